"""The hidden suite, mutation-tested: every wrong forward loses points on its check with its message and its
first divergent step, and nowhere else but the direct consequences it declares; every equivalent forward,
and the solution, gets full marks (on the session's seed here, on one more in test_seeds); a forward that does none
of the block's work gets no forward points at all.

Graded in this process as the sandbox grades (`grade_here`, tests/graded.py): what a forward earns does not depend
on the isolation that ran it (tests/grading/test_parity.py holds every layer to it)."""

import pytest

from autograder.engine.checks.gradients import profile_verdict
from autograder.engine.rubric import RUBRIC, TOTAL_POINTS
from autograder.engine.steps import HALVES
from catalog.build import submission
from catalog.equivalent_forwards import CONTAINER_FORWARD, CONTAINER_INIT, EQUIVALENT
from catalog.oracle import false_facts
from catalog.wrong_forwards import HINTED, TRIVIAL, WRONG
from tiers import quick_sample

pytestmark = pytest.mark.quick  # in `make test-quick`: this wing's fast tier (a sample of the two catalogs)

FORWARD_CHECKS = [name for name in RUBRIC if name != "compounding"]


def _points(result) -> dict:
    """Every part's points, by (check, part)."""
    return {(check.check, part.name): part.points for check in result.checks for part in check.subtests}


def _by_check(result):
    return {check.check: check for check in result.checks}


@pytest.mark.parametrize("name", quick_sample(sorted(EQUIVALENT), every=4))
def test_equivalent_forward_gets_full_marks(grade_here, name):
    """On the session's seed; test_seeds grades every equivalent forward on it and one more of five seeds, and holds
    each to the same points on both and no first difference named on either."""
    result = grade_here(submission(forward=EQUIVALENT[name]))
    lost = {c.check: c.message for c in result.checks if not c.passed}
    assert result.score == TOTAL_POINTS, lost
    assert result.first_divergence is None and not result.grader_errors


def test_components_kept_in_containers_are_followed(grade_here):
    result = grade_here(submission(forward=CONTAINER_FORWARD, init=CONTAINER_INIT))
    assert result.score == TOTAL_POINTS, {c.check: c.message for c in result.checks if not c.passed}


@pytest.mark.parametrize("wrong", quick_sample(WRONG, every=5), ids=lambda w: w.name)
def test_wrong_forward_loses_points_where_its_mistake_is_named(grade_here, wrong):
    result = grade_here(submission(forward=wrong.forward))
    checks = _by_check(result)
    check = checks[wrong.check]
    assert check.points < check.max_points, f"{wrong.check} did not notice {wrong.name}"
    lost = {name for name, c in checks.items() if c.points < c.max_points}
    assert lost <= {wrong.check, *wrong.also}, f"points lost elsewhere: {lost - {wrong.check, *wrong.also}}"
    if wrong.step is not None:
        assert result.first_divergence is not None and result.diverged.step == wrong.step, result.first_divergence
    else:
        assert result.first_divergence is None and result.diverged is None, result.first_divergence
    text = check.message + " " + (result.first_divergence or "")
    assert wrong.phrase in text, text
    assert not false_facts(wrong.forward, result.facts), false_facts(wrong.forward, result.facts)
    assert not result.grader_errors
    for name in lost:  # every lost part says why, in words of its own
        assert all(part.message.strip() for part in checks[name].subtests if not part.passed)


@pytest.mark.parametrize("write", ["x += branch", "x.add_(branch)", "x[...] = x + branch"])
def test_a_forward_that_writes_into_its_input_loses_the_repeated_call_and_only_that_part(grade_here, write):
    """Read from values: the repeated question hands the same tensor twice, so the second call answers for the
    input the first call left behind. Every other output was computed on an input of the grader's own."""
    statement = write.replace("branch", "self.drop_shortcut(self.att(self.norm1(x)))")
    result = grade_here(
        submission(
            forward=f"""
        def forward(self, x):
            {statement}
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """
        )
    )
    parts = {s.name: s for c in result.checks for s in c.subtests}
    repeat = parts["the same output on every call, input left unchanged (eval mode)"]
    assert not repeat.passed and "the second call on the same input tensor did not" in repeat.message, repeat.message
    assert "write into its input" in repeat.message
    robustness = _by_check(result)["forward_robustness"]
    assert [s.name for s in robustness.subtests if not s.passed] == [repeat.name]


