"""The assignment this kit grades: where its annotated source lives and what each kind of cell is for.

The annotated source notebook is the single source of truth. The grader keeps no copy of the provided
classes, of the solution or of the points: an `Assignment` reads them from the source's cells. The kit's
own checkout holds one (`KIT`); a course may hold its own edited copy anywhere (`Assignment(path)`).

* `public_code()`    - the code a student receives (provided cells, task cells with their stubs). The
  sandboxed child gets only this.
* `reference_code()` - the same cells with the solutions in place. Only the trusted parent runs it.
* `check_points()`   - the points of each hidden-check cell: the points each check is graded out of (the
  rubric's parts share them by weight).
* `written_points()` - the points of every other graded cell (written answers, graded by hand).
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections import Counter
from pathlib import Path

from .notebook import HIDDEN_CHECK_PREFIX, Cell, read_cells, student_code

ROOT = Path(__file__).resolve().parents[2]  # the repository: autograder/course/kit.py
COURSE_DIR = ROOT / "assignments"
SOURCE_NOTEBOOK = COURSE_DIR / "source" / "layernorm" / "layernorm.ipynb"
TEMPLATE_DIR = ROOT / "student_template"
SOLUTIONS_DIR = ROOT / "solutions"
DOCS_DIR = ROOT / "docs"  # the documentation's pages, README.md the first
# The module the sandbox's children answer the grader's questions with: named, never imported by the sandbox
# (the questions are the engine's; the sandbox only runs them).
QUESTIONS = "autograder.engine.questions.job"

# A task id joins the solution cell, the stub's message and the checks that grade it.
TASKS = {"task1_forward": "Task 1", "task2_compounding": "Task 2"}

_HIDDEN_TESTS = re.compile(r"^[^\n]*BEGIN HIDDEN TESTS.*?END HIDDEN TESTS[^\n]*\n?", re.DOTALL | re.MULTILINE)
BEGIN_SOLUTION = "### BEGIN SOLUTION"
END_SOLUTION = "### END SOLUTION"
_DEF = re.compile(r"^(\s*)(def|class)\s+(\w+)")


def documentation_pages() -> list[Path]:
    """README.md and every page of docs/, in that order: where the kit's documentation says anything."""
    return [ROOT / "README.md", *sorted(DOCS_DIR.glob("*.md"))]


def documentation(page: str | None = None) -> str:
    """The text of one page of the documentation (`"students.md"`: docs/students.md; `"README.md"`), or of all of
    them, each page whole, one after the other (where a test looks for a claim wherever the documentation makes it)."""
    if page is not None:
        return (ROOT / page if page == "README.md" else DOCS_DIR / page).read_text(encoding="utf-8")
    return "\n\n".join(path.read_text(encoding="utf-8") for path in documentation_pages())


class SourceProblem(Exception):
    """A course's source notebook cannot be graded by the kit as it stands; the message says why and what to do."""


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
        cells = [
            Cell(c.kind, stub_solutions(c.source, task_of(c)) if task_of(c) else c.source, c.nbgrader, c.tags, c.index)
            for c in self.cells()
        ]
        return student_code(cells)

    def reference_code(self) -> list[tuple[str, str]]:
        return [(label, strip_solution_markers(code)) for label, code in student_code(list(self.cells()))]

    def check_points(self) -> dict[str, float]:
        """Points of each hidden-check cell, keyed by check name (grade_id without `check_`)."""
        return {cell.grade_id.removeprefix(HIDDEN_CHECK_PREFIX): _points(cell) for cell in self.cells() if cell.is_hidden_check}

    def written_points(self) -> dict[str, float]:
        """Points of every other graded cell, by grade_id: the written answers an instructor grades by hand."""
        return {cell.grade_id: _points(cell) for cell in self.cells() if cell.nbgrader.get("grade") and not cell.is_hidden_check}

    def problems(self, rubric: dict) -> list[str]:
        """What stops the kit from grading this source (empty when nothing does). The points are the course's:
        any number of points is fine, and the rubric's parts share them."""
        found = Counter(cell.grade_id for cell in self.cells() if cell.is_hidden_check)
        own_tests = [
            c.grade_id
            for c in self.cells()
            if c.kind == "code" and c.nbgrader.get("grade") and not c.nbgrader.get("solution") and not c.is_hidden_check
        ]
        problems = [
            f"the cell check_{name} is missing (give it 0 points to leave the check out)"
            for name in rubric
            if f"{HIDDEN_CHECK_PREFIX}{name}" not in found
        ]
        for grade_id, count in found.items():
            cell = next(c for c in self.cells() if c.grade_id == grade_id)
            if grade_id.removeprefix(HIDDEN_CHECK_PREFIX) not in rubric:
                problems.append(
                    f"the cell {grade_id} names no check of the kit (its checks: "
                    f"{', '.join(HIDDEN_CHECK_PREFIX + name for name in rubric)})"
                )
            if count > 1:
                problems.append(f"{count} cells are called {grade_id}")
            if not cell.nbgrader.get("grade"):
                problems.append(f"the cell {grade_id} is not graded (make it an autograded test cell)")
            if _points(cell) < 0:
                problems.append(f"the cell {grade_id} gives {cell.nbgrader.get('points')!r} points")
        problems += [
            f"the cell {grade_id} is an autograded test the kit does not run (student code runs only in "
            "its sandbox, so it would give full points): make it a check_<name> cell or a written answer"
            for grade_id in own_tests
        ]
        return problems

    def verify(self, rubric: dict) -> "Assignment":
        """This assignment, or SourceProblem naming every problem in one sentence."""
        problems = self.problems(rubric)
        if problems:
            raise SourceProblem(f"{self.source}: " + "; ".join(problems))
        return self

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
            notes.append(f"Cells missing from your notebook ({', '.join(missing)}) were added back, as released, for grading.")
            graded += [locked[grade_id] for grade_id in missing if not locked[grade_id].is_hidden_check]
        return graded, notes


def _points(cell: Cell) -> float:
    """A graded cell's points; anything that is not a finite number counts as -1, which `problems` reports."""
    try:
        points = float(cell.nbgrader.get("points", 0))
    except (TypeError, ValueError):
        return -1.0
    return points if math.isfinite(points) else -1.0


def is_kit_source(path: str | Path, rubric: dict) -> bool:
    """Is this source notebook one of the kit's assignments? Recognised by its content: it holds a hidden-check
    cell of a check of the kit's rubric (whatever the assignment or notebook is called). A source that holds some
    but not all of them is still the kit's: grading it then refuses and says what is missing, rather than letting
    a kernel run it."""
    try:
        names = {c.grade_id.removeprefix(HIDDEN_CHECK_PREFIX) for c in read_cells(path) if c.is_hidden_check}
    except Exception:
        return False
    return bool(set(rubric) & names)


KIT = Assignment(SOURCE_NOTEBOOK)
