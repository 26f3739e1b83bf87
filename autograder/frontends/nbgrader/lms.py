"""A course's grades into its LMS: the file Canvas or Moodle imports, written from each student's standing
(`gradebook.standing_from_gradebook`, what every other view shows) on the kit's assignments, with the LMS's own
export as the roster (`autograder.frontends.lms`).

Two doors, one computation (`lms_file`):

* `python -m autograder lms-export --course COURSE --lms canvas|moodle --roster FILE --match-column COLUMN | --mapping
  FILE --out FILE [--assignment NAME ...]` (`lms_export`);
* `nbgrader export --exporter=autograder.frontends.nbgrader.lms.CanvasExport` (or `MoodleExport`), with `--to`,
  `--assignment` and the exporter's options (`--CanvasExport.roster=FILE --CanvasExport.match_column=COLUMN`, or
  `c.LmsExport.roster = ...` in nbgrader_config.py for both).

Both check first that the course is private (`privacy`), and refuse in one line, writing nothing, where the roster
or the mapping cannot be read, the roster is not the LMS's layout, a column is missing, or written answers await
grading (unless counted as 0). A grade the file does not carry (out of date, a student matched to no row or to two)
makes the command end with status 3 (`export.HELD_BACK`), as `nbgrader export` does; each is said in one line.
Nothing here imports the grader.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import ExportPlugin
from traitlets import Bool, Unicode

from autograder.course import kit
from autograder.engine.rubric import RUBRIC
from autograder.frontends.lms.canvas import canvas_file
from autograder.frontends.lms.grades import Choices, Graded, Refused, Written
from autograder.frontends.lms.match import Matching, read_mapping
from autograder.frontends.lms.moodle import moodle_file
from autograder.frontends.lms.table import RosterError, read_table, write_private
from .export import HELD_BACK
from .gradebook import autograded_notebook, load_submissions, standing_from_gradebook
from .plugins import course_directory
from .preflight import source_notebooks
from .privacy import exposure, guard_or_exit, refusal_line

LAYOUTS = {"canvas": canvas_file, "moodle": moodle_file}
WHERE = {"canvas": "Canvas: Grades > Import", "moodle": "Moodle: Grades > Import > CSV file"}


@dataclass(frozen=True)
class Request:
    """What the instructor asked for."""

    lms: str
    roster: Path
    out: Path
    assignments: tuple = ()  # names; empty: every one of the kit's assignments in the gradebook
    match_column: str = ""
    mapping: Path | None = None
    choices: Choices = field(default_factory=Choices)


def lms_file(gradebook: Gradebook, coursedir, config, request: Request) -> Written:
    """The LMS's file for `request`, written to `request.out`; Refused or RosterError (one line) where nothing is."""
    if request.match_column and request.mapping:
        raise Refused("students are matched by a roster column or by a mapping file: give one of them, not both")
    if not request.match_column and not request.mapping:
        raise Refused("name the roster column that holds nbgrader's student ids (--match-column), or give a mapping file")
    if Path(request.out).resolve() == Path(request.roster).resolve():
        raise Refused("the file to write is the roster itself: write it elsewhere")
    notes = []
    matching = Matching(request.match_column)
    if request.mapping:
        matching, notes = read_mapping(request.mapping)
    table = read_table(request.roster)
    graded = kit_graded(gradebook, coursedir, config, request.assignments)
    if request.choices.column and len(graded) > 1:
        raise Refused("--column names the LMS's column of one assignment: export one with --assignment")
    written = LAYOUTS[request.lms](table, graded, matching, request.choices)
    written.lines[:0] = notes
    written.names = tuple(g.name for g in graded)
    write_private(request.out, written.text())
    return written


def kit_graded(gradebook: Gradebook, coursedir, config, names: tuple = ()) -> list[Graded]:
    """Each of the kit's assignments named (all of them in the gradebook where none is): its maximum, and the
    standing of every student with a submission."""
    found = []
    for name in names or [a.name for a in gradebook.assignments]:
        sources = [p for p in source_notebooks(coursedir, name) if kit.is_kit_source(p, RUBRIC)]
        if not sources:
            if names:
                raise Refused(f"{name} is not one of the kit's assignments in this course (nbgrader export writes the others)")
            continue
        assignment = kit.Assignment(sources[0])
        try:
            submissions = list(gradebook.find_assignment(name).submissions)
        except MissingEntry:
            raise Refused(f"the gradebook has no assignment {name}: run `nbgrader generate_assignment {name}` first") from None
        held = load_submissions(gradebook, assignment)  # noqa: F841  (one query for all; kept while the rows are read)
        standings = {}
        for submission in submissions:
            student = submission.student.id
            try:
                notebook = autograded_notebook(coursedir, assignment, student)
                standings[student] = standing_from_gradebook(gradebook, assignment, student, notebook, config)
            except MissingEntry:
                continue
        maximum = sum(assignment.check_points().values()) + sum(assignment.written_points().values())
        found.append(Graded(name, float(maximum), standings))
    if not found:
        raise Refused("the gradebook holds none of the kit's assignments")
    return found