@pytest.mark.parametrize("returned", ["x + shortcut", "shortcut + x", "x + h"])
def test_without_the_first_shortcut_the_attention_branch_is_not_followed_into_the_feed_forward_half(grade_here, returned):
    """The attention branch goes on through calls that take its value alone (an extra LayerNorm is part of it),
    but never into the other half: with the first shortcut missing, norm2 takes the branch alone, and the part
    says so (norm2 received att(norm1(x)) and nothing else), not that the feed-forward half's output was "the
    attention branch"."""
    result = grade_here(
        submission(
            forward=f"""
        def forward(self, x):
            x = self.drop_shortcut(self.att(self.norm1(x)))
            shortcut = h = x
            x = self.drop_shortcut(self.ff(self.norm2(x)))
            return {returned}
        """
        )
    )
    parts = {s.name: s for c in result.checks for s in c.subtests}
    attention, feed_forward = parts["shortcut around attention"], parts["shortcut around the feed-forward network"]
    assert not attention.passed and feed_forward.passed
    assert attention.message.startswith("norm2 received att(norm1(x)); Pre-LN hands norm2 h = x + "), attention.message
    assert "the attention branch was added to" not in attention.message, attention.message


@pytest.mark.parametrize("name", quick_sample(sorted(HINTED), every=2))
def test_a_forward_that_would_leave_its_device_is_told_so_and_loses_nothing(grade_here, name):
    forward, phrase = HINTED[name]
    result = grade_here(submission(forward=forward))
    assert result.score == TOTAL_POINTS, {c.check: c.message for c in result.checks if not c.passed}
    note = next((n for n in result.notes if "x.device" in n), "")
    assert phrase in note and "costs no point" in note, result.notes


@pytest.mark.parametrize("name", quick_sample(sorted(TRIVIAL), every=3))
def test_a_forward_that_does_no_work_gets_no_forward_points(grade_here, name):
    result = grade_here(submission(forward=TRIVIAL[name]))
    checks = _by_check(result)
    assert {n: checks[n].points for n in FORWARD_CHECKS} == {n: 0 for n in FORWARD_CHECKS}
    assert checks["compounding"].passed and not result.grader_errors


@pytest.mark.parametrize("broken", [1, 7, 24])
def test_the_deep_stack_message_names_the_broken_block_counted_from_the_input(broken):
    """values[i] is the gradient at block i+1's input; block k multiplies the gradient by values[k-1] / values[k]."""
    factors = [1.05] * 24
    factors[broken - 1] = 0.3
    values, gradient = [], 1.0
    for factor in reversed(factors):  # the gradient travels from the last block back to the first
        gradient *= factor
        values.insert(0, gradient)
    passed, message, _ = profile_verdict(values)
    if broken == 24:  # the last block's factor is invisible: nothing after it to compare
        assert passed
    else:
        assert not passed and message.startswith(f"block {broken} of 24 multiplies the gradient by 0.30")


# The attention half reaches the output through a final norm2 of the whole sum: norm2's first call receives x, a
# sum with attention's branch left out, but the half is not left out of the block (the grader's change of
# attention's output moves the output). The page said it "does not reach the output"; it is said only where the
# grader's change left the output as it was (the catalog's feed-forward case keeps it).
HALF_REACHES_THROUGH_THE_END = """
def forward(self, x):
    h = x + self.drop_shortcut(self.att(self.norm1(x)))
    f = self.drop_shortcut(self.ff(self.norm2(x)))
    return self.norm2(h + f)
"""


