"""A small course of the kit's assignment, driven in-process as an instructor drives it: each action is the nbgrader
converter, exchange, export plugin or kit function the command line would run, each view is read back as
numbers, and `Model` knows what every student's standing must be from what was done to them (it never reads the
gradebook: it adds up what it did). `StandIn` grades without the sandbox where the sandbox is not the point: a
submission names its kind, and the kind gives each check a fixed share of the points the course gives it.
"""

from __future__ import annotations

import contextlib
import csv
import html
import io
import logging
import re
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from unittest import mock

import nbformat
from nbgrader.api import Gradebook
from nbgrader.auth import Authenticator
from nbgrader.converters import Autograde, GenerateAssignment, GenerateFeedback
from nbgrader.converters.base import NbGraderException
from nbgrader.coursedir import CourseDirectory

from autograder.course import kit
from autograder.engine.results import CheckResult, SubmissionResult, SubTest
from autograder.engine.rubric import RUBRIC, WRITTEN
from autograder.frontends import classgrade, feedback, report
from autograder.frontends.nbgrader import bridge
from autograder.frontends.nbgrader.bridge import course_config
from autograder.frontends.lms.canvas import canvas_file
from autograder.frontends.lms.grades import Choices, Refused as NotWritten
from autograder.frontends.lms.match import Matching
from autograder.frontends.lms.moodle import moodle_file
from autograder.frontends.lms.table import Table
from autograder.frontends.nbgrader.export import PerCheckExport
from autograder.frontends.nbgrader.lms import kit_graded
from autograder.frontends.nbgrader.feedback import FormgraderStanding, KitReleaseFeedback
from autograder.frontends.nbgrader.gradebook import course_standings
from autograder.frontends.nbgrader.plugins import KitRefusal
from autograder.frontends.nbgrader.recorder import CourseRecorder, course_rows
from autograder.grading.options import GradingOptions
from autograder.sandbox.parent import pool
from autograder.sandbox.parent.client import UNSAFE
from nbgrader_course import do_kit_homework, make_course

NAME, NOTEBOOK, NOTEBOOK_ID = kit.KIT.name, kit.KIT.notebook_name, kit.KIT.notebook_id
STUDENTS = ("ada", "ben", "cho")
DUE = datetime(2030, 1, 1, 12, 0, tzinfo=timezone.utc)
KINDS = {  # what the stand-in gives: check -> share of the check's points
    "correct": {name: 1.0 for name in RUBRIC},
    "post_ln": {**{name: 1.0 for name in RUBRIC}, "forward_order": 0.0, "forward_prenorm": 0.0, "forward_shortcuts": 0.5},
    "blank": {name: 0.0 for name in RUBRIC},
}
SAMPLE = {"correct": "ada_correct", "post_ln": "ben_post_ln", "blank": None}
ANSWERED = {"correct": True, "post_ln": True, "blank": False}  # a written answer left as released scores 0
MARK = "# stand-in kind: "
CANVAS_ROSTER = [  # Canvas's gradebook export of the course: each student's login is their nbgrader id
    ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Quiz 1 (101)", "Current Score", "Final Score"],
    ["    Points Possible", "", "", "", "", "10", "(read only)", "(read only)"],
    ['=HYPERLINK("http://x.example","Ada")', "11", "S1", "ada", "Sec A", "9", "90", "90"],
    ['Ben, "B"\nsecond line', "12", "S2", "ben", "Sec A", "-1.5", "0", "0"],
    ["@Cho", "13", "S3", "cho", "Sec B", "EX", "", ""],
    ["Dee, no submission", "14", "S4", "dee", "Sec B", "", "", ""],
    ["Student, Test", "15", "", "", "", "", "", ""],
]
MOODLE_ROSTER = [  # Moodle's grade export of the course: the ID number is the nbgrader id
    ["First name", "Last name", "ID number", "Email address", "Assignment: layernorm (Real)", "Last downloaded from this course"],
    ["=cmd|' /C calc'!A0", "Ada", "ada", "ada@example.org", "-", "1700000000"],
    ["Ben", "+1", "ben", "ben@example.org", "-", "1700000000"],
    ["Cho", "C", "cho", "cho@example.org", "-", "1700000000"],
    ["Dee", "D", "dee", "dee@example.org", "-", "1700000000"],
]
TINY_PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"
    b"\x00\x00\x00\rIDATx\x9cc\xf8\xff\xff?\x00\x05\xfe\x02\xfe\xa7\x35\x81\x84\x00\x00\x00\x00IEND\xaeB`\x82"
)


