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

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder.course.fence import NBGRADER_FIELDS, SubmissionError, decode, name_text, parse_json
from autograder.course.fence import text as plain_text
from autograder.course.notebook import read_bytes, read_notebook
from nbgrader.nbgraderformat.v3 import MetadataValidatorV3

from .plugins import KIT_KEY

MINOR = 5


@dataclass(frozen=True)
class Intake:
    notebook: nbformat.NotebookNode
    notes: tuple = ()
    unreadable: str | None = None  # why nothing could be read (the student's own result)


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
        except Exception:  # valid for the kit, not for nbformat's reader: rebuilt below
            notebook = None
        if notebook is not None and not (
            _valid(notebook) and all(_nbgrader_takes(c) for c in notebook.cells if "nbgrader" in c.metadata)
        ):
            notebook = None  # ...or not for nbformat's schema or nbgrader's validator
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
    nbgrader metadata, and of the rest each metadata key and the outputs where nbformat's schema takes them."""
    metadata = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    notebook = nbformat.v4.new_notebook(metadata=_schema_kept(metadata, _notebook_with))
    for position in kept:
        raw, cell = data["cells"][position - 1], cells[position]
        extra = _plain(raw.get("metadata")) if isinstance(raw.get("metadata"), dict) else {}
        extra.pop("nbgrader", None)
        extra.pop("tags", None)
        extra = _schema_kept(extra, lambda m: _notebook_with({}, [_cell_with(cell.kind, m)]))
        if _whole(raw, cell):  # nbgrader reads its metadata whole: kept only when nothing of it was odd
            extra["nbgrader"] = _plain(raw["metadata"]["nbgrader"])
        extra.update({"tags": list(cell.tags)} if cell.tags else {})
        new = _cell_with(cell.kind, extra, cell.source)
        if cell.kind == "code" and isinstance(raw.get("outputs"), list):
            new.outputs = raw["outputs"]
            if not _valid(_notebook_with({}, [new])):  # built unvalidated: _valid asks the schema
                new.outputs = []
        notebook.cells.append(new)
    if not _valid(notebook):
        notebook.metadata = nbformat.NotebookNode()
    return notebook


def _notebook_with(metadata: dict, cells: list = ()) -> nbformat.NotebookNode:
    return nbformat.from_dict({"cells": list(cells), "metadata": metadata, "nbformat": 4, "nbformat_minor": 5})


def _cell_with(kind: str, metadata: dict, source: str = "") -> nbformat.NotebookNode:
    cell = {"cell_type": kind, "id": nbformat.v4.nbbase.random_cell_id(), "metadata": metadata, "source": source}
    if kind == "code":
        cell.update(outputs=[], execution_count=None)
    return nbformat.from_dict(cell)


def _valid(notebook: nbformat.NotebookNode) -> bool:
    try:
        nbformat.validate(notebook)
    except Exception:  # any way the schema refuses it (nbformat raises more than one kind)
        return False
    return True


def _schema_kept(metadata: dict, holder) -> nbformat.NotebookNode:
    """The metadata keys nbformat's schema takes, each tried alone in `holder` (a notebook holding it);
    the kit's own key dropped. A key the schema knows with a value of another shape (a `kernelspec` of null, say)
    goes, the rest stays."""
    kept = {}
    for key, value in _plain(metadata).items():
        if _valid(holder({key: value})):
            kept[key] = value
    return nbformat.from_dict(kept)


def _whole(raw: dict, cell) -> bool:
    """Keep a cell's nbgrader metadata: the fence read every field of it, and nbgrader's own validator takes it
    (a locked cell has a grade_id, a graded one its points, and so on)."""
    metadata = raw.get("metadata")
    ours = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    if not (isinstance(ours, dict) and ours and all(key in cell.nbgrader for key in ours if key in NBGRADER_FIELDS)):
        return False
    return _nbgrader_takes(_cell_with(cell.kind, {"nbgrader": _plain(ours)}, cell.source))


def _nbgrader_takes(cell: nbformat.NotebookNode) -> bool:
    """Does nbgrader's own validator take the cell (its verdict reads the cell's type and nbgrader metadata alone)?"""
    metadata = cell.get("metadata", {})
    ours = json.dumps(metadata.get("nbgrader"), sort_keys=True) if "nbgrader" in metadata else None
    return _takes(str(cell.get("cell_type")), ours)


@functools.lru_cache(maxsize=4096)
def _takes(cell_type: str, nbgrader_metadata: str | None) -> bool:
    """nbgrader's verdict on one kind of cell, kept: a class's notebooks carry the same metadata cell by cell, and
    the validator checks its own schema on every call (once most of the time of reading a submission)."""
    metadata = {} if nbgrader_metadata is None else {"nbgrader": json.loads(nbgrader_metadata)}
    try:
        MetadataValidatorV3().validate_cell(nbformat.from_dict({"cell_type": cell_type, "metadata": metadata, "source": ""}))
    except Exception:  # nbgrader's ValidationError, or a KeyError where a field it needs is missing
        return False
    return True


def _plain(value) -> nbformat.NotebookNode:
    """Metadata as nbformat holds it (an object of JSON values), the kit's own dropped."""
    return nbformat.from_dict({k: v for k, v in value.items() if isinstance(k, str) and k != KIT_KEY})
