"""The gradient half of the lesson: the deep-stack measurement separates the arrangements, and the
compounding check accepts exact answers and names the usual mistakes."""

import pytest

from autograder.engine.checks.gradients import profile_verdict
from autograder.engine.rubric import RUBRIC
from catalog.build import submission
from catalog.task2_variants import EDGES, RIGHT, WRONG
from tiers import quick_sample

pytestmark = pytest.mark.quick  # in `make test-quick`: this wing's fast tier


@pytest.fixture(scope="module")
def profiles(seed):
    """Profiles on run seeds held back from the calibration (benchmarks/calibrate_profile.py used 1..200): new
    ones every session, derived from the session's seed, so the thresholds keep being tried on unseen stacks."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from calibrate_profile import CALIBRATION_SEEDS, arrangements, profile

    from autograder.grading.reference import reference_namespace

    held_back = [10_000 + (seed * 7919 + i * 104_729) % 2**30 for i in range(4)]
    assert not set(held_back) & set(CALIBRATION_SEEDS)
    ns = reference_namespace()
    return {name: [profile(ns, block, s) for s in held_back] for name, block in arrangements(ns).items()}


@pytest.mark.slow  # the quick tier runs the others
def test_measurement_passes_pre_ln_for_every_seed(profiles):
    assert all(profile_verdict(p)[0] for p in profiles["Pre-LN"])


@pytest.mark.parametrize(
    "arrangement, phrase", [("Post-LN", "shrink"), ("no shortcuts", "shrink"), ("no normalization", "exploding gradient")]
)
def test_measurement_fails_the_other_arrangements_for_every_seed(profiles, arrangement, phrase):
    for values in profiles[arrangement]:
        passed, message, _ = profile_verdict(values)
        assert not passed and phrase in message


def test_an_exploding_gradient_is_named_first_even_where_a_block_also_shrinks_it():
    """Without normalization a stack's factors can be far above 1 with one block below: the explosion is the
    larger fact and comes first, and the shrinking block is still named."""
    factors = [1.8] * 15 + [0.87] + [1.8] * 8  # factors[k]: what block k+1 multiplies the gradient by
    values, gradient = [], 1.0
    for factor in reversed(factors):
        gradient *= factor
        values.insert(0, gradient)
    passed, message, stats = profile_verdict(values)
    assert not passed and stats["growth"] > 1e5
    assert message.startswith("the gradient grows") and "exploding gradient" in message
    assert "Besides, block 16 of 24 multiplies the gradient by 0.87 on its way back" in message
    assert "vanishing" not in message


@pytest.mark.parametrize("shrinking", [2, 5, 24])
def test_where_several_blocks_shrink_the_gradient_the_message_names_them_all_not_the_smallest(shrinking):
    """Blocks 1..`shrinking` shrink the gradient, by 0.50 to 0.62: the message says how many and by how much, rather
    than blaming the block with the smallest factor. Block 24's own factor never shows (nothing after it)."""
    factors = [0.5 + 0.12 * k / max(shrinking - 1, 1) for k in range(shrinking)] + [1.0] * (24 - shrinking)
    values, gradient = [], 1.0
    for factor in reversed(factors):
        gradient *= factor
        values.insert(0, gradient)
    passed, message, _ = profile_verdict(values)
    seen = min(shrinking, 23)
    assert not passed and message.startswith(f"{seen} blocks multiply the gradient by 0.50 to 0.6"), message


def test_a_vanishing_gradient_is_named_only_where_block_1_gets_less_than_block_24():
    def profile(factors):  # factors[k]: what block k+1 multiplies the gradient by on its way back
        values, gradient = [], 1.0
        for factor in reversed(factors):
            gradient *= factor
            values.insert(0, gradient)
        return values

    falling = profile([0.5] * 24)  # every block halves it: block 1 gets almost nothing
    dipping = profile([1.0] * 8 + [0.95, 0.95] + [1 / 0.95] * 2 + [1.0] * 12)  # two shrink it, two give it back
    assert "a vanishing gradient" in profile_verdict(falling)[1]
    passed, message, _ = profile_verdict(dipping)
    assert not passed and message.startswith("2 blocks shrink") and "vanishing" not in message


def test_measurement_rejects_broken_profiles():
    assert not profile_verdict([1.0, float("nan"), 1.0])[0]
    assert not profile_verdict([0.0] * 24)[0]
    assert not profile_verdict([])[0]


@pytest.mark.parametrize("name", quick_sample(sorted(RIGHT), every=4))
def test_compounding_accepts_exact_answers_in_any_style(grade_here, name):
    result = grade_here(submission(task2=RIGHT[name]))
    check = next(c for c in result.checks if c.check == "compounding")
    assert check.passed, check.message


@pytest.mark.parametrize(
    "name, part, phrase, task2", quick_sample(WRONG + EDGES, every=3, several=True), ids=[w[0] for w in WRONG + EDGES]
)
def test_compounding_rejects_each_mistake_with_its_message(grade_here, name, part, phrase, task2):
    result = grade_here(submission(task2=task2))
    check = next(c for c in result.checks if c.check == "compounding")
    failed = {s.name: s.message for s in check.subtests if not s.passed}
    assert set(failed) == {part}, failed
    assert phrase in failed[part], failed[part]
    assert sum(s.points for s in check.subtests) == RUBRIC["compounding"].points - RUBRIC["compounding"].parts[part]


def test_gradient_check_fails_post_ln_and_no_shortcut_blocks(grade_here):
    from catalog.wrong_forwards import WRONG as FORWARDS

    post_ln = next(w for w in FORWARDS if w.name == "post_ln")
    no_shortcut = """
        def forward(self, x):
            x = self.drop_shortcut(self.att(self.norm1(x)))
            return self.drop_shortcut(self.ff(self.norm2(x)))
        """
    for forward in (post_ln.forward, no_shortcut):
        result = grade_here(submission(forward=forward))
        gradients = next(c for c in result.checks if c.check == "forward_gradients")
        profile_part = next(s for s in gradients.subtests if s.name == "24-block stack keeps a Pre-LN profile")
        assert not profile_part.passed and "stack of 24 of your blocks" in profile_part.message


def test_a_stack_cut_from_autograd_is_said_in_words():
    """A block whose output is cut from autograd's graph (zeros made from what it computed): the deep-stack part says
    why the grader cannot measure a stack of it in the lesson's words, not in autograd's error."""
    import graded

    forward = """
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            return torch.zeros_like(x + self.drop_shortcut(self.ff(self.norm2(x))))
        """
    result = graded.grade(submission(forward=forward), 7)
    said = [part.message for check in result.checks for part in check.subtests if "stack" in part.message]
    assert any("what it returns does not depend on its input through autograd" in message for message in said), said
    assert not any("grad_fn" in message or "element 0" in message for message in said), said
