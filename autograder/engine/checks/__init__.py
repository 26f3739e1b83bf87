"""Verdicts. One module per concept; each turns observations into pass/fail outcomes with messages.

A check module has `NAME` (its rubric key) and `evaluate(evidence) -> dict[part, Outcome]`, one entry per
rubric part. Checks are pure: they read `Evidence` (the child's answers as read by `answers`, the reference's
answers to the same questions, the named flows of the student's runs, the grader's replays of them), never run
student code and write nothing into it: each outcome carries the facts its message states and the numbers it
rests on (`Outcome.facts`, `Outcome.details`), and whoever runs the checks gathers them in the rubric's order.

Every point needs agreement with something the grader computed itself on inputs it chose: the reference's
answers, or the grader's own replay of the student's program. Two rules run through every check:

* matching is enough: a run whose values (and gradients) agree with Pre-LN's earns every part read from
  that run, however it was written (`Evidence.matches`);
* a part whose property a do-nothing block has for free pays only when the block did the work: its output
  depends on x through attention and through the feed-forward network, each with real weight
  (`Evidence.work`, `Evidence.half_work`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

import numpy as np

from autograder.engine import fits, ledger
from autograder.engine.facts import Ran
from autograder.engine.replayed import Responds
from autograder.engine.reading.script import PRE_LN, compile_script
from autograder.engine.reading.program import in_mode, live
from autograder.engine.reading.replays import param_gradients, per_instance
from autograder.engine.reading.masks import read_masks
from autograder.engine.reading.sweep import Miss, Reader
from autograder.engine.tolerance import GRADIENTS, close, tolerance
from autograder.engine.unmet import Unmet

from .outcomes import PASS, Outcome, fail, failed
from .regions import sweep_parts
from .walked import masks as walked_masks, train_reading
from .work import times_ran, weights_from_values

# A branch does real work when the output's dependence on x through it is at least this fraction of Pre-LN's.
REAL_WEIGHT = 0.05


@dataclass(eq=False)
class Evidence:
    student: dict  # probe name -> the child's answer, read by `answers.read_answer`
    reference: dict  # probe name -> the reference's answer to the same question
    named: dict  # arrangement name -> its eval-mode output (Post-LN, ...)
    parts: dict  # the grader's own components for this plan (float32, CPU, eval mode)
    x: np.ndarray  # the block input of the recorded runs, as the grader drew it
    flows: dict  # "eval" / "train" -> Flow of the student's recorded run (None: no run)
    replays: object = None  # replays.Replays: what the grader recomputes from the flows
    plan: object = None  # the questions (engine.questions.plan.Plan)
    sources: list = field(default_factory=list)  # the student's code as sent to the sandbox
    device: str = "cpu"
    drop_p: float = 0.5
    divergence: object = None  # diagnosis.Divergence

    def obs(self, probe: str) -> dict:
        return self.student.get(probe) or {"ok": False, "error": {"type": "Missing", "message": "this probe did not run"}}

    def close(self, a, b, scale: float = 1.0) -> bool:
        """Equal within the device's float32 tolerance, `scale` times it (`engine.tolerance`: the rule and why)."""
        return close(a, b, tolerance(self.device), scale)

    @per_instance
    def equations(self, mode: str) -> dict:
        """Pre-LN's equations (`engine.ledger`) on every named run of `mode`, by step: in eval mode the grader's input
        and, where the grader read it, the other one (`eval_other`); in train mode its run."""
        return ledger.outcomes(self.flows, mode, tolerance(self.device), self.drop_p)

    # --- matching is enough -------------------------------------------------------------------------
    def _agrees(self, run: dict, y, x_grad, param_grads: dict) -> bool:
        """Does a recorded run give these values: its output and every gradient?"""
        if "grad_error" in run or not self.close(run["y"], y):
            return False
        grads = [(run["x_grad"], x_grad)] + [(run["param_grads"][k], param_grads[k]) for k in param_grads]
        return all(a is not None and b is not None and self.close(a, b, GRADIENTS) for a, b in grads)

    @per_instance
    def as_reference(self, mode: str) -> bool:
        """Does the student's `mode` run give the reference's very values (output and every gradient)?"""
        run, reference = self.obs(mode), self.reference[mode]
        return run["ok"] and self._agrees(run, reference["y"], reference["x_grad"], reference["param_grads"])

    @per_instance
    def matches(self, mode: str) -> bool:
        """Does the student's `mode` run agree with Pre-LN, in values? In eval mode: its output and every gradient
        equal the reference's on the grader's input. In train mode, torch's seed was fixed before the call, as it
        was for the reference: a forward that draws its dropout masks as Pre-LN does (drop_shortcut on attention's
        output, then on the feed-forward output) gives the reference's very values, however it is written. Masks
        drawn in another order (one call per sequence, say) give other values; such a run matches when, boundary
        by boundary, it holds Pre-LN's values under the masks its own dropouts drew (`boundaries`), and its
        gradients are those of Pre-LN under those masks."""
        if self.as_reference(mode):
            return True
        if mode == "eval":
            return False
        expected = self.train_gradients()
        return expected is not None and self._agrees(self.obs("train"), self.obs("train")["y"], *expected)

    @per_instance
    def gives_reference(self, mode: str) -> bool:
        """Does the `mode` run match Pre-LN, or give the reference's output, values only (in eval mode, on the other input
        too)? It computes Pre-LN's function: what it computes is read from Pre-LN, its gradients by the gradient check."""
        same = lambda name: self.obs(name)["ok"] and self.close(self.obs(name)["y"], self.reference[name]["y"])  # noqa: E731
        return self.matches(mode) or (same(mode) and (mode != "eval" or ("eval_other" in self.reference and same("eval_other"))))

    @per_instance
    def train_gradients(self, independent: bool = True):
        """Pre-LN's gradients under the masks the student's train run drew, where that run holds Pre-LN's values
        boundary by boundary (None where it does not, or the run failed). The masks are read from the values at the
        boundary between the halves, as the sweep reads them (`reading/sweep.py`: each element exactly dropped or
        kept and scaled, whatever the draw), or, where that reading finds no such masks (norm2 received h in pieces
        it cannot join), the train run's reading's (`walked.masks`: each element's ratio of values, which rounding blurs where a
        branch is near 0).
        `independent=False` reads one mask drawn for both halves too: the derivative of what such a forward computes."""
        flow = self.flows.get("train")
        if flow is None or not self.obs("train")["ok"]:
            return None
        run = self.obs("train")
        pieces = [call["input"] for call in run["calls"] if call["name"] == "norm2"]
        masks = read_masks(self.x, pieces, run["y"], self.parts, self.drop_p, tolerance(self.device), independent)
        if masks is None and (reading := train_reading(self)) is not None:
            masks = walked_masks(reading)
        if masks is None:
            return None
        program = live(in_mode(compile_script(PRE_LN, self.drop_p), "train"))
        return param_gradients(program, flow.x, self.parts, self.replays.readout, masks, train=True)

    # --- right on every valid input -----------------------------------------------------------------
    @functools.cached_property
    def sweep(self) -> list:
        """Every call of the sweep where the block differs from Pre-LN, smallest input first (`reading/sweep.py`)."""
        mine, theirs = self.obs("sweep"), (self.reference or {}).get("sweep")
        if theirs is None or not theirs.get("ok") or self.plan is None or not self.plan.sweep:
            return []
        if not mine["ok"]:
            words = "on the grader's other inputs (other configurations, sizes, dropout rates and modes)"
            return [Miss(mode, 0, 0, "config", "error", None, 0, words, error_text(mine)) for mode in ("eval", "train")]
        return Reader(self.plan, self.replays.kit, self.close).misses(mine, theirs)

    # --- credit only for work done ------------------------------------------------------------------
    @functools.cached_property
    def weights(self) -> dict | str:
        """How much the eval output depends on x through each branch (1: as much as in Pre-LN), or why the
        grader cannot tell."""
        run = self.obs("eval")
        if not run["ok"]:
            return error_text(run)
        flow = self.flows.get("eval")
        if flow is not None and flow.replayable:
            return self.replays.weights
        responded = weights_from_values(self)
        if responded is not None:
            return responded
        why = flow.why_not_replayable() if flow is not None else "your forward's run could not be read"
        return f"the grader cannot follow your forward ({why}), so it cannot measure the work its branches do"

    def half_work(self, side: str) -> str | None:
        """None when the output depends on x through the branch `side` with real weight; else why not."""
        if self.gives_reference("eval"):
            return None
        weights = self.weights
        if isinstance(weights, str):
            return weights
        weight = weights[side]
        if weight is None:
            return (
                f"{NAMES[side]} ran where the grader cannot change its output (some of its own layers without the "
                "last, or inside nested vmaps), so the grader cannot measure the work it does"
            )
        if weight >= REAL_WEIGHT:
            return None
        if weight < 1e-6:
            return f"in eval mode, what your block returns does not depend on x through {NAMES[side]}"
        return (
            f"in eval mode, what your block returns depends on x through {NAMES[side]} only {weight:.2g} times as much as a "
            f"Pre-LN block's does"
        )

    @property
    def work(self) -> str | None:
        """None when the block did the work (both branches carry real weight from x to the output)."""
        whys = [why for why in (self.half_work("att"), self.half_work("ff")) if why]
        return "; ".join(dict.fromkeys(whys)) if whys else None

    def half_part(self, mode: str, side: str, what: str, needs: tuple = ()) -> Outcome:
        """A part about one half: passed only where the `mode` run matches Pre-LN or the equations it `needs` hold on each
        run of that mode (`ledger.holds`), and paid there only when that half did its work; else failed, in the ledger's
        facts (`fits.why`); `what` where the branch never ran."""
        if self.gives_reference(mode):
            return PASS if mode == "eval" else self._worked(side)
        if ledger.holds(found := self.equations(mode), needs):
            return self._worked(side)
        flow = self.flows.get(mode)
        if flow is None or flow.first(side) is None:
            why, facts = absent(self, mode, side)  # no fact: the branch may be there, where the grader cannot see it
            return fail(why + (f"{what}." if facts else ", so the grader cannot check this part of it."), facts)
        said = fits.why(self.flows, needs, mode, tolerance(self.device), found, float(self.parts[ledger.FED[side]].eps))
        mode_said = mode == "eval" or isinstance(said.facts[0], Unmet)  # an equation's fact names its mode itself
        return fail(said.text() if mode_said else f"in {mode} mode, {said.text()}", said.facts)

    def _worked(self, side: str) -> Outcome:
        """PASS when the half `side` does real work in the eval-mode output (a train-mode part is about work the
        block does: a block whose branches count only in train mode does none)."""
        why = self.half_work(side)
        if why is None:
            return PASS
        return fail(
            f"Not credited: {why}, and this part counts only for a half whose branch does real work in the block's output."
        )

    def gate(self, outcome: Outcome) -> Outcome:
        """`outcome`, paid only for a block that did the work (see `work`)."""
        if not outcome.passed or self.work is None:
            return outcome
        return failed(
            outcome,
            f"Not credited: {self.work}, and this part counts only for a block whose output depends on x "
            "through attention and through the feed-forward network, each with real weight.",
        )


