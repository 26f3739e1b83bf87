"""Run the visible tests of the layernorm notebook and report each one by name, with every check that fails.

Needs only Python and the packages the notebook uses. On your course's JupyterHub they are installed already; on
your own computer, install them once:

    pip install torch==2.13.0 numpy==2.4.6 matplotlib==3.11.2 jupyter==1.1.1

Then, in the folder that holds the notebook (save the notebook first):

    python run_tests.py                      # finds the notebook of this assignment here, whatever its name
    python run_tests.py my_copy.ipynb        # or names it

It runs your code cells in order (skipping the slow experiment cells, the visible tests and the graded cells),
then runs every visible test cell on its own, so one failing test does not hide the others. A test made of
several checks lists each check that failed. The tests themselves are in visible_tests.py, next to this file.
"""
import json
import os
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ASSIGNMENT_CELLS = {"task1_forward", "task2_compounding"}     # the cells that make a notebook this assignment's


def grade_ids(path):
    """The nbgrader cell names of a notebook (empty when it is not a readable notebook)."""
    try:
        cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
    except (OSError, ValueError, AttributeError):
        return set()
    return {(c.get("metadata") or {}).get("nbgrader", {}).get("grade_id") for c in cells if isinstance(c, dict)}


def find_notebook(arguments):
    """The notebook to test, or None after saying in one line what to do."""
    if arguments:
        path = Path(arguments[0])
        if not path.is_file():
            print(f"No notebook at {path}: name your notebook, for example `python run_tests.py layernorm.ipynb`.")
            return None
        print(f"Testing {path.name}")
        return path.resolve()
    found = [p for p in sorted(HERE.glob("*.ipynb")) if ASSIGNMENT_CELLS <= grade_ids(p)]
    if not found:
        print(f"No notebook in {HERE} holds this assignment's cells: put run_tests.py next to your notebook, "
              "or name the notebook: `python run_tests.py path/to/notebook.ipynb`.")
        return None
    if len(found) > 1:
        newest = max(found, key=lambda p: p.stat().st_mtime)
        others = ", ".join(p.name for p in found if p != newest)
        print(f"Testing {newest.name}, the most recently saved of this assignment's notebooks here (also: {others}); "
              f"name another with `python run_tests.py NAME.ipynb`.")
        return newest
    print(f"Testing {found[0].name}")
    return found[0]


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


def main(arguments):
    notebook = find_notebook(arguments)
    if notebook is None:
        return 2
    os.environ.setdefault("MPLBACKEND", "Agg")  # a plot in your code never opens a window here
    sys.path[:0] = [str(notebook.parent), str(HERE)]     # where the test cells find visible_tests.py
    namespace = {"__name__": "__main__"}
    tests, problems = [], []
    for name, source, tags in cells(notebook):
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
    sys.exit(main(sys.argv[1:]))
