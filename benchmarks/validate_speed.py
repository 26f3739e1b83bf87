"""How long Jupyter's Validate button takes on the solved notebook, next to the students' `python run_tests.py`.

What it measures, in a temporary copy of solutions/ (the notebook and the files released beside it):
  * "Validate":      what the button runs. The assignment-list extension of a student's Jupyter server calls
                     nbgrader's `Validator.validate` in the server's own process, which has nbgrader loaded
                     already; here one long-lived process imports nbgrader once and times each call (a kernel
                     starts, imports torch, runs every cell; the experiment cells see NBGRADER_EXECUTION and wait);
  * "run_tests.py":  `python run_tests.py` in the same folder (the command students run before submitting);
  * for reference, "nbgrader validate": the command-line tool, which also pays for importing nbgrader.
Every repetition runs them one after the other (interleaved), so load on the shared machine hits all alike; the
report gives the median of each and the ratio of Validate to run_tests.py.

Target: Validate at most 2x run_tests.py.

Exit status 1 when Validate does not pass the solved notebook (a broken notebook or check), never for a missed
target.

    .venv/bin/python benchmarks/validate_speed.py [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions"
TARGET = 2.0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="repetitions of each command (default 5)")
    args = parser.parse_args(argv)
    os.environ.pop("MPLBACKEND", None)  # as in a student's server: the kernel's inline backend
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    from nbgrader.validator import Validator  # loaded once, as the Jupyter server has it loaded
    from traitlets.config import Config

    with tempfile.TemporaryDirectory(prefix="bench-validate-") as scratch:
        folder = Path(scratch) / "layernorm"
        shutil.copytree(SOLUTIONS, folder)
        notebook = folder / "layernorm.ipynb"

        def button():
            return Validator(config=Config()).validate(str(notebook))

        def runner():
            return subprocess.run([sys.executable, "run_tests.py"], cwd=folder, capture_output=True, text=True, env=env)

        def command_line():
            return subprocess.run(
                [sys.executable, "-m", "nbgrader", "validate", "layernorm.ipynb"],
                cwd=folder,
                capture_output=True,
                text=True,
                env=env,
            )

        commands = {"Validate (the button)": button, "run_tests.py": runner, "nbgrader validate (CLI)": command_line}
        results = {name: command() for name, command in commands.items()}  # untimed: warms the page cache
        times: dict[str, list[float]] = {name: [] for name in commands}
        for round_ in range(args.repeat):
            for name, command in commands.items():
                started = time.perf_counter()
                results[name] = command()
                times[name].append(time.perf_counter() - started)
            print(f"round {round_ + 1}/{args.repeat}: " + ", ".join(f"{n} {t[-1]:.2f}s" for n, t in times.items()), flush=True)

    medians = {name: statistics.median(samples) for name, samples in times.items()}
    print("\nmedian wall time (all samples, s)")
    for name, samples in times.items():
        print(f"  {name:26s} {medians[name]:6.2f}   [{', '.join(f'{s:.2f}' for s in samples)}]")
    ratio = medians["Validate (the button)"] / medians["run_tests.py"]
    print(f"\nValidate / run_tests.py: {ratio:.2f}x  (target <= {TARGET:g}: {'OK' if ratio <= TARGET else 'MISSED'})")
    print(f"nbgrader validate (CLI) / run_tests.py: {medians['nbgrader validate (CLI)'] / medians['run_tests.py']:.2f}x")
    validated = results["Validate (the button)"]
    runner_output = results["run_tests.py"].stdout.strip().splitlines()
    print(
        f"\nValidate's verdict on the solved notebook: {validated or 'no failures'}; "
        f"run_tests.py: {runner_output[-1] if runner_output else '(no output)'}"
    )
    return 0 if not validated and results["run_tests.py"].returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
