"""How long the solved notebook takes to run headless, top to bottom, figures and the training experiment included
(target: < 60 s on a 2-core laptop), next to the baseline of starting a kernel and importing torch in it.

    .venv/bin/python benchmarks/notebook_runtime.py [--repeat 2]

Prints the wall time of each run, the per-cell times of the slowest cells, and the notebook's time over the
kernel-plus-torch baseline.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from autograder.course import kit  # noqa: E402


def run(cells) -> tuple[float, list[tuple[float, str]]]:
    notebook = nbformat.v4.new_notebook(cells=cells)
    timings = []
    client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(kit.SOLUTIONS_DIR)}})
    started = time.monotonic()
    with client.setup_kernel():
        for index, cell in enumerate(notebook.cells):
            begun = time.monotonic()
            client.execute_cell(cell, index)
            timings.append((time.monotonic() - begun, cell.metadata.get("nbgrader", {}).get("grade_id", f"cell {index}")))
    return time.monotonic() - started, sorted(timings, reverse=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=2)
    repeat = parser.parse_args().repeat
    os.environ.pop("MPLBACKEND", None)        # the kernel's inline backend: figures become outputs, as for students
    solved = nbformat.read(kit.SOLUTIONS_DIR / kit.KIT.notebook_name, as_version=4)
    cells = [c for c in solved.cells if not c.metadata.get("nbgrader", {}).get("grade_id", "").startswith("check_")]
    baseline_cells = [nbformat.v4.new_code_cell("import torch")]
    notebook_times, baseline_times = [], []
    for attempt in range(repeat):
        baseline_times.append(run(baseline_cells)[0])
        elapsed, slowest = run(cells)
        notebook_times.append(elapsed)
        print(f"run {attempt + 1}: notebook {elapsed:.1f} s, kernel + import torch {baseline_times[-1]:.1f} s")
    print("slowest cells (last run): " + ", ".join(f"{name} {seconds:.1f} s" for seconds, name in slowest[:5]))
    median = statistics.median(notebook_times)
    print(f"median: notebook {median:.1f} s (target < 60 s), "
          f"{median / statistics.median(baseline_times):.1f}x the kernel + torch baseline")
    return 0 if median < 60 else 1


if __name__ == "__main__":
    sys.exit(main())
