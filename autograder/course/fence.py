"""Reading the bytes a student controls, inside a fence: limits on size, depth, numbers, types and encodings.

A submission is untrusted data that reaches the trusted parent. Whatever its shape, reading it either gives
well-typed cells (`notebook.Cell`: text where text belongs, a grade id that is a plain name or none) with notes
that tell the student what was odd and how it was read, or raises `SubmissionError` with a sentence that says
why nothing could be read. Nothing else comes out of it: no RecursionError, no ValueError for a number of ten
thousand digits, no TypeError for a number where a cell's text should be.

* size: at most `MAX_BYTES` (checked before reading, and on what was read);
* encoding: a notebook is UTF-8 (a byte-order mark is allowed), as its format requires; a `.py` file is UTF-8 or
  declares its encoding as Python allows; lone surrogates in JSON strings become U+FFFD;
* JSON: nesting at most `MAX_DEPTH`, integers at most `MAX_DIGITS` digits, at most `MAX_CELLS` cells;
* types: each field the grader reads has the type the notebook format gives it, or is read without it (a note
  says so): a cell's text, its type, its metadata, nbgrader's fields and the tags.
"""

from __future__ import annotations

import codecs
import io
import json
import math
import re
import tokenize
import unicodedata

MAX_BYTES = 20_000_000
MAX_DEPTH = 100  # notebooks nest a dozen levels; widget state a few more
MAX_DIGITS = 100
MAX_CELLS = 10_000
MAX_NOTES = 6
CELL_TYPES = ("code", "markdown", "raw")
GRADE_ID = re.compile(r"[A-Za-z0-9_.\-]{1,200}")  # nbgrader's ids: plain names
NBGRADER_FIELDS = {
    "grade_id": str,
    "grade": bool,
    "solution": bool,
    "locked": bool,
    "task": bool,
    "points": (int, float, str),
    "schema_version": int,
}  # points: the source's, any number or text
# (kit.py refuses a source whose points are not a finite number, naming them; nothing reads a submission's points)


class SubmissionError(Exception):
    """The submission could not be read at all (not a notebook, not valid JSON, beyond the limits, unreadable)."""


