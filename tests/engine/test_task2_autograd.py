"""Task 2's autograd part is paid on values only a derivative of the chain can give: the grader's own magnitudes
agree with real autograd on every layer it draws and are far from any estimate of the slope, and every forged
`magnitude_by_autograd` (tests/catalog/forged_task2.py), graded through the sandbox, gains nothing over leaving the
function unfinished."""

import json
import math
import random

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from autograder.engine.checks.compounding import EXACT, by_hand, why_autograd_wrong
from autograder.engine.questions import chains
from autograder.engine.questions.plan import Plan
from autograder.grading.reference import reference_namespace
from catalog.build import submission
from catalog.forged_task2 import FORGED, UNFINISHED
from tiers import quick_sample

pytestmark = pytest.mark.quick  # in `make test-quick`: this wing's fast tier

DRAWN = [(chains.draw(random.Random(i)), random.Random(-i).randint(5, 12)) for i in range(200)]


def _worst(values, target):
    return max(abs(v - t) / abs(t) for v, t in zip(values, target))


@pytest.mark.slow  # the quick tier runs the others
def test_the_graders_magnitudes_agree_with_autograd_on_every_drawn_layer():
    measure = reference_namespace()["magnitude_by_autograd"]
    worst = max(_worst(measure(chains.torch_layer(spec), n), by_hand(spec, n)[0]) for spec, n in DRAWN)
    assert worst < EXACT / 10, worst


def test_no_finite_difference_gets_a_drawn_chain_right():
    """Whatever fixed step a central difference takes, it misses some magnitude of every drawn chain by more than
    the grader allows (the tiny fast sine in each layer moves the slope far more than the values)."""

    def central_difference(spec, n, h):
        layer = chains.torch_layer(spec)

        def chain(start, k):
            y = torch.tensor(start, dtype=torch.float64)
            for _ in range(k):
                y = layer(y)
            return y.item()

        return [abs(chain(1 + h, k) - chain(1 - h, k)) / (2 * h) for k in range(1, n + 1)]

    for spec, n in DRAWN[:40]:
        target = by_hand(spec, n)[0]
        for h in (1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9):
            assert _worst(central_difference(spec, n, h), target) > EXACT, (chains.describe(spec), h)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 12))
@example(seed=112, n=3)  # shrunk: its first float32 value matches to 6e-11
def test_autograd_in_float32_is_named_on_every_drawn_chain(seed, n):
    """A magnitude_by_autograd run in float32 is told to use float64, whatever the chain: its values are float32
    numbers, and the first of them can match the grader's to 1e-10 by chance (shrunk from a CI run). The same answer
    in float64 is right."""
    spec = chains.draw(random.Random(seed))

    def measured(dtype):
        x = torch.tensor(1.0, dtype=dtype, requires_grad=True)
        y, out, layer = x, [], chains.torch_layer(spec)
        for _ in range(n):
            y = layer(y)
            out.append(torch.autograd.grad(y, x, retain_graph=True)[0].abs().item())
        return out

    target = by_hand(spec, n)[0]
    assert _worst(measured(torch.float64), target) < EXACT
    assert "float64" in why_autograd_wrong(measured(torch.float32), spec, n)


def test_the_drawn_layers_keep_the_magnitudes_in_a_comparable_range():
    for spec, n in DRAWN:
        magnitudes, values = by_hand(spec, n)
        assert all(1e-6 < m < 1e4 for m in magnitudes) and all(math.isfinite(v) for v in values)
        assert magnitudes != values  # the chain's values are never its gradient


def test_a_plan_keeps_its_layers_through_json():
    plan = Plan.draw(12345)
    again = Plan.from_dict(json.loads(json.dumps(plan.to_dict())))
    assert again.layers == plan.layers and len(plan.layers) == 16
    assert sum(not terms for (_, terms), _ in plan.layers) == 12  # the constant factors of the formula part, and more
    assert Plan.draw(12345).layers == plan.layers != Plan.draw(12346).layers


@pytest.mark.parametrize("seed", [1, 2, 12345, 2**31 - 1])
def test_every_function_is_asked_over_its_whole_domain(seed):
    """Factors of 0, 1 and -1, a tiny and a huge magnitude, depths of 0 and 1, for every function that takes them."""
    plan = Plan.draw(seed)
    constants = [(spec[0], n) for spec, n in plan.layers if not spec[1]]
    for cases in (list(plan.chains), constants):
        factors = {factor for factor, n in cases if n > 0}
        assert {0.0, 1.0, -1.0} <= factors
        assert any(0 < abs(f) < 1e-2 for f in factors) and any(abs(f) > 1e2 for f in factors)
        assert {0, 1} <= {n for _, n in cases}
    assert {0.0, 1.0, -1.0} <= set(plan.factors)
    assert any(0 < abs(f) < 1e-2 for f in plan.factors) and any(abs(f) > 1e2 for f in plan.factors)


@pytest.fixture(scope="module")
def unfinished_score():
    scores = {}

    def score(grade_source):
        if "total" not in scores:
            result = grade_source(submission(task2=UNFINISHED))
            scores["total"] = result.score
            scores["compounding"] = next(c for c in result.checks if c.check == "compounding").points
        return scores

    return score


@pytest.mark.parametrize("name", quick_sample(sorted(FORGED), every=8))
def test_a_forged_magnitude_by_autograd_gains_nothing(grade_source, unfinished_score, name):
    """Through the real sandbox (`grade_source`): a forger patches the grader's own modules where it runs, which
    in the test's process would be the grader's, not a child's; and its honest self is graded the same way."""
    honest = unfinished_score(grade_source)
    result = grade_source(submission(task2=FORGED[name]))
    check = next(c for c in result.checks if c.check == "compounding")
    autograd = next(s for s in check.subtests if s.name == "magnitude_by_autograd")
    assert not autograd.passed and autograd.points == 0, autograd.message
    assert check.points <= honest["compounding"] and result.score <= honest["total"]
    assert not result.grader_errors