@pytest.mark.parametrize("seed", quick_sample([7, 2026], every=2))
def test_a_half_that_reaches_the_output_is_not_said_to_miss_it(grade_here, seed):
    result = grade_here(submission(forward=HALF_REACHES_THROUGH_THE_END), seed=seed)
    said = " ".join([result.first_divergence or ""] + [c.message for c in result.checks])
    assert result.score < TOTAL_POINTS and "norm2 received another value than x plus attention's output" in said, said
    assert result.diverged.step == HALVES["ff"].norm, result.first_divergence  # norm2 received x, not h
    assert "does not reach the output" not in said, said


def test_a_right_forward_keeps_its_train_gradients_where_a_branch_element_is_near_zero(grade_here):
    """On this seed one element of attention's output is so small that the first sum reads the same whether the
    dropout kept it or dropped it; the forward's own dropout dropped it (tests/engine/test_masks.py: the rule)."""
    from catalog.families import FAMILIES

    result = grade_here(submission(forward=FAMILIES["feed_forward_half_on_tokens_first"][0]), seed=1113281557)
    assert result.score == TOTAL_POINTS, {c.check: c.message for c in result.checks if not c.passed}


def test_a_cut_gradient_path_loses_the_deep_stack_part_and_the_figure_shows_the_stack_as_it_runs(grade_here):
    """The second shortcut detached: the block computes Pre-LN's values, so the grader's stack of what it computes keeps
    a Pre-LN profile; the student's own 24 blocks, as they run, pass almost nothing back to block 1. The part about
    the deep stack is not paid, and the line drawn as the student's is that stack."""
    result = grade_here(
        submission(
            forward="""
        def forward(self, x):
            h = x + self.drop_shortcut(self.att(self.norm1(x)))
            return h.detach() + self.drop_shortcut(self.ff(self.norm2(h)))
        """
        )
    )
    parts = {s.name: s for c in result.checks for s in c.subtests}
    profile = parts["24-block stack keeps a Pre-LN profile"]
    assert not profile.passed and "24 of your own blocks, as they run" in profile.message, profile.message
    drawn = result.profile["student"]
    assert drawn[0] < 1e-6 * drawn[-1], drawn  # vanishing towards block 1, as the student's stack does
    right = grade_here(submission(forward=EQUIVALENT[sorted(EQUIVALENT)[0]]))
    assert right.profile["student"] == pytest.approx(right.profile["reference"], rel=1e-3)


GRADIENT_ONLY = """
        def forward(self, x):
            h = x + self.drop_shortcut(self.att(self.norm1(x)))
            n2 = self.norm2(h)
            f = FEED
            return h.detach() + self.drop_shortcut(f)
        """


@pytest.mark.parametrize(
    "feed",
    quick_sample(
        [
            "self.ff(torch.nn.functional.pad(n2, (0, 0, 0, 3)))[:, :n2.shape[1]]",
            "torch.cat([self.ff(c) for c in n2.chunk(2, dim=1)], dim=1)",
            "self.ff(n2.flip(1)).flip(1)",
        ],
        every=3,
    ),
)
def test_a_rewrite_that_keeps_values_costs_a_gradient_only_mistake_nothing_more(grade_here, feed):
    """The second shortcut detached: its values are Pre-LN's, its gradients are not. Written with the feed-forward
    network called on a padded, chunked or flipped tensor, it earns what it earns written plainly, part by part:
    a block that gives Pre-LN's values on the grader's inputs is read by those values where the grader cannot
    replay its program (`Evidence.gives_reference`), and loses only the gradient points."""
    plain = grade_here(submission(forward=GRADIENT_ONLY.replace("FEED", "self.ff(n2)")))
    rewritten = grade_here(submission(forward=GRADIENT_ONLY.replace("FEED", feed)))
    assert _points(rewritten) == _points(plain)
    assert {c.check for c in plain.checks if c.points < c.max_points} == {"forward_gradients"}


BRANCH_HALVED = """
        def forward(self, x):
            h = x + self.drop_shortcut(self.att(self.norm1(x)))
            n2 = self.norm2(h)
            f = FEED
            return h + 0.5 * self.drop_shortcut(f)
        """


