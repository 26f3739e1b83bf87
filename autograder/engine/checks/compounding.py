"""Task 2: magnitudes by formula and by autograd against the grader's own values, and the classification at its
boundaries.

* `magnitude_by_formula(factor, n)` is checked on the grader's factors against |factor| ** k.
* `magnitude_by_autograd(layer, n)` is handed the chain's per-layer function. Besides constant factors, the grader
  draws layers whose derivative the lesson never gives (harness/chains.py) and computes their magnitudes itself,
  by the chain rule. Only an exact derivative of the chain agrees with it: a formula, the chain's values, a
  throw-away `backward()` or a finite difference does not. Nothing the child says about how it got its numbers
  counts.
* `classify_factor` on factors at, below and above 1 in size, negative ones too.

Common mistakes get named: an extra or missing layer, sums instead of products, rounding, float32, the chain's
values instead of its gradient, one fixed factor where the factor changes from layer to layer."""

from __future__ import annotations

import math

import numpy as np

from autograder.engine.questions import chains
from . import PASS, Evidence, error_text, fail

NAME = "compounding"
FORMULA, AUTOGRAD, CLASSIFY = "magnitude_by_formula", "magnitude_by_autograd", "classify_factor"
EXACT = 1e-10  # relative: float64 autograd agrees with the chain rule to about 1e-12 on the grader's layers


_DERIVATIVES = {  # operation of harness/chains.py -> (its value, its derivative), in plain floating point
    "erf": (math.erf, lambda u: 2 / math.sqrt(math.pi) * math.exp(-u * u)),
    "tanh": (math.tanh, lambda u: 1 - math.tanh(u) ** 2),
    "atan": (math.atan, lambda u: 1 / (1 + u * u)),
    "sigmoid": (lambda u: 1 / (1 + math.exp(-u)), lambda u: math.exp(-u) / (1 + math.exp(-u)) ** 2),
    "sin": (math.sin, math.cos),
}


def by_hand(spec: tuple, n: int) -> tuple[list[float], list[float]]:
    """The chain's exact magnitudes |d y_k / d x| for k = 1..n, from x = 1 (chain rule, float64), and its values |y_k|.
    Parent-side only: nothing in the sandboxed child imports this module."""
    a, terms = spec
    y, gradient, magnitudes, values = chains.START, 1.0, [], []
    for _ in range(n):
        slope = a + sum(b * c * _DERIVATIVES[op][1](c * y) for op, b, c in terms)
        value = a * y
        for op, b, c in terms:
            value = value + b * _DERIVATIVES[op][0](c * y)
        gradient, y = gradient * slope, value
        magnitudes.append(abs(gradient))
        values.append(abs(y))
    return magnitudes, values


def exact(factor: float, n: int) -> list[float]:
    return [abs(factor) ** k for k in range(1, n + 1)]


def expected_label(factor: float) -> str:
    return "vanishing" if abs(factor) < 1 else "exploding" if abs(factor) > 1 else "stable"


def _in_float32(values: list[float], target: list[float]) -> bool:
    """Every value is a float32 number (a float64 result lands on one about once in 2**29) and each is within float32's
    reach of the grader's: 10 %, as the chain's fast sine moves a float32 slope by up to 4e-4 a layer (3e-2 after 12
    layers, the most a chain has, over 3,000 drawn chains)."""
    return all(math.isfinite(v) and float(np.float32(v)) == v for v in values) and _same(values, target, 0.1)


def _same(values, target, rel: float) -> bool:
    return len(values) == len(target) and all(math.isclose(v, t, rel_tol=rel, abs_tol=0.0) for v, t in zip(values, target))


def _shape_of_the_list(values: list[float], target: list[float], n: int, shown: str) -> str | None:
    """A list one entry too long or too short, or shifted by one layer."""
    if len(values) == n + 1 and _same(values[1:], target, EXACT):
        return f"{shown} you returned {n + 1} values: the list starts after layer 1, not with the starting value"
    if len(values) == n - 1:
        return f"{shown} you returned {n - 1} values: one per layer is {n}"
    if len(values) != n:
        return f"{shown} expected {n} values, got {len(values)}"
    return None


def _first_difference(values: list[float], target: list[float], shown: str) -> str:
    k = next(i for i, (v, t) in enumerate(zip(values, target)) if not math.isclose(v, t, rel_tol=EXACT))
    return f"{shown} the value after layer {k + 1} should be {target[k]!r}, got {values[k]!r}"


