"""Dropout placement: on each branch output, before its addition, once, with drop_shortcut's p, and only
in train mode.

Placement is read from a train-mode run with real dropout (torch's seed fixed by the grader), on the
student's own values: what each dropout received and where its result went. Masks drawn in any order (one
call per sequence, say) are fine: what counts is that drop_shortcut acts once on each branch output.
"""
from __future__ import annotations

from . import PASS, Evidence, error_text, fail

NAME = "forward_dropout"
ATT, FF, EVAL = ("dropout on attention's output", "dropout on the feed-forward output", "dropout is off in eval mode")


def _eval_off(evidence: Evidence):
    train = evidence.flows.get("train")
    if evidence.matches("train") and evidence.matches("eval"):
        return PASS
    if train is None or not any(step.drops for step in train.live):
        return fail("Not credited: your forward dropped nothing in train mode, so there is no dropout to switch off.")
    active = [step for step in evidence.anatomy("eval").flow.live if step.drops]
    if active:
        return fail(f"In eval mode {active[0].name} still dropped values of {evidence.flows['eval'].describe(active[0].takes)}: "
                    "dropout must be inactive after model.eval(); self.drop_shortcut follows .train() and .eval().")
    return evidence.gate(PASS)


def evaluate(evidence: Evidence) -> dict:
    train = evidence.obs("train")
    if not train["ok"]:
        message = f"In train mode: {error_text(train)}."
        return {ATT: fail(message), FF: fail(message), EVAL: fail(message)}
    placed = {part: evidence.half_part("train", side, "dropout", " in train mode, so there is no branch output to drop")
              for part, side in ((ATT, "att"), (FF, "ff"))}
    if not evidence.obs("eval")["ok"]:
        return {**placed, EVAL: fail(error_text(evidence.obs("eval")))}
    return {**placed, EVAL: _eval_off(evidence)}
