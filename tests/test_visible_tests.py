"""The notebook's visible tests, run the way `run_tests.py` runs them, on the catalogs of wrong and equivalent
submissions: they catch the common mistakes (at least 80 % of every wrong forward we know of, and every forward
that does no work), never reject a correct block, and explain each failure by its concept, not by code."""
import contextlib
import io
import re

import pytest

from autograder import kit
from autograder.notebook import cells_from_python
from catalog import task2_variants, wrong_forwards
from catalog.build import submission
from catalog.equivalent_forwards import EQUIVALENT
from catalog.leaks import secret_lines
from catalog.unseen_wrong import UNSEEN_WRONG

REQUIRED_FLAG_RATE = 0.8
IDENTITY = "def forward(self, x):\n    return x\n"
FORMULA_COPY = """
import math, torch

def magnitude_by_formula(factor, n_layers):
    return [abs(factor) ** k for k in range(1, n_layers + 1)]

def magnitude_by_autograd(factor, n_layers):
    return [abs(factor) ** k for k in range(1, n_layers + 1)]      # the formula again, no autograd

def classify_factor(factor):
    return "vanishing" if abs(factor) < 1 else "exploding" if abs(factor) > 1 else "stable"
"""


def visible_tests() -> list[tuple[str, str]]:
    return [(c.grade_id, c.source) for c in kit.KIT.cells() if c.kind == "code" and (c.grade_id or "").startswith("test_")]


def run_visible(text: str) -> dict[str, str]:
    """Run a `.py` submission's cells, then every visible test cell on its own; the failures by test name."""
    namespace = {"__name__": "__main__"}
    for cell in cells_from_python(text):
        exec(compile(cell.source, "<submission>", "exec"), namespace)
    failures = {}
    for name, source in visible_tests():
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(source, f"<{name}>", "exec"), namespace)
        except Exception as error:
            failures[name] = f"{type(error).__name__}: {error}"
    return failures


def failed_checks(failures: dict[str, str]) -> set[str]:
    """Names of the single checks that failed (each listed as "- name: message" by run_checks)."""
    return {match for message in failures.values() for match in re.findall(r"^- (\w+):", message, re.MULTILINE)}


def wrong_forwards_known() -> list[tuple[str, str]]:
    """Every wrong forward of the catalogs, read now: the grader's catalog grows while the notebook stays put."""
    return ([(w.name, w.forward) for w in wrong_forwards.WRONG] +
            [(name, forward) for name, forward, _ in UNSEEN_WRONG])


@pytest.fixture(scope="module")
def wrong_results():
    return {name: run_visible(submission(forward=forward)) for name, forward in wrong_forwards_known()}


def test_the_solution_passes_every_visible_test():
    assert run_visible(submission()) == {}


def test_visible_tests_flag_most_wrong_forwards(wrong_results):
    missed = sorted(name for name, failures in wrong_results.items() if not failures)
    rate = 1 - len(missed) / len(wrong_results)
    print(f"visible tests flag {rate:.0%} of {len(wrong_results)} wrong forwards; missed: {missed}")
    assert len(wrong_forwards.WRONG) >= 20 and len(UNSEEN_WRONG) >= 20
    assert rate >= REQUIRED_FLAG_RATE, f"only {rate:.0%} flagged; missed {missed}"


@pytest.mark.parametrize("name, forward", [("identity", IDENTITY), *getattr(wrong_forwards, "TRIVIAL", {}).items()])
def test_a_forward_that_does_no_work_fails(name, forward):
    assert run_visible(submission(forward=forward)), f"{name} passes every visible test"


@pytest.mark.parametrize("name", sorted(EQUIVALENT))
def test_a_correct_forward_in_any_style_passes(name):
    assert run_visible(submission(forward=EQUIVALENT[name])) == {}


def test_every_check_fails_for_some_wrong_forward_and_passes_for_the_solution(wrong_results):
    task2 = [run_visible(submission(task2=source)) for *_, source in task2_variants.WRONG]
    task2.append(run_visible(submission(task2=FORMULA_COPY)))
    tripped = failed_checks({f"{i}{name}": message for i, results in enumerate([*wrong_results.values(), *task2])
                             for name, message in results.items()})
    defined = {name for _, source in visible_tests() for name in re.findall(r"^def (\w+)\(\):", source, re.MULTILINE)}
    assert len(defined) >= 15
    assert defined - tripped == set(), "checks no wrong submission trips (they could never fail)"


def test_task2_mistakes_fail_and_correct_answers_pass():
    for name, _, _, source in task2_variants.WRONG:
        assert "test_compounding" in run_visible(submission(task2=source)), name
    copied = run_visible(submission(task2=FORMULA_COPY))
    assert "autograd_really_runs_autograd" in copied.get("test_compounding", "")
    for name, source in task2_variants.RIGHT.items():
        assert run_visible(submission(task2=source)) == {}, name


def test_every_failing_check_is_reported_not_only_the_first(wrong_results):
    post_ln = wrong_results["post_ln"]["test_zero_branches"]
    assert "silenced_branches_give_back_the_input" in post_ln and "silenced_branches_pass_the_gradient_back" in post_ln
    assert "2 of 2 checks failed" in post_ln


def test_messages_explain_concepts_without_quoting_code(wrong_results):
    secret = secret_lines()
    messages = [m for results in wrong_results.values() for m in results.values()]
    assert len(messages) > 50
    for message in messages:
        assert "self." not in message, message
        assert not [line for line in secret if line in message], message
