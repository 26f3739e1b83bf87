"""Both shortcut additions: each half adds its branch to the value it started from, and the shortcut path
carries the block input to the output with nothing on it.

The two additions are read from the student's own values (eval mode), so a mistake elsewhere (a wrong norm,
say) does not cost them: each pays where Pre-LN's equation of its sum holds between the values recorded at the
component boundaries (`engine.ledger`: what norm2 receives is x plus attention's output, what the block returns is
that plus the feed-forward output), or where the block returns x plus both branches (h not seen at norm2: norm2
received another value), or where the half's own equation holds (the branch, as dropped, added unscaled to the
value its half started from, wherever that sum went), and otherwise the run's facts say why not (`fits.why`).
The third part is the grader's own computation: the student's program, replayed with attention and the
feed-forward network silenced (every weight 0), must hand back its input exactly, as a Pre-LN block does, and on
the real weights the shortcut path must run from x to the output with nothing on it (both equations of the sums
hold, or the path's own: the first half starts from x, the second from the sum the first branch went into, and the
block returns the sum the second went into); it pays only when both additions are right and the branches do real
work.
"""

from __future__ import annotations

from autograder.engine import ledger
from autograder.engine.steps import HALVES
from autograder.engine.unmet import unmet

from . import PASS, Evidence, difference, error_text, fail

NAME = "forward_shortcuts"
ATT, FF, PATH = ("shortcut around attention", "shortcut around the feed-forward network", "silent branches give back the input")


def _path(evidence: Evidence, additions_right: bool):
    if evidence.gives_reference("eval"):
        return PASS
    if not additions_right:
        return fail("Not credited: this part counts only when both additions above are right.")
    try:
        silenced = evidence.replays.silenced()
    except ValueError as why:
        return fail(f"The grader cannot replay your forward with silenced branches: {why}.")
    if not evidence.close(silenced, evidence.x):
        return fail(
            "With attention and the feed-forward network silenced (every weight and bias 0) a Pre-LN block "
            "hands back its input exactly; the grader's replay of your forward does not "
            f"({difference(silenced, evidence.x)})."
        )
    found = evidence.equations("eval")
    if ledger.holds(found, ((HALVES["att"].sum, HALVES["ff"].sum), (ledger.SUMS,), tuple(ledger.PATH))):
        return evidence.gate(PASS)  # norm2 receives x + attention's branch, y is that + the other; or y is x + both
    said = unmet(found, (tuple(ledger.PATH),), "eval")
    return fail(f"On the real weights the shortcut path does not run straight from input to output: {said.text()}.", said.facts)


def evaluate(evidence: Evidence) -> dict:
    run = evidence.obs("eval")
    if not run["ok"]:
        message = error_text(run)
        return {ATT: fail(message), FF: fail(message), PATH: fail(message)}
    missing = ", so there is no branch to add a shortcut around"
    outcomes = {
        part: evidence.half_part("eval", side, missing, ((HALVES[side].sum,), (ledger.SUMS,), (ledger.ADDED[side],)))
        for part, side in ((ATT, "att"), (FF, "ff"))
    }
    outcomes[PATH] = _path(evidence, outcomes[ATT].passed and outcomes[FF].passed)
    return outcomes
