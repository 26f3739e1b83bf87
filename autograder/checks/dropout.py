"""Dropout placement: on each branch output, before its addition, once, with drop_shortcut's p, and only
in train mode.

Placement is read from a train-mode run with real dropout (torch's seed fixed by the grader), on the
student's own values: what each dropout received and where its result went.
"""
from __future__ import annotations

from ..anatomy import active_how
from . import PASS, Evidence, error_text, fail

NAME = "forward_dropout"
ATT, FF, EVAL = ("dropout on attention's output", "dropout on the feed-forward output", "dropout is off in eval mode")


def _eval_off(evidence: Evidence):
    train = evidence.anatomy("train").flow
    if not any(step.drops for step in train.steps):
        return fail("Not credited: your forward dropped nothing in train mode, so there is no dropout to switch off.")
    seeds, run = evidence.obs("eval_seeds"), evidence.obs("eval")
    if not seeds["ok"]:
        return fail(error_text(seeds))
    active = [step for step in evidence.anatomy("eval").flow.steps if step.drops]
    if not active and evidence.close(seeds["y_a"], seeds["y_b"]) and evidence.close(seeds["y_a"], run["y"]):
        return PASS
    how = active_how(active[0]) if active else "something in your forward is random in eval mode"
    return fail(f"In eval mode your block gave different outputs for the same input: dropout must be inactive after "
                f"model.eval(); {how}.")


def evaluate(evidence: Evidence) -> dict:
    train = evidence.obs("train")
    if not train["ok"]:
        message = f"In train mode: {error_text(train)}."
        return {ATT: fail(message), FF: fail(message), EVAL: fail(message)}
    placed = {part: evidence.half_part("train", side, "dropout", " in train mode, so there is no branch output to drop")
              for part, side in ((ATT, "att"), (FF, "ff"))}
    if not evidence.obs("eval")["ok"]:
        return {**placed, EVAL: fail(error_text(evidence.obs("eval")))}
    return {**placed, EVAL: evidence.gate(_eval_off(evidence))}