def _kind(value) -> str:
    return {
        bool: "true or false",
        int: "a number",
        float: "a number",
        str: "text",
        list: "a list",
        dict: "an object",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def decode(data: bytes, name: str, python: bool = False) -> str:
    """The text of a submission's bytes: UTF-8 (a byte-order mark dropped), or for a `.py` file the encoding
    it declares."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        if python:
            try:
                encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
                return data.decode(encoding)
            except (SyntaxError, LookupError, UnicodeDecodeError):
                pass
        utf16 = data[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
        raise SubmissionError(
            f"{name} is not UTF-8 text"
            + (" (it is UTF-16: save it as UTF-8)" if utf16 else f" (byte {data[error.start]:#04x} at position {error.start})")
        ) from None


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise SubmissionError(f"it holds a number of {len(text.lstrip('-'))} digits (a notebook's have at most {MAX_DIGITS})")
    return int(text)


def parse_json(text: str, name: str):
    """The JSON value of `text`, within the limits; SubmissionError saying why not."""
    try:
        value = json.loads(text, parse_int=_integer)
    except json.JSONDecodeError as error:
        raise SubmissionError(f"{name} is not valid notebook JSON ({error.msg}, line {error.lineno})") from None
    except RecursionError:
        raise SubmissionError(f"{name} is nested more deeply than any notebook (more than {MAX_DEPTH} levels)") from None
    except SubmissionError as error:
        raise SubmissionError(f"{name}: {error}") from None
    except (ValueError, OverflowError, MemoryError) as error:
        raise SubmissionError(f"{name} is not valid notebook JSON ({error})") from None
    depth_of(value, name)
    return value


def depth_of(value, name: str) -> int:
    """The nesting depth of a JSON value, walked without recursion; SubmissionError beyond MAX_DEPTH."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        current, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_DEPTH:
            raise SubmissionError(f"{name} is nested more deeply than any notebook (more than {MAX_DEPTH} levels)")
        if isinstance(current, dict):
            stack += [(v, depth + 1) for v in current.values()]
        elif isinstance(current, list):
            stack += [(v, depth + 1) for v in current]
    return deepest


def text(value: str) -> str:
    """`value` with lone surrogates (which JSON's escapes allow and UTF-8 cannot write) replaced by U+FFFD."""
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


# Characters that do not show as themselves: controls (C0, DEL, C1), formats (direction overrides and isolates,
# zero-width spaces and joiners, tags), surrogates, private and unassigned code points, line and paragraph
# separators, every space but the space itself, the rest of Unicode's Default_Ignorable_Code_Point (IGNORABLE: not
# format characters, yet drawn as nothing: the Hangul fillers, variation selectors, the combining grapheme joiner)
# and the braille blank, which fonts draw as an empty cell (a space).
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
IGNORABLE = frozenset(
    chr(c)
    for c in (0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180C, 0x180D, 0x180F, 0x3164, 0xFFA0)
    + tuple(range(0xFE00, 0xFE10))
    + tuple(range(0xE0100, 0xE01F0))
)
BRAILLE_BLANK = "\u2800"
BLANKS = IGNORABLE | {BRAILLE_BLANK}
MAX_MARKS = 4  # combining marks on one letter: more are drawn over the lines around it ("zalgo" text)
_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def hidden(character: str) -> bool:
    """Whether `character` does not show as itself (see HIDDEN_CATEGORIES and BLANKS); the space shows."""
    return character != " " and (unicodedata.category(character) in HIDDEN_CATEGORIES or character in BLANKS)


def escape(character: str) -> str:
    """A character as Python writes it in a string: \\t, \\n, \\r, \\x1b, \\u202e, \\U000e0041."""
    code = ord(character)
    if character in _ESCAPES:
        return _ESCAPES[character]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(value: str, newlines: bool = False, ascii: bool = False) -> str:
    """`value` as text that shows every character it holds: each hidden character (`hidden`) written as its escape
    (`escape`), and so are a combining mark with no letter of `value` before it and the marks past MAX_MARKS on one
    letter. `newlines`: a line break stays one (the writer's own lines); `ascii`: every character beyond ASCII is
    written as its escape too (to tell apart two names that read alike). What it returns holds no control, format
    or invisible character, and it returns the same for it: visible(visible(x)) == visible(x)."""
    shown, marks = [], None  # marks: combining marks on the last letter kept; None: no letter to carry one
    for character in value:
        if character == "\n" and newlines:
            shown.append(character)
            marks = None
            continue
        if hidden(character) or (ascii and not " " <= character <= "~"):
            shown.append(escape(character))
            marks = None
            continue
        if unicodedata.category(character) in ("Mn", "Me"):
            if marks is None or marks >= MAX_MARKS:
                shown.append(escape(character))
                continue
            marks += 1
        else:
            marks = 0
        shown.append(character)
    return "".join(shown)


def name_text(name: str) -> str:
    """A file or folder name as plain text: bytes that are not UTF-8 written as \\xNN, and characters that do not
    show (line breaks, tabs, direction overrides, zero-width and blank characters) as their escapes (`visible`)."""
    return visible(name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace"))


class Notes:
    """What was odd about a notebook's cells, in the student's terms (a few, then how many more)."""

    def __init__(self):
        self.items: list[str] = []

    def add(self, position: int, what: str) -> None:
        self.items.append(f"cell {position}: {what}")

    def sentences(self) -> tuple[str, ...]:
        if not self.items:
            return ()
        shown = self.items[:MAX_NOTES] + (
            [f"{len(self.items) - MAX_NOTES} more like these"] if len(self.items) > MAX_NOTES else []
        )
        return (
            "Parts of your notebook are not what a Jupyter notebook holds, so the grader read them as "
            "follows: " + "; ".join(shown) + ".",
        )


def _source(value, position: int, notes: Notes) -> str | None:
    if isinstance(value, str):
        return text(value)
    if isinstance(value, list) and all(isinstance(line, str) for line in value):
        return text("".join(value))
    notes.add(position, f"its text is {_kind(value)}, not text: the cell was left out")
    return None


def _nbgrader(value, position: int, notes: Notes) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        notes.add(position, f"its nbgrader metadata is {_kind(value)}: read as a cell without any")
        return {}
    clean = {}
    for key, wanted in NBGRADER_FIELDS.items():
        if key not in value:
            continue
        field = value[key]
        if isinstance(field, bool) and wanted is not bool:
            field = None
        if not isinstance(field, wanted) or (isinstance(field, float) and not math.isfinite(field) and key != "points"):
            notes.add(position, f"its nbgrader {key} is {_kind(value[key])}: read as a cell without one")
        elif key == "grade_id" and not GRADE_ID.fullmatch(field):
            notes.add(position, "its nbgrader grade_id is not a plain name: read as a cell without one")
        else:
            clean[key] = field
    return clean


def _tags(value, position: int, notes: Notes) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, list) and all(isinstance(tag, str) for tag in value):
        tags = tuple(dict.fromkeys(text(tag) for tag in value))  # a notebook's tags are a set: nbformat takes no repeat
        if len(tags) < len(value):
            notes.add(position, "a tag of it is written more than once: read once")
        return tags
    if isinstance(value, str):
        notes.add(position, f"its tags are one name, not a list: read as the tag {text(value)[:40]!r}")
        return (text(value),)
    notes.add(position, f"its tags are {_kind(value)}, not a list of names: read without them")
    return ()


def notebook_cells(data, name: str) -> tuple[list[dict], tuple[str, ...]]:
    """The cells of a parsed notebook as plain dicts of the right types ({"kind", "source", "nbgrader", "tags",
    "index"}), and the notes on what was odd; SubmissionError where it is no notebook at all."""
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise SubmissionError(f"{name} is not a Jupyter notebook (no list of cells)")
    if len(data["cells"]) > MAX_CELLS:
        raise SubmissionError(f"{name} has {len(data['cells'])} cells (a notebook of this assignment has at most {MAX_CELLS})")
    cells, notes = [], Notes()
    for position, raw in enumerate(data["cells"], start=1):
        if not isinstance(raw, dict):
            notes.add(position, f"it is {_kind(raw)}, not a cell: left out")
            continue
        kind = raw.get("cell_type", "code")
        if kind not in CELL_TYPES:
            notes.add(
                position,
                f"its type is {_kind(kind) if not isinstance(kind, str) else repr(kind[:20])}, not "
                "code, markdown or raw: left out",
            )
            continue
        metadata = raw.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            notes.add(position, f"its metadata is {_kind(metadata)}: read as a cell without any")
        metadata = metadata if isinstance(metadata, dict) else {}
        source = _source(raw.get("source", ""), position, notes)
        if source is None:
            continue
        cells.append(
            {
                "kind": kind,
                "source": source,
                "nbgrader": _nbgrader(metadata.get("nbgrader"), position, notes),
                "tags": _tags(metadata.get("tags"), position, notes),
                "index": position,
            }
        )
    return cells, notes.sentences()