def absent(evidence: Evidence, mode: str, side: str) -> tuple[str, tuple]:
    """Why a half is missing from what the grader can follow in the `mode` run, with the fact that says it: the
    branch never ran, or the block's output does not change when the grader changes the branch's output, or
    (neither known, no fact) the grader could not see its output (or its layers') reach the result."""
    if not times_ran(evidence.flows[mode], side):
        return Ran(mode, side, 0).text().capitalize(), (Ran(mode, side, 0),)
    if responds(evidence, side) is False:
        return Responds("eval", side, False).text().capitalize(), (Responds("eval", side, False),)
    whole = any(call.name == side and call.kind != "manual" for call in evidence.flows[mode].calls)
    who = f"{NAMES[side].capitalize()} ran, but" if whole else f"Layers of {NAMES[side]} ran, but"
    where = "" if mode == "eval" else f" in {mode} mode"
    return f"{who} the grader could not follow {'its' if whole else 'their'} output into what your block returns{where}", ()


def responds(evidence: Evidence, side: str) -> bool | None:
    """Does the eval output change when the grader changes `side`'s output (the `respond` question)? None:
    that answer is missing."""
    mine, run = evidence.obs("respond"), evidence.obs("eval")
    if not (mine["ok"] and run["ok"]) or side not in mine:
        return None
    flow = evidence.flows.get("eval")
    if flow is None or not any(call.name == side for call in flow.calls):
        return None  # no call of it was recorded, so the grader's change touched nothing it can vouch for
    return not evidence.close(mine[side]["y"], run["y"])


