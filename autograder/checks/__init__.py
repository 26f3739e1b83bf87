"""Verdicts. One module per concept; each turns observations into pass/fail outcomes with messages.

A check module has `NAME` (its rubric key) and `evaluate(evidence) -> dict[part, Outcome]`, one entry per
rubric part. Checks are pure: they read `Evidence` (the child's answers as read by `answers`, the reference's
answers to the same questions, the named flows of the student's runs) and never run student code.

Every point needs agreement with something the grader computed itself on inputs it chose: the reference's
output, or the grader's own components applied to the student's recorded values. A part whose property a
block gets for free (a block that returns its input "leaves its input unchanged") pays only when the block
did the work: see `Evidence.work`.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from ..anatomy import Anatomy
from ..dataflow import Flow, arrays_close, standardized  # noqa: F401  (checks import them from here)
from ..replays import per_instance

# Tolerance tiers for comparing float32 results with the reference: CUDA kernels reorder sums.
TOLERANCES = {"cpu": (1e-5, 1e-6), "cuda": (2e-3, 2e-4)}


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
    x: np.ndarray                      # the block input of every forward question, as the grader drew it
    flows: dict                        # "eval" / "train" -> Flow of the student's recorded run (None: no run)
    replays: object = None             # replays.Replays: gradients and profiles the grader recomputes
    plan: object = None                # the questions (harness.probes.Plan)
    sources: list = field(default_factory=list)   # the student's code as sent to the sandbox
    device: str = "cpu"
    drop_p: float = 0.5
    divergence: object = None          # diagnosis.Divergence
    details: dict = field(default_factory=dict)

    def obs(self, probe: str) -> dict:
        return self.student.get(probe) or {"ok": False, "error": {"type": "Missing", "message": "this probe did not run"}}

    def close(self, a, b, scale: float = 1.0) -> bool:
        rtol, atol = TOLERANCES.get(self.device, TOLERANCES["cpu"])
        return arrays_close(a, b, rtol * scale, atol * scale)

    @per_instance
    def anatomy(self, mode: str) -> Anatomy | None:
        """Both halves of the student's run in `mode`, set against Pre-LN (None when that run failed)."""
        flow = self.flows.get(mode)
        return Anatomy(flow, self.parts, mode, self.drop_p) if flow is not None else None

    @functools.cached_property
    def work(self) -> str | None:
        """None when the block did the work (attention and the feed-forward network both ran, as the grader's
        own components compute them, which `grading.evaluate` made sure of, and both reach the output); else why not. Parts whose property a
        do-nothing block has for free pay only when this is None."""
        run = self.obs("eval")
        if not run["ok"]:
            return error_text(run)
        flow: Flow = self.flows["eval"]
        missing = [name for name in ("att", "ff") if flow.first(name) is None]
        if missing:
            return f"{' and '.join(NAMES[m] for m in missing)} never ran in your forward (in eval mode)"
        if flow.y_takes is not None:
            unused = [NAMES[n] for n in ("att", "ff") if not flow.influences(flow.first(n).key)]
            if unused:
                return f"the output of {' and of '.join(unused)} does not reach what your forward returns"
            return None
        grads = run.get("param_grads") or {}
        silent = [NAMES[n] for n in ("att", "ff")
                  if not any(g is not None and np.any(g != 0) for k, g in grads.items() if k.startswith(n + "."))]
        return f"no gradient reaches {' or '.join(silent)}: its output does not reach your result" if silent else None

    def used(self, mode: str, side: str) -> str | None:
        """None when the branch `side` ran in the `mode` run and reaches the output; else why not."""
        flow = self.flows.get(mode)
        step = flow.first(side) if flow is not None else None
        if step is None:
            return f"{NAMES[side]} never ran in {mode} mode"
        if flow.y_takes is not None and not flow.influences(step.key):
            return f"the output of {NAMES[side]} does not reach what your forward returns"
        return None

    def half_gate(self, outcome: Outcome, mode: str, side: str) -> Outcome:
        """`outcome`, paid only when the half it is about did its work: its branch reaches the output."""
        why = self.used(mode, side)
        if not outcome.passed or why is None:
            return outcome
        return fail(f"Not credited: {why}, and this part counts only for a half whose branch is part of the result.")

    def half_part(self, mode: str, side: str, finder: str, what: str) -> Outcome:
        """A part about one half, judged by its `anatomy` finder ("norm", "dropout", "addition") in the `mode`
        run, and paid only when that half did its work. `what` ends the message when the half never ran."""
        anatomy = self.anatomy(mode)
        if getattr(anatomy, side) is None:
            return fail(f"{NAMES[side].capitalize()} never ran{what}.")
        found = getattr(anatomy, finder)(side)
        return self.half_gate(PASS if found is None else fail(found.text()), mode, side)

    def gate(self, outcome: Outcome) -> Outcome:
        """`outcome`, paid only for a block that did the work (see `work`)."""
        if not outcome.passed or self.work is None:
            return outcome
        return fail(f"Not credited: {self.work}, and this part counts only for a block that computes attention and "
                    "the feed-forward network and adds them into its output.")


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