# --- the course ---------------------------------------------------------------------------------------


@dataclass
class Refused:
    line: str  # the kit's one line


class Lines(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)

    def errors(self) -> list[str]:
        return [r.getMessage() for r in self.records if r.levelno >= logging.ERROR]


def one_line(lines: Lines, error: BaseException) -> Refused:
    """The kit's refusal: exactly one error line, naming what was not done, and no traceback anywhere."""
    errors = lines.errors()
    text = "\n".join(r.getMessage() for r in lines.records)
    assert len(errors) == 1 and errors[0].startswith("Not "), (errors, error)
    assert "Traceback" not in text and "\n" not in errors[0], text
    return Refused(errors[0])


class Course:
    """One course folder (copied from a template made once), its exchange and a grade-class folder."""

    template: Path | None = None

    def __init__(self, place: Path):
        if Course.template is None or not Course.template.exists():
            Course.template = self._template(place.parent / "template")
        self.root = place
        shutil.copytree(Course.template, place)
        self.course, self.exchange, self.out = place / "course", place / "exchange", place / "graded"
        self.counter = 0

    @staticmethod
    def _template(place: Path) -> Path:
        course = make_course(place / "course", ordinary=False)
        with open(course / "nbgrader_config.py", "a") as config:
            config.write('\nc.LateSubmissionPlugin.penalty_method = "zero"\n')
        (place / "exchange").mkdir(mode=0o777)
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
            gradebook.update_or_create_assignment(NAME, duedate=DUE.replace(tzinfo=None))
        Course.run_generate(course, place / "exchange")
        return place

    # configuration as the instructor's nbgrader commands see it
    def config(self):
        return self.config_of(self.course, self.exchange)

    @staticmethod
    def config_of(course: Path, exchange: Path):
        config = course_config(course)
        config.CourseDirectory.root = str(course)
        config.CourseDirectory.course_id = "dl101"
        config.Exchange.root = str(exchange)
        return config

    def coursedir(self, config=None) -> CourseDirectory:
        coursedir = CourseDirectory(config=config or self.config(), root=str(self.course))
        coursedir.assignment_id = NAME
        return coursedir

    @staticmethod
    def run_generate(course: Path, exchange: Path) -> None:
        config = Course.config_of(course, exchange)
        coursedir = CourseDirectory(config=config, root=str(course))
        coursedir.assignment_id = NAME
        converter = GenerateAssignment(coursedir=coursedir, config=config, log=_quiet())
        converter.force = True
        converter.start()

    def _logged(self, action):
        """Run `action(log)`; Refused with its one line where the kit refused, else what it returned."""
        lines, log = Lines(), logging.getLogger(f"course-{id(self)}-{self.counter}")
        self.counter += 1
        log.handlers, log.propagate = [lines], False
        log.setLevel(logging.DEBUG)
        try:
            return action(log)
        except (KitRefusal, SystemExit) as error:
            if isinstance(error, SystemExit) and isinstance(error.code, str):  # CourseRecorder's refusal
                log.error(error.code)
            return one_line(lines, error)
        except NbGraderException as error:  # nbgrader failed for some student: say what its log said
            raise AssertionError(
                "nbgrader failed; its log:\n"
                + "\n".join(f"{r.levelname}: {r.getMessage()}" for r in lines.records if r.levelno >= logging.WARNING)
            ) from error

    # --- the instructor's actions ----------------------------------------------------------------------
    def collect(self, student: str, kind: str, late: bool, number: int, seconds_late: float = 34) -> None:
        """A submission of `kind` as `nbgrader collect` leaves it: the notebook, its time and its secret; `late`:
        `seconds_late` after the due date, else some days before it."""
        released = nbformat.read(self.course / "release" / NAME / NOTEBOOK, as_version=4)
        notebook = do_kit_homework(released, SAMPLE[kind]) if SAMPLE[kind] else released
        for cell in notebook.cells:
            if cell.metadata.get("nbgrader", {}).get("grade_id") == "task1_forward":
                cell.source = f"{MARK}{kind}\n{cell.source}"
        folder = self.course / "submitted" / student / NAME
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, folder / NOTEBOOK)
        when = DUE + timedelta(seconds=seconds_late) if late else DUE - timedelta(days=9) + timedelta(minutes=number)
        (folder / "timestamp.txt").write_text(f"{when:%Y-%m-%d %H:%M:%S.%f} UTC")
        (folder / "submission_secret.txt").write_text(f"secret-{student}")

    def autograde(self, force: bool):
        def run(log):
            converter = Autograde(coursedir=self.coursedir(), config=self.config(), log=log)
            converter.force = force
            converter.start()

        return self._logged(run)

    def grade_class(self, force: bool):
        def run(log):
            recorder = CourseRecorder(self.course, NAME)
            options = GradingOptions(seed=5, assignment=recorder.assignment)
            return classgrade.grade_class(
                self.course / "submitted", self.out, options=options, workers=1, force=force, progress=False, course=recorder
            )

        return self._logged(run)

    def set_score(self, student: str, grade_id: str, points: float) -> None:
        """What formgrader's PUT /formgrader/api/grade/<id> does with a score typed into its box (nbgrader's
        GradeHandler.put: the manual score and extra credit as sent, and the cell no longer needs grading)."""
        with Gradebook(f"sqlite:///{self.course / 'gradebook.db'}") as gradebook:
            grade = gradebook.find_grade(grade_id, NOTEBOOK_ID, NAME, student)
            grade.manual_score, grade.extra_credit = points, None
            grade.needs_manual_grade = grade.manual_score is None and grade.auto_score is None
            gradebook.db.commit()

    def set_comment(self, student: str, grade_id: str, text: str) -> None:
        """What formgrader's PUT /formgrader/api/comment/<id> does (nbgrader's CommentHandler.put)."""
        with Gradebook(f"sqlite:///{self.course / 'gradebook.db'}") as gradebook:
            gradebook.find_comment(grade_id, NOTEBOOK_ID, NAME, student).manual_comment = text
            gradebook.db.commit()

    def marks(self) -> dict:
        """(student, cell) -> (manual score, needs_manual_grade, manual comment) of every graded or commented cell,
        as the gradebook holds them (a cell without a comment row: comment None; without a grade: score and flag
        None)."""
        found = {}
        with Gradebook(f"sqlite:///{self.course / 'gradebook.db'}") as gradebook:
            for submission in gradebook.find_assignment(NAME).submissions:
                notebook = gradebook.find_submission_notebook(NOTEBOOK_ID, NAME, submission.student.id)
                for grade in notebook.grades:
                    found[(submission.student.id, grade.name)] = (grade.manual_score, grade.needs_manual_grade, None)
                for comment in notebook.comments:
                    score, flag, _ = found.get((submission.student.id, comment.name), (None, None, None))
                    found[(submission.student.id, comment.name)] = (score, flag, comment.manual_comment)
        return found

    def set_late_rule(self, rule: str) -> None:
        """The course's late rule: "none" is nbgrader's default (the course's configuration says nothing: a late
        submission is flagged and loses nothing), "zero" gives it a score of zero."""
        config = self.course / "nbgrader_config.py"
        kept = [line for line in config.read_text().splitlines() if "LateSubmissionPlugin.penalty_method" not in line]
        chosen = [f"c.LateSubmissionPlugin.penalty_method = {rule!r}"] if rule != "none" else []
        config.write_text("\n".join(kept + chosen) + "\n")

    def change_points(self, points: dict, generate: bool):
        path = self.course / "source" / NAME / NOTEBOOK
        notebook = nbformat.read(path, as_version=4)
        for cell in notebook.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if grade_id in points:
                cell.metadata.nbgrader["points"] = points[grade_id]
        nbformat.write(notebook, path)
        if generate:
            self.run_generate(self.course, self.exchange)

    def generate_feedback(self):
        def run(log):
            converter = GenerateFeedback(coursedir=self.coursedir(), config=self.config(), log=log)
            converter.start()

        return self._logged(run)

    def release_feedback(self):
        def run(log):
            config = self.config()
            KitReleaseFeedback(
                coursedir=self.coursedir(config), authenticator=Authenticator(config=config), config=config, log=log
            ).start()

        return self._logged(run)

    @property
    def exported(self) -> Path:
        """Where `export` writes grades.csv (grades_per_check.csv beside it)."""
        return self.root / "grades.csv"

    def export(self):
        target = self.exported

        def run(log):
            plugin = PerCheckExport(config=self.config(), log=log)
            plugin.to, plugin.assignment, plugin.student = str(target), [], []
            with Gradebook(f"sqlite:///{self.course / 'gradebook.db'}") as gradebook:
                plugin.export(gradebook)
            return target

        return self._logged(run)

    # --- the views, read back ---------------------------------------------------------------------------
    def standings(self) -> dict:
        config = self.config()
        return course_standings(self.coursedir(config), config, kit.Assignment(self.source()))

    def standings_and_lms_files(self) -> tuple[dict, dict]:
        """Each student's standing, as the door to the LMS reads the gradebook, and the LMS files rendered from that
        one reading (`lms_files`)."""
        config = self.config()
        with Gradebook(f"sqlite:///{self.course / 'gradebook.db'}") as gradebook:
            graded = kit_graded(gradebook, self.coursedir(config), config)
        return graded[0].standings, self.lms_files(graded)

    def source(self) -> Path:
        return self.course / "source" / NAME / NOTEBOOK

    def page(self, student: str) -> Path:
        return self.course / "feedback" / student / NAME / f"{NOTEBOOK_ID}.html"

    def released(self) -> list[str]:
        return sorted(p.read_text() for p in (self.exchange / "dl101" / "feedback").glob("*.html"))

    def formgrader_view(self, student: str) -> str:
        """The cell formgrader's submission view opens with."""
        notebook = nbformat.read(self.course / "autograded" / student / NAME / NOTEBOOK, as_version=4)
        with Gradebook(f"sqlite:///{self.course / 'gradebook.db'}") as gradebook:
            submission_id = gradebook.find_submission_notebook(NOTEBOOK_ID, NAME, student).id
        config = self.config()
        FormgraderStanding(config=config).preprocess(
            notebook, {"submission_id": submission_id, "assignment_id": NAME, "notebook_id": NOTEBOOK_ID, "student": student}
        )
        return notebook.cells[0].source

    def report(self) -> str:
        _, rows = course_rows(self.course, NAME)
        return report.class_report_html(rows)

    @staticmethod
    def lms_files(graded: list) -> dict:
        """The course's LMS files of its assignments as `kit_graded` read them: Canvas's (its export
        `CANVAS_ROSTER`, written answers awaiting grading counted as 0) and Moodle's (`MOODLE_ROSTER`, identified by
        e-mail address, missing work as 0; refused while answers await grading), each as (what was written, its rows
        read back), or Refused with the line."""
        files = {}
        for lms, layout, roster, matching, choices in [
            ("canvas", canvas_file, CANVAS_ROSTER, Matching("SIS Login ID"), Choices(awaiting_as_zero=True)),
            ("moodle", moodle_file, MOODLE_ROSTER, Matching("ID number"), Choices(True, identifier="Email address")),
        ]:
            try:
                written = layout(Table(lms, roster[0], [list(row) for row in roster[1:]]), graded, matching, choices)
            except NotWritten as refused:
                files[lms] = Refused(str(refused))
                continue
            files[lms] = (written, list(csv.reader(io.StringIO(written.text(), newline=""))))
        return files


