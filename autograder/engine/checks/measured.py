"""The parts the grader judges without knowing what the block should give (the answers of `questions/measured.py`).

Where a block neither gives Pre-LN's values nor can be replayed, the gradient and robustness parts used to fail
with "the grader cannot compute...": the grader's failure, charged to the student. Two things hold of any block
whatever it computes, and these judges check them on values the grader asked for:

* `derivative`: the gradients autograd reports are the derivative of what the forward returns. The read-out loss,
  measured on the input (or every component's parameters) moved a small step each way along a direction the
  grader drew, changes at the rate the gradients give. Two of three step sizes must agree on that rate first: a
  step that crosses a jump (a rounding, a kink) disagrees, and where no two agree nothing is judged.
* `same_function`: a block computes one function of each sequence, whatever batch it comes in and in float64 too,
  and its tokens see only earlier tokens: a shorter sequence, a longer batch and float64 give what the eval run
  gave for the same sequences and tokens. A second call on the same tensor gives the first call's output.
"""

from __future__ import annotations

import numpy as np

from autograder.engine.questions.measured import DIRECTIONS, REPEATED, STEPS, directions
from autograder.engine.questions.plan import SHORT
from . import Evidence, Outcome, PASS, difference, error_text, fail

ROUNDING = 1e-13  # float64's rounding of a loss (2.2e-16 of it), with room, over the step: the slope's noise floor
SLOPE_RTOL = 1e-6  # of |gradient| (directions have unit length): float64 central differences agree to ~1e-9 of it


def derivative(evidence: Evidence, mode: str, which: str, why: str) -> Outcome:
    """`which`: "input", "params" or "all" (see `gradients._gradients`); `why`: why the grader cannot compute the
    gradients itself."""
    label = f"in {mode} mode"
    answer = evidence.obs("derivative")
    cannot = f"The gradients {label} cannot be checked: {why}"
    if not answer["ok"]:
        return fail(f"{cannot}, and {error_text(answer, 'your block in float64')}.")
    run = answer[mode]
    shapes = {"x": run["x_grad"].shape, **{name: grad.shape for name, grad in run["param_grads"].items()}}
    drawn = directions(shapes, evidence.plan, mode)
    wrong, unknown = [], []
    for direction in {"input": ("input",), "params": ("parameters",)}.get(which, DIRECTIONS):
        if direction == "input":
            pairs = [(run["x_grad"], drawn["input"].numpy())]
        else:
            pairs = [(run["param_grads"][name], value.numpy()) for name, value in drawn["parameters"].items()]
        autograd = float(sum(np.sum(grad * value) for grad, value in pairs))
        size = float(np.sqrt(sum(np.sum(grad * grad) for grad, _ in pairs)))  # the directions have unit length
        slopes = [(plus - minus) / (2 * step) for (plus, minus), step in zip(run["moved"][direction], STEPS)]
        losses = [abs(value) for pair in run["moved"][direction] for value in pair]
        tolerance = SLOPE_RTOL * (size + min(map(abs, slopes))) + ROUNDING * max(losses, default=0.0) / min(STEPS)
        agreed = [a for a, b in ((0, 1), (1, 2), (0, 2)) if abs(slopes[a] - slopes[b]) <= tolerance]
        if not np.all(np.isfinite([*slopes, autograd])) or not agreed:
            unknown.append(direction)
        elif abs(slopes[agreed[0]] - autograd) > tolerance:
            wrong.append((direction, slopes[agreed[0]], autograd))
    if wrong:
        names = {"input": ("the block input", "the block input"), "parameters": ("the components", "their parameters")}
        direction, slope, autograd = wrong[0]
        return fail(
            f"{label.capitalize()}, the gradients autograd computed for {' and '.join(names[d][0] for d, _, _ in wrong)} "
            f"are not the derivative of what your forward returns: with {names[direction][1]} moved a small step along "
            f"a direction the grader drew, the read-out loss changes at a rate of {slope:.6g}, where the gradients "
            f"give {autograd:.6g}.",
            details={f"measured slopes {mode}": [list(item) for item in wrong]},
        )
    if unknown:
        return fail(f"{cannot}, and the read-out loss does not change smoothly where the grader moved your block's inputs.")
    return PASS


def same_function(evidence: Evidence, probe: str, label: str, why: str) -> Outcome:
    """A robustness part (`probe` names it) judged on the block's own eval output, for a block whose output for
    the grader's new input the grader cannot compute (`why`)."""
    if probe == "eval_seeds":
        answer = evidence.obs(probe)
        if not answer["ok"]:
            return fail(f"{label}: {error_text(answer)}.")
        if evidence.close(answer["y_b"], answer["y_a"]):
            return PASS
        return fail(
            f"{label}: the two calls gave different outputs ({difference(answer['y_b'], answer['y_a'])}). Does your "
            "forward write into its input (x += ..., an in-place method), or draw random numbers in eval mode?"
        )
    answer = evidence.obs("same_function")
    key = {"robust_small": "short", "robust_batch": "longer"}.get(probe, "double")
    run = answer.get(key) if answer["ok"] else answer
    if not run["ok"]:
        return fail(f"{label}: {error_text(run)}.")
    y = evidence.obs("eval")["y"]
    tokens = y.shape[1] - SHORT
    if probe == "robust_small":
        got, expected = run["y"], y[:1, :tokens]
        asked = f"the first sequence of the grader's input cut to its first {tokens} tokens"
        gives = f"those {tokens} tokens of its output for the whole input (each token sees only earlier tokens)"
    elif probe == "robust_batch":
        got, expected = run["y"], np.concatenate([y, y[:REPEATED]])
        asked = f"the grader's input with its first {REPEATED} sequences again after it"
        gives = "what it gave for each of those sequences in the grader's batch"
    else:
        got, expected = run["y"], y
        asked = "the grader's input in float64, after block.double()"
        if not evidence.close(got, expected):
            return fail(f"{label}: {asked}, your block gives other values than in float32 ({difference(got, expected)}).")
        if np.array_equal(got, got.astype(np.float32).astype(np.float64)):
            return fail(f"{label}: {asked}, every value your block returned holds only float32's precision.")
        return PASS
    if evidence.close(got, expected):
        return PASS
    return fail(f"{label}: on {asked}, your block does not give {gives} ({difference(got, expected)}).")