def why_wrong(values: list[float], factor: float, n: int) -> str:
    target = exact(factor, n)
    shown = f"for factor {factor:g} over {n} layers"
    found = _shape_of_the_list(values, target, n, shown)
    if found:
        return found
    if factor < 0 and _same(values, [factor**k for k in range(1, n + 1)], EXACT):
        return (
            f"{shown} some values are negative: a magnitude is a size, |factor| ** k (the sign flips every layer, "
            "the size does not)"
        )
    if _same(values, [abs(factor) ** k for k in range(0, n)], EXACT):
        return f"{shown} each value is one layer behind: after layer k the magnitude is |factor| ** k"
    if _same(values, [abs(factor) ** k for k in range(2, n + 2)], EXACT):
        return f"{shown} each value is one layer ahead: after layer k the magnitude is |factor| ** k"
    steps = range(1, n + 1)
    if any(
        _same(values, cand, EXACT)
        for cand in ([factor * k for k in steps], [1 + factor * k for k in steps], [1 + (factor - 1) * k for k in steps])
    ):
        return f"{shown} the values grow by adding the factor, not by multiplying: layers compound as a product"
    for digits in range(10):
        if _same(values, [round(t, digits) for t in target], 1e-12):
            return f"{shown} the values are rounded to {digits} decimals; return them exactly (no round())"
    if _same(values, target, 1e-5) or _in_float32(values, target):
        return f"{shown} the values are slightly off: compute in float64 (float32 keeps only about 7 digits)"
    return _first_difference(values, target, shown)


def why_autograd_wrong(values: list[float], spec: tuple, n: int) -> str:
    target, chain_values = by_hand(spec, n)
    shown = f"for the layer y -> {chains.describe(spec)} over {n} layers"
    found = _shape_of_the_list(values, target, n, shown)
    if found:
        return found
    if not _same(chain_values, target, 1e-6) and _same(values, chain_values, 1e-6):
        return (
            f"{shown} you returned the chain's values |y|, not its gradient: after each layer record the size of "
            "the gradient of y with respect to the starting x"
        )
    for first in {target[0], chain_values[0]}:
        if not _same([first**k for k in range(1, n + 1)], target, 1e-6) and _same(
            values, [first**k for k in range(1, n + 1)], 1e-6
        ):
            return (
                f"{shown} you multiplied one fixed factor ({first:.6g}) layer after layer, but this layer's factor "
                "changes with the value it receives: measure the gradient through the whole chain with autograd"
            )
    local = [target[0]] + [after / before for before, after in zip(target, target[1:])]
    if not _same(local, target, 1e-6) and _same(values, local, 1e-6):
        return (
            f"{shown} you recorded each layer's own factor, but the magnitude after layer k is the product of the "
            "factors of layers 1 to k: the gradient of the current y with respect to the starting x"
        )
    if _in_float32(values, target) or (
        not math.isclose(values[0], target[0], rel_tol=EXACT) and math.isclose(values[0], target[0], rel_tol=1e-5)
    ):
        return (
            f"{shown} the values are close but not exact: let autograd differentiate in float64 (float32, or an "
            "estimate of the slope from nearby values, keeps only about 6 or 7 digits)"
        )
    return _first_difference(values, target, shown)


LAYER_HINT = (
    " magnitude_by_autograd receives the layer itself, a function of a tensor: apply it with y = layer(y) "
    "(not a number to multiply by)"
)


def _judge(cases: list[dict], function: str, target, explain, call) -> object:
    for case in cases:
        if "error" in case:
            text = error_text(case, function)
            hint = LAYER_HINT if function == AUTOGRAD and "'function'" in text else ""
            return fail(f"{function}({call(case)}): {text}.{hint}")
        if not _same(case["value"], target(case["case"], case["n"]), EXACT):
            return fail(f"{function}: {explain(case['value'], case['case'], case['n'])}.")
    return PASS


def evaluate(evidence: Evidence) -> dict:
    observation = evidence.obs("compounding")
    if not observation["ok"]:
        message = error_text(observation, "Task 2")
        return {FORMULA: fail(message), AUTOGRAD: fail(message), CLASSIFY: fail(message)}
    outcomes = {
        FORMULA: _judge(observation["formula"], FORMULA, exact, why_wrong, lambda c: f"{c['case']:g}, {c['n']}"),
        AUTOGRAD: _judge(
            observation["autograd"],
            AUTOGRAD,
            lambda spec, n: by_hand(spec, n)[0],
            why_autograd_wrong,
            lambda c: f"<the layer y -> {chains.describe(c['case'])}>, {c['n']}",
        ),
        CLASSIFY: PASS,
    }
    for factor, case in zip(evidence.plan.factors, observation["classify"]):
        if "error" in case:
            outcomes[CLASSIFY] = fail(f"classify_factor({factor:g}): {error_text(case, CLASSIFY)}.")
            break
        if case["value"].strip().lower() != expected_label(factor):
            outcomes[CLASSIFY] = fail(
                f"classify_factor({factor:g}) returned {case['value']!r}; expected {expected_label(factor)!r}. What "
                "counts is the size of the factor, |factor|: below 1 it vanishes, above 1 it explodes, exactly 1 is "
                "stable (a negative factor only flips the sign)."
            )
            break
    return outcomes
