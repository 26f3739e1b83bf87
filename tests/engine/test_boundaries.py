"""The engine's pure parts, in milliseconds: the steps table, the facts, and the walk along Pre-LN's boundaries.

Forwards here are small Python functions run on the grader's own components through a tape of this file's own
(not the kit's recorder), so each test knows by construction what every component received; the walk must find
the step the forward breaks, and every fact it states must hold on the tape's values."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from autograder.engine.diagnosis.boundaries import Walk
from autograder.engine.diagnosis.location import locate
from autograder.engine.diagnosis.values import express, masked
from autograder.engine.facts import KINDS, Dropout, Dropped, Ran, Received, Sum, Unknown, Unreceived
from autograder.engine.replayed import Changes
from autograder.engine.questions.parts import make_parts
from autograder.engine.questions.plan import GRADING_CFG
from autograder.engine.steps import BY_NUMBER, EDGES, STEPS, step_text
from autograder.grading.reference import reference_namespace

pytestmark = pytest.mark.quick
P = 0.5


@pytest.fixture(scope="module")
def parts():
    found = make_parts(reference_namespace(), GRADING_CFG, 321, drop_p=P)
    for part in found.values():
        part.eval()
    return found


class Tape:
    """The five components, recording what each call received and returned."""

    def __init__(self, parts: dict, train: bool):
        self.parts, self.calls, self.train = parts, [], train
        self.drop = torch.nn.Dropout(P).train(train)

    def __getattr__(self, name):
        module = self.drop if name == "drop_shortcut" else self.parts[name]

        def call(value):
            out = module(value)
            self.calls.append(
                SimpleNamespace(
                    name=name,
                    kind="module",
                    input=value.detach().numpy().astype(np.float64),
                    output=out.detach().numpy().astype(np.float64),
                    variant=None,
                    index=len(self.calls),
                )
            )
            return out

        return call


def run(parts, forward, train=False, x=None):
    """The tape and the flow-like record of `forward(t, x)`."""
    torch.manual_seed(7)
    x = torch.randn(3, 8, 32, generator=torch.Generator().manual_seed(3)) if x is None else x
    tape = Tape(parts, train)
    with torch.no_grad():
        y = forward(tape, x)
    x, y = x.numpy().astype(np.float64), y.numpy().astype(np.float64)
    # a named run (`dataflow.Flow`) of the calls alone: no step joined from pieces, none the recording missed
    flow = SimpleNamespace(
        x=x, y=y, tol=1e-5, calls=tape.calls, steps=[], decoys=[], vectors={}, layers=[], counts={}, train=train
    )
    return tape, flow


def walk(parts, forward, train=False, responses=None):
    tape, flow = run(parts, forward, train)
    return Walk(flow, parts, "train" if train else "eval", P, responses).first(), tape, flow


def pre_ln(t, x):
    h = x + t.drop_shortcut(t.att(t.norm1(x)))
    return h + t.drop_shortcut(t.ff(t.norm2(h)))


# --- the steps table -------------------------------------------------------------------------------------


def test_the_steps_table_numbers_ten_steps_and_every_edge_belongs_to_one_of_them():
    assert [s.number for s in STEPS] == list(range(1, 11))
    assert set(EDGES.values()) <= set(BY_NUMBER)
    assert step_text(4) == "Step 4 of 10 (apply drop_shortcut to attention's output)"


def test_every_fact_kind_renders_and_travels_as_data():
    facts = [
        Ran("eval", "norm2", 0),
        Received("eval", "att", 2, "norm1(x)", False, 3),
        Sum("eval", None, None, (("x", 1.0), ("att(norm1(x))", 0.5))),
        Unknown("eval", "norm2", 1, "h"),
        Changes("eval", "att", "norm2", True),
        Dropout("train", "dropout", 1, True, 1.25, 2),
        Unreceived("train", ("drop_shortcut", "dropout"), "att(norm1(x))"),
    ]
    texts = [f.text() for f in facts]
    assert texts[0] == "norm2 never ran"
    assert texts[1] == "attention (call 2 of 3) received a value that is not norm1(x)"
    assert texts[2] == "your forward returned x + 0.5*att(norm1(x))"
    assert "p = 0.2" in texts[5]
    assert texts[6] == "no call of drop_shortcut or of torch's dropout received att(norm1(x))"
    for fact in facts:
        data = fact.to_dict()
        assert data["kind"] in KINDS and KINDS[data["kind"]](**{k: v for k, v in data.items() if k != "kind"}) == fact


# --- the value primitives ----------------------------------------------------------------------------------


def test_locate_finds_pieces_and_rearrangements_and_nothing_else():
    rng = np.random.default_rng(0)
    whole = rng.normal(size=(3, 8, 32))
    assert np.array_equal(whole.reshape(-1)[locate(whole[:, ::-1], whole, 1e-6)], whole[:, ::-1])
    assert locate(whole[1].T, whole, 1e-6) is not None
    assert locate(whole[0] * 2, whole, 1e-6) is None
    assert locate(np.concatenate([whole[0], whole[0]]), whole, 1e-6) is None  # one element twice
    assert locate(np.tanh(whole), whole, 1e-6) is None


def test_express_and_masked_say_what_a_value_is_made_of_or_nothing():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=200), rng.normal(size=200)
    assert express(a + 0.5 * b, {"a": a, "b": b}, 1e-8) == {"a": 1.0, "b": 0.5}
    assert express(np.tanh(a), {"a": a, "b": b}, 1e-8) is None
    mask = rng.random(200) < 0.5
    assert masked(np.where(mask, 0.0, 2 * a), a, 2.0, 1e-8)
    assert not masked(a, a, 2.0, 1e-8) and not masked(np.where(mask, 0.0, 3 * a), a, 2.0, 1e-8)


# --- the walk, both ways -----------------------------------------------------------------------------------


def _same_tokens(got, want) -> bool:
    """The same token vectors (each a row of features, in order), in any arrangement."""
    rows = lambda v: sorted(map(tuple, np.round(np.asarray(v, dtype=np.float64).reshape(-1, 32), 4)))  # noqa: E731
    return np.shape(got) == np.shape(want) and rows(got) == rows(want)


def _holds(fact, tape, flow, parts) -> bool:
    """Check a fact against the tape, independently of the walk."""
    calls = [c for c in tape.calls if c.name == getattr(fact, "component", None)]
    x = torch.as_tensor(flow.x, dtype=torch.float32)
    with torch.no_grad():
        n1 = parts["norm1"](x)
        values = {"x": x, "norm1(x)": n1, "att(norm1(x))": parts["att"](n1)}
        values["h"] = x + values["att(norm1(x))"]
        values["norm2(h)"] = parts["norm2"](values["h"])
        values["h + drop_shortcut(ff(norm2(h)))"] = values["h"] + parts["ff"](values["norm2(h)"])
    if isinstance(fact, Ran):
        return len(calls) == fact.count
    if isinstance(fact, Received):
        got = calls[fact.call - 1].input if fact.call else None
        want = values[fact.value].numpy()
        return got is not None and (_same_tokens(got, want) == fact.equal)
    if isinstance(fact, Unknown):
        return not np.allclose(calls[fact.call - 1].input, values[fact.value].numpy(), atol=1e-4)
    if isinstance(fact, Unreceived) and fact.value in values:
        return not any(_same_tokens(c.input, values[fact.value].numpy()) for c in tape.calls if c.name in fact.components)
    return True


@pytest.mark.parametrize(
    "name, forward, step",
    [
        ("norm1 left out", lambda t, x: (lambda h: h + t.ff(t.norm2(h)))(x + t.att(x)), 2),
        ("norm2 in front of attention", lambda t, x: (lambda h: h + t.ff(t.norm2(h)))(x + t.att(t.norm2(x))), 2),
        ("attention on a scaled norm", lambda t, x: (lambda h: h + t.ff(t.norm2(h)))(x + t.att(2 * t.norm1(x))), 3),
        ("first shortcut left out", lambda t, x: (lambda h: h + t.ff(t.norm2(h)))(t.att(t.norm1(x))), 5),
        ("first shortcut replaced", lambda t, x: (lambda h: h + t.ff(t.norm2(h)))(t.norm1(x) + t.att(t.norm1(x))), 1),
        ("attention branch left out", lambda t, x: (lambda h: h + t.ff(t.norm2(h)))(x + 0 * t.att(t.norm1(x))), 2),
        ("norm2 skipped", lambda t, x: (lambda h: h + t.ff(h))(x + t.att(t.norm1(x))), 7),
        ("second half missing", lambda t, x: x + t.att(t.norm1(x)), 7),
        ("second shortcut left out", lambda t, x: t.ff(t.norm2(x + t.att(t.norm1(x)))), 10),
        ("output normalized", lambda t, x: t.norm2(pre_ln(t, x)), 10),
        # what a branch's component receives, by the rule of `steps.handed`
        ("norm1(x) normalized again by norm2", lambda t, x: (lambda h: h + t.ff(t.norm2(h)))(x + t.att(t.norm2(t.norm1(x)))), 3),
        ("the feed-forward network on x", lambda t, x: (lambda h: h + t.ff(x))(x + t.att(t.norm1(x))), 7),
        ("the feed-forward network on attention's output", lambda t, x: (lambda a: x + a + t.ff(a))(t.att(t.norm1(x))), 7),
        # norm2(h) made, and the feed-forward network handed norm1(x) in its place
        ("ff on norm1(x)", lambda t, x: (lambda h: (t.norm2(h), h + t.ff(t.norm1(x)))[1])(x + t.att(t.norm1(x))), 8),
        ("norm2 applied twice", lambda t, x: (lambda h: h + t.ff(t.norm2(t.norm2(h))))(x + t.att(t.norm1(x))), 7),
        ("norm2(h) normalized again by norm1", lambda t, x: (lambda h: h + t.ff(t.norm1(t.norm2(h))))(x + t.att(t.norm1(x))), 8),
        ("second branch replaced by h", lambda t, x: (lambda h: (t.ff(t.norm2(h)), h + h)[1])(x + t.att(t.norm1(x))), 10),
        # the same programs with nothing made and thrown away: the same steps
        ("ff on norm1(x), norm2 never run", lambda t, x: (lambda h: h + t.ff(t.norm1(x)))(x + t.att(t.norm1(x))), 8),
        ("h + h, the second half never run", lambda t, x: (lambda h: h + h)(x + t.att(t.norm1(x))), 10),
        (
            "a decoy before a scaled norm",
            lambda t, x: (t.att(x), (lambda h: h + t.ff(t.norm2(h)))(x + t.att(2 * t.norm1(x))))[1],
            3,
        ),
        (
            "the first sum's features sorted",
            lambda t, x: (lambda h: h + t.ff(t.norm2(h)))((x + t.att(t.norm1(x))).sort(-1).values),
            None,
        ),
    ],
)
def test_the_walk_names_the_step_a_forward_breaks_and_only_true_facts(parts, name, forward, step):
    found, tape, flow = walk(parts, forward)
    assert found is not None and found.step == step, (name, found)
    assert all(_holds(fact, tape, flow, parts) for fact in found.facts), found.facts
    if step is None:  # the sum was changed by an operation the grader has no name for: not "h", and no step
        assert any(isinstance(f, Received) and f.value == "h" and not f.equal for f in found.facts), found.facts


def _unrecorded(t, name, value):
    """`name` called where the grader records nothing (inside vmap, say): the run only counts it."""
    t.hidden[name] = t.hidden.get(name, 0) + 1
    with torch.no_grad():
        return t.parts[name](value)


def _second_half(t, h):
    return h + t.drop_shortcut(t.ff(t.norm2(h)))


@pytest.mark.parametrize(
    "name, forward, step",
    [
        ("norm1 unrecorded, on x squared", lambda t, x: _second_half(t, x + t.att(_unrecorded(t, "norm1", x * x))), 2),
        (
            "norm1 unrecorded, attention on half of it",
            lambda t, x: _second_half(t, x + t.att(0.5 * _unrecorded(t, "norm1", x))),
            3,
        ),
        (
            "norm1 unrecorded, attention on its tanh",
            lambda t, x: _second_half(t, x + t.att(torch.tanh(_unrecorded(t, "norm1", x)))),
            None,  # norm1 replaced by something that does not normalize, or its output changed: the values cannot tell
        ),
        (
            "norm2 unrecorded, on the sum plus x",
            lambda t, x: (lambda h: h + t.ff(_unrecorded(t, "norm2", h + x)))(x + t.att(t.norm1(x))),
            7,
        ),
        (
            "norm2 unrecorded, the feed-forward network on half of it",
            lambda t, x: (lambda h: h + t.ff(0.5 * _unrecorded(t, "norm2", h)))(x + t.att(t.norm1(x))),
            8,
        ),
        (
            "norm1 by hand, attention's one call squared on its way",
            lambda t, x: _second_half(
                t, x + (lambda a: a * a)(t.att((x - x.mean(-1, keepdim=True)) / x.std(-1, keepdim=True, unbiased=False)))
            ),
            2,
        ),
        (
            "the feed-forward network unrecorded, the sum negated on its way out",
            lambda t, x: (lambda h: -(h + _unrecorded(t, "ff", t.norm2(h))))(x + t.att(t.norm1(x))),
            10,
        ),
        (
            "the feed-forward network unrecorded, its branch squared",
            lambda t, x: (lambda h: h + _unrecorded(t, "ff", t.norm2(h)) ** 2)(x + t.att(t.norm1(x))),
            None,  # the network's input, its output or the sum: the values cannot tell
        ),
        (
            "the feed-forward network per sequence, on softplus of norm2's output",
            lambda t, x: (lambda h: h + torch.stack([t.ff(s) for s in torch.nn.functional.softplus(t.norm2(h))]))(
                x + t.att(t.norm1(x))
            ),
            8,
        ),
    ],
)
def test_the_values_name_the_step_around_an_unrecorded_or_unused_call(parts, name, forward, step):
    """A LayerNorm the grader could not record: a component that received that norm's value scaled had it from the
    norm (the edge into the component broke); one that received a value normalized token by token had a norm's
    output of something else (the norm's step). A single call whose output goes on changed is still the block's one
    account of that component's work, and outputs stacked back together are used."""
    tape, flow = run(parts, lambda t, x: (setattr(t, "hidden", {}), forward(t, x))[1])
    flow.counts = {**{c.name: sum(1 for d in tape.calls if d.name == c.name) for c in tape.calls}, **tape.hidden}
    found = Walk(flow, parts, "eval", P).first()
    assert found is not None and found.step == step, (name, found)
    assert all(_holds(fact, tape, flow, parts) for fact in found.facts), found.facts


def test_pre_ln_in_any_arrangement_of_its_values_has_no_divergence(parts):
    def per_sequence(t, x):
        return torch.cat([pre_ln(t, x[i : i + 1]) for i in range(x.shape[0])])

    def ff_flipped(t, x):
        h = x + t.drop_shortcut(t.att(t.norm1(x)))
        return h + t.drop_shortcut(t.ff(t.norm2(h).flip(1)).flip(1))

    for forward in (pre_ln, per_sequence, ff_flipped):
        assert walk(parts, forward)[0] is None
        assert walk(parts, forward, train=True)[0] is None


def test_an_operation_the_reader_has_no_name_for_is_said_to_be_unknown_and_told_apart_by_a_change(parts):
    """tanh on attention's branch: the sum is no sum of the block's values. Without the grader's changed run no
    step is named; with it, norm2's input moved by something other than the change, which rules out a replaced
    shortcut alone but not the branch and the shortcut both changed: still no step. In train mode, where the
    student's dropout zeroed the branch, norm2 received x itself: the shortcut is right, the branch changed, step 5."""
    forward = lambda t, x: (lambda h: h + t.ff(t.norm2(h)))(  # noqa: E731
        x + torch.tanh(t.drop_shortcut(t.att(t.norm1(x))))
    )
    found, tape, flow = walk(parts, forward)
    assert found.step is None and any(isinstance(f, Received) and not f.equal for f in found.facts)
    changed = _changed_run(parts, forward, "att")
    found = walk(parts, forward, responses={"att": changed})[0]
    assert found.step is None and any(isinstance(f, Changes) and not f.exactly for f in found.facts)
    found, tape, flow = walk(parts, forward, train=True)
    assert found.step == 5 and any(isinstance(f, Dropped) and f.shortcut == "x" for f in found.facts)
    both = lambda t, x: (lambda h: h + t.ff(t.norm2(h)))(  # noqa: E731
        torch.tanh(x) + torch.tanh(t.drop_shortcut(t.att(t.norm1(x))))
    )
    assert walk(parts, both, train=True)[0].step is None  # the shortcut is not x where the branch was dropped
    replaced = lambda t, x: (lambda h: h + t.ff(t.norm2(h)))(torch.tanh(x) + t.att(t.norm1(x)))  # noqa: E731
    found = walk(parts, replaced, responses={"att": _changed_run(parts, replaced, "att")})[0]
    assert found.step == 1 and any(isinstance(f, Changes) and f.exactly for f in found.facts)


def _changed_run(parts, forward, component: str) -> dict:
    """The eval run with `component`'s outputs moved by a fixed amount, as the `respond` question records it."""
    bumped = dict(parts)
    inner = parts[component]
    bumped[component] = lambda v: inner(v) + 0.3
    tape, flow = run(bumped, forward)
    return {"y": flow.y, "calls": [{"name": c.name, "input": c.input, "output": c.output} for c in tape.calls]}


def test_train_mode_names_the_dropout_steps(parts):
    missing = lambda t, x: (lambda h: h + t.drop_shortcut(t.ff(t.norm2(h))))(x + t.att(t.norm1(x)))  # noqa: E731
    assert walk(parts, missing, train=True)[0].step == 4
    assert walk(parts, missing)[0] is None  # invisible in eval mode

    def other_p(t, x):
        h = x + torch.nn.functional.dropout(t.att(t.norm1(x)), 0.2, True)
        t.calls.append(
            SimpleNamespace(
                name="dropout",
                kind="function",
                input=t.calls[-1].output,
                output=(h - x).numpy().astype(np.float64),
                variant=None,
                index=len(t.calls),
            )
        )
        return h + t.drop_shortcut(t.ff(t.norm2(h)))

    found = walk(parts, other_p, train=True)[0]
    assert found.step == 4 and any(isinstance(f, Dropout) and abs(f.scale - 1.25) < 1e-3 for f in found.facts)
    on_shortcut = lambda t, x: (lambda h: h + t.drop_shortcut(t.ff(t.norm2(h))))(  # noqa: E731
        t.drop_shortcut(x) + t.drop_shortcut(t.att(t.norm1(x)))
    )
    assert walk(parts, on_shortcut, train=True)[0].step == 5


def _by_hand(t):
    return t * (torch.rand_like(t) >= 0.9) / 0.1


@pytest.mark.parametrize("half", ["att", "ff"])
def test_a_dropout_written_by_hand_is_not_told_through_the_other_half_s_call(parts, half):
    """One branch's output is masked by hand at another rate; drop_shortcut's one call is the other half's, which
    received its own branch as Pre-LN does: no fact about the hand-written dropout may cite that call."""
    first, second = (_by_hand, None) if half == "att" else (None, _by_hand)

    def forward(t, x):
        a = t.att(t.norm1(x))
        h = x + (first(a) if first else t.drop_shortcut(a))
        f = t.ff(t.norm2(h))
        return h + (second(f) if second else t.drop_shortcut(f))

    tape, flow = run(parts, forward, train=True)
    found = Walk(flow, parts, "train", P).first()
    assert found is not None and found.step == (4 if half == "att" else 9), found
    assert not any(getattr(fact, "component", None) == "drop_shortcut" for fact in found.facts), found.facts
    assert any(isinstance(fact, Unreceived) for fact in found.facts), found.facts  # what the values show, said
    assert all(_holds(fact, tape, flow, parts) for fact in found.facts), found.facts
