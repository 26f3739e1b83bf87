"""Reading notebooks and `.py` files into cells: the one place that parses a submission's text.

Nothing here executes code. A submission is turned into a list of `Cell`s, inside the fence of `fence` (limits
on size, depth, numbers, types and encodings: anything else is a `SubmissionError` that says why, or a note on
how an odd cell was read); `student_code` picks the cells a grader runs (the student's definitions) and drops
the ones it must not (visible tests, hidden-check placeholders, slow experiments, IPython magics).
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from .fence import MAX_BYTES, SubmissionError, decode, name_text, notebook_cells, parse_json

EXPERIMENT_TAG = "experiment"  # slow demo / figure cells: skipped by graders and the local runner
VISIBLE_TEST_PREFIX = "test_"  # grade_id prefix of the visible tests students run locally
HIDDEN_CHECK_PREFIX = "check_"  # grade_id prefix of the graded cells that hold hidden checks

_PERCENT_CELL = re.compile(r"^# %%(.*)$", re.MULTILINE)
_MAGIC = re.compile(r"^\s*[%!]")


@dataclass(frozen=True)
class Cell:
    kind: str  # "code", "markdown" or "raw"
    source: str
    nbgrader: dict = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    index: int = 0  # position in the notebook, 1-based, for messages

    @property
    def grade_id(self) -> str | None:
        return self.nbgrader.get("grade_id")

    @property
    def label(self) -> str:
        return f"cell {self.index}" + (f" ({self.grade_id})" if self.grade_id else "")

    @property
    def is_experiment(self) -> bool:
        return EXPERIMENT_TAG in self.tags

    @property
    def is_visible_test(self) -> bool:
        return (self.grade_id or "").startswith(VISIBLE_TEST_PREFIX)

    @property
    def is_hidden_check(self) -> bool:
        return (self.grade_id or "").startswith(HIDDEN_CHECK_PREFIX)


@dataclass(frozen=True)
class Reading:
    """A submission read inside the fence: its cells, and notes to the student on what was odd in it."""

    cells: list
    notes: tuple = ()


def read_notebook(data, name: str = "the notebook") -> Reading:
    """The cells of a parsed notebook (any JSON value: anything but a notebook is a SubmissionError)."""
    cells, notes = notebook_cells(data, name)
    return Reading(
        [Cell(kind=c["kind"], source=c["source"], nbgrader=c["nbgrader"], tags=c["tags"], index=c["index"]) for c in cells], notes
    )


def cells_from_notebook(data) -> list[Cell]:
    return read_notebook(data).cells


def cells_from_python(text: str) -> list[Cell]:
    """A `.py` submission: one cell, or one per `# %%` marker (jupytext's percent format)."""
    pieces = _PERCENT_CELL.split(text)
    if len(pieces) == 1:
        return [Cell(kind="code", source=text, index=1)]
    cells = [Cell(kind="code", source=pieces[0], index=1)] if pieces[0].strip() else []
    for header, body in zip(pieces[1::2], pieces[2::2]):
        kind = "markdown" if "[markdown]" in header else "code"
        tags = tuple(re.findall(r'"([^"]+)"', header.split("tags=", 1)[1])) if "tags=" in header else ()
        cells.append(Cell(kind=kind, source=body, tags=tags, index=len(cells) + 1))
    return cells


def read_bytes(path: str | Path, max_bytes: int = MAX_BYTES) -> bytes:
    """A submission's bytes: a plain file only (no symlink, FIFO or device, which could point at the solution or
    hang the grader), at most `max_bytes`, read without following links and without blocking."""
    path, name = Path(path), name_text(Path(path).name)
    try:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            raise SubmissionError(f"{name} is a symbolic link, not a file: submit the notebook itself")
        if not stat.S_ISREG(info.st_mode):
            raise SubmissionError(f"{name} is not a regular file (a pipe, a device or a folder)")
        if info.st_size > max_bytes:
            raise SubmissionError(f"{name} is larger than {max_bytes // 1_000_000} MB")
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            if not stat.S_ISREG(os.fstat(handle).st_mode):
                raise SubmissionError(f"{name} is not a regular file")
            data = os.read(handle, max_bytes + 1)
        finally:
            os.close(handle)
    except OSError as error:
        raise SubmissionError(f"could not read {name}: {error.strerror or error}") from None
    if len(data) > max_bytes:
        raise SubmissionError(f"{name} is larger than {max_bytes // 1_000_000} MB")
    return data


def read_text(path: str | Path, max_bytes: int = MAX_BYTES) -> str:
    path = Path(path)
    return decode(read_bytes(path, max_bytes), name_text(path.name), python=path.suffix == ".py")


def read_submission(path: str | Path, *, max_bytes: int = MAX_BYTES) -> Reading:
    """A notebook or `.py` submission read inside the fence; SubmissionError when it cannot be read at all."""
    path = Path(path)
    text = read_text(path, max_bytes)
    if path.suffix == ".py":
        return Reading(cells_from_python(text))
    return read_notebook(parse_json(text, name_text(path.name)), name_text(path.name))


def read_cells(path: str | Path, *, max_bytes: int = MAX_BYTES) -> list[Cell]:
    return read_submission(path, max_bytes=max_bytes).cells


def strip_magics(source: str) -> str:
    """Blank out IPython magics and shell escapes (`%matplotlib`, `!pip ...`), keeping line numbers."""
    return "\n".join("" if _MAGIC.match(line) else line for line in source.split("\n"))


def student_code(cells: list[Cell]) -> list[tuple[str, str]]:
    """(label, source) of every code cell a grader should run to get the student's definitions."""
    return [
        (cell.label, strip_magics(cell.source))
        for cell in cells
        if cell.kind == "code" and not (cell.is_experiment or cell.is_visible_test or cell.is_hidden_check)
    ]
