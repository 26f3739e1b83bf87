"""The same submission, the same points, on more seeds than the test suite asks (tests/engine/test_seeds.py: every
hand-written catalog forward and 100 fuzzed ones, on five seeds).

Grades, in this one process (`grading/inprocess.py`, one thread), every hand-written catalog forward, the generated
corpus (150 single-step mutants, 112 in other styles, Pre-LN in 12 styles), the region generator's forwards and
fuzzed ones, each on --seeds seeds drawn at random (printed), and prints every forward whose points moved between
seeds, part by part, then the count: the target is none.

    .venv/bin/python benchmarks/seed_stability.py [--seeds 10] [--fuzzed 100] [--regions 100] [--no-corpus]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))


def forwards(fuzzed: int, regions: int, corpus: bool) -> list[tuple[str, dict]]:
    from catalog.fuzz import corpus as fuzz_corpus
    from catalog.generate import mutants, styled_mutants
    from catalog.regions import corpus as region_corpus
    from catalog.everything import catalog_forwards

    found = catalog_forwards()
    if corpus:
        found += [(f"mutant {c.name}", {"forward": c.forward}) for c in (*mutants(), *styled_mutants())]
    found += [(f"regions {i}: {f.name}", {"forward": f.source, "init": f.init}) for i, f in enumerate(region_corpus(regions, 3))]
    found += [(f"fuzzed {i}: {f.name}", {"forward": f.source}) for i, f in enumerate(fuzz_corpus(fuzzed, seed=9))]
    return found


def _points(result) -> dict:
    return {(check.check, part.name): part.points for check in result.checks for part in check.subtests}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--fuzzed", type=int, default=100)
    parser.add_argument("--regions", type=int, default=100)
    parser.add_argument("--no-corpus", action="store_true", help="leave out the generated corpus (274 forwards)")
    args = parser.parse_args(argv)
    import torch

    from autograder.course.notebook import read_cells
    from autograder.grading.inprocess import grade_cells_in_process
    from catalog.build import submission

    torch.set_num_threads(1)
    seeds = [random.SystemRandom().randrange(1, 2**31) for _ in range(args.seeds)]
    print(f"seeds: {seeds}")
    cases = forwards(args.fuzzed, args.regions, not args.no_corpus)
    path = Path(tempfile.mkdtemp(prefix="bench-seeds-")) / "submission.py"
    moved, started = 0, time.perf_counter()
    for name, source in cases:
        path.write_text(submission(**source))
        points = {seed: _points(grade_cells_in_process(read_cells(path), seed)) for seed in seeds}
        first = points[seeds[0]]
        differ = {seed: {p: (first[p], v) for p, v in found.items() if v != first[p]} for seed, found in points.items()}
        differ = {seed: parts for seed, parts in differ.items() if parts}
        if differ:
            moved += 1
            print(f"MOVED {name}: against seed {seeds[0]}: {differ}", flush=True)
    print(
        f"\n{len(cases)} forwards on {len(seeds)} seeds in {time.perf_counter() - started:.0f} s: {moved} with points that "
        f"moved between seeds  {'OK' if moved == 0 else 'MISSED'} (target: none)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
