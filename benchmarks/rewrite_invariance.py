"""Does a wrong forward earn what the same mistakes earn written plainly? The fuzzer's corpus
(tests/catalog/fuzz.py) fills the slots it does not change with rewrites that keep values (a component on a padded,
flipped or chunked tensor, its own layers called, vmap, functional calls, sums written otherwise); each forward keeps
its plain twin (`Forward.plain`, the same changes and nothing else). "Matching is enough" says a rewrite that keeps
values costs nothing: this prints every wrong forward whose points differ from its twin's, part by part, and the
counts, per part and per rewrite. The target is none; the grader's reading of a program that holds its values is
what the difference measures.

    .venv/bin/python benchmarks/rewrite_invariance.py [--forwards 500] [--seed 7]
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))


def points(result) -> dict:
    return {(check.check, part.name): part.points for check in result.checks for part in check.subtests}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--forwards", type=int, default=500)
    parser.add_argument("--seed", type=int, default=7, help="the grading seed")
    args = parser.parse_args()
    import graded
    from catalog.build import submission
    from catalog.fuzz import CORPUS_SEED, corpus

    started = time.process_time()
    compared, moved, parts = 0, [], collections.Counter()
    for index, forward in enumerate(corpus(args.forwards, CORPUS_SEED)):
        if forward.right or forward.source == forward.plain:
            continue
        compared += 1
        written = points(graded.grade(submission(forward.source), args.seed))
        plain = points(graded.grade(submission(forward.plain), args.seed))
        differ = {part: (written[part], plain[part]) for part in written if written[part] != plain.get(part)}
        if differ:
            moved.append(index)
            parts.update(name for _, name in differ)
            lost = sum(plain.values()) - sum(written.values())
            print(f"{index}: {forward.name}: {lost:g} points fewer than its plain twin, on {len(differ)} parts")
    print(f"\n{len(moved)} of {compared} wrong forwards with value-keeping rewrites earn other points than their twin")
    for name, count in parts.most_common():
        print(f"  {count:4d}  {name}")
    print(f"({time.process_time() - started:.0f} s of CPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
