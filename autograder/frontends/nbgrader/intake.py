"""A student's notebook read for nbgrader inside the kit's fence (`autograder.course.fence`), before any of
nbgrader's own preprocessors see it.

nbgrader reads each submitted notebook itself (nbformat), and its preprocessors then trust its shape: a number
where a cell's grade_id should be, a list where its metadata should be, stop them, and that student is left
ungraded. On the kit's assignments `KitPreflight` (the exporter of `nbgrader autograde`) reads the submitted file
here instead, and grade-class's course recorder does too:

* a notebook the fence reads without a note goes on as nbformat reads it;
* one with odd parts goes on rebuilt from what the fence read (each odd part left out, every other part kept
  where nbformat's schema allows it; a cell's nbgrader metadata, which nbgrader reads whole, kept only where
  none of it was odd), and the notes go with it to the grader, which puts them in the result;
* one that cannot be read goes on as the assignment's released notebook, marked unreadable: the grader gives it
  the student's own result ("could not be read ..."), and nbgrader records it like any other grade.

The kit's own metadata (`KIT_KEY`) in a submitted file is the student's to forge: it is dropped here, and only
what this module writes there is trusted later.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder.course.fence import NBGRADER_FIELDS, SubmissionError, decode, name_text, parse_json
from autograder.course.fence import text as plain_text
from autograder.course.notebook import read_bytes, read_notebook
from .plugins import KIT_KEY

MINOR = 5


@dataclass(frozen=True)
class Intake:
    notebook: nbformat.NotebookNode
    notes: tuple = ()
    unreadable: str | None = None        # why nothing could be read (the student's own result)


def read_submitted(path: str | Path, release: str | Path | None = None) -> Intake:
    """The submitted notebook at `path`, within the fence; `release`: the released notebook that stands in for
    one that cannot be read."""
    path = Path(path)
    name = name_text(path.name)
    try:
        data = cleaned(parse_json(decode(read_bytes(path), name), name))
        reading = read_notebook(data, name)
    except SubmissionError as error:
        return Intake(_stand_in(release), (), f"Your notebook could not be read: {error}, so nothing was graded.")
    notebook = None
    if not reading.notes:
        try:
            notebook = nbformat.reads(json.dumps(data), as_version=4)
            nbformat.validate(notebook)
        except Exception:               # valid for the kit, not for nbformat's schema: rebuilt below
            notebook = None
    if notebook is None:
        notebook = rebuilt(data, [c.index for c in reading.cells], {c.index: c for c in reading.cells})
    return Intake(_without_kit_metadata(notebook), reading.notes)


def cleaned(value):
    """A JSON value with every string (keys too) writable as UTF-8 (`fence.text`); its depth is bounded already."""
    if isinstance(value, str):
        return plain_text(value)
    if isinstance(value, list):
        return [cleaned(item) for item in value]
    if isinstance(value, dict):
        return {plain_text(key): cleaned(item) for key, item in value.items()}
    return value


def marked(intake: Intake) -> nbformat.NotebookNode:
    """The notebook nbgrader goes on with, carrying what the grader must know (notes, or why it is unreadable)."""
    notebook = intake.notebook
    record = {"unreadable": intake.unreadable} if intake.unreadable else {"reading": list(intake.notes)}
    notebook.metadata[KIT_KEY] = record
    return notebook


def _stand_in(release) -> nbformat.NotebookNode:
    try:
        return _without_kit_metadata(nbformat.read(str(release), as_version=4))
    except Exception:
        return nbformat.v4.new_notebook()


def _without_kit_metadata(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    notebook.metadata.pop(KIT_KEY, None)
    for cell in notebook.cells:
        cell.get("metadata", {}).pop(KIT_KEY, None)
    return notebook


def rebuilt(data: dict, kept: list[int], cells: dict) -> nbformat.NotebookNode:
    """A valid notebook of the cells the fence kept (positions `kept`, read as `cells`): the fence's text and
    nbgrader metadata, the rest of each cell where nbformat's schema takes it."""
    metadata = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    notebook = nbformat.v4.new_notebook(metadata=_plain(metadata))
    for position in kept:
        raw, cell = data["cells"][position - 1], cells[position]
        extra = _plain(raw.get("metadata")) if isinstance(raw.get("metadata"), dict) else {}
        extra.pop("nbgrader", None)
        extra.pop("tags", None)
        if _whole(raw, cell):          # nbgrader reads its metadata whole: kept only when nothing of it was odd
            extra["nbgrader"] = _plain(raw["metadata"]["nbgrader"])
        extra.update({"tags": list(cell.tags)} if cell.tags else {})
        make = {"code": nbformat.v4.new_code_cell, "markdown": nbformat.v4.new_markdown_cell,
                "raw": nbformat.v4.new_raw_cell}[cell.kind]
        new = make(cell.source, metadata=extra)
        if cell.kind == "code" and isinstance(raw.get("outputs"), list):
            new.outputs = raw["outputs"]
            try:
                nbformat.validate(nbformat.v4.new_notebook(cells=[new]))
            except Exception:
                new.outputs = []
        try:
            nbformat.validate(nbformat.v4.new_notebook(cells=[new]))
        except Exception:
            new = make(cell.source, metadata={k: v for k, v in extra.items() if k in ("nbgrader", "tags")})
        notebook.cells.append(new)
    try:
        nbformat.validate(notebook)
    except Exception:
        notebook.metadata = nbformat.NotebookNode()
    return notebook


def _whole(raw: dict, cell) -> bool:
    metadata = raw.get("metadata")
    ours = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    return isinstance(ours, dict) and bool(ours) and all(key in cell.nbgrader for key in ours if key in NBGRADER_FIELDS)


def _plain(value) -> nbformat.NotebookNode:
    """Metadata as nbformat holds it (an object of JSON values), the kit's own dropped."""
    return nbformat.from_dict({k: v for k, v in value.items() if isinstance(k, str) and k != KIT_KEY})
