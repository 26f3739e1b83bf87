"""`grade-class`: every student gets results, a feedback page and a row in grades.csv; one bad submission
never stops the run; up-to-date students are not graded twice unless forced."""

import csv
import json
import os
import re
import shutil

import pytest

from autograder.course import kit
from autograder.engine.rubric import RUBRIC, TOTAL_POINTS, WRITTEN
from autograder.frontends.classgrade import grade_class
from autograder.frontends.discovery import discover
from autograder.frontends.commands import ClassGraded
from autograder.grading.options import GradingOptions

pytestmark = pytest.mark.quick  # in `make test-quick`: this wing's fast tier


@pytest.fixture
def mixed_class(tmp_path):
    root = tmp_path / "submissions"
    root.mkdir()
    shutil.copy(kit.SOLUTIONS_DIR / kit.KIT.notebook_name, root / "ana.ipynb")  # a notebook
    (root / "bo").mkdir()
    shutil.copy(kit.TEMPLATE_DIR / kit.KIT.notebook_name, root / "bo" / kit.KIT.notebook_name)  # a folder
    from catalog.build import submission

    (root / "cy.py").write_text(submission())  # a .py file
    (root / "di.ipynb").write_text("not a notebook")  # unreadable
    (root / "ed").mkdir()  # nothing in it
    return root


def test_discover_recognises_each_layout(mixed_class):
    found = {s.student: s.path for s in discover(mixed_class)}
    assert set(found) == {"ana", "bo", "cy", "di", "ed"}
    assert found["bo"].name == kit.KIT.notebook_name and found["ed"] is None
    nbgrader_layout = {s.student: s.path for s in discover(kit.COURSE_DIR / "sample_class")}
    assert nbgrader_layout["ada_correct"] == (
        kit.COURSE_DIR / "sample_class" / "ada_correct" / kit.KIT.name / kit.KIT.notebook_name
    )


@pytest.mark.slow
def test_grade_class_grades_everyone_and_resumes(mixed_class, tmp_path):
    out = tmp_path / "out"
    rows = grade_class(mixed_class, out, options=GradingOptions(seed=11), workers=2, progress=False)
    scores = {r["student"]: float(r["score"]) for r in rows}
    assert scores == {"ana": TOTAL_POINTS, "bo": 0, "cy": TOTAL_POINTS, "di": 0, "ed": 0}
    for student in scores:
        assert json.loads((out / student / "results.json").read_text())["extra_data"]["seed"] == 11
        assert (out / student / "feedback.html").read_text().startswith("<!DOCTYPE html>")
    with open(out / "grades.csv") as handle:
        table = list(csv.DictReader(handle))
    assert [r["student"] for r in table] == sorted(scores)
    assert list(table[0]) == [
        "student",
        "submission",
        "score",
        "max_score",
        "late_penalty",
        "late_by",
        "seconds_late",
        "awaiting",
        *RUBRIC,
        *WRITTEN,
        "first_divergence",
        "seed",
        "grader_errors",
    ]
    full = TOTAL_POINTS + sum(WRITTEN.values())  # outside a course the written answers await an instructor
    ana = next(r for r in table if r["student"] == "ana")
    assert (ana["score"], ana["max_score"], ana["awaiting"]) == (f"{TOTAL_POINTS:g}", f"{full:g}", f"{sum(WRITTEN.values()):g}")
    assert (ana["late_by"], ana["seconds_late"]) == ("", "")  # no due date outside a course: not known, not "on time"
    assert f'<span id="score">{TOTAL_POINTS:g} / {full:g}</span>' in (out / "ana" / "feedback.html").read_text()
    assert "No notebook or .py file" in (out / "ed" / "feedback.html").read_text()
    report = (out / "report.html").read_text()
    assert "5 students; mean" in report and 'id="pass-rates"' in report

    from click.testing import CliRunner

    from autograder.frontends.cli import main

    again = CliRunner().invoke(main, ["class-report", str(out), "--out", str(tmp_path / "again.html")])
    assert again.exit_code == 0, again.output
    untitled = lambda page: re.sub(r"<(title|h1)>[^<]*</\1>", "", page)  # noqa: E731
    assert untitled((tmp_path / "again.html").read_text()) == untitled(report)  # the same report from the folder

    stamps = {s: (out / s / "results.json").stat().st_mtime_ns for s in scores}
    os.utime(mixed_class / "cy.py")  # cy resubmits
    resumed = grade_class(mixed_class, out, options=GradingOptions(seed=12), workers=1, progress=False)
    now = {s: (out / s / "results.json").stat().st_mtime_ns for s in scores}
    regraded = {s for s in scores if now[s] != stamps[s]}
    assert regraded == {"cy", "ed"} == set(resumed.graded)  # ed has no file, so is never up to date
    assert json.loads((out / "ana" / "results.json").read_text())["extra_data"]["seed"] == 11
    said = ClassGraded(resumed, 12, out, kit.KIT.source, None, [], resumed.graded).summary()
    assert (
        said.startswith("graded 2 students (seed 12); skipped 3 whose results were up to date")
        and "(seed 11: ana, bo, di)" in said
    )

    grade_class(mixed_class, out, options=GradingOptions(seed=13), workers=1, progress=False, force=True)
    assert all(json.loads((out / s / "results.json").read_text())["extra_data"]["seed"] == 13 for s in scores)
