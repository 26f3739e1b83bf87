"""An LMS's CSV file, read strictly, and a table written back through the kit's CSV writer (`exports.csv_text`).

The file is the instructor's, but what is in it (names, e-mail addresses, notes) was chosen by students and by
whoever edited it: it is read as text and nothing else, and becomes a `Table` or one line saying why not
(`RosterError`), never a crash.

* UTF-8, with or without a byte-order mark (kept for the LMS's own reader); another encoding is refused, naming
  the row and the byte where it fails, and how to save the file;
* values separated by commas, semicolons or tabs: the first of these outside quotes in the header row says which
  (Canvas writes semicolons in some languages, Moodle's export offers tabs); line ends as the file has them;
* a quoted value may hold separators, quotes and line breaks; a quote left open, or text after a closing quote,
  refuses the file, naming the row;
* a row with another number of values than the header is malformed (`Table.malformed`, one line each).

Rows are numbered as a spreadsheet shows them: the header is row 1.
"""

from __future__ import annotations

import csv
import io
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from autograder.course.fence import name_text
from autograder.frontends.exports import csv_text

MAX_BYTES = 50 * 2**20
SEPARATORS = (",", ";", "\t")
NEGATIVE = re.compile(r"-\d+(?:[.,]\d+)?")  # a negative number as an LMS writes one: a number, not a formula
BOMS = {b"\xff\xfe": "UTF-16", b"\xfe\xff": "UTF-16", b"\x00\x00\xfe\xff": "UTF-32"}


class RosterError(Exception):
    """The file cannot be read as a table, for the reason its message gives in one line; nothing was written."""


@dataclass
class Table:
    name: str  # the file, as lines name it
    header: list[str]
    rows: list[list[str]]  # every row after the header, as read (a blank line: [])
    bom: bool = False
    line_end: str = "\r\n"

    def column(self, name: str, option: str = "") -> int:
        """The index of the column called exactly `name`; RosterError where there is none, or two."""
        found = [i for i, title in enumerate(self.header) if title == name]
        if len(found) == 1:
            return found[0]
        said = ", ".join(quoted(t) for t in self.header)
        if found:
            raise RosterError(f"{self.name} has {len(found)} columns called {quoted(name)}: rename one of them")
        raise RosterError(f"{self.name} has no column called {quoted(name)}{option} (its columns: {said})")

    def malformed(self, index: int) -> bool:
        return bool(self.rows[index]) and len(self.rows[index]) != len(self.header)

    def problems(self, kept: str) -> list[str]:
        """One line per malformed row, saying what happens to it (`kept`: "kept as it is", "left out")."""
        return [
            f"row {index + 2}: {len(row)} values where the header has {len(self.header)} columns; {kept}"
            for index, row in enumerate(self.rows)
            if self.malformed(index)
        ]


def quoted(text: str, limit: int | None = 60) -> str:
    """A value of the file as a line shows it: quoted, invisible and control characters escaped, cut at `limit`
    characters (a student's id, which the line is about, whole: `limit` None)."""
    text = name_text(text)
    return '"' + (text if limit is None or len(text) <= limit else text[: limit - 1] + "…") + '"'


def student(name: str) -> str:
    return quoted(name, None)


def read_table(path: Path, what: str = "the roster") -> Table:
    """The file at `path` as a Table (see the module); RosterError in one line where it cannot be one."""
    name = f"{what} {name_text(str(path))}"
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as error:
        raise RosterError(f"cannot read {name}: {error.strerror or error}") from None
    if len(data) > MAX_BYTES:
        raise RosterError(f"{name} is over {MAX_BYTES // 2**20} MiB: not an LMS's gradebook file")
    for mark, encoding in BOMS.items():
        if data.startswith(mark):
            raise RosterError(f"{name} is {encoding} text: save it as CSV UTF-8 and try again")
    bom = data.startswith(b"\xef\xbb\xbf")
    text = _decoded(data[3:] if bom else data, name)
    if not text.strip():
        raise RosterError(f"{name} is empty")
    line_end = next((end for end in ("\r\n", "\n", "\r") if end in text), "\r\n")
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=_separator(text), strict=True)
    records = []
    try:
        for record in reader:
            records.append(record)
    except csv.Error as error:
        raise RosterError(f"{name} row {len(records) + 1}: {error} (a quote left open?); nothing written") from None
    return Table(name, records[0], records[1:], bom, line_end)


def _decoded(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        row = data[: error.start].count(b"\n") + 1
        raise RosterError(
            f"{name} is not UTF-8 (line {row}: byte 0x{data[error.start]:02x}): save it as CSV UTF-8 and try again"
        ) from None


def _separator(text: str) -> str:
    """The first comma, semicolon or tab outside quotes in the first row (a comma where there is none)."""
    quoted_now = False
    for char in text:
        if char == '"':
            quoted_now = not quoted_now
        elif not quoted_now and char in "\r\n":
            break
        elif not quoted_now and char in SEPARATORS:
            return char
    return ","


class _Key(str):
    """A column of a written table: its title, and its place (two columns may share a title)."""

    __hash__ = object.__hash__

    def __eq__(self, other):
        return self is other


def table_text(header: list, rows: list[list], line_end: str = "\r\n", bom: bool = False) -> str:
    """The CSV of `rows` under `header` (comma-separated, every value neutralized by `exports.csv_text`); a row
    shorter than the header is filled with empty values, and one longer is cut to it. A negative number the LMS
    wrote (text such as "-1.5") stays a number: a spreadsheet runs nothing in it, and the LMS reads it back as it
    wrote it."""
    keys = [_Key(title) for title in header]
    records = [{key: _value(value) for key, value in zip(keys, row)} for row in rows]
    return ("\ufeff" if bom else "") + csv_text(keys, records, line_end)


def _value(value):
    if isinstance(value, str) and NEGATIVE.fullmatch(value):
        number = value.replace(",", ".")
        return float(number) if "." in number else int(number)
    return value


def write_private(path: Path, text: str) -> None:
    """`text` into `path` whole or not at all (by way of a temporary file beside it), readable by its owner alone: it
    holds every student's grade."""
    path = Path(path)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")  # mode 0600
    try:
        with os.fdopen(handle, "w", newline="", encoding="utf-8", errors="backslashreplace") as out:
            out.write(text)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
