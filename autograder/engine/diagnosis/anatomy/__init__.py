"""What each half of a student's block does, read from its own values and set against Pre-LN's.

Each finder looks at one part of one half in a named run (`dataflow.Flow`) and returns a `Finding` (the
step, and what the grader saw there) or None. Findings state facts only: which value a component received,
as a sum of the block's earlier values, what was added to what, which dropouts acted. Causes ("the halves
are swapped", "Post-LN") are hypotheses, named only by `diagnosis` once a replay confirms them. The checks
take their messages from these findings, so a part is explained in one place, the same way, wherever it
costs points.
"""

from __future__ import annotations

from .additions import AdditionFinder
from .dropouts import DropoutFinder
from .halves import Finding, Half, half
from .norms import NormFinder
from .path import PathFinder

__all__ = ["Anatomy", "Finding", "Half", "half"]


class Anatomy(NormFinder, DropoutFinder, AdditionFinder, PathFinder):
    """Both halves of one run, with one finder per step family: `norm(side)`, `dropout(side)`, `addition(side)`,
    `stream()` and `output()`, each returning a `Finding` or None."""
