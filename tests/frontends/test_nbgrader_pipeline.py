"""The instructor's pipeline on nbgrader, end to end, on the bundled sample class (the README's main job):
real nbgrader commands, per-check partial credit in the gradebook through both paths, feedback that
teaches and leaks nothing."""

import pytest
from nbgrader.api import Gradebook

from autograder.course import kit
from autograder.engine.rubric import TOTAL_POINTS
from autograder.frontends.demo import gradebook_table, run_demo
from catalog.leaks import secret_lines

pytestmark = pytest.mark.slow

EXPECTED_TOTAL = {"ada_correct": TOTAL_POINTS, "eve_untouched": 0, "gil_edits_locked_cells": TOTAL_POINTS}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    run_demo(out, seed=2024, workers=2)
    return out


def test_release_leaks_nothing(demo):
    secret = secret_lines()
    for path in (demo / "course" / "release").rglob("*"):
        if path.is_file():
            text = path.read_text()
            assert "BEGIN HIDDEN" not in text
            assert not [line for line in secret if line in text], path


def test_gradebook_holds_per_check_partial_credit(demo):
    table = {row["student"]: row for row in gradebook_table(demo / "course")}
    assert set(table) == set(p.name for p in (kit.COURSE_DIR / "sample_class").iterdir())
    for student, total in EXPECTED_TOTAL.items():
        assert table[student]["total"] == total
    assert 0 < table["ben_post_ln"]["forward_shortcuts"] < 3  # partial credit inside one check
    assert table["ben_post_ln"]["forward_order"] == 0
    assert table["dev_dropout_on_sum"]["forward_dropout"] == 1
    assert table["cho_missing_shortcut"]["forward_order"] == 0 and table["cho_missing_shortcut"]["compounding"] == 3
    assert table["fen_crashes"]["compounding"] == 3 and table["fen_crashes"]["total"] == 3


def test_both_paths_record_the_same_points_for_every_check(demo):
    plain, hardened = gradebook_table(demo / "course"), gradebook_table(demo / "course-hardened")
    assert plain == hardened
    import json

    for results in (demo / "grade-class").glob("*/results.json"):
        with Gradebook(f"sqlite:///{demo / 'course' / 'gradebook.db'}") as gradebook:
            score = gradebook.find_submission(kit.KIT.name, results.parent.name).score
        assert score == json.loads(results.read_text())["score"]


@pytest.mark.parametrize("course", ["course", "course-hardened"])
def test_feedback_names_the_first_divergent_step_and_leaks_nothing(demo, course):
    secret = secret_lines()
    pages = sorted((demo / course / "feedback").glob(f"*/{kit.KIT.name}/*.html"))
    assert len(pages) == len(EXPECTED_TOTAL) + 4
    for page in pages:
        student = page.parts[-3]
        own = (kit.COURSE_DIR / "sample_class" / student / kit.KIT.name / kit.KIT.notebook_name).read_text()
        text = page.read_text()
        assert "BEGIN HIDDEN" not in text
        assert "Traceback (most recent call last)" not in text and "-" * 60 not in text  # no tracebacks
        leaked = [line for line in secret if line in text and line not in own]
        assert not leaked, f"{page}: {leaked[:3]}"
    ben = (demo / course / "feedback" / "ben_post_ln" / kit.KIT.name / "layernorm.html").read_text()
    assert "Step 2 of 10" in ben and "Post-LN" in ben and "image/png" in ben


@pytest.mark.parametrize("course", ["course", "course-hardened"])
def test_edited_and_deleted_cells_are_graded_fairly_and_the_student_is_told(demo, course):
    page = (demo / course / "feedback" / "gil_edits_locked_cells" / kit.KIT.name / "layernorm.html").read_text()
    assert "edited" in page and "test_block_shape" in page
    assert "check_compounding" in page
    autograded = demo / course / "autograded" / "gil_edits_locked_cells" / kit.KIT.name / kit.KIT.notebook_name
    assert "check_compounding" in autograded.read_text()


@pytest.mark.parametrize("course", ["course", "course-hardened"])
def test_crashing_submission_gets_a_clear_message(demo, course):
    page = (demo / course / "feedback" / "fen_crashes" / kit.KIT.name / "layernorm.html").read_text()
    assert "ended the grading process" in page


def test_export_writes_grades(demo):
    grades = (demo / "course" / "grades.csv").read_text()
    assert "ada_correct" in grades and "layernorm" in grades
    assert (demo / "grade-class" / "grades.csv").read_text().count("\n") == len(EXPECTED_TOTAL) + 5
