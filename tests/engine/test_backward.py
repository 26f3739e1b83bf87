"""Pre-LN's equations run backward (`diagnosis.backward`): on a forward whose values are Pre-LN's, the gradients the
child kept at each boundary say where the gradient left the chain rule, and by what factor.

The generator knows the truth by construction: it puts one gradient-only operation of the fuzzer's (a detach, half
the gradient, the gradient reversed) on one edge of Pre-LN's dataflow, and measures that operation's factor itself,
with autograd on a number. The boundary it expects named is the edge's, written from the lesson's dataflow: where
the value the edge carries is the term of one sum, the value that edge starts from; where it is a term of two (x,
h), that value along the edge. A right forward, rewritten in value-keeping ways, names nothing.
"""

from __future__ import annotations

import dataclasses
import random

import pytest
import torch
from hypothesis import given, settings, strategies as st

from autograder.course import kit
from autograder.course.notebook import read_cells, student_code
from autograder.engine.diagnosis.backward import gradient_cause
from autograder.engine.facts import Backward
from autograder.engine.questions.cells import load_cells
from autograder.engine.questions.plan import Plan
from autograder.engine.questions.probes import Probing, run_probe
from autograder.engine.reading.answers import read_answer
from autograder.engine.tolerance import tolerance
from autograder.grading.reference import expected_shapes, trusted_parts
from autograder.sandbox.inside.protocol import encode_observation
from catalog.build import submission
from catalog.fuzz import EDGE_KEYS, WRONG_OPS, draw, render
from catalog.oracle import Run

pytestmark = pytest.mark.quick

GRADIENT_OPS = [op for op in WRONG_OPS if op.shows == "gradients"]
# where a gradient-only change on each edge of Pre-LN's dataflow shows first, from the output back
EXPECTED = {
    ("x", "n1"): "to x through norm1",
    ("n1", "a"): "through norm1(x)",
    ("a", "d1"): "through att(norm1(x))",
    ("x", "h"): "to x along the first shortcut",
    ("d1", "h"): "through drop_shortcut(att(norm1(x)))",
    ("h", "n2"): "to h through norm2",
    ("n2", "f"): "through norm2(h)",
    ("f", "d2"): "through ff(norm2(h))",
    ("h", "y"): "to h along the second shortcut",
    ("d2", "y"): "through drop_shortcut(ff(norm2(h)))",
    ("y", "out"): "from what your forward returns",
}
PLAN = Plan.draw(11)


def _factor(code: str) -> float:
    """The operation's own gradient factor, measured: d op(t) / dt at a number."""
    t = torch.tensor(1.7, dtype=torch.float64, requires_grad=True)
    out = eval(code, {"torch": torch, "t": t})
    return float(torch.autograd.grad(out, t)[0]) if out.requires_grad else 0.0


def _cause(forward: str, mode: str, forged=None) -> Backward | None:
    """The cause the grader reads from the child's `mode` run of `forward`, as the sandbox would send it (`forged`:
    changes the run as read first)."""
    public, errors = load_cells(kit.KIT.public_code())
    namespace, errors = load_cells(student_code(read_cells(_written(forward))))
    assert not errors, errors
    probing = Probing(namespace, public, PLAN)
    parts = trusted_parts(kit.KIT, PLAN)
    run = read_answer(mode, encode_observation(run_probe(mode, probing)), expected_shapes(PLAN, parts))
    assert run["ok"], run
    if forged is not None:
        forged(run)
    readout = probing.randn(run["y"].shape, PLAN.readout).numpy()
    return gradient_cause(run, probing.x().double().numpy(), parts, readout, tolerance("cpu"), mode)


def _said(forward: str, mode: str, forged=None) -> str | None:
    found = _cause(forward, mode, forged)
    return None if found is None else found.text()


def _written(forward: str):
    import tempfile
    from pathlib import Path

    path = Path(tempfile.mkdtemp()) / "submission.py"
    path.write_text(submission(forward=forward))
    return path


@pytest.mark.parametrize("edge", EDGE_KEYS, ids="->".join)
@pytest.mark.parametrize("op", GRADIENT_OPS, ids=lambda op: op.name)
def test_a_gradient_changed_on_one_edge_is_said_there_with_its_factor(edge, op):
    """Every edge, every gradient-only operation, both modes: the space is small enough to take whole."""
    factor, where = _factor(op.code), EXPECTED[edge]
    expected = (
        f"no gradient flows back {where}"
        if factor == 0
        else (f"{factor:.3g} times the gradient the chain rule gives flows back {where}")
    )
    forward = render({edge: op.code}, {}, {})
    oracle = Run(forward)
    for mode in ("eval", "train"):
        fact = _cause(forward, mode)
        assert fact is not None and fact.text() == expected, (edge, op.name, mode, fact)
        assert oracle.check(fact.to_dict()) is True, fact  # the oracle's own Pre-LN, so changed, gives its gradients
        other = dataclasses.replace(fact, factor=fact.factor + 0.5)
        assert oracle.check(other.to_dict()) is False, other  # and with another factor it does not


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["eval", "train"]))
def test_a_right_forward_names_no_cause(seed, mode):
    forward = draw(random.Random(seed), wrong=0)
    assert _said(forward.source, mode) is None, forward.source


def test_a_forward_with_other_values_names_no_cause():
    """Only a run whose values are Pre-LN's is read backward: a shortcut doubled and detached is unknown."""
    forward = (
        "def forward(self, x):\n    h = 2 * x.detach() + self.drop_shortcut(self.att(self.norm1(x)))\n"
        "    return h + self.drop_shortcut(self.ff(self.norm2(h)))\n"
    )
    assert _said(forward, "eval") is None


PRE_LN = render({}, {}, {})


def _zero_last_gradient(run: dict) -> None:
    run["calls"][-1]["grad_out"] = 0 * run["calls"][-1]["grad_out"]


def _double_feed_forward_gradients(run: dict) -> None:
    run["param_grads"] = {name: 2 * g if name.startswith("ff.") else g for name, g in run["param_grads"].items()}


@pytest.mark.parametrize("forged", [_zero_last_gradient, _double_feed_forward_gradients])
def test_a_cause_is_said_only_where_the_grader_replayed_it(forged):
    """The child's word is never evidence: a boundary gradient it claims names a cause only where Pre-LN with that
    gradient changed, run by the grader, gives the gradients the run reported. A right run with its last boundary's
    gradient zeroed, and a detached branch whose feed-forward gradients are doubled, name nothing."""
    assert _said(PRE_LN, "eval") is None and _said(PRE_LN, "eval", _zero_last_gradient) is None
    detached = render({("d1", "h"): "t.detach()"}, {}, {})
    assert _said(detached, "eval") == "no gradient flows back through drop_shortcut(att(norm1(x)))"
    assert _said(detached, "eval", forged) is None
