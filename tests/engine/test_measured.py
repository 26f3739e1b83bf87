"""Parts judged without the grader computing what the block should give (`checks/measured.py`).

A forward whose values are wrong in a way the grader cannot replay (a tanh, a sine on a value handed to a
component) used to fail every gradient and robustness part with "the grader cannot compute ...". Now its gradients
are held to the derivative the grader measures (the read-out loss on the input, or a component's parameters, moved
a small step each way), and its robustness to its own eval output (a shorter sequence, a longer batch, float64, a
second call). The generator below knows the truth by construction: a forward with no change to its gradients has
autograd's derivative, one with a detached, halved or reversed gradient path does not.

Graded in this process as the sandbox grades (`grade_here`, tests/graded.py)."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog.build import submission
from tiers import quick_sample

pytestmark = pytest.mark.quick

INPUT, PARAMS, TRAIN = (
    "the block input's gradient (eval mode)",
    "every component's gradients (eval mode)",
    "gradients flow through every path (train mode)",
)
SMALL, BATCH, DOUBLE, REPEAT = (
    "batch of one, short context",
    "a batch of five sequences",
    "float64 after .double()",
    "the same output on every call, input left unchanged (eval mode)",
)
# smooth, token by token, and not a sum of earlier values: the grader cannot replay a program through them
SMOOTH = {"tanh": "torch.tanh({})", "sine": "torch.sin({})", "sigmoid gate": "{0} * torch.sigmoid({0})"}
# where the smooth op sits: the value handed to norm1, to norm2, or the feed-forward output
PLACES = ("n1", "n2", "f")
# a gradient change on one path, values kept: (name, expression in t)
GRADIENT_CHANGES = {
    "none": "{}",
    "detached": "{}.detach()",
    "halved gradient": "(0.5 * {0} + 0.5 * {0}.detach())",
    "reversed gradient": "(2 * {0}.detach() - {0})",
}
PATHS = ("x->h", "d1->h", "h->y", "d2->y")


def forward_text(op: str, place: str, change: str, path: str) -> str:
    wrong = lambda value, at: SMOOTH[op].format(value) if place == at else value  # noqa: E731
    cut = lambda value, at: GRADIENT_CHANGES[change].format(value) if path == at else value  # noqa: E731
    return f"""
        def forward(self, x):
            a = self.att(self.norm1({wrong("x", "n1")}))
            d1 = self.drop_shortcut(a)
            h = {cut("x", "x->h")} + {cut("d1", "d1->h")}
            f = self.ff(self.norm2({wrong("h", "n2")}))
            d2 = self.drop_shortcut({wrong("f", "f")})
            return {cut("h", "h->y")} + {cut("d2", "d2->y")}
        """


def _parts(result) -> dict:
    return {part.name: part for check in result.checks for part in check.subtests}


@pytest.mark.slow  # the quick tier runs the others
@settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    op=st.sampled_from(sorted(SMOOTH)),
    place=st.sampled_from(PLACES),
    change=st.sampled_from(sorted(GRADIENT_CHANGES)),
    path=st.sampled_from(PATHS),
)
def test_gradients_are_held_to_the_derivative_the_grader_measures(grade_here, op, place, change, path):
    result = grade_here(submission(forward=forward_text(op, place, change, path)))
    parts = _parts(result)
    for name in (INPUT, PARAMS, TRAIN):
        assert "cannot be checked" not in parts[name].message, parts[name].message
    if change == "none":
        assert all(parts[name].passed for name in (INPUT, PARAMS, TRAIN)), [parts[n].message for n in (INPUT, PARAMS, TRAIN)]
        assert all(parts[name].passed for name in (SMALL, BATCH, DOUBLE, REPEAT)), [
            parts[n].message for n in (SMALL, BATCH, DOUBLE, REPEAT)
        ]
    else:
        assert not parts[TRAIN].passed
        assert "are not the derivative of what your forward returns" in parts[TRAIN].message, parts[TRAIN].message
        assert "where the gradients give" in parts[TRAIN].message, parts[TRAIN].message


@pytest.mark.parametrize(
    "change, lost",
    quick_sample(
        [
            ("h = x + d1", set()),
            ("x += d1\n            h = x", {REPEAT}),  # writes into its input: the second call sees another input
            ("h = x + d1 + 0.1 * x.mean(0, keepdim=True)", {SMALL, BATCH}),  # each sequence sees the batch
            ("h = (x + d1).view(x.shape[0], 8, -1)", {SMALL}),  # the context length written in
            ("h = (x + d1).float()\n            return (h + self.ff(self.norm2(torch.tanh(h)))).float()", {DOUBLE}),
        ],
        every=2,
        several=True,
    ),
)
def test_robustness_is_held_to_the_blocks_own_output(grade_here, change, lost):
    """A tanh on the value handed to norm2 keeps the grader from replaying the block; its robustness parts are then
    judged on its own eval output, and each loses exactly the part its mistake is about."""
    forward = f"""
        def forward(self, x):
            d1 = self.drop_shortcut(self.att(self.norm1(x)))
            {change}
            return h + self.drop_shortcut(self.ff(self.norm2(torch.tanh(h))))
        """
    parts = _parts(grade_here(submission(forward=forward)))
    failed = {name for name in (SMALL, BATCH, DOUBLE, REPEAT) if not parts[name].passed}
    assert failed == lost, {name: parts[name].message for name in (SMALL, BATCH, DOUBLE, REPEAT)}
    for name in (SMALL, BATCH, DOUBLE, REPEAT):
        assert "cannot compute" not in parts[name].message, parts[name].message


def test_a_block_whose_tokens_see_later_tokens_is_told_so_on_the_short_sequence(grade_here):
    """Tokens reversed before attention, and a tanh in front of norm2: the first tokens of a shorter sequence are
    not the first tokens of the whole sequence's output, and the part says so with the sizes it used."""
    forward = """
        def forward(self, x):
            h = x + self.drop_shortcut(self.att(self.norm1(x).flip(1)))
            return h + self.drop_shortcut(self.ff(self.norm2(torch.tanh(h))))
        """
    parts = _parts(grade_here(submission(forward=forward)))
    assert not parts[SMALL].passed
    assert "cut to its first 5 tokens" in parts[SMALL].message, parts[SMALL].message
    assert all(parts[name].passed for name in (BATCH, DOUBLE, REPEAT))


