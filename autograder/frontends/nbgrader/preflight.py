"""Before nbgrader grades one of the kit's assignments: can it be graded, here and as the course stands?

`nbgrader autograde` (and formgrader's Autograde button) deletes a student's autograded folder before it grades
them again (`--force`), and skips students graded before without looking at what changed. So the kit decides
before nbgrader touches any student's folder: `KitPreflight` is the exporter nbgrader's Autograde converter
creates once, after it has listed the submissions and before it processes the first one. On a refusal it logs one
line and stops the command (nbgrader's own NbGraderException: no traceback, nothing deleted, every student as
before). It refuses when

* the course's source notebook cannot be graded (a check cell missing, unknown or duplicated, negative points);
* the gradebook holds other points for a check cell than the source (the source was edited after
  `nbgrader generate_assignment`, which records the points nbgrader adds up);
* nothing on this machine can isolate student code, and the course has not chosen to grade anyway;
* the user grading cannot run the kit's Python (the sandbox starts its server with it);
* two student ids read alike (`ids`: `alice` and the Cyrillic `\u0430lice`, `jos\u00e9` written two ways), among the
  assignment's submitted folders and the gradebook's students: one line names both.

Isolation: where bubblewrap works (any user, with unprivileged user namespaces) or the grader is root, the
sandbox isolates. Elsewhere `c.KitSandbox.when_unisolated` decides, in the course's or the hub's
nbgrader_config.py: "refuse" (the default) or "unsafe", which grades without isolation; every result then says
so (`extra_data.isolation`, the autograded notebook, a note on the student's page, the log).
"""

from __future__ import annotations

import functools
from pathlib import Path

from nbconvert.exporters import NotebookExporter
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.converters import Autograde
from traitlets import Enum
from traitlets.config import Config, Configurable

from autograder.course import kit
from autograder.engine.rubric import RUBRIC
from autograder.frontends.interpreter import interpreter_refusal
from autograder.frontends.shown import line
from . import privacy
from .plugins import KIT_KEY, course_directory, kit_source, refuse


class KitSandbox(Configurable):
    """How the kit grades where it cannot isolate student code (set in a course's or the hub's nbgrader_config.py)."""

    when_unisolated = Enum(
        ["refuse", "unsafe"],
        default_value="refuse",
        help=(
            "Where neither bubblewrap works nor the grader is root, nothing keeps a submission from reading the "
            "solution and other students' files. 'refuse' (the default) grades nothing there; 'unsafe' grades anyway, "
            "and every result records that it was not isolated."
        ),
    ).tag(config=True)


def unsafe_allowed(config: Config) -> bool:
    return KitSandbox(config=config).when_unisolated == "unsafe"


@functools.lru_cache(maxsize=1)
def can_isolate() -> bool:
    from autograder.sandbox.parent.policy import isolation_available

    return isolation_available()


ISOLATION_REFUSAL = (
    "nothing here can isolate student code (bubblewrap does not work and the grader is not root), "
    "so a submission could read the solution and other students' files. Install bubblewrap with "
    "unprivileged user namespaces, or grade as root (docs/deployment.md, \"On a hub\"); or set "
    "c.KitSandbox.when_unisolated = \"unsafe\" in the course's nbgrader_config.py to grade without "
    "isolation, which every result then records"
)
UNISOLATED_WARNING = (
    "grading WITHOUT isolation (c.KitSandbox.when_unisolated = \"unsafe\"): submissions can read "
    "the solution and other students' files; every result records it"
)


def source_notebooks(coursedir, assignment_id: str) -> list[Path]:
    folder = Path(coursedir.format_path(coursedir.source_directory, ".", assignment_id or "*"))
    return sorted(p for p in folder.parent.glob(f"{folder.name}/*.ipynb"))


def gradebook_disagreements(db_url: str, assignment: kit.Assignment) -> list[str]:
    """Graded cells whose points in the gradebook are not the source's (empty when the gradebook has none yet)."""
    found = []
    source = {**{f"check_{name}": p for name, p in assignment.check_points().items()}, **assignment.written_points()}
    with Gradebook(db_url) as gradebook:
        for grade_id, points in source.items():
            try:
                recorded = gradebook.find_grade_cell(grade_id, assignment.notebook_id, assignment.name).max_score
            except MissingEntry:
                continue
            if abs(recorded - points) > 1e-9:
                found.append(f"{grade_id} gives {points:g} points in the source, {recorded:g} in the gradebook")
    return found


