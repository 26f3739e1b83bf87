"""How often does the first-step reading miss on fresh draws? The property of tests/engine/test_first_step.py (a fuzzed
forward names a step its generator allows, or none, and says only facts its oracle finds true) on `--draws` forwards
from the fuzzer (tests/catalog/fuzz.py), each drawn from its own seed as Hypothesis would draw one: how many wrong
forwards, how many of three kinds, and the seeds, forwards and findings of every failure, to shrink into the test's
`FOUND` catalog. In CI the property runs on fixed draws (tests/conftest.py); this is the search afresh, about a tenth
of a second a forward.

    .venv/bin/python benchmarks/first_step_draws.py [--draws 2000] [--start 0]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests" / "engine"), str(ROOT / "tests"), str(ROOT)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--start", type=int, default=0, help="the first draw's index (each index is its own seed)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)  # one core a run, so two runs side by side do not fight over threads
    from catalog.fuzz import draw
    from test_first_step import test_a_fuzzed_forward_names_a_step_its_generator_allows_or_none as prop

    check = prop.hypothesis.inner_test  # the property's body, on arguments given here
    started, failed = time.process_time(), 0
    for index in range(args.start, args.start + args.draws):
        rng = random.Random(index)
        wrong, open_only, seed = rng.randint(0, 3), rng.choice([True, None, False]), rng.randint(0, 2**32 - 1)
        try:
            check(seed=seed, wrong=wrong, open_only=open_only)
        except AssertionError as error:
            failed += 1
            name = draw(random.Random(seed), wrong=wrong, open_only=open_only if wrong else None).name
            print(f"seed={seed} wrong={wrong} open_only={open_only}: {name}\n    {str(error)[:400]}", flush=True)
    seconds = time.process_time() - started
    print(f"{failed} of {args.draws} draws failed the property ({seconds:.0f} s CPU, {seconds / args.draws:.3f} s a draw)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