def summary(request: Request, written: Written) -> str:
    said = f" (the {len(written.lines)} lines above: rows and students not filled from a standing)" if written.lines else ""
    return (
        f"wrote {request.out}: {', '.join(written.names)} for {written.filled} roster rows{said}; import it in "
        f"{WHERE[request.lms]}"
    )


def lms_export(
    *,
    course: Path,
    lms: str,
    roster: Path,
    out: Path,
    assignments: tuple = (),
    match_column: str = "",
    mapping: Path | None = None,
    choices: Choices = Choices(),
) -> Written:
    """`lms-export`: the file for the course's LMS (see the module). Refused in one line ("Not writing ...") where
    nothing is written."""
    from nbgrader.coursedir import CourseDirectory

    from .bridge import course_config

    course = Path(course).resolve()
    config = course_config(course)
    coursedir = CourseDirectory(config=config, root=str(course))
    request = Request(lms, Path(roster), Path(out), tuple(assignments), match_column, mapping, choices)
    found = exposure(coursedir, config)
    if found is not None and not found.allowed:
        raise Refused(f"Not writing {out}: {refusal_line(found)}")
    try:
        with Gradebook(coursedir.db_url, coursedir.course_id) as gradebook:
            return lms_file(gradebook, coursedir, config, request)
    except (Refused, RosterError) as error:
        raise Refused(f"Not writing {out}: {error}") from None


class LmsExport(ExportPlugin):
    """`nbgrader export` into an LMS's file (see the module): `CanvasExport` and `MoodleExport` pick the LMS."""

    layout = ""
    roster = Unicode("", help="The LMS's own gradebook export: Canvas's Grades > Export, Moodle's plain text file").tag(
        config=True
    )
    match_column = Unicode("", help="The roster's column holding nbgrader's student ids").tag(config=True)
    mapping = Unicode("", help="A two-column file: nbgrader's student id, and the value of a roster column").tag(config=True)
    identifier = Unicode("", help="Moodle: the roster column written to identify students (default: match_column)").tag(
        config=True
    )
    column = Unicode("", help="The LMS's column for the assignment (default: its name)").tag(config=True)
    missing_as_zero = Bool(False, help="A roster row with no submission gets 0 (default: left out)").tag(config=True)
    awaiting_as_zero = Bool(False, help="Written answers awaiting grading count as 0 (default: refuse)").tag(config=True)

    def export(self, gradebook) -> None:
        guard_or_exit(self, "Not exporting grades")
        name = type(self).__name__
        choices = Choices(
            self.missing_as_zero, self.awaiting_as_zero, self.column, self.identifier, f"--{name}.awaiting_as_zero=True"
        )
        out = Path(self.to or f"{self.layout}-grades.csv")
        if self.student:
            self.log.warning("--student is left aside: the LMS's file is written for every row of its roster")
        assignments = tuple(str(a) for a in self.assignment)
        request = Request(self.layout, Path(self.roster), out, assignments, self.match_column, self.mapping or None, choices)
        try:
            written = lms_file(gradebook, course_directory(self), self.config, request)
        except (Refused, RosterError) as error:
            self.log.error("Not writing %s: %s.", out, error)
            sys.exit(1)
        for line in written.lines:
            self.log.warning("%s", line)
        self.log.info("%s", summary(request, written))
        if written.held_back:
            self.log.error("Held back from %s (every other grade is in it): %s.", out, written.held_back)
        if not written.complete:
            sys.exit(HELD_BACK)


class CanvasExport(LmsExport):
    """`nbgrader export --exporter=autograder.frontends.nbgrader.lms.CanvasExport`: Canvas's gradebook file."""

    layout = "canvas"


class MoodleExport(LmsExport):
    """`nbgrader export --exporter=autograder.frontends.nbgrader.lms.MoodleExport`: a file for Moodle's CSV import."""

    layout = "moodle"