def refusal(coursedir, config: Config, assignment_id: str, unsafe: bool = False) -> str | None:
    """Why the kit will not grade `assignment_id` in this course now, in one sentence; None when it will.
    `unsafe`: grading without isolation was asked for otherwise (`grade-class --unsafe`)."""
    for path in source_notebooks(coursedir, assignment_id):
        if not kit.is_kit_source(path, RUBRIC):
            continue
        assignment = kit.Assignment(path)
        problems = assignment.problems(RUBRIC)
        if problems:
            return f"{path}: " + "; ".join(problems)
        stale = gradebook_disagreements(coursedir.db_url, assignment)
        if stale:
            return (
                f"{'; '.join(stale)}: run `nbgrader generate_assignment {assignment.name} --force` first "
                "(it records the source's points; submissions are kept)"
            )
        if not can_isolate() and not (unsafe or unsafe_allowed(config)):
            return ISOLATION_REFUSAL
        cannot_run = interpreter_refusal()
        if cannot_run:
            return cannot_run
    return None


def submitted_students(coursedir, assignment_id: str) -> list[str]:
    """The name of every student folder holding a submission of `assignment_id`, as it is on disk."""
    pattern = Path(coursedir.format_path(coursedir.submitted_directory, "*", assignment_id))
    return sorted(p.parent.name for p in pattern.parent.parent.glob(f"*/{pattern.name}") if p.is_dir())


def alike_students(coursedir, assignment_id: str) -> str | None:
    """Two student ids that read alike (`ids`) among the assignment's submitted folders and the gradebook's
    students, in one clause; None where there are none."""
    from autograder.course.fence import name_text
    from autograder.frontends.ids import refusal as alike

    with Gradebook(coursedir.db_url) as gradebook:
        known = [student.id for student in gradebook.students]  # nbgrader's id is the folder's name, as it is
    return alike([(name_text(name), name) for name in known + submitted_students(coursedir, assignment_id)])


def graded_with_another_source(coursedir, assignment: kit.Assignment) -> list[str]:
    """Students whose autograded notebook was graded against another version of the source (new points, say)."""
    import json

    stale = []
    pattern = Path(coursedir.format_path(coursedir.autograded_directory, "*", assignment.name))
    for path in sorted(pattern.parent.parent.glob(f"*/{assignment.name}/{assignment.notebook_name}")):
        try:
            record = json.loads(path.read_text()).get("metadata", {}).get(KIT_KEY, {})
        except (OSError, ValueError):
            continue
        if record.get("source") not in (None, assignment.key):
            stale.append(path.parent.parent.name)
    return stale


class KitPreflight(NotebookExporter):
    """nbgrader's notebook exporter for Autograde, which checks the kit's assignment first (see the module), and
    reads each submitted notebook of the kit's assignments inside the kit's fence (`intake`)."""

    def from_file(self, file_stream, resources=None, **kw):
        converter = self.parent
        kit_notebook = (
            isinstance(converter, Autograde)
            and getattr(converter, "_sanitizing", False)
            and resources is not None
            and "nbgrader" in resources
            and kit_source(self, resources) is not None
        )
        if not kit_notebook:
            return super().from_file(file_stream, resources=resources, **kw)
        from .intake import marked, read_submitted

        coursedir = course_directory(converter)
        info = resources["nbgrader"]
        release = Path(coursedir.format_path(coursedir.release_directory, ".", info["assignment"])) / f"{info['notebook']}.ipynb"
        return self.from_notebook_node(marked(read_submitted(file_stream.name, release)), resources=resources, **kw)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        converter = self.parent
        if not isinstance(converter, Autograde):
            return
        coursedir = course_directory(converter)
        privacy.guard(coursedir, self.config, converter.log, f"Not grading {coursedir.assignment_id}")
        kit_sources = [p for p in source_notebooks(coursedir, coursedir.assignment_id) if kit.is_kit_source(p, RUBRIC)]
        why = refusal(coursedir, self.config, coursedir.assignment_id) or (
            alike_students(coursedir, coursedir.assignment_id) if kit_sources else None
        )
        if why:
            raise refuse(converter.log, f"Not grading {coursedir.assignment_id}", why)
        if kit_sources:  # the kit reads them next: nobody else may, nor write into them
            for problem in privacy.close_submissions(coursedir, coursedir.assignment_id, self.config, coursedir.student_id):
                converter.log.warning("could not close a submission to other users: %s", line(problem))
        if kit_sources and not can_isolate():
            converter.log.warning(UNISOLATED_WARNING)
        if kit_sources and not converter.force:
            stale = graded_with_another_source(coursedir, kit.Assignment(kit_sources[0]))
            if stale:
                converter.log.warning(
                    "%d students were graded against an earlier version of %s (%s); "
                    "`nbgrader autograde %s --force` grades them again",
                    len(stale),
                    kit_sources[0].name,
                    ", ".join(map(line, stale[:5])) + (", ..." if len(stale) > 5 else ""),
                    coursedir.assignment_id,
                )
