"""Verdicts. One module per concept; each turns observations into pass/fail outcomes with messages.

A check module has `NAME` (its rubric key) and `evaluate(evidence) -> dict[part, Outcome]`, one entry per
rubric part. Checks are pure: they read `Evidence` (the child's answers as read by `answers`, the reference's
answers to the same questions, the named flows of the student's runs, the grader's replays of them) and
never run student code.

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
from dataclasses import dataclass, field

import numpy as np

from autograder.engine.diagnosis.anatomy import Anatomy
from autograder.engine.diagnosis.first_step import student_program
from autograder.engine.diagnosis.script import PRE_LN, compile_script
from autograder.engine.reading.dataflow import arrays_close
from autograder.engine.reading.program import canonical, in_mode, live, signature
from autograder.engine.reading.replays import per_instance

# Tolerance tiers for comparing float32 results with the reference: CUDA kernels reorder sums.
TOLERANCES = {"cpu": (1e-5, 1e-6), "cuda": (2e-3, 2e-4)}
# A branch does real work when the output's dependence on x through it is at least this fraction of Pre-LN's.
REAL_WEIGHT = 0.05


@dataclass(frozen=True)
class Outcome:
    passed: bool
    message: str = ""


PASS = Outcome(True)


def fail(message: str) -> Outcome:
    return Outcome(False, message)


@dataclass(eq=False)
class Evidence:
    student: dict                      # probe name -> the child's answer, read by `answers.read_answer`
    reference: dict                    # probe name -> the reference's answer to the same question
    named: dict                        # arrangement name -> its eval-mode output (Post-LN, ...)
    parts: dict                        # the grader's own components for this plan (float32, CPU, eval mode)
    x: np.ndarray                      # the block input of the recorded runs, as the grader drew it
    flows: dict                        # "eval" / "train" -> Flow of the student's recorded run (None: no run)
    replays: object = None             # replays.Replays: what the grader recomputes from the flows
    plan: object = None                # the questions (engine.questions.plan.Plan)
    sources: list = field(default_factory=list)   # the student's code as sent to the sandbox
    device: str = "cpu"
    drop_p: float = 0.5
    divergence: object = None          # diagnosis.Divergence
    details: dict = field(default_factory=dict)

    def obs(self, probe: str) -> dict:
        return self.student.get(probe) or {"ok": False, "error": {"type": "Missing", "message": "this probe did not run"}}

    def close(self, a, b, scale: float = 1.0) -> bool:
        """Equal within the device's tolerance; the absolute part scales with the values' size, since float32
        rounding does (the same forward written token by token, say, rounds its sums differently)."""
        rtol, atol = TOLERANCES.get(self.device, TOLERANCES["cpu"])
        values = np.asarray(b, dtype=np.float64)
        size = float(np.max(np.abs(values))) if values.size and np.all(np.isfinite(values)) else 1.0
        return arrays_close(a, b, rtol * scale, atol * scale * max(1.0, size))

    @per_instance
    def anatomy(self, mode: str) -> Anatomy | None:
        """Both halves of the student's run in `mode`, set against Pre-LN (None when that run failed)."""
        flow = self.flows.get(mode)
        return Anatomy(flow, self.parts, mode, self.drop_p) if flow is not None else None

    # --- matching is enough -------------------------------------------------------------------------
    @per_instance
    def matches(self, mode: str) -> bool:
        """Does the student's `mode` run agree with Pre-LN? In eval mode: its output and every gradient equal
        the reference's on the grader's input. In train mode (its own dropout masks, drawn in any order): its
        program is Pre-LN's, drop_shortcut acting once on each branch output with its p."""
        run = self.obs(mode)
        if not run["ok"]:
            return False
        if mode == "eval":
            reference = self.reference["eval"]
            if not self.close(run["y"], reference["y"]) or "grad_error" in run:
                return False
            grads = [(run["x_grad"], reference["x_grad"])] + [
                (run["param_grads"][k], reference["param_grads"][k]) for k in reference["param_grads"]]
            return all(a is not None and b is not None and self.close(a, b, 10) for a, b in grads)
        flow = self.flows.get("train")
        if flow is None or not flow.replayable:
            return False
        pre_ln = canonical(live(in_mode(compile_script(PRE_LN, self.drop_p), "train")))
        return signature(canonical(live(student_program(flow, "train")))) == signature(pre_ln)

    # --- credit only for work done ------------------------------------------------------------------
    @functools.cached_property
    def weights(self) -> dict | str:
        """How much the eval output depends on x through each branch (1: as much as in Pre-LN), or why the
        grader cannot tell."""
        run = self.obs("eval")
        if not run["ok"]:
            return error_text(run)
        flow = self.flows.get("eval")
        if flow is None or not flow.replayable:
            why = flow.why_not_replayable() if flow is not None else "your forward's run could not be read"
            return f"the grader cannot follow your forward ({why}), so it cannot measure the work its branches do"
        return self.replays.weights

    def half_work(self, side: str) -> str | None:
        """None when the output depends on x through the branch `side` with real weight; else why not."""
        if self.matches("eval"):
            return None
        weights = self.weights
        if isinstance(weights, str):
            return weights
        weight = weights[side]
        if weight >= REAL_WEIGHT:
            return None
        if weight < 1e-6:
            return f"what your block returns does not depend on x through {NAMES[side]}"
        return (f"what your block returns depends on x through {NAMES[side]} only {weight:.2g} times as much as a "
                f"Pre-LN block's does")

    @property
    def work(self) -> str | None:
        """None when the block did the work (both branches carry real weight from x to the output)."""
        whys = [why for why in (self.half_work("att"), self.half_work("ff")) if why]
        return "; ".join(dict.fromkeys(whys)) if whys else None

    def half_part(self, mode: str, side: str, finder: str, what: str) -> Outcome:
        """A part about one half, judged by its `anatomy` finder ("norm", "dropout", "addition") in the `mode`
        run, passed outright when that run matches Pre-LN, and paid only when that half did its work. `what`
        ends the message when the half never ran."""
        if self.matches(mode):
            return PASS
        anatomy = self.anatomy(mode)
        if getattr(anatomy, side) is None:
            return fail(f"{NAMES[side].capitalize()} never ran{what}.")
        found = getattr(anatomy, finder)(side)
        if found is not None:
            return fail(found.text())
        why = self.half_work(side)
        return PASS if why is None else fail(f"Not credited: {why}, and this part counts only for a half whose "
                                             "branch does real work in the block's output.")

    def gate(self, outcome: Outcome) -> Outcome:
        """`outcome`, paid only for a block that did the work (see `work`)."""
        if not outcome.passed or self.work is None:
            return outcome
        return fail(f"Not credited: {self.work}, and this part counts only for a block whose output depends on x "
                    "through attention and through the feed-forward network, each with real weight.")


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
    if kind in ("ProbeFailure", "Timeout", "Crashed", "Skipped", "Missing", "ProtocolError"):
        text = message
    else:
        text = f"{what} raised {kind}: {message}" if message else f"{what} raised {kind}"
    if "cuda" in message and "device" in message:      # on a GPU, a tensor moved off x.device fails every probe
        text += ". Keep every tensor on x.device: no .cpu() or .numpy() inside forward, new tensors with device=x.device"
    return text + (f" ({error['where']})" if error.get("where") else "")


def norm_params(evidence: Evidence, name: str):
    norm = evidence.parts[name]
    return norm.scale.detach().numpy().astype(np.float64), norm.shift.detach().numpy().astype(np.float64)