def _quiet() -> logging.Logger:
    log = logging.getLogger("course-states-quiet")
    log.setLevel(logging.CRITICAL)
    return log


# --- reading numbers off a view --------------------------------------------------------------------------


def number(text: str) -> float:
    return float(text)


def page_numbers(page: str) -> dict:
    """What a feedback page says: score, maximum, late penalty, each check's and written answer's points."""
    score, maximum = re.search(r'<span id="score">([\d.]+) / ([\d.]+)</span>', page).groups()
    checks = {
        name: html.unescape(points)
        for name, points in re.findall(r'data-check="(\w+)"><td class="title">[^<]*</td><td class="pts">([^<]+)', page)
    }
    written = {
        cell: html.unescape(points)
        for cell, points in re.findall(r'data-cell="(\w+)"><td class="title">[^<]*</td><td class="pts">([^<]+)</td>', page)
    }
    said = re.search(r'<p id="late"[^>]*>(.*?)</p>', page)
    late_line = html.unescape(said.group(1)) if said else ""
    deducted = re.search(r"([\d.]+) points deducted", late_line)
    return {
        "score": number(score),
        "max": number(maximum),
        "late": number(deducted.group(1)) if deducted else 0.0,
        "late_line": late_line,
        "checks": checks,
        "written": written,
        "unisolated": 'id="unisolated"' in page,
    }


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


