"""One notebook of every odd shape (`catalog.malformed`) in a class of honest ones, through `grade-class` and through
`nbgrader autograde`: the honest students are graded as if the odd ones were not there, each odd one gets a result
of its own (graded on its merits with a note, or "could not be read", never a grader error), grades.csv and the
report are written, and a rerun (and a forced one) grades the same. The odd bytes are read in the grader's own
process, inside the fence (`autograder.course.fence`), before any sandbox: what reaches the sandbox is well-typed
cells, which every isolation layer grades as the grader's own process does (tests/engine/ grade a sample of every
family in each layer against the in-process result), so the class is graded here in the kit's default layer."""

import csv
import json
import os

import nbformat
import pytest
from nbgrader.api import Gradebook

from autograder.course import kit
from autograder.engine.rubric import TOTAL_POINTS
from autograder.frontends.classgrade import grade_class
from autograder.frontends.nbgrader.feedback import recorded_result
from autograder.grading.options import GradingOptions
from autograder.sandbox.parent.client import Limits
from catalog.malformed import READ, SHAPES
from nbgrader_course import KIT_STUDENTS, Shell, do_kit_homework, sample_submission

pytestmark = pytest.mark.slow

HONEST = {"ada_correct": TOTAL_POINTS, "ben_post_ln": None, "gil_edits_locked_cells": TOTAL_POINTS}
LIMITS = Limits(load_s=12, probe_s=6, job_s=40, wall_factor=4)


def _class(root) -> None:
    for student in HONEST:
        (root / student).mkdir(parents=True)
        nbformat.write(sample_submission(student), root / student / kit.KIT.notebook_name)
    for name, shape in SHAPES.items():
        (root / f"odd_{name}").mkdir()
        (root / f"odd_{name}" / kit.KIT.notebook_name).write_bytes(shape.data)


def _results(out) -> dict:
    return {p.parent.name: json.loads(p.read_text()) for p in out.glob("*/results.json")}


def assert_fair(results: dict, notes_of) -> None:
    for name, shape in SHAPES.items():
        data = results[f"odd_{name}"]
        notes = " ".join(notes_of(data))
        assert not data["extra_data"]["grader_errors"], (name, data["extra_data"]["grader_errors"])
        if shape.outcome == READ:
            assert data["score"] == TOTAL_POINTS, (name, data["score"], notes)
        else:
            assert data["score"] == 0 and "could not be read" in notes and "nothing was graded" in notes, name
        assert shape.phrase in notes, (name, notes)


def test_grade_class_grades_the_honest_and_gives_each_odd_notebook_its_own_result(tmp_path):
    root, out = tmp_path / "class", tmp_path / "out"
    _class(root)
    options = GradingOptions(seed=8, limits=LIMITS)
    rows = grade_class(root, out, options=options, workers=1, progress=False)
    results = _results(out)
    assert set(results) == {r["student"] for r in rows} == set(HONEST) | {f"odd_{n}" for n in SHAPES}
    assert_fair(results, lambda data: data["extra_data"]["notes"])
    for student, score in HONEST.items():
        assert not results[student]["extra_data"]["grader_errors"]
        assert score is None or results[student]["score"] == score, student
    table = {row["student"]: row for row in csv.DictReader(open(out / "grades.csv", newline=""))}
    assert set(table) == set(results) and (out / "report.html").stat().st_size > 0
    before = {student: data["score"] for student, data in results.items()}
    again = grade_class(root, out, options=options, workers=1, progress=False)
    assert {r["student"]: float(r["score"]) for r in again} == before  # a rerun: nothing to grade again
    forced = grade_class(root, out, options=options, workers=1, progress=False, force=True)
    assert {r["student"]: float(r["score"]) for r in forced} == before


def test_nbgrader_autograde_gives_each_odd_notebook_its_own_result(released, tmp_path):
    course = released.copy(tmp_path / "course", ordinary=False)
    shell = Shell({"AUTOGRADER_SEED": "9"})
    released = nbformat.read(course / "release" / kit.KIT.name / kit.KIT.notebook_name, as_version=4)
    for student in KIT_STUDENTS:
        path = course / "submitted" / student / kit.KIT.name / kit.KIT.notebook_name
        path.parent.mkdir(parents=True)
        nbformat.write(do_kit_homework(nbformat.from_dict(released), student), path)
    for name, shape in SHAPES.items():
        path = course / "submitted" / f"odd_{name}" / kit.KIT.name / kit.KIT.notebook_name
        path.parent.mkdir(parents=True)
        path.write_bytes(shape.data)
    run = shell("nbgrader", "autograde", kit.KIT.name, cwd=course, check=False)
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    results = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for student in [*KIT_STUDENTS, *(f"odd_{name}" for name in SHAPES)]:
            notebook = nbformat.read(course / "autograded" / student / kit.KIT.name / kit.KIT.notebook_name, as_version=4)
            result = recorded_result(notebook, student)
            results[student] = {
                "score": gradebook.find_submission_notebook(kit.KIT.notebook_id, kit.KIT.name, student).score,
                "notes": list(result.notes),
                "extra_data": {"grader_errors": result.grader_errors},
            }
    assert_fair(results, lambda data: data["notes"])
    assert results["ada_correct"]["score"] == TOTAL_POINTS and results["gil_edits_locked_cells"]["score"] == TOTAL_POINTS
    shell("nbgrader", "generate_feedback", kit.KIT.name, cwd=course)
    assert all((course / "feedback" / f"odd_{name}" / kit.KIT.name / f"{kit.KIT.notebook_id}.html").is_file() for name in SHAPES)
    assert os.path.getsize(course / "gradebook.db") > 0
