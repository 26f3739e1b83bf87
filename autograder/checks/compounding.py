"""Task 2: magnitudes by formula and by autograd against exact values, on the grader's own factors and depths,
and the classification at its boundaries. The magnitude after layer k is |factor| ** k: a negative factor
flips the sign every layer but shrinks or grows the size like its absolute value. Common mistakes get named:
an extra or missing layer, sums instead of products, rounding, float32, a formula where autograd was asked."""
from __future__ import annotations

import math

from . import PASS, Evidence, error_text, fail

NAME = "compounding"
FORMULA, AUTOGRAD, CLASSIFY = "magnitude_by_formula", "magnitude_by_autograd", "classify_factor"


def exact(factor: float, n: int) -> list[float]:
    return [abs(factor) ** k for k in range(1, n + 1)]


def expected_label(factor: float) -> str:
    return "vanishing" if abs(factor) < 1 else "exploding" if abs(factor) > 1 else "stable"


def _same(values, target, rel: float) -> bool:
    return len(values) == len(target) and all(math.isclose(v, t, rel_tol=rel, abs_tol=0.0) for v, t in zip(values, target))


def why_wrong(values: list[float], factor: float, n: int) -> str:
    target = exact(factor, n)
    shown = f"for factor {factor:g} over {n} layers"
    if len(values) == n + 1 and _same(values[1:], target, 1e-9):
        return f"{shown} you returned {n + 1} values: the list starts after layer 1, not with the starting value"
    if len(values) == n - 1:
        return f"{shown} you returned {n - 1} values: one per layer is {n}"
    if factor < 0 and _same(values, [factor ** k for k in range(1, n + 1)], 1e-9):
        return (f"{shown} some values are negative: a magnitude is a size, |factor| ** k (the sign flips every layer, "
                "the size does not)")
    if _same(values, [abs(factor) ** k for k in range(0, n)], 1e-9):
        return f"{shown} each value is one layer behind: after layer k the magnitude is |factor| ** k"
    if _same(values, [abs(factor) ** k for k in range(2, n + 2)], 1e-9):
        return f"{shown} each value is one layer ahead: after layer k the magnitude is |factor| ** k"
    if len(values) == n and any(_same(values, cand, 1e-9) for cand in
                                ([factor * k for k in range(1, n + 1)], [1 + factor * k for k in range(1, n + 1)],
                                 [1 + (factor - 1) * k for k in range(1, n + 1)])):
        return f"{shown} the values grow by adding the factor, not by multiplying: layers compound as a product"
    for digits in range(10):
        if _same(values, [round(t, digits) for t in target], 1e-12):
            return f"{shown} the values are rounded to {digits} decimals; return them exactly (no round())"
    if _same(values, target, 1e-5):
        return f"{shown} the values are slightly off: compute in float64 (float32 keeps only about 7 digits)"
    if len(values) != n:
        return f"{shown} expected {n} values, got {len(values)}"
    k = next(i for i, (v, t) in enumerate(zip(values, target)) if not math.isclose(v, t, rel_tol=1e-9))
    return f"{shown} the value after layer {k + 1} should be {target[k]!r}, got {values[k]!r}"


def _judge_chains(chains: list[dict], key: str, function: str):
    for case in chains:
        attempt = case[key]
        if "error" in attempt:
            return fail(f"{function}({case['factor']:g}, {case['n']}): {error_text(attempt, function)}.")
        if not _same(attempt["value"], exact(case["factor"], case["n"]), 1e-9):
            return fail(f"{function}: {why_wrong(attempt['value'], case['factor'], case['n'])}.")
        if key == "autograd" and case["autograd_calls"] == 0:
            return fail(f"{function}({case['factor']:g}, {case['n']}) returned the right values without asking autograd "
                        "(torch.autograd.grad or .backward() never ran): measure them through a chain of scalings, "
                        "do not compute the formula again.")
    return PASS


def evaluate(evidence: Evidence) -> dict:
    observation = evidence.obs("compounding")
    if not observation["ok"]:
        message = error_text(observation, "Task 2")
        return {FORMULA: fail(message), AUTOGRAD: fail(message), CLASSIFY: fail(message)}
    outcomes = {FORMULA: _judge_chains(observation["chains"], "formula", FORMULA),
                AUTOGRAD: _judge_chains(observation["chains"], "autograd", AUTOGRAD), CLASSIFY: PASS}
    for factor, case in zip(evidence.plan.factors, observation["classify"]):
        if "error" in case:
            outcomes[CLASSIFY] = fail(f"classify_factor({factor:g}): {error_text(case, CLASSIFY)}.")
            break
        if case["value"].strip().lower() != expected_label(factor):
            outcomes[CLASSIFY] = fail(
                f"classify_factor({factor:g}) returned {case['value']!r}; expected {expected_label(factor)!r}. What "
                "counts is the size of the factor, |factor|: below 1 it vanishes, above 1 it explodes, exactly 1 is "
                "stable (a negative factor only flips the sign).")
            break
    return outcomes