def swept(evidence: Evidence, part: str, outcome: Outcome, gradients: bool = True) -> Outcome:
    """`outcome`, unless it passed and the sweep shows the block differs on an input that part is about: then
    the smallest such input is named. Without `gradients`, a difference in gradients alone is not this part's (a
    block that gives Pre-LN's values with other gradients: the gradient check's)."""
    if not outcome.passed:
        return outcome
    for miss in evidence.sweep:
        if part in sweep_parts(miss) and (gradients or miss.what != "gradient"):
            said = failed(outcome, f"Not on every valid input: {miss.where}, {miss.detail}.")
            return replace(said, facts=(*outcome.facts, miss))
    return outcome


NAMES = {"att": "attention", "ff": "the feed-forward network"}


def difference(a, b) -> str:
    """A short description of how two arrays differ, for messages."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return f"shape {a.shape} instead of {b.shape}"
    if not np.all(np.isfinite(a)):
        return "it contains NaN or inf"
    return f"largest difference {np.max(np.abs(a - b)):.3g}"


def error_text(observation: dict, what: str = "forward") -> str:
    error = observation.get("error") or {}
    kind, message = error.get("type", "Error"), error.get("message", "")
    if kind in ("ProbeFailure", "Timeout", "Crashed", "Skipped", "Missing", "ProtocolError", "GraderError"):
        text = message
    else:
        text = f"{what} raised {kind}: {message}" if message else f"{what} raised {kind}"
    if "cuda" in message and "device" in message:  # on a GPU, a tensor moved off x.device fails every probe
        text += ". Keep every tensor on x.device: no .cpu() or .numpy() inside forward, new tensors with device=x.device"
    return text + (f" ({error['where']})" if error.get("where") else "")


def norm_params(evidence: Evidence, name: str):
    norm = evidence.parts[name]
    return norm.scale.detach().numpy().astype(np.float64), norm.shift.detach().numpy().astype(np.float64)
