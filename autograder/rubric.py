"""Points: every check, every part of it, in one readable place.

The keys are the check names used everywhere: the hidden-check cells of the notebook (`check_<name>`), the
Gradescope test names, the columns of grades.csv. A test keeps the notebook's cell points equal to these.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CheckSpec:
    title: str
    parts: dict[str, float]          # sub-test name -> points
    visibility: str = "after_published"

    @property
    def points(self) -> float:
        return sum(self.parts.values())


RUBRIC: dict[str, CheckSpec] = {
    "forward_order": CheckSpec("Operation order (Pre-LN)", {
        "output matches a Pre-LN block": 4,
    }, visibility="visible"),
    "forward_shortcuts": CheckSpec("Both shortcut additions", {
        "identity when attention and feed-forward are zero": 1,
        "first shortcut adds the block input": 1,
        "second shortcut adds the first half's result": 1,
    }),
    "forward_prenorm": CheckSpec("Pre-LN placement of norm1 and norm2", {
        "norm1 feeds attention": 1,
        "norm2 feeds the feed-forward network": 1,
        "no extra normalization": 1,
    }),
    "forward_dropout": CheckSpec("Dropout placement", {
        "train-mode output matches Pre-LN dropout": 1,
        "p = 1.0 drops both branches": 1,
        "dropout is off in eval mode": 1,
    }),
    "forward_gradients": CheckSpec("Gradient behaviour", {
        "gradients match a Pre-LN block": 1,
        "no detached path": 1,
        "input left unchanged": 1,
        "24-block stack keeps a Pre-LN profile": 1,
    }),
    "forward_robustness": CheckSpec("Robustness", {
        "batch of one, short context": 1,
        "under torch.no_grad()": 1,
        "float64 after .double()": 1,
        "stays on the input's device": 1,
    }),
    "compounding": CheckSpec("Task 2: gradient compounding", {
        "magnitude_by_formula": 1,
        "magnitude_by_autograd": 1,
        "classify_factor": 1,
    }, visibility="visible"),
}

TOTAL_POINTS = sum(spec.points for spec in RUBRIC.values())
