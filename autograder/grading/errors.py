"""How a failure of the grader itself is named: where it happened, the exception's last line, and the line of the
grader's code it came from (for the instructor; a student sees only that the grader failed)."""

from __future__ import annotations

import traceback
from pathlib import Path


def grader_error_text(where: str, error: BaseException) -> str:
    line = traceback.format_exception_only(type(error), error)[-1].strip()
    frame = traceback.extract_tb(error.__traceback__)[-1] if error.__traceback__ else None
    at = f" at {Path(frame.filename).name}:{frame.lineno}" if frame else ""
    return f"{where}: {line}{at}"
