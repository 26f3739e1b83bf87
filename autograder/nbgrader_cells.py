"""What the hidden-check cells call when nbgrader runs them in a Jupyter kernel (stock `Execute`).

The kit's own configuration never runs these cells in a kernel (`SandboxedExecute` answers them), but a
course that keeps nbgrader's stock executor still gets the same checks: the first `report(...)` grades the
notebook file being autograded through the sandbox, once, and every cell then reports its check's points.
The kernel's own state, where student code ran, is never consulted.
"""
from __future__ import annotations

import os
from pathlib import Path

from . import kit
from .grading import grade_file, new_seed
from .sandbox import SandboxServer

_graded: dict[str, object] = {}


def _notebook_path() -> Path:
    """The notebook nbgrader is autograding: it executes it with the notebook's folder as working directory."""
    named = os.environ.get("AUTOGRADER_NOTEBOOK")
    if named:
        return Path(named)
    here = Path.cwd() / kit.KIT.notebook_name
    if here.is_file():
        return here
    candidates = sorted(Path.cwd().glob("*.ipynb"))
    if len(candidates) != 1:
        raise FileNotFoundError(f"cannot tell which notebook to grade in {Path.cwd()}")
    return candidates[0]


def _result():
    path = _notebook_path().resolve()
    key = f"{path}:{path.stat().st_mtime_ns}"
    if key not in _graded:
        seed = int(os.environ.get("AUTOGRADER_SEED", 0)) or new_seed()
        with SandboxServer() as server:
            _graded[key] = grade_file(path, server, seed=seed)
    return _graded[key]


def report(check: str) -> float:
    """Print the named check's message and return its points (nbgrader reads the value as partial credit)."""
    result = _result()
    found = next(c for c in result.checks if c.check == check)
    print(f"{found.title}: {found.points:g} / {found.max_points:g}\n{found.message}")
    if check == "forward_order" and result.first_divergence and not found.passed:
        print("Where your block first went wrong: " + result.first_divergence)
    return found.points