@pytest.mark.parametrize(
    "feed",
    quick_sample(
        [
            "self.ff.layers[2](self.ff.layers[1](self.ff.layers[0](n2)))",  # the network run layer by layer
            "torch.vmap(self.ff)(n2)",  # through vmap, where the grader's change of its output draws nothing at random
            "self.ff.layers[2](torch.relu(self.ff.layers[0](n2)))",  # its own layers, another activation
        ],
        every=2,
    ),
)
def test_the_work_of_a_branch_the_grader_cannot_replay_is_measured(grade_here, feed):
    """A tanh in front of norm2 keeps the grader from replaying the block, and the feed-forward network runs where no
    call of it is recorded whole. The grader changes the output of the network's last layer (the `respond` question)
    and sees the block's output move: the branch does its work, and no part is withheld for want of a measure. With
    the branch's output zeroed on its way into the sum, the same measure finds no work."""
    forward = f"""
        def forward(self, x):
            h = x + self.drop_shortcut(self.att(self.norm1(x)))
            n2 = self.norm2(torch.tanh(h))
            f = {feed}
            return h + self.drop_shortcut(BRANCH)
        """
    working = _parts(grade_here(submission(forward=forward.replace("BRANCH", "f"))))
    idle = _parts(grade_here(submission(forward=forward.replace("BRANCH", "0 * f"))))
    withheld = {name: part.message for name, part in working.items() if part.message.startswith("Not credited: ")}
    assert not [m for m in withheld.values() if "this part counts only for a block" in m], withheld
    for name in (INPUT, PARAMS, TRAIN, SMALL, BATCH, DOUBLE, REPEAT):
        assert working[name].passed, working[name].message
        assert "does not depend on x through the feed-forward network" in idle[name].message, idle[name].message
