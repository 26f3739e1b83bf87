"""`nbgrader export` in a course of the kit writes nbgrader's own grades.csv. Every assignment that is not the
kit's gets stock nbgrader's rows byte for byte (the oracle is nbgrader's CsvExportPlugin on the same gradebook);
the kit's rows carry the standing's numbers and say how late a submission was, under every late rule; a kit grade
out of date holds back only its own rows, in one line, with exit status 3."""

import csv
import io
import math
import os
import re
import shutil
import sys
import unicodedata
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nbgrader.api import Gradebook
from nbgrader.plugins import CsvExportPlugin
from traitlets.config import Config

from autograder.frontends.exports import TRIGGERS, cell
from autograder.frontends.nbgrader.export import HELD_BACK, KIT_COLUMNS, NBGRADER_COLUMNS, PerCheckExport
from plain_text import assert_text, is_text
from course_states import DUE, STUDENTS, Course, Model, Refused, StandIn, fast_sqlite

pytestmark = pytest.mark.quick  # in `make test-quick`: this wing's fast tier (its course-driving tests are slow)


def alembic_on(monkeypatch):
    """nbgrader starts `alembic` by name to make a gradebook: this environment's, as on a hub's PATH."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")


@pytest.fixture(autouse=True)
def alembic_on_path(monkeypatch):
    alembic_on(monkeypatch)


# --- other assignments: nbgrader's file ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def empty_gradebook(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("gradebook") / "gradebook.db"
    with pytest.MonkeyPatch.context() as monkeypatch:
        alembic_on(monkeypatch)
        with Gradebook(f"sqlite:///{path}"):
            pass
    return path


PLAIN = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_. ", min_size=1, max_size=12).filter(
    lambda t: t[0] != " "
)
ANY_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=12)
NAMES = st.text("abcdefghijklmnopqrstuvwxyz0123456789_", min_size=1, max_size=8)
POINTS = st.sampled_from([0, 0.5, 1, 1.25, 2, 3])


@st.composite
def courses(draw, text=PLAIN):
    """A gradebook's worth of ordinary assignments: students (names and addresses of `text`, or none), assignments
    with or without a due date, each with graded cells, and submissions (a score per cell, a late penalty)."""
    ids = draw(st.lists(text, min_size=1, max_size=4, unique=True))
    students = [
        (i, draw(st.none() | text), draw(st.none() | text), draw(st.none() | text.map(lambda t: t + "@example.org"))) for i in ids
    ]
    assignments = []
    for name in draw(st.lists(NAMES, min_size=1, max_size=3, unique=True)):
        due = draw(st.none() | st.datetimes(datetime(2030, 1, 1), datetime(2031, 1, 1)))
        cells = draw(st.lists(st.sampled_from([1, 2, 5]), min_size=1, max_size=3))
        submitted = {}
        for student in draw(st.lists(st.sampled_from(ids), unique=True)):
            when = draw(st.datetimes(datetime(2029, 12, 1), datetime(2031, 2, 1)))
            scores = [min(draw(POINTS), maximum) for maximum in cells]
            submitted[student] = (when, scores, draw(st.sampled_from([0.0, 0.5, 1.0])))
        assignments.append((name, due, cells, submitted))
    return students, assignments


def fill(gradebook: Gradebook, students, assignments) -> None:
    for student_id, first, last, email in students:
        gradebook.add_student(student_id, first_name=first, last_name=last, email=email)
    for name, due, cells, submitted in assignments:
        gradebook.add_assignment(name, duedate=due)
        gradebook.add_notebook(name, name)
        for index, maximum in enumerate(cells):
            gradebook.add_grade_cell(f"cell{index}", name, name, max_score=maximum, cell_type="code")
        for student_id, (when, scores, penalty) in submitted.items():
            gradebook.add_submission(name, student_id, timestamp=when)
            notebook = gradebook.find_submission_notebook(name, name, student_id)
            notebook.late_submission_penalty = penalty
            for index, score in enumerate(scores):
                gradebook.find_grade(f"cell{index}", name, name, student_id).auto_score = score
        gradebook.db.commit()


def export_both(folder: Path, gradebook_file: Path, course, stock: bool = True) -> tuple[bytes, bytes]:
    """grades.csv as stock nbgrader's exporter writes it (where `stock`), and as the kit's, from one gradebook."""
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "source").mkdir(parents=True)
    shutil.copy(gradebook_file, folder / "gradebook.db")
    config = Config()
    config.CourseDirectory.root = str(folder)
    with fast_sqlite(), Gradebook(f"sqlite:///{folder / 'gradebook.db'}") as gradebook:
        fill(gradebook, *course)
        if stock:
            CsvExportPlugin(config=config, to=str(folder / "stock.csv")).export(gradebook)
        PerCheckExport(config=config, to=str(folder / "kit.csv")).export(gradebook)
    return (folder / "stock.csv").read_bytes() if stock else b"", (folder / "kit.csv").read_bytes()


@pytest.mark.slow  # the quick tier runs the others
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(course=courses())
def test_without_the_kits_assignments_grades_csv_is_nbgraders_byte_for_byte(tmp_path, empty_gradebook, course):
    stock, ours = export_both(tmp_path / "course", empty_gradebook, course)
    assert ours == stock
    rows = list(csv.DictReader(io.StringIO(ours.decode())))
    assert len(rows) == sum(len(course[0]) for _ in course[1])  # a row per assignment and student, as nbgrader's


@pytest.mark.slow  # the quick tier runs the others
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(course=courses(ANY_TEXT))
def test_any_name_is_one_cell_that_runs_nothing(tmp_path, empty_gradebook, course):
    """Where stock nbgrader writes a name as it is (a comma, a quote or a line break in it breaks the file; a
    leading = runs in a spreadsheet), the kit's file still reads back as every value, in its place, as text only:
    each value as `exports.cell` writes it (tests/frontends/test_writers.py: text that shows every letter of it,
    running nothing), which for a value that is text already is the value (a leading ' where it would run)."""
    students, assignments = course
    _, ours = export_both(tmp_path / "course", empty_gradebook, course, stock=False)
    rows = list(csv.reader(io.StringIO(ours.decode(), newline="")))
    assert rows[0] == NBGRADER_COLUMNS and len(rows) == 1 + len(students) * len(assignments)
    written = {tuple(row[3:7]) for row in rows[1:]}
    for row in written:
        for value in row:
            assert_text(value)

    def shown(value):
        if value is None:
            return ""
        if all(is_text(c) and unicodedata.category(c) not in ("Mn", "Me") for c in value):  # no mark without a letter
            return "'" + value if value.startswith(TRIGGERS) else value
        return cell(value)

    assert written == {tuple(shown(v) for v in (i, last, first, email)) for i, first, last, email in students}


# --- the kit's assignment: the standing, how late, and what is out of date -----------------------------------

PER_STARTED_HOUR = '''
from nbgrader.plugins import LateSubmissionPlugin


class PerStartedHour(LateSubmissionPlugin):
    def late_submission_penalty(self, student_id, score, total_seconds):
        return float(-(-total_seconds // 3600))


c.AssignLatePenalties.plugin_class = PerStartedHour
'''
LATE_RULES = {  # the course's configuration -> the penalty it gives, (points, seconds late) -> points
    "default": ("", lambda points, seconds: 0.0),  # nbgrader's: flag the submission, take nothing
    "zero": ('c.LateSubmissionPlugin.penalty_method = "zero"', lambda points, seconds: points),
    "per started hour": (PER_STARTED_HOUR, lambda points, seconds: min(points, math.ceil(seconds / 3600))),
}
UNITS = {"s": (1, 0.5), "min": (60, 30), "h": (3600, 180), "days": (86400, 4320)}  # seconds; half the last digit


def read_back(late_by: str) -> tuple[float, float]:
    """ "5.2 h" as (seconds, how far the words may be from the seconds they stand for)."""
    value, unit = re.fullmatch(r"(\d+(?:\.\d)?) (s|min|h|days)", late_by).groups()
    return float(value) * UNITS[unit][0], UNITS[unit][1]


def with_rule(course: Course, lines: str) -> None:
    config = course.course / "nbgrader_config.py"
    config.write_text(config.read_text().replace('c.LateSubmissionPlugin.penalty_method = "zero"', lines))


def collect_at(course: Course, student: str, kind: str, number: int, offset: int) -> None:
    """A submission of `kind` collected `offset` seconds after the due date (before it, where negative)."""
    course.collect(student, kind, False, number)
    when = DUE + timedelta(seconds=offset)
    (course.course / "submitted" / student / "layernorm" / "timestamp.txt").write_text(f"{when:%Y-%m-%d %H:%M:%S.%f} UTC")


@pytest.mark.slow
@pytest.mark.parametrize("rule", sorted(LATE_RULES))
def test_the_export_says_how_late_a_kit_submission_was_under_every_late_rule(tmp_path, rule):
    """Submissions collected any time around the due date (graded in-process by the stand-in): each kit row has
    its seconds late, "by how much" in words that read back to them, and the rule's penalty."""
    lines, penalty = LATE_RULES[rule]
    examples = iter(range(1000))

    @settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(
        offsets=st.lists(st.integers(-3 * 86400, 20 * 86400), min_size=len(STUDENTS), max_size=len(STUDENTS)),
        kinds=st.lists(st.sampled_from(["correct", "post_ln", "blank"]), min_size=len(STUDENTS), max_size=len(STUDENTS)),
    )
    def check(offsets, kinds):
        course, model = Course(tmp_path / f"example{next(examples)}"), Model()
        with_rule(course, lines)
        for number, (student, kind, offset) in enumerate(zip(STUDENTS, kinds, offsets)):
            collect_at(course, student, kind, number, offset)
            model.submitted[student] = (kind, False, number)
            model.grade(student)
        with StandIn().active():
            assert not isinstance(course.autograde(False), Refused)
        assert not isinstance(course.export(), Refused)
        rows = {r["student_id"]: r for r in csv.DictReader(open(course.exported, newline=""))}
        for student, offset in zip(STUDENTS, offsets):
            row, late = rows[student], max(offset, 0)
            points = model.expected(student)["raw"]  # the points before any penalty
            assert float(row["seconds_late"]) == late and float(row["raw_score"]) == pytest.approx(points)
            assert float(row["late_submission_penalty"]) == pytest.approx(penalty(points, late) if late else 0.0)
            assert float(row["score"]) == pytest.approx(points - float(row["late_submission_penalty"]))
            if late:
                said, within = read_back(row["late_by"])
                assert abs(said - late) <= within, (row["late_by"], late)
            else:
                assert row["late_by"] == ""

    check()


@pytest.mark.slow
def test_an_out_of_date_kit_grade_holds_back_only_its_own_rows(tmp_path):
    """Three kit students and an ordinary assignment; the course's points change and one student is graded again:
    the other two kit rows are left out (one line, exit status 3), everything else is written."""
    course = Course(tmp_path / "course")
    ordinary = [("hw2", datetime(2029, 12, 1), [2, 1], {s: (datetime(2029, 11, 30), [2, 1], 0.0) for s in STUDENTS[:2]})]
    with StandIn().active():
        for number, student in enumerate(STUDENTS):
            collect_at(course, student, "correct", number, -3600)
        assert not isinstance(course.autograde(False), Refused)
        with Gradebook(f"sqlite:///{course.course / 'gradebook.db'}") as gradebook:
            fill(gradebook, [], ordinary)
        assert not isinstance(course.export(), Refused)  # nothing out of date: every row
        complete = list(csv.DictReader(open(course.exported, newline="")))
        assert len(complete) == 2 * len(STUDENTS)
        course.change_points({"check_forward_order": 6}, True)
        collect_at(course, STUDENTS[0], "post_ln", 7, -60)  # a new submission: graded again, against the new points
        assert not isinstance(course.autograde(False), Refused)
    with pytest.raises(SystemExit) as stopped:
        export = PerCheckExport(config=course.config(), to=str(course.exported))
        with Gradebook(f"sqlite:///{course.course / 'gradebook.db'}") as gradebook:
            export.export(gradebook)
    assert stopped.value.code == HELD_BACK
    done = course.export()  # the same, through the course's logged run: its one line
    assert isinstance(done, Refused) and "grades of 2 students of layernorm are out of date" in done.line, done
    assert "check_forward_order" in done.line and "every other row is" in done.line
    rows = list(csv.DictReader(open(course.exported, newline="")))
    kept = {(r["assignment"], r["student_id"]) for r in rows}
    assert kept == {("hw2", s) for s in STUDENTS} | {("layernorm", STUDENTS[0])}
    assert list(rows[0]) == NBGRADER_COLUMNS + KIT_COLUMNS
    before = {(r["assignment"], r["student_id"]): r for r in complete}
    assert all(r == before[("hw2", r["student_id"])] for r in rows if r["assignment"] == "hw2")  # untouched
    long = list(csv.DictReader(open(course.exported.with_name("grades_per_check.csv"), newline="")))
    assert {(r["assignment"], r["student"]) for r in long} == {("hw2", s) for s in STUDENTS[:2]} | {("layernorm", STUDENTS[0])}
