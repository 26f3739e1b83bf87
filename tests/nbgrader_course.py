"""A real nbgrader course for the tests: the kit's assignment next to an ordinary one, and nbgrader run as an
instructor runs it (the `nbgrader` command, from the course folder, with the course's own configuration)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

from autograder.course import kit
from autograder.course.sample_class import SAMPLE_DIR

ORDINARY = "hw2"  # a second assignment of the course, with nothing of the kit in it
KIT_STUDENTS = ("ada_correct", "ben_post_ln", "gil_edits_locked_cells")


def ordinary_notebook() -> nbformat.NotebookNode:
    """An everyday nbgrader assignment: a solution cell, an autograded test with a hidden part, a written answer."""

    def meta(grade_id, **flags):
        return {
            "nbgrader": {
                "grade_id": grade_id,
                "schema_version": 3,
                "grade": False,
                "solution": False,
                "locked": False,
                "task": False,
                **flags,
            }
        }

    cells = [
        nbformat.v4.new_markdown_cell("# Homework 2\nWrite `add`.", metadata=meta("intro", locked=True)),
        nbformat.v4.new_code_cell(
            "def add(a, b):\n    ### BEGIN SOLUTION\n    return a + b\n    ### END SOLUTION", metadata=meta("add", solution=True)
        ),
        nbformat.v4.new_code_cell(
            "assert add(1, 2) == 3\n### BEGIN HIDDEN TESTS\nassert add(-1, 1) == 0\n### END HIDDEN TESTS",
            metadata=meta("test_add", grade=True, locked=True, points=2),
        ),
        nbformat.v4.new_markdown_cell("Why is addition commutative?", metadata=meta("explain_prompt", locked=True)),
        nbformat.v4.new_markdown_cell("YOUR ANSWER HERE", metadata=meta("explain", grade=True, solution=True, points=1)),
    ]
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return notebook


def make_course(folder: Path, *, ordinary: bool = True) -> Path:
    """A course folder as an instructor sets one up: the kit's source and configuration, and an ordinary assignment."""
    course = Path(folder)
    shutil.copytree(kit.SOURCE_NOTEBOOK.parent, course / "source" / kit.KIT.name)
    shutil.copy(kit.COURSE_DIR / "nbgrader_config.py", course / "nbgrader_config.py")
    if ordinary:
        (course / "source" / ORDINARY).mkdir(parents=True)
        nbformat.write(ordinary_notebook(), course / "source" / ORDINARY / f"{ORDINARY}.ipynb")
    return course


class Released:
    """Courses of `make_course` with every assignment generated (`nbgrader generate_assignment`, as the instructor
    runs it): one of each kind per test session (the `released` fixture), made on first use; a test writes into its
    own copy (`copy`)."""

    def __init__(self, place: Path):
        self.place, self.made = Path(place), {}

    def copy(self, folder: Path, *, ordinary: bool = True) -> Path:
        if ordinary not in self.made:
            course = make_course(self.place / ("with-ordinary" if ordinary else "kit-only"), ordinary=ordinary)
            for assignment in (kit.KIT.name, ORDINARY) if ordinary else (kit.KIT.name,):
                Shell()("nbgrader", "generate_assignment", assignment, cwd=course)
            self.made[ordinary] = course
        shutil.copytree(self.made[ordinary], folder)
        return Path(folder)


def sample_submission(student: str) -> nbformat.NotebookNode:
    return nbformat.read(SAMPLE_DIR / student / kit.KIT.name / kit.KIT.notebook_name, as_version=4)


def do_ordinary_homework(notebook: nbformat.NotebookNode, correct: bool) -> nbformat.NotebookNode:
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id == "add":
            cell.source = "def add(a, b):\n    return a " + ("+" if correct else "-") + " b"
        elif grade_id == "explain":
            cell.source = "Because a + b counts the same things as b + a."
    return notebook


def do_kit_homework(released: nbformat.NotebookNode, student: str) -> nbformat.NotebookNode:
    """What one of the sample class's students does with the released notebook: their cells, in place."""
    theirs = sample_submission(student)
    if student == "gil_edits_locked_cells":
        return theirs  # edits a locked cell and deletes a graded one: the whole notebook is theirs
    by_id = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in theirs.cells}
    for cell in released.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.metadata.get("nbgrader", {}).get("solution") and grade_id in by_id:
            cell.source = by_id[grade_id].source
    return released


class Shell:
    """Runs commands as the instructor or a student would, and keeps a log of each (for test_exchange.py's check of
    the documented commands).
    `python`: the environment's Python (default this one); `user`: run as that Unix user (needs root), with
    `home` as their home folder (default their own). Everything a command printed is kept in `said`."""

    def __init__(
        self, env: dict | None = None, python: str | Path = sys.executable, user: str | None = None, home: Path | None = None
    ):
        self.python, self.user, self.home = str(python), user, home
        self.said: list[tuple[list[str], str]] = []
        self.env = {**os.environ, **(env or {}), "PATH": f"{Path(self.python).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        self.log: list[list[str]] = []

    def __call__(self, *arguments: str, cwd: Path, env: dict | None = None, check: bool = True):
        command = list(arguments)
        self.log.append(command)
        if command[0] == "nbgrader":
            argv = [self.python, "-m", "nbgrader", *command[1:]]
        elif command[:2] == ["python", "-m"]:
            argv = [self.python, *command[1:]]
        else:
            argv = command
        environment = {**self.env, **(env or {})}
        if self.user:
            import hub_users

            environment = {
                **environment,
                "HOME": str(self.home or hub_users.home(self.user)),
                "USER": self.user,
                "LOGNAME": self.user,
            }
            argv = hub_users.command_as(self.user, argv)
        process = subprocess.run(argv, cwd=cwd, env=environment, capture_output=True, text=True, timeout=900)
        self.said.append((command, process.stdout + process.stderr))
        if check and process.returncode != 0:
            raise AssertionError(f"{' '.join(command)} failed ({process.returncode}):\n{process.stdout}\n{process.stderr}")
        return process
