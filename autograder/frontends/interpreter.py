"""Can the user grading run the kit's Python? The sandbox starts its server with this very interpreter: where the
user cannot run it (an environment made with a Python in a home folder of mode 0700, say, started through a
path that still worked for the first process), every submission would fail with "the sandbox server did not
start". Every door asks here first and refuses in one line that names the path.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def _closed_on_the_way(path: Path) -> Path | None:
    """The first folder on the way to `path` (links followed) this user may not pass through, or the file itself
    if it may not run it."""
    target = Path(os.path.realpath(path))
    for folder in [*reversed(target.parents)]:
        if not os.access(folder, os.X_OK):
            return folder
    return None if os.access(target, os.X_OK) else target


def interpreter_refusal(executable: str | None = None) -> str | None:
    """Why this user cannot run the kit's interpreter, in one sentence that names the path; None when they can."""
    executable = executable or sys.executable
    if os.access(executable, os.X_OK) and os.access(sys.prefix, os.R_OK | os.X_OK):
        return None
    real = os.path.realpath(executable)
    closed = _closed_on_the_way(Path(executable)) or Path(sys.prefix)
    shown = executable if real == executable else f"{executable} (that is, {real})"
    return (
        f"this user (uid {os.getuid()}) cannot run the kit's Python, {shown}: {closed} is closed to them. "
        "Make the environment with a Python every user can run, in a folder every user can enter "
        "(docs/deployment.md, \"Set up a hub\")"
    )
