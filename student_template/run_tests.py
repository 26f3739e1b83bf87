"""Run the visible tests of layernorm.ipynb and report each one by name, with every check that fails.

Needs only Python and the packages the notebook uses, installed once:

    pip install torch==2.13.0 numpy==2.4.6 matplotlib==3.11.2 jupyter==1.1.1

Then, in the folder that holds the notebook (save the notebook first):

    python run_tests.py

It runs your code cells in order (skipping the slow experiment cells, the visible tests and the graded cells),
then runs every visible test cell on its own, so one failing test does not hide the others. A test made of
several checks lists each check that failed.
"""
import json
import os
import sys
import traceback
from pathlib import Path

NOTEBOOK = Path(__file__).resolve().parent / "layernorm.ipynb"


def cells(path):
    for index, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"], start=1):
        if cell.get("cell_type") != "code":
            continue
        source = "".join(cell.get("source", []))
        source = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.split("\n"))
        name = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") or f"cell {index}"
        tags = cell.get("metadata", {}).get("tags", [])
        yield name, source, tags


def failure(error):
    """The error's type and its whole message (a test's checks each on their own line); for errors other than a
    failed check, also the cell and line where it happened."""
    lines = str(error).strip().splitlines() or [""]
    text = f"{type(error).__name__}: {lines[0]}" if lines[0] else type(error).__name__
    if not isinstance(error, AssertionError):
        frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename.startswith("<")]
        if frames:
            text += f" (in {frames[-1].filename.strip('<>')}, line {frames[-1].lineno})"
    return "\n".join([text, *(f"        {line}" for line in lines[1:])])


def main():
    os.environ.setdefault("MPLBACKEND", "Agg")  # a plot in your code never opens a window here
    namespace = {"__name__": "__main__"}
    tests, problems = [], []
    for name, source, tags in cells(NOTEBOOK):
        if name.startswith("check_") or "experiment" in tags:
            continue
        if name.startswith("test_"):
            tests.append((name, source))
            continue
        try:
            exec(compile(source, f"<{name}>", "exec"), namespace)
        except Exception as error:
            problems.append(f"{name} did not run: {failure(error)}")
    for problem in problems:
        print(f"  note  {problem}")
    passed = 0
    for name, source in tests:
        try:
            exec(compile(source, f"<{name}>", "exec"), namespace)
        except Exception as error:
            print(f"  FAIL  {name}: {failure(error)}")
        else:
            passed += 1
            print(f"  PASS  {name}")
    print(f"{passed} passed, {len(tests) - passed} failed")
    return 0 if passed == len(tests) else 1


if __name__ == "__main__":
    sys.exit(main())
