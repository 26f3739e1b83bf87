"""Run the visible tests of layernorm.ipynb and report each one by name.

Usage, in the folder that holds the notebook (save the notebook first):

    python run_tests.py

It runs your code cells in order (skipping the slow experiment cells and the test cells), then runs
every visible test cell on its own, so one failing test does not hide the others.
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
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename.startswith("<")]
    where = f" (in {frames[-1].filename.strip('<>')}, line {frames[-1].lineno})" if frames else ""
    message = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {message}{where}" if message else f"{type(error).__name__}{where}"


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
