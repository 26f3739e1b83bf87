"""Finding each student's submission in a class folder: a folder of submissions (one per student: a notebook, a
.py, or a folder holding one) or nbgrader's `submitted/<student>/<assignment>/` layout. Everything below the
folder is the students': it is walked without following links, bounded in depth and width, and a student id is
the name as plain text (`fence.name_text`: what does not show, as its escape). Two ids that read alike (`ids`)
are refused by grade-class before anything is graded."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from autograder.course import kit
from autograder.course.fence import name_text

SUBMISSION_SUFFIXES = (".ipynb", ".py")


@dataclass(frozen=True)
class Submission:
    student: str
    path: Path | None  # None: the student's folder holds nothing gradable
    name: str = field(default="", compare=False)  # the file or folder name the id was made from


MAX_ENTRIES, MAX_DEPTH = 10_000, 12  # what of a student's folder is looked through for their submission


def pick_file(folder: Path, assignment: kit.Assignment = kit.KIT) -> Path | None:
    """The submission inside a student's folder: the assignment's notebook first, else any notebook or .py.
    Links are never followed (the file found may itself be one: reading it then refuses with a message). The
    folder is the student's: it is walked without recursion, at most MAX_DEPTH deep and MAX_ENTRIES wide."""
    preferred = folder / assignment.notebook_name
    if preferred.is_file() or preferred.is_symlink():
        return preferred
    found, todo, seen = [], [(folder, 0)], 0
    while todo and seen < MAX_ENTRIES:
        top, depth = todo.pop()
        try:
            entries = sorted(os.scandir(top), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            seen += 1
            if entry.is_dir(follow_symlinks=False):
                if entry.name != ".ipynb_checkpoints" and depth < MAX_DEPTH:
                    todo.append((Path(entry.path), depth + 1))
            elif entry.name.endswith(SUBMISSION_SUFFIXES):
                found.append(Path(entry.path))
    for suffix in SUBMISSION_SUFFIXES:
        matching = sorted(p for p in found if p.name.endswith(suffix))
        if matching:
            return matching[0]
    return None


def discover(root: Path, assignment: kit.Assignment = kit.KIT) -> list[Submission]:
    """One Submission per student, sorted by student id. In nbgrader's layout (a course's submitted/ folder,
    which may hold other assignments too) a student without a `<student>/<assignment>/` folder did not submit
    this assignment and is left out, as `nbgrader autograde` leaves them out. A student id is the file or
    folder's name as plain text; `Submission.name` keeps the name (for `ids`: two that read alike are refused)."""
    submissions = []
    entries = [e for e in sorted(Path(root).iterdir()) if not e.name.startswith(".")]
    course_layout = any((e / assignment.name).is_dir() for e in entries if e.is_dir() and not e.is_symlink())
    for entry in entries:
        if course_layout and not (entry / assignment.name).is_dir():
            continue
        if entry.suffix in SUBMISSION_SUFFIXES and not entry.is_dir():
            submissions.append(Submission(name_text(entry.stem), entry, entry.stem))  # a link or a pipe: refused when read
        elif entry.is_dir() and not entry.is_symlink():
            nbgrader_layout = entry / assignment.name
            submissions.append(
                Submission(
                    name_text(entry.name),
                    pick_file(nbgrader_layout if nbgrader_layout.is_dir() else entry, assignment),
                    entry.name,
                )
            )
    return submissions


def id_forms(submissions: list[Submission]) -> list[tuple[str, str]]:
    """Each submission's id as `ids` compares it: as shown, and the name it was made from."""
    return [(s.student, s.name or s.student) for s in submissions]
