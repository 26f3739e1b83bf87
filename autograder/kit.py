"""The assignment this kit grades: where its annotated source lives and what each kind of cell is for.

The annotated source notebook is the single source of truth. The grader keeps no copy of the provided
classes, of the solution or of the points: an `Assignment` reads them from the source's cells. The kit's
own checkout holds one (`KIT`); a course may hold its own edited copy anywhere (`Assignment(path)`).

* `public_code()`    - the code a student receives (provided cells, task cells with their stubs). The
  sandboxed child gets only this.
* `reference_code()` - the same cells with the solutions in place. Only the trusted parent runs it.
* `check_points()`   - the points of each hidden-check cell, which must agree with the kit's rubric.
"""
from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path

from .notebook import HIDDEN_CHECK_PREFIX, Cell, read_cells, student_code

ROOT = Path(__file__).resolve().parent.parent
COURSE_DIR = ROOT / "assignments"
SOURCE_NOTEBOOK = COURSE_DIR / "source" / "layernorm" / "layernorm.ipynb"
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


class RubricMismatch(Exception):
    """A course's source notebook and the kit's rubric disagree: the kit will not grade against either."""


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


def task_of(cell: Cell) -> str | None:
    return TASKS.get(cell.grade_id or "")


@functools.lru_cache(maxsize=16)
def _cells_of(path: str, digest: str) -> tuple[Cell, ...]:
    return tuple(read_cells(path))


class Assignment:
    """One annotated source notebook, read once per content (an edited file is read again)."""

    def __init__(self, source: str | Path = SOURCE_NOTEBOOK):
        self.source = Path(source).resolve()

    def __repr__(self) -> str:
        return f"Assignment({str(self.source)!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Assignment) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    @property
    def name(self) -> str:
        """The nbgrader assignment id: the source notebook's folder."""
        return self.source.parent.name

    @property
    def notebook_name(self) -> str:
        return self.source.name

    @property
    def notebook_id(self) -> str:
        return self.source.stem

    @property
    def key(self) -> str:
        """Identifies the source's content: equal keys, equal code, reference and points. Read again only when
        the file's size or modification time changed (it is asked for several times per graded submission)."""
        info = self.source.stat()
        if getattr(self, "_stamp", None) != (info.st_mtime_ns, info.st_size):
            self._digest = hashlib.sha256(self.source.read_bytes()).hexdigest()
            self._stamp = (info.st_mtime_ns, info.st_size)
        return self._digest

    def cells(self) -> tuple[Cell, ...]:
        return _cells_of(str(self.source), self.key)

    def public_code(self) -> list[tuple[str, str]]:
        cells = [Cell(c.kind, stub_solutions(c.source, task_of(c)) if task_of(c) else c.source, c.nbgrader, c.tags,
                      c.index) for c in self.cells()]
        return student_code(cells)

    def reference_code(self) -> list[tuple[str, str]]:
        return [(label, strip_solution_markers(code)) for label, code in student_code(list(self.cells()))]

    def check_points(self) -> dict[str, float]:
        """Points of each hidden-check cell, keyed by check name (grade_id without `check_`)."""
        return {cell.grade_id.removeprefix(HIDDEN_CHECK_PREFIX): float(cell.nbgrader.get("points", 0))
                for cell in self.cells() if cell.is_hidden_check}

    def verify_rubric(self, rubric: dict) -> None:
        """Refuse, naming the cell and both values, where the source's points differ from the kit's rubric."""
        points = self.check_points()
        problems = []
        for name, spec in rubric.items():
            if name not in points:
                problems.append(f"the cell check_{name} is missing (the kit's rubric gives it {spec.points:g} points)")
            elif points[name] != spec.points:
                problems.append(f"the cell check_{name} gives {points[name]:g} points, the kit's rubric "
                                f"(autograder/rubric.py) gives {spec.points:g}")
        problems += [f"the cell check_{name} has no check in the kit's rubric" for name in points if name not in rubric]
        if problems:
            raise RubricMismatch(f"{self.source}: " + "; ".join(problems) + ". Make the notebook and the rubric agree "
                                 "(change the cell's points back, or the part points in autograder/rubric.py).")

    def locked_cells(self) -> dict[str, Cell]:
        return {c.grade_id: c for c in self.cells() if c.grade_id and c.nbgrader.get("locked")}

    def restore_locked_cells(self, cells: list[Cell]) -> tuple[list[Cell], list[str]]:
        """Treat a submitted notebook as nbgrader does: locked cells as released, whatever the student did.

        Returns the cells to grade and student-facing notes on what was put back (edited or deleted cells).
        A `.py` submission has no cell ids and is returned unchanged.
        """
        locked = self.locked_cells()
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
            notes.append(f"Cells missing from your notebook ({', '.join(missing)}) were added back, as released, "
                         "for grading.")
            graded += [locked[grade_id] for grade_id in missing if not locked[grade_id].is_hidden_check]
        return graded, notes


def is_kit_source(path: str | Path, rubric: dict) -> bool:
    """Is this source notebook one of the kit's assignments? Recognised by its content: it holds a hidden-check
    cell for every check of the kit's rubric (whatever the assignment or notebook is called)."""
    try:
        names = {c.grade_id.removeprefix(HIDDEN_CHECK_PREFIX) for c in read_cells(path) if c.is_hidden_check}
    except Exception:
        return False
    return set(rubric) <= names


KIT = Assignment(SOURCE_NOTEBOOK)