# --- the stand-in grader -----------------------------------------------------------------------------------


def stand_in(cells, name: str, assignment: kit.Assignment, seed: int, device: str, student, unsafe: bool, read: tuple = ()):
    """A result as the grader writes one: each check's parts share the course's points by the rubric's weights,
    and every part gets the kind's share of its points."""
    kind = next((c.source.split(MARK, 1)[1].split()[0] for c in cells if MARK in c.source), "blank")
    points = assignment.check_points()
    checks = []
    for check, spec in RUBRIC.items():
        share = KINDS[kind][check]
        parts = tuple(
            SubTest(
                part,
                round(share * maximum, 6),
                maximum,
                share == 1.0,
                "" if share == 1.0 else f"the stand-in's {kind} gets {share:g} of this part",
            )
            for part, maximum in spec.parts_for(points.get(check)).items()
        )
        checks.append(
            CheckResult(
                check,
                spec.title,
                parts,
                "All parts passed." if share == 1.0 else f"{kind}: {share:g} of the points",
                spec.visibility,
            )
        )
    isolation = UNSAFE if unsafe else "stand-in: isolated"
    notes = ((f"Graded without isolation ({UNSAFE}).",) if unsafe else ()) + tuple(read)
    return SubmissionResult(name, tuple(checks), seed, device, isolation, 0.01, None, notes, {}, student)


