"""Writing what the front ends hand out (results.json, grades.csv, the feedback pages, the class report): whole or
not at all, readable by others."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomically(path: str | Path, text: str) -> None:
    """`text` into `path` (its folder made if need be) by way of a temporary file beside it: a reader finds the
    old file or the new one, never half of one; an error leaves no temporary file behind."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temporary, 0o644)  # mkstemp makes it private; what the kit writes is meant to be read by others
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
