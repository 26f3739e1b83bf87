"""The hidden suite, mutation-tested: every wrong forward loses points on its check with its message;
every equivalent forward, and the solution, gets full marks."""
import pytest

from autograder.rubric import TOTAL_POINTS
from catalog.build import submission
from catalog.equivalent_forwards import CONTAINER_FORWARD, CONTAINER_INIT, EQUIVALENT
from catalog.wrong_forwards import WRONG


def _by_check(result):
    return {check.check: check for check in result.checks}


@pytest.mark.parametrize("name", sorted(EQUIVALENT))
def test_equivalent_forward_gets_full_marks(grade_source, name):
    result = grade_source(submission(forward=EQUIVALENT[name]))
    lost = {c.check: c.message for c in result.checks if not c.passed}
    assert result.score == TOTAL_POINTS, lost
    assert result.first_divergence is None


def test_components_kept_in_containers_are_followed(grade_source):
    result = grade_source(submission(forward=CONTAINER_FORWARD, init=CONTAINER_INIT))
    assert result.score == TOTAL_POINTS, {c.check: c.message for c in result.checks if not c.passed}


@pytest.mark.parametrize("wrong", WRONG, ids=lambda w: w.name)
def test_wrong_forward_loses_points_with_its_message(grade_source, wrong):
    result = grade_source(submission(forward=wrong.forward))
    check = _by_check(result)[wrong.check]
    assert check.points < check.max_points, f"{wrong.check} did not notice {wrong.name}"
    assert result.score < TOTAL_POINTS
    if wrong.step is not None:
        assert result.first_divergence is not None and result.first_divergence.startswith(f"Step {wrong.step} of 10"), \
            result.first_divergence
    text = check.message + " " + (result.first_divergence or "")
    assert wrong.phrase in text, text
    # compounding is independent of the forward: a forward mistake never costs Task 2 points
    assert _by_check(result)["compounding"].passed


def test_catalog_is_large_enough():
    assert len(WRONG) >= 20 and len(EQUIVALENT) >= 8
