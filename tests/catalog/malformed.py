"""Notebooks of odd shapes, made from the full-marks solution: valid JSON that is no notebook, or a notebook with
one odd part, and bytes that are not even text. Each says what a fair grader does with it:

* READ: the notebook is graded on its merits (full marks: only an odd part of a cell the grader does not need
  changed), with a note that names the odd part (`phrase`);
* UNREADABLE: nothing can be graded; the result is the student's own, "could not be read", saying why (`phrase`),
  never a grader error, and the other students are graded as if it were not there.
"""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass

from autograder.course import kit

READ, UNREADABLE = "read", "unreadable"
SOLUTION = kit.SOLUTIONS_DIR / kit.KIT.notebook_name


@dataclass(frozen=True)
class Shape:
    name: str
    data: bytes
    outcome: str            # READ or UNREADABLE
    phrase: str             # in the result's notes


def solution() -> dict:
    return json.loads(SOLUTION.read_text())


def _cell(notebook: dict, grade_id: str) -> dict:
    return next(c for c in notebook["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id)


def _changed(change) -> bytes:
    notebook = copy.deepcopy(solution())
    change(notebook)
    return json.dumps(notebook, indent=1).encode()


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def shapes() -> list[Shape]:
    text = SOLUTION.read_text()
    def set_(grade_id, *path_value):
        def change(notebook):
            target = _cell(notebook, grade_id)
            *path, key, value = path_value
            for step in path:
                target = target[step]
            target[key] = value
        return change
    return [
        # valid JSON, odd in a part of one cell: graded on its merits
        Shape("number_as_grade_id", _changed(set_("task1_forward", "metadata", "nbgrader", "grade_id", 5)), READ,
              "grade_id is a number"),
        Shape("list_as_a_check_s_grade_id", _changed(set_("check_forward_order", "metadata", "nbgrader", "grade_id",
                                                          ["check_forward_order"])), READ, "grade_id is a list"),
        Shape("number_as_cell_text", _changed(set_("intro", "source", 5)), READ, "its text is a number"),
        Shape("numbers_in_the_lines_of_a_cell", _changed(set_("predict", "source", ["a line", 7, None])), READ,
              "its text is a list"),
        Shape("metadata_a_list", _changed(set_("block_intro", "metadata", [1, 2])), READ, "its metadata is a list"),
        Shape("nbgrader_metadata_text", _changed(set_("block_count", "metadata", "nbgrader", "locked")), READ,
              "nbgrader metadata is text"),
        Shape("tags_a_number", _changed(set_("demo_count", "metadata", "tags", 3)), READ, "its tags are a number"),
        Shape("a_number_among_the_cells", _changed(lambda nb: nb["cells"].insert(3, 7)), READ,
              "it is a number, not a cell"),
        Shape("cell_type_a_number", _changed(set_("walkthrough", "cell_type", 3)), READ, "its type is a number"),
        Shape("an_output_that_is_null", _changed(set_("check_forward_gradients", "outputs", [None])), READ, ""),
        Shape("points_an_object", _changed(set_("check_forward_order", "metadata", "nbgrader", "points", {"a": 1})),
              READ, "points is an object"),
        Shape("huge_float", _changed(set_("intro", "metadata", "size", 1e308)).replace(b"1e+308", b"1e999999"), READ,
              ""),
        Shape("lone_surrogate_in_a_cell", text.replace('"# ', '"\\ud800 # ', 1).encode(), READ, ""),
        Shape("byte_order_mark", b"\xef\xbb\xbf" + text.encode(), READ, ""),
        Shape("nesting_a_notebook_may_have", _changed(set_("intro", "metadata", "deep", json.loads(_nested(60)))),
              READ, ""),
        # nothing to grade: a result of its own
        Shape("deep_nesting", text.replace('"metadata": {', '"metadata": {"deep": ' + _nested(100_000) + ", ", 1)
              .encode(), UNREADABLE, "nested more deeply"),
        Shape("huge_integer", text.replace('"nbformat": 4', '"nbformat": 4' + "0" * 10_000, 1).encode(), UNREADABLE,
              "digits"),
        Shape("not_json", b'{"cells": [', UNREADABLE, "not valid notebook JSON"),
        Shape("empty_file", b"", UNREADABLE, "not valid notebook JSON"),
        Shape("a_json_list", b"[1, 2, 3]", UNREADABLE, "not a Jupyter notebook"),
        Shape("a_json_number", b"5", UNREADABLE, "not a Jupyter notebook"),
        Shape("cells_an_object", b'{"cells": {"a": 1}}', UNREADABLE, "not a Jupyter notebook"),
        Shape("utf16", text.encode("utf-16"), UNREADABLE, "UTF-16"),
        Shape("latin1", text.replace("# ", "# caf\u00e9 ", 1).encode("latin-1", "replace"), UNREADABLE,
              "not UTF-8"),
        Shape("binary", bytes(range(256)) * 8, UNREADABLE, "not UTF-8"),
        Shape("too_many_cells", json.dumps({"cells": [{"cell_type": "raw", "source": ""}] * 20_000}).encode(),
              UNREADABLE, "cells"),
    ]


SHAPES = {shape.name: shape for shape in shapes()}
