"""The first step where a student's forward went wrong, found the way the lesson teaches: walk the ten Pre-LN
steps in order and stop at the first whose value disagrees (`anatomy.Anatomy.walk`).

Both recorded runs are walked, eval mode and train mode (real dropout, the grader's seed), and the answer
says which mode diverges when only one does. Values are compared, not code, so equivalent code in any style
has no divergence.
"""
from __future__ import annotations

from dataclasses import dataclass

from .anatomy import STEPS, Anatomy, Finding
from .dataflow import Flow, _Basis

__all__ = ["STEPS", "Divergence", "first_divergence", "gradient_hint"]


@dataclass(frozen=True)
class Divergence:
    finding: Finding
    mode: str | None = None          # "train" or "eval" when only that mode diverges

    @property
    def step(self) -> int:
        return self.finding.step

    @property
    def message(self) -> str:
        return self.finding.message

    def text(self) -> str:
        body = self.finding.text()
        return f"In {self.mode} mode only: {body}" if self.mode else body


def first_divergence(anatomies: dict) -> Divergence | None:
    """The earliest divergent step over the eval and train runs (`anatomies`: mode -> Anatomy or None)."""
    found = {mode: a.walk() for mode, a in anatomies.items() if a is not None}
    found = {mode: f for mode, f in found.items() if f is not None}
    if not found:
        return None
    if len(found) == 1 and len([a for a in anatomies.values() if a is not None]) == 2:
        mode, finding = next(iter(found.items()))
        return Divergence(finding, mode)
    return Divergence(min(found.values(), key=lambda f: f.step))


def gradient_hint(events: list[dict], flow: Flow | None) -> str | None:
    """Explain a gradient-only mistake from the detaches the student's code performed, or the components it
    ran with autograd switched off."""
    for step in (flow.steps if flow is not None else []):
        if step.no_grad and step.name in ("att", "ff", "norm1", "norm2"):
            where = f" ({step.where})" if step.where else ""
            return (f"{step.name} ran under torch.no_grad(){where}, so no gradient flows back through its branch. "
                    "Keep every path of the block in the autograd graph")
    for event in events:
        if event.get("op") not in ("detach", ".data"):
            continue
        what = "a value"
        if event.get("value") is not None and flow is not None:
            basis = _Basis(flow.tol)
            for key, vector in flow.vectors.items():
                basis.add(key, vector)
            what = flow.describe(basis.explain(event["value"], flow.x.size))
        consumer = event.get("consumer")
        step = _step_of(what, consumer)
        where = f" ({event['where']})" if event.get("where") else ""
        fed = f", and {consumer} received it" if consumer else ""
        prefix = f"step {step} of 10 ({STEPS[step]}): " if step else ""
        return (f"{prefix}your forward detached {what} with {event['op']}{where}{fed}, so no gradient flows back "
                "through it. Keep every path of the block in the autograd graph")
    return None


def _step_of(what: str, consumer: str | None) -> int | None:
    if consumer in ("norm1", "att"):
        return {"norm1": 2, "att": 3}[consumer]
    if consumer in ("norm2", "ff"):
        return {"norm2": 7, "ff": 8}[consumer]
    if what == "x":
        return 1
    if what.startswith(("att(", "drop_shortcut(att(", "dropout(att(")):
        return 4
    if what.startswith(("ff(", "drop_shortcut(ff(", "dropout(ff(")):
        return 9
    return None
