"""Dropout placement: on each branch output, before its addition, once, with drop_shortcut's p, and only
in train mode.

Placement is read from a train-mode run with real dropout (torch's seed fixed by the grader), on the
student's own values: what each dropout received and where its result went. Masks drawn in any order (one
call per sequence, say) are fine: what counts is that drop_shortcut acts once on each branch output. A half pays
where its equations hold in the train run (`engine.ledger`): one dropout with drop_shortcut's p received the branch
output whole, and what it gave is dropped no more, whatever sum it then enters (a wrong shortcut is the shortcut
part's); elsewhere the run's facts say why not (`fits.why`). Where the half's sum is not Pre-LN's, its
own addition (`ADDED`: the branch, as dropped, added unscaled to the value its half started from) that holds in the
eval run must hold in the train run too (a dropout on the shortcut shows only there).
"""

from __future__ import annotations

from autograder.engine.facts import Output
from autograder.engine.ledger import ADDED, FAILS, HOLDS, ONCE, SUMS, holds
from autograder.engine.steps import HALVES
from autograder.engine.diagnosis.chain import ORDER
from autograder.engine.diagnosis.told import facts_at
from autograder.engine.tolerance import tolerance
from autograder.engine.unmet import unmet

from . import Evidence, PASS, error_text, fail, swept
from .walked import train_reading

NAME = "forward_dropout"
ATT, FF, EVAL = ("dropout on attention's output", "dropout on the feed-forward output", "dropout is off in eval mode")


def _eval_off(evidence: Evidence):
    if evidence.matches("train") and evidence.matches("eval"):
        return evidence.gate(PASS)
    train, run, seeds = evidence.obs("train"), evidence.obs("eval"), evidence.obs("eval_seeds")
    flow = evidence.flows.get("eval")
    active = [step for step in flow.live if step.drops] if flow is not None else []
    if active:
        return fail(
            f"In eval mode {active[0].name} still dropped values of {flow.describe(active[0].takes)}: "
            "dropout must be inactive after model.eval(); self.drop_shortcut follows .train() and .eval()."
        )
    steady = seeds["ok"] and evidence.close(seeds["y_a"], seeds["y_b"])  # eval mode gives one output per input
    drawn = [event for event in run.get("events") or [] if event["op"] == "random"] if run["ok"] else []
    if drawn and seeds["ok"] and not steady:  # a dropout written by hand: no call of one is recorded
        return fail(
            f"In eval mode your forward drew random numbers ({drawn[0]['name']}"
            + (f", {drawn[0]['where']}" if drawn[0]["where"] else "")
            + ") and two calls on the same input gave different outputs: dropout must be inactive after "
            "model.eval(); check self.training before masking by hand, or use self.drop_shortcut."
        )
    if steady and evidence.close(train["y"], run["y"]):
        return fail(
            "Not credited: in train mode your forward returned exactly what it returns in eval mode, so it "
            "dropped nothing and there is no dropout to switch off.",
            (Output("train", "eval", True),),
        )
    return evidence.gate(PASS)


def _placed(evidence: Evidence, side: str):
    """Dropout on the branch output, once, with its p; and the half's own addition, where it holds in eval mode, holds in
    train mode too (a dropout on the shortcut shows only there)."""
    half = HALVES[side]
    needs = ((half.drop, ONCE[side]),)  # one dropout with p on the branch output, what it gave dropped no more
    outcome = evidence.half_part("train", side, " in train mode, so there is no branch output to drop", needs)
    summed = ((half.drop, half.sum), (half.drop, SUMS))  # and that output in Pre-LN's sum
    if not outcome.passed or evidence.matches("train") or holds(evidence.equations("train"), summed):
        return outcome
    added = ADDED[side]  # the branch as dropped, added to the value its half started from: in eval mode, not in train mode
    if evidence.equations("train").get(added) == FAILS and evidence.equations("eval").get(added) == HOLDS:
        said = unmet(evidence.equations("train"), ((added,),), "train")
        return fail(f"{said.text()}.", said.facts)
    return outcome


def _train_only(evidence: Evidence):
    """Both dropout parts read right, yet the train run holds other values than Pre-LN under its own masks while
    the eval run holds Pre-LN's (an extra dropout on a sum, say): the part of the half where the train run first
    differs fails, with what the values show there: (part, its outcome). None when the train run matches or the eval
    run does not."""
    if evidence.flows.get("train") is None or evidence.matches("train") or not evidence.matches("eval"):
        return None
    reading = train_reading(evidence)
    seen = reading.first()
    if seen is None:
        return None
    index, step, wrong = seen
    said = facts_at(evidence.flows, reading, index, wrong, tolerance(evidence.device), step)
    first_half = (step if step is not None else ORDER[index]) <= HALVES["att"].sum
    return (ATT if first_half else FF), fail(
        f"In train mode your forward holds other values than Pre-LN does under the masks its own dropouts drew: {said.text()}.",
        said.facts,
    )


def evaluate(evidence: Evidence) -> dict:
    train = evidence.obs("train")
    if not train["ok"]:
        message = f"In train mode: {error_text(train)}."
        return {ATT: fail(message), FF: fail(message), EVAL: fail(message)}
    placed = {ATT: _placed(evidence, "att"), FF: _placed(evidence, "ff")}
    if evidence.gives_reference("train"):  # other rates, shapes and call sequences
        placed = {part: swept(evidence, part, outcome, evidence.matches("train")) for part, outcome in placed.items()}
    unexplained = _train_only(evidence) if all(o.passed for o in placed.values()) else None
    if unexplained is not None:
        placed[unexplained[0]] = unexplained[1]
    if not evidence.obs("eval")["ok"]:
        return {**placed, EVAL: fail(error_text(evidence.obs("eval")))}
    return {**placed, EVAL: _eval_off(evidence)}
