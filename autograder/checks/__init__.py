"""Verdicts. One module per concept; each turns observations into pass/fail outcomes with messages.

A check module has `NAME` (its rubric key) and `evaluate(evidence) -> dict[part, Outcome]`, one entry per
rubric part. Checks are pure: they read `Evidence` (what the sandbox observed, what the reference computed)
and never run student code.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..diagnosis import Divergence

# Tolerance tiers for comparing float32 results with the reference: CUDA kernels reorder sums.
TOLERANCES = {"cpu": (1e-4, 1e-5), "cuda": (2e-3, 2e-4)}


@dataclass(frozen=True)
class Outcome:
    passed: bool
    message: str = ""


PASS = Outcome(True)


def fail(message: str) -> Outcome:
    return Outcome(False, message)


@dataclass
class Evidence:
    student: dict                      # probe name -> observation from the sandbox
    reference: dict                    # probe name -> observation of the reference solution
    named: dict                        # arrangement name -> its "eval" observation (Post-LN, ...)
    parts: dict                        # the kit's components for this seed (trusted copies, float32, CPU)
    device: str = "cpu"
    divergence: Divergence | None = None
    gradient_hint: str | None = None
    details: dict = field(default_factory=dict)

    def obs(self, probe: str) -> dict:
        return self.student.get(probe) or {"ok": False, "error": {"type": "Missing", "message": "this probe did not run"}}

    def close(self, a, b, scale: float = 1.0) -> bool:
        rtol, atol = TOLERANCES.get(self.device, TOLERANCES["cpu"])
        return arrays_close(a, b, rtol * scale, atol * scale)


def arrays_close(a, b, rtol: float, atol: float) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and bool(np.all(np.isfinite(a))) and bool(np.allclose(a, b, rtol=rtol, atol=atol))


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
    if kind == "ProbeFailure":
        text = f"{message}"
    elif kind in ("Timeout", "Crashed", "Skipped", "Missing", "ProtocolError"):
        text = message
    else:
        text = f"{what} raised {kind}: {message}" if message else f"{what} raised {kind}"
    if "cuda" in message and "device" in message:      # on a GPU, a tensor moved off x.device fails every probe
        text += ". Keep every tensor on x.device: no .cpu() or .numpy() inside forward, new tensors with device=x.device"
    return text + (f" ({error['where']})" if error.get("where") else "")


def standardized(values, scale=None, shift=None) -> bool:
    """Is every row mean 0 / variance 1, after undoing a LayerNorm's scale and shift?"""
    v = np.asarray(values, dtype=np.float64)
    if scale is not None:
        v = (v - shift) / scale
    return bool(np.all(np.abs(v.mean(-1)) < 1e-3) and np.all(np.abs(v.var(-1) - 1) < 2e-2))


def calls_named(observation: dict, name: str) -> list[dict]:
    return [c for c in observation.get("calls", []) if c["name"] == name]
