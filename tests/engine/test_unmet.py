"""What a part whose equations do not hold is told (`engine.fits.why`, `engine.unmet`): facts only, each read from
the run.

The choice among a part's equations is a property over every assignment of outcomes: the equation said fails where
one of the part's equations fails (from its own, last, alternative back), and is one the grader could not read only
where none fails. The forwards below are written for one fact each, and Pre-LN keeps every part they are about.
"""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from autograder.engine import ledger
from autograder.engine.unmet import WORDS, Unmet, unmet
from catalog.build import submission

KEYS = sorted(WORDS)
OUTCOMES = (ledger.HOLDS, ledger.FAILS, ledger.UNKNOWN)


@st.composite
def needs_and_outcomes(draw):
    """A part's needs (alternatives of equations) and outcomes on a run under which none of them holds whole."""
    needs = tuple(
        tuple(draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique=True))) for _ in range(draw(st.integers(1, 3)))
    )
    found = {key: draw(st.sampled_from(OUTCOMES)) for key in KEYS}
    for together in needs:  # break each alternative at one of its equations, so that none holds whole
        if all(found[key] == ledger.HOLDS for key in together):
            found[together[-1]] = draw(st.sampled_from(OUTCOMES[1:]))
    return needs, found


@given(needs_and_outcomes(), st.sampled_from(["eval", "train"]))
def test_the_equation_said_fails_where_one_of_the_parts_fails_and_is_unread_only_where_none_does(drawn, mode):
    needs, found = drawn
    (fact,) = unmet(found, needs, mode).facts
    failing = [[key for key in together if found[key] == ledger.FAILS] for together in needs]
    if any(failing):
        latest = next(keys for keys in reversed(failing) if keys)  # the part's own equations come last
        assert fact == Unmet(mode, str(latest[0]), True)
    else:
        assert not fact.known and found[fact.equation if fact.equation in found else int(fact.equation)] == ledger.UNKNOWN
        assert fact.equation in {str(key) for key in needs[-1]}
    words = fact.text()
    assert (mode == "train" and fact.equation not in ledger.PATH) == words.startswith("in train mode"), words
    assert ("cannot tell" in words) != fact.known


def _part(result, check: str, part: str):
    return next(s for c in result.checks if c.check == check for s in c.subtests if s.name == part)


PRE_LN = """
def forward(self, x):
    h = x + self.drop_shortcut(self.att(self.norm1(x)))
    return h + self.drop_shortcut(self.ff(self.norm2(h)))
"""
NORM1, NORM2 = ("forward_prenorm", "norm1 feeds attention"), ("forward_prenorm", "norm2 feeds the feed-forward network")
DROP1 = ("forward_dropout", "dropout on attention's output")


@pytest.mark.parametrize(
    "forward, where, kind, said",
    [
        (  # a LayerNorm written with another eps: the grader's fit of the normalization, not the component
            """
            def forward(self, x):
                n = torch.nn.functional.layer_norm(x, x.shape[-1:], self.norm1.scale, self.norm1.shift, eps=1e-3)
                h = x + self.drop_shortcut(self.att(n))
                return h + self.drop_shortcut(self.ff(self.norm2(h)))
            """,
            NORM1,
            "near",
            "ttention received a normalization that added eps = 0.001 to the variance",
        ),
        (  # norm1 reused in front of the feed-forward network: its second call
            """
            def forward(self, x):
                h = x + self.drop_shortcut(self.att(self.norm1(x)))
                return h + self.drop_shortcut(self.ff(self.norm1(h)))
            """,
            NORM2,
            "sum",
            "The feed-forward network received the output of norm1 (call 2)",
        ),
        (  # a dropout on attention's output with another p: what it kept, as it kept it
            """
            def forward(self, x):
                h = x + torch.nn.functional.dropout(self.att(self.norm1(x)), 0.2, self.training)
                return h + self.drop_shortcut(self.ff(self.norm2(h)))
            """,
            DROP1,
            "dropout",
            "multiplied the others by 1.25 (dropout with p = 0.2)",
        ),
        (  # attention's output dropped twice: the dropout part's own equation fails
            """
            def forward(self, x):
                h = x + self.drop_shortcut(self.drop_shortcut(self.att(self.norm1(x))))
                return h + self.drop_shortcut(self.ff(self.norm2(h)))
            """,
            DROP1,
            "unmet",
            "In train mode, what the dropout on attention's output gave went into another dropout",
        ),
        (  # the first sum dropped whole: no dropout took the branch alone, and the one that took it got the sum
            """
            def forward(self, x):
                h = self.drop_shortcut(x + self.att(self.norm1(x)))
                return h + self.drop_shortcut(self.ff(self.norm2(h)))
            """,
            DROP1,
            "sum",
            "In train mode, drop_shortcut (call 1 of 2) received x + the output of attention",
        ),
        (  # a dropout on the shortcut too: the half's addition holds in eval mode and fails in train mode
            """
            def forward(self, x):
                h = self.drop_shortcut(x) + self.drop_shortcut(self.att(self.norm1(x)))
                return h + self.drop_shortcut(self.ff(self.norm2(h)))
            """,
            DROP1,
            "unmet",
            "In train mode, the sum attention's branch went into, less that branch, is not the value its half started from",
        ),
    ],
    ids=["another_eps", "norm1_reused", "another_p", "dropped_twice", "sum_dropped", "shortcut_dropped"],
)
def test_a_failing_part_says_what_the_run_shows_and_pre_ln_keeps_it(grade_here, forward, where, kind, said):
    result = grade_here(submission(forward=forward))
    part = _part(result, *where)
    assert not part.passed and said in part.message, part.message
    assert kind in {fact["kind"] for fact in result.facts}, result.facts
    assert _part(grade_here(submission(forward=PRE_LN)), *where).passed