def test_a_component_run_through_its_own_layers_is_read_as_a_call_of_it(grade_here):
    """The feed-forward branch halved on its way into the sum, the network run layer by layer: the pass over its
    layers computes the network, so the grader reads it as a call (`evaluation.with_passes`) and the forward earns
    what the same mistake earns with the network called whole, part by part."""
    plain = grade_here(submission(forward=BRANCH_HALVED.replace("FEED", "self.ff(n2)")))
    layers = "self.ff.layers[2](self.ff.layers[1](self.ff.layers[0](n2)))"
    layered = grade_here(submission(forward=BRANCH_HALVED.replace("FEED", layers)))
    assert _points(layered) == _points(plain)
    assert plain.score < TOTAL_POINTS


@pytest.mark.parametrize("guarded", [False, True])
def test_a_dropout_written_by_hand_must_be_off_in_eval_mode(grade_here, guarded):
    """The mask drawn by hand on attention's output: unguarded, eval mode still drops, two calls on one input differ,
    and the part about eval mode says so; guarded by self.training, that part is paid."""
    mask = "(torch.rand_like(a) >= self.drop_shortcut.p) / (1 - self.drop_shortcut.p)"
    branch = f"(a * {mask} if self.training else a)" if guarded else f"a * {mask}"
    result = grade_here(
        submission(
            forward=f"""
        def forward(self, x):
            a = self.att(self.norm1(x))
            x = x + {branch}
            return x + self.drop_shortcut(self.ff(self.norm2(x)))
        """
        )
    )
    part = {s.name: s for c in result.checks for s in c.subtests}["dropout is off in eval mode"]
    assert part.passed == guarded, part.message
    assert guarded or "drew random numbers (rand_like" in part.message, part.message


@pytest.mark.parametrize(
    "rewrite",
    quick_sample(
        [
            ("self.ff(n2)", "self.ff(n2.flip(1)).flip(1)"),  # the tokens reversed around the feed-forward network
            ("self.ff(n2)", "self.ff(n2.flip(0)).flip(0)"),  # the sequences reversed
            ("self.norm2(h)", "self.norm2(h.flip(1)).flip(1)"),  # around norm2
        ],
        every=3,
    ),
)
def test_a_token_wise_component_called_on_reversed_tokens_is_read_as_called_in_order(grade_here, rewrite):
    """Attention on a doubled norm: a wrong forward whose program the grader reads. Written with the feed-forward
    network or norm2 called on its value's tokens (or sequences) in reverse order and the order put back, it earns
    what it earns written plainly, part by part: the reading places a value read in reverse order
    (`placement.Nodes.candidates`)."""
    forward = """
        def forward(self, x):
            h = x + self.drop_shortcut(self.att(2.0 * self.norm1(x)))
            n2 = self.norm2(h)
            return h + self.drop_shortcut(self.ff(n2))
        """
    plain = grade_here(submission(forward=forward))
    rewritten = grade_here(submission(forward=forward.replace(*rewrite)))
    assert _points(rewritten) == _points(plain)
    assert (
        plain.score < TOTAL_POINTS and _by_check(plain)["forward_prenorm"].points < _by_check(plain)["forward_prenorm"].max_points
    )


def test_a_half_the_grader_cannot_follow_is_not_said_to_lack_its_branch(grade_here):
    """Attention written out with its own value and output layers (no call of attention itself), the attention
    branch then added to x: the grader cannot follow the layers' output, and the parts about that half say so. They
    used to say "so there is no branch to add a shortcut around", which is false of this forward."""
    result = grade_here(
        submission(
            forward="""
        def forward(self, x):
            a = self.att.out_proj(self.att.W_value(self.norm1(x)))
            h = x + self.drop_shortcut(a)
            return h + self.drop_shortcut(self.ff(self.norm2(torch.tanh(h))))
        """
        )
    )
    parts = {s.name: s for c in result.checks for s in c.subtests}
    for name in ("shortcut around attention", "dropout on attention's output"):
        message = parts[name].message
        assert not parts[name].passed and "no branch" not in message, message
        assert message.startswith("Layers of attention ran, but the grader could not follow their output"), message
        assert message.endswith("so the grader cannot check this part of it."), message
