"""Every byte a student controls is read inside a fence (`autograder.course.fence`): whatever a notebook holds, the
trusted parent either grades it on its merits, saying what was odd, or gives the student a result of their own
("could not be read ..., so nothing was graded"), never a crash, never a grader error.

* a property over real notebooks mutated at random (`catalog.mutations`: types, nesting, sizes, encodings,
  metadata): reading gives well-typed cells or a SubmissionError, and the parent's whole path (reading, locked
  cells, the code sent to the sandbox, evaluation, results.json, the feedback page, the row of grades.csv)
  never raises and never reports a grader error. The sandbox's answers there are the solution's, recorded once;
* every odd shape of `catalog.malformed`, through the real sandbox: read ones graded at full marks with a note
  naming the odd part, unreadable ones a result of their own naming why;
* `python -m autograder grade` on an honest, full-marks solution with a number as one cell's grade_id.
"""

import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings

from autograder.course import kit
from autograder.course.fence import CELL_TYPES, GRADE_ID, NBGRADER_FIELDS
from autograder.course.notebook import SubmissionError, read_submission, student_code
from autograder.engine.questions.plan import Plan
from autograder.engine.rubric import TOTAL_POINTS
from autograder.frontends.classgrade import grade_row, write_grades_csv
from autograder.frontends.feedback import write_feedback_page
from autograder.frontends.gradescope.results import results_json, write_results
from autograder.frontends.standing import standing_of
from autograder.grading.evaluation import ALL_PROBES
from autograder.grading.submission import grade_file
from catalog.malformed import READ, SHAPES, UNREADABLE, solution
from catalog.mutations import mutated

pytestmark = pytest.mark.quick  # in `make test-quick`: this wing's fast tier

SEED = 17
HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture]


def assert_well_typed(cells) -> None:
    for cell in cells:
        assert cell.kind in CELL_TYPES and isinstance(cell.source, str)
        cell.source.encode("utf-8")  # no lone surrogate left
        assert isinstance(cell.tags, tuple) and all(isinstance(tag, str) for tag in cell.tags)
        for key, value in cell.nbgrader.items():
            assert isinstance(value, NBGRADER_FIELDS[key]), (key, value)
        assert cell.grade_id is None or GRADE_ID.fullmatch(cell.grade_id)


@pytest.mark.slow  # the quick tier runs the others
@settings(max_examples=300, deadline=None, suppress_health_check=HEALTH)
@given(case=mutated())
def test_reading_any_mutation_gives_well_typed_cells_or_says_why_not(tmp_path_factory, case):
    done, data = case
    path = tmp_path_factory.mktemp("read") / kit.KIT.notebook_name
    path.write_bytes(data)
    try:
        reading = read_submission(path)
    except SubmissionError as error:
        assert str(error).strip(), done
        return
    assert_well_typed(reading.cells)
    assert all(isinstance(note, str) and note for note in reading.notes)


class Recorded:
    """A stand-in sandbox server that answers every job with the solution's answers, recorded once by the real
    sandbox: the parent's path runs for real, on answers it knows."""

    def __init__(self, server):
        from autograder.course.notebook import read_cells

        self.assignment, self.isolation = server.assignment, server.isolation
        cells, _ = kit.KIT.restore_locked_cells(read_cells(kit.SOLUTIONS_DIR / kit.KIT.notebook_name))
        self.reply = server.grade(student_code(cells), Plan.draw(SEED, "cpu").to_dict(), list(ALL_PROBES))
        self.jobs = []

    def grade(self, cells, plan, probes):
        json.dumps(cells)  # what the parent sends must travel
        self.jobs.append(len(cells))
        return json.loads(json.dumps(self.reply))


@pytest.fixture(scope="module")
def recorded(server):
    return Recorded(server)


@pytest.mark.slow  # the quick tier runs the others
@settings(max_examples=60, deadline=None, suppress_health_check=HEALTH)
@given(case=mutated())
def test_no_mutation_crashes_the_parent_or_becomes_a_grader_error(recorded, tmp_path_factory, case):
    done, data = case
    folder = tmp_path_factory.mktemp("parent")
    path = folder / kit.KIT.notebook_name
    path.write_bytes(data)
    result = grade_file(path, recorded, seed=SEED, student="fuzzed")
    assert not result.grader_errors, (done, result.grader_errors)
    assert 0 <= result.score <= TOTAL_POINTS
    json.dumps(results_json(result), default=float)
    write_results(result, folder / "results.json", source=kit.KIT.key)
    standing = standing_of(result)
    write_feedback_page(result, folder / "feedback.html", standing)
    write_grades_csv(folder, [grade_row("fuzzed", result, standing)])
    if not result.notes or "could not be read" not in result.notes[0]:
        assert recorded.jobs, done  # a readable notebook was graded


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_odd_shape_gets_its_fair_result(server, tmp_path, name):
    shape = SHAPES[name]
    path = tmp_path / kit.KIT.notebook_name
    path.write_bytes(shape.data)
    result = grade_file(path, server, seed=SEED)
    assert not result.grader_errors, result.grader_errors
    text = " ".join(result.notes)
    if shape.outcome == READ:
        assert result.score == TOTAL_POINTS, {c.check: c.message for c in result.checks if not c.passed}
        assert shape.phrase in text, result.notes
    else:
        assert shape.outcome == UNREADABLE and result.score == 0
        assert result.notes[0].startswith("Your notebook could not be read: ") and "nothing was graded" in text
        assert shape.phrase in result.notes[0] and kit.KIT.notebook_name in result.notes[0], result.notes


@pytest.mark.slow
def test_grade_grades_an_honest_solution_with_a_number_as_a_grade_id_on_its_merits(tmp_path):
    """Through the door a Gradescope submission takes: full marks and a note, not "grader error"; and an
    unreadable notebook the student's own result, with results.json written and no traceback."""
    for shape, expected in (("number_as_grade_id", TOTAL_POINTS), ("deep_nesting", 0)):
        path = tmp_path / shape / kit.KIT.notebook_name
        path.parent.mkdir()
        path.write_bytes(SHAPES[shape].data)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "autograder",
                "grade",
                str(path),
                "--results",
                str(path.parent / "results.json"),
                "--seed",
                str(SEED),
            ],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=kit.ROOT,
            env=os.environ,
        )
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
        data = json.loads((path.parent / "results.json").read_text())
        assert data["score"] == expected and not data["extra_data"]["grader_errors"], data["extra_data"]
        assert SHAPES[shape].phrase in " ".join(data["extra_data"]["notes"])


def test_the_solution_itself_reads_without_a_note():
    assert read_submission(kit.SOLUTIONS_DIR / kit.KIT.notebook_name).notes == ()
    assert solution()["cells"]


def test_the_readme_states_the_fence_s_limits():
    from autograder.course import fence
    from autograder.frontends import discovery

    text = " ".join(kit.documentation().split())
    for claim in (
        f"at most {fence.MAX_BYTES // 1_000_000} MB of UTF-8",
        f"nested at most {fence.MAX_DEPTH} levels",
        f"no number over {fence.MAX_DIGITS} digits",
        f"at most {fence.MAX_CELLS:,} cells",
        f"({discovery.MAX_DEPTH} levels, {discovery.MAX_ENTRIES:,} entries at most)",
    ):
        assert claim in text, claim
