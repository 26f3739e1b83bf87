"""The rubric's parts a difference on the grader's sweep over the space of valid inputs costs (`reading/sweep.py`
finds the differences, `Evidence.swept` applies them)."""

from __future__ import annotations

from autograder.engine.reading.sweep import Miss

# The rubric's parts a difference on the sweep costs (`reading/sweep.py`), by the call's region, mode and what
# differed. Anything in eval mode on the float64 block, and an error there in either mode, costs "float64 after
# .double()" alone (as the float64 question always has); in train mode the float64 block's values are compared at
# float32's precision, as the dropouts' part.
# Otherwise an output that differs in eval mode costs "output matches a Pre-LN block" and the robustness part of the
# region the call stands for; one in train mode costs the dropout part of the half it shows in (both where it shows
# in neither alone); a gradient, the gradient part of its mode.
ORDER_PART = "output matches a Pre-LN block"
REGION_PARTS = {
    "length": "batch of one, short context",
    "batch": "a batch of five sequences",
    "dtype": "float64 after .double()",
    "calls": "the same output on every call, input left unchanged (eval mode)",
}
DROPOUT_PARTS = {"att": "dropout on attention's output", "ff": "dropout on the feed-forward output"}
GRADIENT_PARTS = {"eval": "the block input's gradient (eval mode)", "train": "gradients flow through every path (train mode)"}


def sweep_parts(miss: Miss) -> tuple:
    """The parts a difference on the sweep costs (see above)."""
    if dict(miss.input).get("dtype") == "float64" and (miss.mode == "eval" or miss.what == "error"):
        return (REGION_PARTS["dtype"],)
    if miss.what == "gradient":
        return (GRADIENT_PARTS[miss.mode],)
    if miss.mode == "eval":
        return tuple(part for part in (ORDER_PART, REGION_PARTS.get(miss.region)) if part)
    return (DROPOUT_PARTS[miss.half],) if miss.half else tuple(DROPOUT_PARTS.values())
