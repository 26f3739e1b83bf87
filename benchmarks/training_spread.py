"""Regenerate `training_spread.json`, the seeds' spread of the notebook's training experiment, and print it.

    .venv/bin/python benchmarks/training_spread.py [--seeds 32] [--jobs 2]

Trains every setting of the notebook on seeds 0..N-1 with the solution's block (about 20 s of CPU per seed on a
2-core x86_64 machine: 300 s for the 32 seeds with two jobs), writes the table beside the source notebook, and
prints each setting's final losses (the mean of the last 20 steps) with their range. Run `make build` afterwards,
so the release and the solutions carry the new table, then check the lesson's sentences against it
(tests/course/test_lesson_claims.py says which one a new table makes false).
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from autograder.course import kit, training_spread  # noqa: E402


@functools.cache
def _lesson() -> dict:
    """The notebook's training code, executed once per worker process."""
    return training_spread.lesson_training()


def _one(seed: int) -> dict:
    return training_spread.train([seed], _lesson())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=len(training_spread.SEEDS))
    parser.add_argument("--jobs", type=int, default=1)
    arguments = parser.parse_args()
    started = time.monotonic()
    losses: dict[str, dict[int, list[float]]] = {}
    with ProcessPoolExecutor(arguments.jobs) as pool:
        for part in pool.map(_one, range(arguments.seeds)):
            for label, runs in part.items():
                losses.setdefault(label, {}).update(runs)
    result = training_spread.table(losses)
    target = kit.SOURCE_NOTEBOOK.parent / training_spread.SPREAD_FILE
    target.write_text(json.dumps(result, separators=(",", ":")) + "\n", encoding="utf-8")
    print(
        f"{arguments.seeds} seeds in {time.monotonic() - started:.0f} s on {result['machine']} "
        f"({arguments.jobs} job(s)); written to {target.relative_to(kit.ROOT)}"
    )
    for label, runs in result["losses"].items():
        finals = [statistics.fmean(run[-20:]) for run in runs]
        print(
            f"{label:28s} last-20-step mean: {min(finals):.3f} .. {max(finals):.3f} (median "
            f"{statistics.median(finals):.3f}); by seed: {' '.join(f'{f:.2f}' for f in finals)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
