"""The assignment this kit grades: where its annotated source lives and what each kind of cell is for.

The annotated source notebook is the single source of truth. The grader does not keep its own copy of the
provided classes or of the solution: it reads them from the source's cells.

* `public_code()`  - the code a student receives (provided cells, task cells with their stubs). The
  sandboxed child gets only this.
* `reference_code()` - the same cells with the solutions in place. Only the trusted parent runs it.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

from .notebook import Cell, read_cells, student_code

ROOT = Path(__file__).resolve().parent.parent
COURSE_DIR = ROOT / "assignments"
ASSIGNMENT = "layernorm"
NOTEBOOK_NAME = "layernorm.ipynb"
SOURCE_NOTEBOOK = COURSE_DIR / "source" / ASSIGNMENT / NOTEBOOK_NAME
TEMPLATE_DIR = ROOT / "student_template"
SOLUTIONS_DIR = ROOT / "solutions"

# A task id joins the solution cell, the stub's message and the checks that grade it.
TASKS = {
    "task1_forward": "Task 1",
    "task2_compounding": "Task 2",
}

_HIDDEN_TESTS = re.compile(r"^[^\n]*BEGIN HIDDEN TESTS.*?END HIDDEN TESTS[^\n]*\n?", re.DOTALL | re.MULTILINE)
BEGIN_SOLUTION = "### BEGIN SOLUTION"
END_SOLUTION = "### END SOLUTION"
_DEF = re.compile(r"^(\s*)(def|class)\s+(\w+)")


def _qualified_name(lines: list[str]) -> str:
    """`Class.method` or `function` enclosing the end of `lines`."""
    names, indent_limit = [], None
    for line in reversed(lines):
        match = _DEF.match(line)
        if not match:
            continue
        indent = len(match.group(1))
        if indent_limit is None or indent < indent_limit:
            names.append(match.group(3))
            indent_limit = indent
        if indent == 0:
            break
    return ".".join(reversed(names)) or "this cell"


def stub_solutions(source: str, task: str) -> str:
    """Replace each solution region by a stub whose NotImplementedError names the task and the function."""
    out, inside = [], False
    for line in source.split("\n"):
        if BEGIN_SOLUTION in line:
            if inside:
                raise ValueError("nested solution regions")
            inside = True
            indent = re.match(r"\s*", line).group(0)
            name = _qualified_name(out)
            out.append(f"{indent}# YOUR CODE HERE")
            out.append(f'{indent}raise NotImplementedError("{task}: write {name}")')
        elif END_SOLUTION in line:
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError("a solution region has no end marker")
    return "\n".join(out)


def without_hidden_tests(source: str) -> str:
    """A cell as released: hidden-test regions removed."""
    return _HIDDEN_TESTS.sub("", source)


def strip_solution_markers(source: str) -> str:
    """The solved cell: solution regions kept, their marker lines removed."""
    return "\n".join(line for line in source.split("\n") if BEGIN_SOLUTION not in line and END_SOLUTION not in line)


@functools.lru_cache(maxsize=None)
def source_cells(path: Path = SOURCE_NOTEBOOK) -> tuple[Cell, ...]:
    return tuple(read_cells(path))


def task_of(cell: Cell) -> str | None:
    return TASKS.get(cell.grade_id or "")


def reference_code(path: Path = SOURCE_NOTEBOOK) -> list[tuple[str, str]]:
    return [(label, strip_solution_markers(code)) for label, code in student_code(list(source_cells(path)))]


def public_code(path: Path = SOURCE_NOTEBOOK) -> list[tuple[str, str]]:
    cells = [
        Cell(c.kind, stub_solutions(c.source, task_of(c)) if task_of(c) else c.source, c.nbgrader, c.tags, c.index)
        for c in source_cells(path)
    ]
    return student_code(cells)


def check_points(path: Path = SOURCE_NOTEBOOK) -> dict[str, float]:
    """Points of each hidden-check cell in the source, keyed by check name (grade_id without `check_`)."""
    return {
        cell.grade_id.removeprefix("check_"): float(cell.nbgrader.get("points", 0))
        for cell in source_cells(path)
        if cell.is_hidden_check
    }


def restore_locked_cells(cells: list[Cell]) -> tuple[list[Cell], list[str]]:
    """Treat a submitted notebook as nbgrader does: locked cells as released, whatever the student did to them.

    Returns the cells to grade and student-facing notes on what was put back (edited or deleted cells).
    A `.py` submission has no cell ids and is returned unchanged.
    """
    locked = {c.grade_id: c for c in source_cells() if c.grade_id and c.nbgrader.get("locked")}
    if not any(c.grade_id in locked for c in cells):
        return cells, []
    graded, edited, seen = [], [], set()
    for cell in cells:
        original = locked.get(cell.grade_id)
        if original is not None:
            seen.add(cell.grade_id)
            released = without_hidden_tests(original.source)
            if cell.source.strip() not in (original.source.strip(), released.strip()):
                edited.append(cell.grade_id)
                cell = Cell(cell.kind, original.source, cell.nbgrader, cell.tags, cell.index)
        graded.append(cell)
    notes = []
    if edited:
        notes.append(f"You edited locked cells ({', '.join(edited)}); they were graded as released.")
    missing = [grade_id for grade_id, cell in locked.items() if grade_id not in seen and cell.kind == "code"]
    if missing:
        notes.append(f"Cells missing from your notebook ({', '.join(missing)}) were added back, as released, for grading.")
        graded += [locked[grade_id] for grade_id in missing if not locked[grade_id].is_hidden_check]
    return graded, notes
