"""Every benchmark of the kit, one after the other (`make benchmarks` runs this).

What it runs, each as its own process with this Python:
  1. local_tests.py    the students' `python run_tests.py` against `import torch`   (target: ratio <= 2)
     validate_speed.py Jupyter's Validate button against `python run_tests.py`     (target: ratio <= 2)
  2. check_suite.py    CPU time of the whole check suite on one submission          (target: <= 0.3 s CPU)
  3. grade_latency.py  one `python -m autograder grade` against `import torch`       (target: ratio <= 2.5)
  4. class_grading.py  grade-class against stock nbgrader with the same checks in its kernels, nbgrader with
                       the kit, and the checks in one plain process; same scores    (targets: >= 30x faster than
                       stock, <= 2x the plain process, <= 600 MB per grade-class worker)
  5. ordinary_assignment.py nbgrader's commands on an ordinary assignment of a course of the kit, with the kit's
                       configuration against stock nbgrader; same files                (target: ratio <= 1.2)
`--quick` makes each smaller: 2 repetitions, 2 measured passes, 3 runs, 10 students with grade-class timed once,
2 rounds of the ordinary assignment's commands.
The full class benchmark runs stock nbgrader on 50 notebooks, each in a kernel: expect tens of minutes on a
small machine; `--quick` takes a few.

Reading the output: each benchmark's own report (see its docstring), then one summary line per benchmark
with its exit status and wall time. The exit status is 1 when any benchmark failed (a broken run,
class_grading finding a student whose scores differ between the tools, or ordinary_assignment files that differ
with the kit's configuration); missed targets print MISSED in
the reports but do not fail the run.

    .venv/bin/python benchmarks/run_all.py [--quick]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs of every benchmark")
    args = parser.parse_args(argv)
    runs = [
        ("local_tests.py", ["--repeat", "2"] if args.quick else []),
        ("validate_speed.py", ["--repeat", "2"] if args.quick else []),
        ("check_suite.py", ["--repeat", "2"] if args.quick else []),
        ("grade_latency.py", ["--runs", "3"] if args.quick else []),
        ("class_grading.py", ["--students", "10", "--once"] if args.quick else []),
        ("ordinary_assignment.py", ["--rounds", "2"] if args.quick else []),
    ]
    summary = []
    for script, options in runs:
        print(f"\n===== {script} {' '.join(options)}".rstrip(), flush=True)
        started = time.perf_counter()
        code = subprocess.run([sys.executable, str(HERE / script), *options]).returncode
        summary.append((script, code, time.perf_counter() - started))
    print("\n===== summary")
    for script, code, seconds in summary:
        print(f"  {script:18s} {'ok' if code == 0 else f'FAILED (exit {code})':18s} {seconds:7.1f} s")
    return 1 if any(code for _, code, _ in summary) else 0


if __name__ == "__main__":
    sys.exit(main())
