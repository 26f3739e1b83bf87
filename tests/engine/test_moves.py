"""The `moved` question's reading (`diagnosis/moves.py`), in milliseconds, on runs made here by construction.

A consumer of attention's half is `G(S(shortcut) + B(branch))`: S and B what the forward did to the shortcut and
the branch on their way into the sum, G what it did to the sum on its way to norm2. Each is drawn from a list of
operations this file knows (none adds a constant: a constant added anywhere in a sum is an extra term of that sum,
and no values tell where it was added), so the truth is known: the first of S, B, G (in Pre-LN's order: the shortcut's step
1, the branch's addition 5, the sum's way to norm2 7) that is not the identity. The same shape of forward stands
for the feed-forward half (6, 10, 10). The step read from the runs is that step, or none."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pytest

from autograder.engine.diagnosis.moves import moves, step_of

pytestmark = pytest.mark.quick
SHAPE = (2, 4, 8)
TOL = 1e-6

OPS = {  # name -> (function of an array of SHAPE, whether it only moves whole token vectors, whether it is linear)
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
AFTER_SUM = [name for name in OPS if name != "tokens rolled"]  # a token-wise consumer cannot see tokens reordered
STEPS = {"att": (1, 5, 7), "ff": (6, 10, 10)}


def runs_for(s_op: str, b_op: str, g_op: str, half: str, seed: int, second: str = "identity") -> tuple[dict, object]:
    """The four runs of the `moved` question for a forward whose consumer is G(S(shortcut) + B(branch)); for
    attention's half, `second` is what the forward does to h on its way into the second sum."""
    rng = np.random.default_rng(seed)
    x, att, ff, delta = (rng.standard_normal(SHAPE) for _ in range(4))
    S, B, G = (OPS[name][0] for name in (s_op, b_op, g_op))
    runs = {}
    for name in ("base", "x", "att", "ff"):
        held = {"att": att + (delta if name == "att" else 0), "ff": ff + (delta if name == "ff" else 0)}
        given_x = x + (delta if name == "x" else 0)
        if half == "att":
            consumer = G(S(given_x) + B(held["att"]))
            h, y = consumer, OPS[second][0](consumer) + held["ff"]
        else:
            h = given_x + held["att"]
            consumer = y = G(S(h) + B(held["ff"]))
        calls = [
            {"name": "att", "kind": "module", "input": x, "output": held["att"]},
            {"name": "norm2", "kind": "module", "input": h},
            {"name": "ff", "kind": "module", "input": h, "output": held["ff"]},
        ]
        runs[name] = {"y": y, "calls": calls, "counts": {"att": 1, "norm2": 1, "ff": 1}}
    where = "out" if half == "ff" else SimpleNamespace(name="norm2", number=1, input=np.zeros(SHAPE))
    values = {"att": att.reshape(-1), "ff": ff.reshape(-1), "delta": delta.reshape(-1)}
    return {"runs": runs, "values": values}, where


def _simplified(ops: tuple) -> tuple:
    """A composition of operations (applied left to right), identities, a reversal undone by the next and a centring
    repeated dropped;
    anything with a zeroing in it is a zeroing (every operation here maps zero to zero)."""
    if "zeroed" in ops:
        return ("zeroed",)
    out: list = []
    for op in ops:
        if op == "identity":
            continue
        if op == "features reversed" and out and out[-1] == op:
            out.pop()
        elif op == "centred over tokens" and out and out[-1] == op:  # centring twice is centring once
            continue
        else:
            out.append(op)
    return tuple(out)


def truth(s_op: str, b_op: str, g_op: str, half: str) -> int | None:
    """The first step the forward breaks, up to what no values can tell. The consumer computes S'(s) + B'(b) with
    a linear G moved into both terms (G(S(s) + B(b)) = G(S(s)) + G(B(b))), and that is the forward's canonical form:
    one linear operation on both terms is that operation on their sum (step 7 or 10, the reading names the simpler
    forward's step), and a rearrangement of both terms alike is the consumer's own layout (no change). A shortcut
    scaled or left out, or the whole sum scaled, breaks the addition (`steps`: 5, 10), not the step that saves it."""
    linear = lambda ops: all(OPS[op][2] for op in ops)  # noqa: E731
    if linear((g_op,)):
        shortcut, branch, after = _simplified((s_op, g_op)), _simplified((b_op, g_op)), ()
    else:
        shortcut, branch, after = _simplified((s_op,)), _simplified((b_op,)), _simplified((g_op,))
    if shortcut == branch and linear(shortcut):
        layout = all(OPS[op][1] for op in shortcut)
        shortcut, branch, after = (), (), after if layout else _simplified(shortcut + after)
    scaling = lambda ops: bool(ops) and set(ops) <= {"doubled", "zeroed"}  # noqa: E731
    if scaling(shortcut) or (not shortcut and not branch and scaling(after)):  # a shortcut, or the whole sum,
        return STEPS[half][1]  # scaled or left out: the addition
    for ops, step in zip((shortcut, branch, after), STEPS[half]):
        if ops:
            return step
    return None