class StandIn:
    """Patches the sandbox out of both grading paths (nbgrader's executor and grade-class), and the figures out of
    the pages: neither is what the course's numbers are about."""

    def __init__(self):
        self.unsafe = False

    @contextlib.contextmanager
    def active(self):
        grader = self

        class Server:
            def __init__(self, *args, assignment=kit.KIT, **kwargs):
                self.assignment, self.extra_private = assignment, ()

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

            def launch(self):
                pass

            wait_until_ready = close = spawn = launch

        def cells_grade(cells, name, server, *, seed, device="cpu", student=None, notes=()):
            return stand_in(cells, name, server.assignment, seed, device, student, grader.unsafe, notes)

        def file_grade(path, server, *, seed, device="cpu", student=None):
            from autograder.course.notebook import read_cells

            return stand_in(read_cells(path), Path(path).name, server.assignment, seed, device, student, grader.unsafe)

        with contextlib.ExitStack() as stack:
            stack.enter_context(fast_sqlite())
            for target, value in [
                (pool, {"SandboxServer": Server}),
                (bridge, {"grade_cells": cells_grade}),
                (classgrade, {"grade_file": file_grade, "reference_meanwhile": lambda *a, **k: contextlib.nullcontext()}),
                (feedback, {"profile_figure_png": lambda *a, **k: None}),
                (report, {"histogram_png": lambda *a, **k: TINY_PNG, "bars_png": lambda *a, **k: TINY_PNG}),
            ]:
                for attribute, replacement in value.items():
                    stack.enter_context(mock.patch.object(target, attribute, replacement))
            yield self


