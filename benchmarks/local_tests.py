"""How long the students' local test command takes, next to the cost of `import torch` alone.

What it measures: the wall time of `python run_tests.py` (the command students run before submitting)
  * "solution":  in a temporary copy of solutions/ (the notebook with run_tests.py and visible_tests.py beside
                 it: every visible test runs to the end and passes);
  * "template":  in student_template/ itself (the stubs raise at once: the tests fail fast);
and, as the baseline, `python -c "import torch"`. Every repetition runs the three commands one after the
other (interleaved), so load on the shared machine hits all of them alike; the report gives the median of
each and the ratio to the baseline's median.

Target: ratio <= 2 for both (running the tests costs at most one more `import torch`).

Reading the output: one line per command with the median and all samples in seconds, then the ratios
with OK / MISSED against the target (judged on wall time), then CPU times (user + sys) as a steadier
cross-check on a loaded machine. Exit status 1 only when run_tests.py fails on the solution (a broken
runner or notebook), never for a missed target.

    .venv/bin/python benchmarks/local_tests.py [--repeat N]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "student_template"
SOLUTIONS = ROOT / "solutions"
TARGET = 2.0


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str], cwd: Path) -> tuple[float, float, int, str]:
    """Wall time and CPU time (user + sys, from the reaped child's rusage) of one run."""
    cpu, started = _children_cpu(), time.perf_counter()
    process = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - started
    return wall, _children_cpu() - cpu, process.returncode, process.stdout + process.stderr


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="repetitions of each command (default 5)")
    args = parser.parse_args(argv)
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="bench-local-tests-") as scratch:
        solution_dir = Path(scratch) / "solution"
        shutil.copytree(SOLUTIONS, solution_dir)  # the notebook and the files released beside it
        commands = {
            "import torch": ([python, "-c", "import torch"], ROOT),
            "run_tests.py (solution)": ([python, "run_tests.py"], solution_dir),
            "run_tests.py (template)": ([python, "run_tests.py"], TEMPLATE),
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        last: dict[str, tuple[int, str]] = {}
        # one untimed round first: the page cache then holds torch for every timed run alike
        for name, (command, cwd) in commands.items():
            timed(command, cwd)
        for round_ in range(args.repeat):
            for name, (command, cwd) in commands.items():
                seconds, cpu_seconds, code, output = timed(command, cwd)
                times[name].append(seconds)
                cpu[name].append(cpu_seconds)
                last[name] = (code, output)
            print(f"round {round_ + 1}/{args.repeat}: " + ", ".join(f"{n} {t[-1]:.2f}s" for n, t in times.items()), flush=True)

    print("\nmedian wall time (all samples, s)")
    medians = {name: statistics.median(samples) for name, samples in times.items()}
    for name, samples in times.items():
        print(f"  {name:26s} {medians[name]:6.2f}   [{', '.join(f'{s:.2f}' for s in samples)}]")
    base = medians["import torch"]
    print(f"\nratio to `import torch` (target <= {TARGET:g})")
    for name in commands:
        if name == "import torch":
            continue
        ratio = medians[name] / base
        print(
            f"  {name:26s} {ratio:5.2f}x  {'OK' if ratio <= TARGET else 'MISSED'}"
            f"   ({medians[name] - base:+.2f} s vs import torch)"
        )

    cpu_medians = {name: statistics.median(samples) for name, samples in cpu.items()}
    print("\nfor reference, median CPU time (user + sys; less sensitive to other load than wall time)")
    for name in commands:
        print(f"  {name:26s} {cpu_medians[name]:6.2f} s   {cpu_medians[name] / cpu_medians['import torch']:5.2f}x")

    code, output = last["run_tests.py (solution)"]
    summary = output.strip().splitlines()[-1] if output.strip() else "(no output)"
    print(f"\nsolution run: exit {code}, '{summary}'")
    template_code, template_output = last["run_tests.py (template)"]
    template_summary = template_output.strip().splitlines()[-1] if template_output.strip() else "(no output)"
    print(f"template run: exit {template_code}, '{template_summary}' (stubs: failing is expected)")
    if code != 0:
        print("run_tests.py failed on the solution:\n" + output)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
