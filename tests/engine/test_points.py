"""The course owns its points: each check is worth what its cell in the course's source gives, the rubric's parts
share those points by weight, and every place writes points the same way."""

import math

import nbformat
import pytest

from autograder.course import kit
from autograder.engine.results import points_text, score_text
from autograder.engine.rubric import RUBRIC, CheckSpec

pytestmark = pytest.mark.quick  # in `make test-quick`: this wing's fast tier


@pytest.mark.parametrize("points", [0, 1, 2, 2.5, 4, 5, 7, 10, 100, 0.3])
def test_parts_share_the_checks_points_by_weight_and_add_up_exactly(points):
    for spec in RUBRIC.values():
        shares = spec.parts_for(points)
        assert list(shares) == list(spec.parts)
        assert sum(shares.values()) == pytest.approx(points, abs=1e-9)
        weight = sum(spec.parts.values())
        for name, share in shares.items():
            assert share == pytest.approx(points * spec.parts[name] / weight, abs=1e-3)


def test_parts_keep_the_rubrics_default_points_when_the_course_gives_none():
    assert {name: spec.parts_for(None) for name, spec in RUBRIC.items()} == {n: s.parts for n, s in RUBRIC.items()}
    uneven = CheckSpec("t", {"a": 3, "b": 1})
    assert uneven.parts_for(2) == {"a": 1.5, "b": 0.5}
    assert CheckSpec("t", {"a": 0, "b": 0}).parts_for(4) == {"a": 2, "b": 2}


def test_points_are_written_the_same_way_everywhere():
    assert [points_text(x) for x in (17.0, 2.5, 1.66667, 30, 0.0, -0.0, 4.9999999, 1234.5)] == [
        "17",
        "2.5",
        "1.67",
        "30",
        "0",
        "0",
        "5",
        "1234.5",
    ]
    assert score_text(17, 30.0) == "17 / 30" and points_text(None) == "-"


def _course_copy(tmp_path, edit) -> kit.Assignment:
    notebook = nbformat.read(kit.SOURCE_NOTEBOOK, as_version=4)
    edit(notebook)
    path = tmp_path / "source" / "week5" / "block.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(notebook, path)
    return kit.Assignment(path)


def _cell(notebook, grade_id):
    return next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def test_the_kits_own_notebook_is_gradable_and_a_course_may_give_any_points(tmp_path):
    assert kit.KIT.problems(RUBRIC) == []
    course = _course_copy(tmp_path, lambda nb: _cell(nb, "check_forward_order").metadata.nbgrader.update(points=7.5))
    assert course.problems(RUBRIC) == [] and course.check_points()["forward_order"] == 7.5
    assert course.written_points() == kit.KIT.written_points()


def _copy(cell):
    copy = nbformat.from_dict(cell)
    copy["id"] = "check-copy"
    return copy


@pytest.mark.parametrize(
    "edit, said",
    [
        (lambda nb: nb.cells.remove(_cell(nb, "check_forward_dropout")), "check_forward_dropout is missing"),
        (lambda nb: _cell(nb, "check_forward_order").metadata.nbgrader.update(points=-1), "gives -1 points"),
        (lambda nb: _cell(nb, "check_forward_order").metadata.nbgrader.update(points="four"), "gives 'four' points"),
        (lambda nb: _cell(nb, "check_forward_order").metadata.nbgrader.update(points=math.nan), "gives nan points"),
        (lambda nb: _cell(nb, "check_forward_order").metadata.nbgrader.update(grade=False), "is not graded"),
        (
            lambda nb: _cell(nb, "check_compounding").metadata.nbgrader.update(grade_id="check_speed"),
            "check_speed names no check of the kit",
        ),
        (lambda nb: nb.cells.append(_copy(_cell(nb, "check_compounding"))), "2 cells are called check_compounding"),
        (
            lambda nb: nb.cells.append(
                nbformat.v4.new_code_cell(
                    "assert True",
                    metadata={
                        "nbgrader": {
                            "grade_id": "our_test",
                            "grade": True,
                            "solution": False,
                            "locked": True,
                            "points": 2,
                            "schema_version": 3,
                        }
                    },
                )
            ),
            "our_test is an autograded test the kit does not run",
        ),
    ],
)
def test_a_source_the_kit_cannot_grade_is_refused_in_one_sentence(tmp_path, edit, said):
    course = _course_copy(tmp_path, edit)
    assert kit.is_kit_source(course.source, RUBRIC)  # still the kit's: refused, never handed to a kernel
    with pytest.raises(kit.SourceProblem) as refused:
        course.verify(RUBRIC)
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_the_checks_are_graded_out_of_the_courses_points(tmp_path, seed):
    """Graded in one plain process (no sandbox needed for the arithmetic): the solution earns the course's
    points, a Post-LN forward the same share of them as of the kit's."""
    from autograder.grading.inprocess import grade_cells_in_process
    from autograder.course.notebook import read_cells
    from autograder.course.sample_class import SAMPLE_DIR

    points = {"forward_order": 6, "forward_shortcuts": 5, "compounding": 1}
    course = _course_copy(
        tmp_path, lambda nb: [_cell(nb, f"check_{n}").metadata.nbgrader.update(points=p) for n, p in points.items()]
    )
    solution = read_cells(kit.SOLUTIONS_DIR / kit.KIT.notebook_name)
    graded = grade_cells_in_process(solution, seed, assignment=course)
    assert {c.check: c.max_points for c in graded.checks} == course.check_points()
    assert graded.score == sum(course.check_points().values()) and all(c.passed for c in graded.checks)
    post_ln = read_cells(SAMPLE_DIR / "ben_post_ln" / kit.KIT.name / kit.KIT.notebook_name)
    ours, kits = grade_cells_in_process(post_ln, seed, assignment=course), grade_cells_in_process(post_ln, seed)
    for mine, default in zip(ours.checks, kits.checks):
        assert [s.passed for s in mine.subtests] == [s.passed for s in default.subtests]
        assert mine.points == pytest.approx(default.points / default.max_points * mine.max_points, abs=1e-3)