@contextlib.contextmanager
def fast_sqlite():
    """The gradebook without waiting for the disk at every commit (nbgrader commits per cell): a test's course
    needs no durability."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    def pragmas(connection, _):
        cursor = connection.cursor()
        cursor.execute("PRAGMA synchronous=OFF")
        cursor.close()

    event.listen(Engine, "connect", pragmas)
    try:
        yield
    finally:
        event.remove(Engine, "connect", pragmas)


# --- what every student's standing must be ------------------------------------------------------------------


@dataclass
class Graded:
    kind: str
    late: bool
    points: dict  # check grade_id -> the points it was graded out of
    unsafe: bool
    stamp: int  # the submission graded (its collect number)
    seconds_late: float = 0.0  # how long after the due date it was submitted (0: on time)


@dataclass
class Model:
    """What the instructor did, and so what each student's standing is (see `expected`)."""

    source: dict = field(default_factory=lambda: {f"check_{n}": p for n, p in kit.KIT.check_points().items()})
    gradebook: dict = field(default_factory=lambda: {f"check_{n}": p for n, p in kit.KIT.check_points().items()})
    submitted: dict = field(default_factory=dict)  # student -> (kind, late, stamp)
    delay: dict = field(default_factory=dict)  # student -> seconds their last submission came after the due date
    rule: str = "zero"  # the course's late rule: "none" (nbgrader's default) or "zero"
    graded: dict = field(default_factory=dict)  # student -> Graded, as the gradebook holds them
    class_graded: dict = field(default_factory=dict)  # student -> (source points, stamp) of grade-class's files
    scores: dict = field(default_factory=dict)  # (student, grade_id) -> points an instructor set
    comments: dict = field(default_factory=dict)  # (student, cell) -> what an instructor wrote about it
    review: set = field(default_factory=set)  # (student, grade_id) nbgrader's own autograde marked for grading again

    def out_of_date_gradebook(self) -> bool:
        return self.source != self.gradebook

    def stale(self, student: str) -> bool:
        return self.out_of_date_gradebook() or self.graded[student].points != self.source

    def expected(self, student: str) -> dict:
        graded = self.graded[student]
        checks = {}
        for name in RUBRIC:
            grade_id = f"check_{name}"
            checks[name] = self.scores.get((student, grade_id), KINDS[graded.kind][name] * graded.points[grade_id])
        unanswered = None if ANSWERED[graded.kind] else 0.0
        written = {grade_id: self.scores.get((student, grade_id), unanswered) for grade_id in WRITTEN}
        raw = sum(checks.values()) + sum(v for v in written.values() if v is not None)
        penalty = raw if graded.late and self.rule == "zero" else 0.0
        maximum = sum(self.gradebook.values()) + sum(WRITTEN.values())
        return {
            "score": raw - penalty,
            "raw": raw,
            "late": penalty,
            "seconds_late": graded.seconds_late,
            "max": maximum,
            "checks": checks,
            "written": written,
            "stale": self.stale(student),
            "unisolated": graded.unsafe,
            "awaiting": sum(WRITTEN[g] for g, v in written.items() if v is None),
        }

    def grade(self, student: str, by_nbgrader: bool = False) -> None:
        """`by_nbgrader`: graded by `nbgrader autograde`, whose own SaveAutoGrades marks every cell an instructor
        scored as needing grading again (stock nbgrader does the same); the kit's grade-class leaves the flag."""
        kind, late, stamp = self.submitted[student]
        unsafe = self.unsafe
        self.graded[student] = Graded(kind, late, dict(self.source), unsafe, stamp, self.delay.get(student, 0.0))
        if by_nbgrader:
            self.review |= {cell for cell in self.scores if cell[0] == student}

    def instructor_scores(self, student: str, grade_id: str, points: float) -> None:
        self.scores[(student, grade_id)] = points
        self.review.discard((student, grade_id))

    def needs_manual_grade(self, student: str, grade_id: str) -> bool:
        """nbgrader's flag: a cell an instructor scored is done (until nbgrader's autograde asks for a review);
        any other needs grading while nobody gave it points (a written answer; one left as released scores 0)."""
        if (student, grade_id) in self.scores:
            return (student, grade_id) in self.review
        return grade_id in WRITTEN and ANSWERED[self.graded[student].kind]

    unsafe: bool = False
