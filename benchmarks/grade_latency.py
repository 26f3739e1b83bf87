"""Latency of grading one submission: `python -m autograder grade` against `python -c "import torch"`.

Both run as whole processes, alternating, several times each (default 5), on the solution notebook with a
fixed seed; the medians and their ratio are printed. This is what every Gradescope submission and every
`grade` an instructor runs waits for. The baseline is the floor any grader in Python with torch pays.

Target: median grade / median import torch <= 1.3. `--against DIR` grades with another checkout of the kit too (the
kit before a change, say: `git worktree add /tmp/base COMMIT`), alternating with this one, same Python and seed, so
that the two are measured side by side on the same machine at the same time; the paired differences are printed.

    .venv/bin/python benchmarks/grade_latency.py [--runs N] [--submission PATH] [--against DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = 1.3


def timed(command: list[str], cwd: Path = ROOT) -> tuple[float, float]:
    """Wall and CPU (user + system, children included) seconds of one command."""
    before = os.times()
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(cwd)})
    wall = time.perf_counter() - started
    after = os.times()
    return wall, (after.children_user - before.children_user) + (after.children_system - before.children_system)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--submission", type=Path, default=ROOT / "solutions" / "layernorm.ipynb")
    parser.add_argument("--against", type=Path, help="another checkout of the kit, graded alternately with this one")
    args = parser.parse_args(argv)
    results = Path(tempfile.mkdtemp(prefix="bench-latency-")) / "results.json"
    grade = [
        sys.executable,
        "-m",
        "autograder",
        "grade",
        str(args.submission),
        "--results",
        str(results),
        "--seed",
        "11",
        "--device",
        "cpu",
    ]
    torch = [sys.executable, "-c", "import torch"]
    other = args.against.resolve() if args.against else None
    timed(torch)  # warm the page cache for both, untimed
    timed(grade)
    samples = {"import torch": [], "grade": []}
    if other is not None:
        timed(grade, other)
        samples[f"grade ({other.name})"] = []
    for _ in range(args.runs):
        samples["import torch"].append(timed(torch))
        samples["grade"].append(timed(grade))
        if other is not None:
            samples[f"grade ({other.name})"].append(timed(grade, other))
    score = json.loads(results.read_text())["score"]
    medians = {
        name: (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)) for name, runs in samples.items()
    }
    for name, (wall, cpu) in medians.items():
        print(f"{name:13s} median wall {wall:.2f} s, CPU {cpu:.2f} s  (walls: {', '.join(f'{w:.2f}' for w, _ in samples[name])})")
    ratio = medians["grade"][0] / medians["import torch"][0]
    if other is not None:
        theirs = samples[f"grade ({other.name})"]
        paired = statistics.median(mine[0] - base[0] for mine, base in zip(samples["grade"], theirs))
        base = statistics.median(w for w, _ in theirs)
        print(
            f"against {other}: {medians['grade'][0]:.2f} s against {base:.2f} s (ratios to import torch {ratio:.2f}x "
            f"against {base / medians['import torch'][0]:.2f}x); paired difference, median of {args.runs}: {paired:+.2f} s"
        )
    print(
        f"grade scored {score:g}; ratio grade / import torch: {ratio:.2f}x  "
        f"{'OK' if ratio <= TARGET else 'MISSED'} (target <= {TARGET}x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
