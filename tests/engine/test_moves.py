"""The `moved` question's reading (`diagnosis/moves.py`), in milliseconds, on runs made here by construction.

A consumer of attention's half is `G(S(shortcut) + B(branch))`: S and B what the forward did to the shortcut and
the branch on their way into the sum, G what it did to the sum on its way to norm2. Each is drawn from a list of
operations this file knows (none adds a constant: a constant added anywhere in a sum is an extra term of that sum,
and no values tell where it was added), so the truth is known: the first of S, B, G (in Pre-LN's order: the shortcut's step
1, the branch's addition 5, the sum's way to norm2 7) that is not the identity. The same shape of forward stands
for the feed-forward half (6, 10, 10). The step read from the runs is that step, or none."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from autograder.engine.diagnosis.moves import moves, step_of

pytestmark = pytest.mark.quick
SHAPE = (2, 4, 8)
TOL = 1e-6

OPS = {   # name -> (function of an array of SHAPE, whether it only moves whole token vectors, whether it is linear)
    "identity": (lambda t: t, True, True),
    "tanh": (np.tanh, False, False),
    "square": (lambda t: t * t, False, False),
    "doubled": (lambda t: 2 * t, False, True),
    "tokens rolled": (lambda t: np.roll(t, 1, axis=1), True, True),
    "features reversed": (lambda t: t[..., ::-1], False, True),
    "zeroed": (lambda t: 0 * t, False, True),
    "centred over tokens": (lambda t: t - t.mean(axis=1, keepdims=True), False, True),
}
INTO_SUM = sorted(OPS)
AFTER_SUM = [name for name in OPS if name != "tokens rolled"]   # a token-wise consumer cannot see tokens reordered
STEPS = {"att": (1, 5, 7), "ff": (6, 10, 10)}


def runs_for(s_op: str, b_op: str, g_op: str, half: str, seed: int) -> tuple[dict, object]:
    """The four runs of the `moved` question for a forward whose consumer is G(S(shortcut) + B(branch))."""
    rng = np.random.default_rng(seed)
    x, att, ff, delta = (rng.standard_normal(SHAPE) for _ in range(4))
    S, B, G = (OPS[name][0] for name in (s_op, b_op, g_op))
    runs = {}
    for name in ("base", "x", "att", "ff"):
        held = {"att": att + (delta if name == "att" else 0), "ff": ff + (delta if name == "ff" else 0)}
        given_x = x + (delta if name == "x" else 0)
        if half == "att":
            consumer = G(S(given_x) + B(held["att"]))
            h, y = consumer, consumer + held["ff"]
        else:
            h = given_x + held["att"]
            consumer = y = G(S(h) + B(held["ff"]))
        calls = [{"name": "att", "kind": "module", "input": x, "output": held["att"]},
                 {"name": "norm2", "kind": "module", "input": h},
                 {"name": "ff", "kind": "module", "input": h, "output": held["ff"]}]
        runs[name] = {"y": y, "calls": calls, "counts": {"att": 1, "norm2": 1, "ff": 1}}
    where = "out" if half == "ff" else SimpleNamespace(name="norm2", number=1, input=np.zeros(SHAPE))
    values = {"att": att.reshape(-1), "ff": ff.reshape(-1), "delta": delta.reshape(-1)}
    return {"runs": runs, "values": values}, where


def _simplified(ops: tuple) -> tuple:
    """A composition of operations (applied left to right), identities and a reversal undone by the next dropped."""
    out: list = []
    for op in ops:
        if op == "identity":
            continue
        if op == "features reversed" and out and out[-1] == op:
            out.pop()
        else:
            out.append(op)
    return tuple(out)


def truth(s_op: str, b_op: str, g_op: str, half: str) -> int | None:
    """The first step the forward breaks, up to what no values can tell. The consumer computes S'(s) + B'(b) with
    a linear G moved into both terms (G(S(s) + B(b)) = G(S(s)) + G(B(b))), and that is the forward's canonical form:
    one linear operation on both terms is that operation on their sum (step 7 or 10, the reading names the simpler
    forward's step), and a rearrangement of both terms alike is the consumer's own layout (no change)."""
    linear = lambda ops: all(OPS[op][2] for op in ops)        # noqa: E731
    if linear((g_op,)):
        shortcut, branch, after = _simplified((s_op, g_op)), _simplified((b_op, g_op)), ()
    else:
        shortcut, branch, after = _simplified((s_op,)), _simplified((b_op,)), _simplified((g_op,))
    if shortcut == branch and linear(shortcut):
        layout = all(OPS[op][1] for op in shortcut)
        shortcut, branch, after = (), (), after if layout else shortcut + after
    for ops, step in zip((shortcut, branch, after), STEPS[half]):
        if ops:
            return step
    return None


@settings(max_examples=300, deadline=None, derandomize=True)
@given(s_op=st.sampled_from(INTO_SUM), b_op=st.sampled_from(INTO_SUM), g_op=st.sampled_from(AFTER_SUM),
       half=st.sampled_from(["att", "ff"]), seed=st.integers(0, 2**16))
def test_the_step_read_from_the_runs_is_the_first_change_or_none(s_op, b_op, g_op, half, seed):
    moved, where = runs_for(s_op, b_op, g_op, half, seed)
    expected = truth(s_op, b_op, g_op, half)
    step, facts = step_of(moves(moved, half, where, SHAPE, TOL), half)
    if expected is None:
        return      # Pre-LN's sum: the walk never asks
    assert step in (None, expected), (s_op, b_op, g_op, half, step, facts)


@pytest.mark.parametrize("s_op, b_op, g_op, half, step", [
    ("tanh", "identity", "identity", "att", 1),             # the shortcut replaced
    ("identity", "tanh", "identity", "att", 5),             # the branch changed on its way in
    ("identity", "identity", "tanh", "att", 7),             # the sum changed on its way to norm2
    ("identity", "identity", "centred over tokens", "ff", 10),
    ("features reversed", "tokens rolled", "identity", "ff", 6),
    ("square", "identity", "identity", "ff", 6),
    ("identity", "doubled", "identity", "ff", 10),
])
def test_each_kind_of_change_is_named(s_op, b_op, g_op, half, step):
    moved, where = runs_for(s_op, b_op, g_op, half, 0)
    assert step_of(moves(moved, half, where, SHAPE, TOL), half)[0] == step


def test_facts_are_what_the_runs_show():
    moved, where = runs_for("tanh", "identity", "identity", "att", 3)
    facts = moves(moved, "att", where, SHAPE, TOL)
    assert facts["branch"].exactly and not facts["shortcut"].exactly and not facts["across"].exactly
    assert "by exactly that amount" in facts["branch"].text() and "norm2" in facts["branch"].text()


def test_runs_whose_components_were_not_held_tell_nothing():
    moved, where = runs_for("tanh", "identity", "identity", "att", 1)
    moved["runs"]["x"]["calls"][0]["output"] = moved["runs"]["x"]["calls"][0]["output"] + 1.0   # not the held value
    assert moves(moved, "att", where, SHAPE, TOL) is None
    moved, where = runs_for("tanh", "identity", "identity", "att", 1)
    moved["runs"]["att"]["calls"].append(dict(moved["runs"]["att"]["calls"][0]))           # attention called twice
    assert moves(moved, "att", where, SHAPE, TOL) is None
    assert moves(None, "att", where, SHAPE, TOL) is None