def _read_at_the_output(s_op: str, b_op: str, g_op: str, after: str, expected: int | None) -> set:
    """The steps right for attention's half read in what the block returned, where `after` is done to h on its
    way into the second sum: the forward's own first step (6 where only `after` changed), and, where what is done to
    the sum and `after` are linear, so done to both terms, the step of that forward (a reversal undone on one term
    leaves the other reversed: a shortcut reversed and scaled is one replaced)."""
    found = {expected if expected is not None else None if after == "identity" else 6}
    if OPS[g_op][2] and OPS[after][2]:
        shortcut, branch = _simplified((s_op, g_op, after)), _simplified((b_op, g_op, after))
        if not branch and shortcut:
            found.add(STEPS["att"][1] if set(shortcut) <= {"doubled", "zeroed"} else STEPS["att"][0])
    return found - {None}


@pytest.mark.slow  # the quick tier runs the others
@pytest.mark.parametrize("seed", [0, 1])
def test_the_step_read_from_the_runs_is_the_first_change_or_none(seed):
    """Every forward of the vocabulary (shortcut, branch and sum operations, either half), on two draws of values."""
    wrong = []
    for s_op, b_op, g_op, half in itertools.product(INTO_SUM, INTO_SUM, AFTER_SUM, ("att", "ff")):
        moved, where = runs_for(s_op, b_op, g_op, half, seed)
        expected = truth(s_op, b_op, g_op, half)
        step, facts = step_of(moves(moved, half, where, SHAPE, TOL), half)
        if expected is not None and step not in (None, expected):  # (a right sum: the walk asks at norm2 only
            wrong.append((s_op, b_op, g_op, half, step, expected))  # where it received something else)
        if half == "att":  # read in what the block returned instead (norm2 unrecorded), through the second sum,
            for after in INTO_SUM:  # with what the forward did to h on its way there: the sum may be right
                late_moved, _ = runs_for(s_op, b_op, g_op, half, seed, second=after)
                late, _ = step_of(moves(late_moved, half, "out", SHAPE, TOL), half, at_out=True)
                if late not in (None, *_read_at_the_output(s_op, b_op, g_op, after, expected)):
                    wrong.append((s_op, b_op, g_op, f"{after} on the second shortcut", late, expected))
    assert not wrong, wrong[:5]


@pytest.mark.parametrize(
    "s_op, b_op, g_op, half, step",
    [
        ("tanh", "identity", "identity", "att", 1),  # the shortcut replaced
        ("identity", "tanh", "identity", "att", 5),  # the branch changed on its way in
        ("identity", "identity", "tanh", "att", 7),  # the sum changed on its way to norm2
        ("identity", "identity", "centred over tokens", "ff", 10),
        ("features reversed", "tokens rolled", "identity", "ff", 6),
        ("square", "identity", "identity", "ff", 6),
        ("identity", "doubled", "identity", "ff", 10),
    ],
)
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
    moved["runs"]["x"]["calls"][0]["output"] = moved["runs"]["x"]["calls"][0]["output"] + 1.0  # not the held value
    assert moves(moved, "att", where, SHAPE, TOL) is None
    moved, where = runs_for("tanh", "identity", "identity", "att", 1)
    moved["runs"]["att"]["calls"].append(dict(moved["runs"]["att"]["calls"][0]))  # attention called twice
    assert moves(moved, "att", where, SHAPE, TOL) is None
    assert moves(None, "att", where, SHAPE, TOL) is None


# --- a component run through its own layers (`diagnosis/own_layers.py`) ------------------------------------------
def _layer(name, layer, value, out, at):
    return {"name": name, "layer": layer, "input": value, "output": out, "at": at}


def test_one_pass_over_a_component_s_layers_is_one_call_of_it():
    from autograder.engine.diagnosis.own_layers import passes

    a, b, c, d = (np.full((2, 3), float(k)) for k in range(4))
    layers = [
        _layer("ff", 2, a, b, 1),
        _layer("ff", 3, b, c, 1),
        _layer("ff", 4, c, d, 1),  # one pass
        _layer("ff", 2, d, a, 1),
        _layer("ff", 4, a, b, 1),  # the next chunk
        _layer("att", 1, a, c, 2),  # after another recorded call
        _layer("norm1", 1, a, a, 2),
    ]  # a component also called whole
    found = passes(layers, called={"norm1"})
    assert [(p.name, float(p.input[0, 0]), float(p.output[0, 0])) for p in found] == [
        ("ff", 0.0, 3.0),
        ("ff", 3.0, 1.0),
        ("att", 0.0, 2.0),
    ]
    assert [p.index for p in found] == sorted(p.index for p in found) and 0 < found[0].index < 1 < found[2].index < 2
    assert all(p.kind == "layers" for p in found) and passes([], set()) == []


@pytest.mark.parametrize(
    "s_op, b_op, second, half, intact",
    [
        ("identity", "tanh", "identity", "att", True),  # the first shortcut reaches norm2 as it is
        ("tanh", "identity", "identity", "att", False),
        ("identity", "identity", "identity", "ff", True),  # x and attention's output both reach the output: h
        ("identity", "tanh", "identity", "ff", False),  # attention's output changed on its way into h
        ("identity", "identity", "tanh", "ff", False),  # the second shortcut changed
        ("tanh", "identity", "identity", "ff", False),  # ... or x on its way into h
    ],
)
def test_a_shortcut_is_intact_where_both_its_sources_reach_the_consumer_as_they_are(s_op, b_op, second, half, intact):
    from autograder.engine.diagnosis.moves import shortcut_intact

    moved, where = runs_for(s_op, b_op, "identity", "att", 0, second=second)
    norm2 = where if half == "att" else None
    assert shortcut_intact(moved, half, norm2, SHAPE, TOL) is intact
