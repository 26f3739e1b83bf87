"""Both shortcut additions: each half adds its branch to the value it started from, and the shortcut path
carries the block input to the output with nothing on it.

The two additions are read from the student's own values (eval mode), so a mistake elsewhere (a wrong norm,
say) does not cost them. The third part is the grader's own computation: the student's program, replayed
with attention and the feed-forward network silenced (every weight 0), must hand back its input exactly, as
a Pre-LN block does; it pays only when both additions are right and the branches do real work.
"""

from __future__ import annotations

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
    found = evidence.anatomy("eval").stream()
    if found is not None:
        return fail("On the real weights the shortcut path does not run straight from input to output: " + found.text() + ".")
    return evidence.gate(PASS)


def evaluate(evidence: Evidence) -> dict:
    run = evidence.obs("eval")
    if not run["ok"]:
        message = error_text(run)
        return {ATT: fail(message), FF: fail(message), PATH: fail(message)}
    outcomes = {
        part: evidence.half_part("eval", side, "addition", ", so there is no branch to add a shortcut around")
        for part, side in ((ATT, "att"), (FF, "ff"))
    }
    outcomes[PATH] = _path(evidence, outcomes[ATT].passed and outcomes[FF].passed)
    return outcomes
