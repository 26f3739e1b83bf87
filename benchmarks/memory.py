"""Memory: a sandbox worker under the largest answers a child can send, and grade-class as the class grows.

* answers: `python -m autograder grade` on a blank template whose child answers every question with 15 MiB
  (11 answers, each a valid tensor within the frame limit). The sandbox bounds one submission's answers in
  all (`sandbox.inside.watch.MAX_ANSWER_BYTES`); peak memory of the worker (server, supervisor, child) and of the
  grading process;
* class size: `python -m autograder grade-class` on N submissions (the sample class's notebooks cycled) for
  each N given (default 50 and 400); peak memory of the grade-class process itself and of its largest worker.

A thread reads /proc every 0.1 s (`class_grading.TreeSampler`: forked copies count their private pages).
Targets: every worker at most 600 MB; the grade-class process at the largest class at most 1.1x its peak at
the smallest (flat in the class size).

    .venv/bin/python benchmarks/memory.py [--sizes 50 400] [--workers N]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from class_grading import ROOT, SAMPLES, run_tool

sys.path.insert(0, str(ROOT / "tests"))
WORKER_MB, FLAT = 600, 1.1


def hostile_answers(scratch: Path) -> dict:
    from catalog.isolation import FAMILIES

    path = scratch / "huge_answers.py"
    path.write_text(next(e.source for e in FAMILIES if e.name == "eleven_answers_of_fifteen_megabytes"))
    return run_tool(
        [
            sys.executable,
            "-m",
            "autograder",
            "grade",
            str(path),
            "--results",
            str(scratch / "r.json"),
            "--seed",
            "5",
            "--device",
            "cpu",
        ],
        ROOT,
        None,
    )


def a_class(scratch: Path, size: int, workers: int | None) -> dict:
    folder = scratch / f"class-{size}"
    notebooks = sorted(
        p / "layernorm" / "layernorm.ipynb" for p in SAMPLES.iterdir() if (p / "layernorm" / "layernorm.ipynb").is_file()
    )
    for index in range(size):
        (folder / f"s{index:04d}").mkdir(parents=True)
        shutil.copy(notebooks[index % len(notebooks)], folder / f"s{index:04d}" / "layernorm.ipynb")
    command = [
        sys.executable,
        "-m",
        "autograder",
        "grade-class",
        str(folder),
        "--out",
        str(scratch / f"out-{size}"),
        "--seed",
        "5",
        "--device",
        "cpu",
        "--force",
    ] + (["--workers", str(workers)] if workers else [])
    return run_tool(command, ROOT, None)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 400])
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    try:
        run = hostile_answers(scratch)
        peak = run["peak"]
        print(
            f"11 answers of 15 MiB: worker {peak['worker']:.0f} MB (server VmHWM {peak['hwm']:.0f}), grading "
            f"process {peak['root']:.0f} MB, exit {run['code']}  "
            f"{'OK' if peak['worker'] <= WORKER_MB else 'MISSED'} (target <= {WORKER_MB} MB per worker)",
            flush=True,
        )
        classes = {}
        for size in args.sizes:
            classes[size] = a_class(scratch, size, args.workers)
            peak = classes[size]["peak"]
            print(
                f"grade-class, {size} submissions: {classes[size]['wall']:.1f} s, exit {classes[size]['code']}; "
                f"grade-class process {peak['root']:.0f} MB, largest worker {peak['worker']:.0f} MB, tree "
                f"{peak['tree']:.0f} MB",
                flush=True,
            )
        small, large = min(classes), max(classes)
        ratio = classes[large]["peak"]["root"] / classes[small]["peak"]["root"]
        worst = max(c["peak"]["worker"] for c in classes.values())
        print(
            f"grade-class process at {large} against {small} submissions: {ratio:.2f}x  "
            f"{'OK' if ratio <= FLAT else 'MISSED'} (target <= {FLAT}x); largest worker {worst:.0f} MB  "
            f"{'OK' if worst <= WORKER_MB else 'MISSED'} (target <= {WORKER_MB} MB)"
        )
        return 1 if any(r["code"] for r in (run, *classes.values())) else 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
