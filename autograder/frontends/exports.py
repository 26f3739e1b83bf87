"""Every CSV the kit writes goes through `write_csv`: no cell of it can run in a spreadsheet.

A spreadsheet runs a cell that starts with `=`, `+`, `-` or `@` as a formula (`=HYPERLINK(...)`, `@SUM(...)`), and
some also after a tab or a carriage return. Student ids, file names, names and e-mail addresses are the
student's to choose, so every text cell that starts with one of these is neutralized as OWASP recommends (CSV
injection): a leading `'` makes it plain text, shown as written. Numbers the kit computed are written as numbers
(a negative one runs nothing). The csv module quotes what needs quoting (separators, quotes, line breaks).
"""

from __future__ import annotations

import csv
import io

TRIGGERS = ("=", "+", "-", "@", "\t", "\r")


def cell(value) -> object:
    """`value` as a CSV cell that runs nothing: a number as it is, text with a leading `'` where it would run."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(TRIGGERS) else text


def csv_text(header: list, rows: list[dict], line_end: str = "\r\n") -> str:
    """The CSV of `rows` (dicts keyed by `header`, missing keys empty), every cell and column name neutralized.
    `line_end` ends each row ("\n" as nbgrader's own export writes); a value holding a line break or a carriage
    return is quoted whatever it is."""
    return _line([cell(name) for name in header], line_end) + "".join(
        _line([cell(row.get(name, "")) for name in header], line_end) for row in rows
    )


def _line(values: list, line_end: str) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerow(values)  # "\r\n": quotes every value holding \r or \n
    return buffer.getvalue()[:-2] + line_end


def write_csv(path, header: list, rows: list[dict], line_end: str = "\r\n") -> None:
    with open(path, "w", newline="", encoding="utf-8", errors="backslashreplace") as handle:
        handle.write(csv_text(header, rows, line_end))
