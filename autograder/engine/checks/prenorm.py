"""Pre-LN placement: norm1 feeds attention, norm2 feeds the feed-forward network, nothing is normalized again.

The LayerNorms carry random, different scales and shifts, so swapped, reused or parameter-free norms show,
and near misses (another eps, the unbiased variance, another axis) are recognised as such. Each half is
judged on the value it started from, so a wrong shortcut does not cost these points. A branch that received its
LayerNorm's recorded output (Pre-LN's equation of the branch's step, `engine.ledger`) is fed by it, whatever else
the forward does.
"""

from __future__ import annotations

from autograder.engine.ledger import fed_by
from autograder.engine.reading.dataflow import standardized
from autograder.engine.steps import HALVES
from . import PASS, Evidence, error_text, fail, norm_params, times_ran

NAME = "forward_prenorm"
NORM1, NORM2, EXTRA = ("norm1 feeds attention", "norm2 feeds the feed-forward network", "no extra normalization")


def _extra(evidence: Evidence):
    if evidence.gives_reference("eval"):
        return PASS
    flow = evidence.flows.get("eval")
    branches = [flow.first(side) for side in ("att", "ff")] if flow is not None else [None]
    own = [fed_by(flow, branch) if branch is not None else None for branch in branches]  # the norm in front of each
    if None in own:
        return fail(
            "Not credited: this part counts only when attention and the feed-forward network each receive a normalized value."
        )
    extra = [s for s in flow.live if s.is_norm and s.key not in {norm.key for norm in own}]
    # a norm the forward called once is no extra one, however the reading split it (a call on a padded tensor, say)
    extra = [s for s in extra if not (s.name in ("norm1", "norm2") and times_ran(flow, s.name) <= 1)]
    if extra:
        repeated = [s.name for s in extra if s.name in ("norm1", "norm2")]
        what = f"{repeated[0]} ran more than once" if repeated else f"an extra {extra[0].name} ran"
        return fail(
            f"{what} in one forward pass (on {flow.describe(extra[0].takes)}): each LayerNorm is used "
            "exactly once, in front of its branch."
        )
    y = evidence.obs("eval")["y"]
    if any(standardized(y, *params) for params in ((None, None), norm_params(evidence, "norm1"), norm_params(evidence, "norm2"))):
        return fail(
            "The block's output is itself normalized: a Pre-LN block returns the second sum, with no "
            "LayerNorm after the additions."
        )
    return evidence.gate(PASS)


def evaluate(evidence: Evidence) -> dict:
    run = evidence.obs("eval")
    if not run["ok"]:
        message = error_text(run)
        return {NORM1: fail(message), NORM2: fail(message), EXTRA: fail(message)}
    return {
        NORM1: evidence.half_part("eval", "att", "", ((HALVES["att"].branch,),)),
        NORM2: evidence.half_part("eval", "ff", "", ((HALVES["ff"].branch,),)),
        EXTRA: _extra(evidence),
    }
