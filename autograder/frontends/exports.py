"""Every CSV the kit writes goes through `write_csv`: no cell of it can run in a spreadsheet.

A spreadsheet runs a cell that starts with `=`, `+`, `-` or `@` as a formula (`=HYPERLINK(...)`, `@SUM(...)`), and
some also after a tab or a carriage return. Student ids, file names, names and e-mail addresses are the
student's to choose, so every text cell that starts with one of these is neutralized as OWASP recommends (CSV
injection): a leading `'` makes it plain text, shown as written. Numbers the kit computed are written as numbers
(a negative one runs nothing). The csv module quotes what needs quoting (separators, quotes).

A cell is text only, too: every control, line break, escape sequence, direction override and invisible character
in it is written as its escape (`shown.line`: `\\u202e`, `\\n`, `\\x1b`), before the formula check, so a spreadsheet
or a terminal shows a name as its characters are (`alice\\u3164`, not a second "alice"), and a leading tab or
carriage return is its escape, which runs nothing.
"""

from __future__ import annotations

import csv
import io

from .shown import line

TRIGGERS = ("=", "+", "-", "@", "\t", "\r")


def cell(value) -> object:
    """`value` as a CSV cell that runs nothing and shows every character it holds: a number as it is, text as one
    line with its hidden characters as escapes and a leading `'` where it would run."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    text = line(value)
    return "'" + text if text.startswith(TRIGGERS) else text


def csv_text(header: list, rows: list[dict], line_end: str = "\r\n") -> str:
    """The CSV of `rows` (dicts keyed by `header`, missing keys empty), every cell and column name neutralized.
    `line_end` ends each row ("\n" as nbgrader's own export writes); no value holds a line break or a carriage
    return (they are escapes)."""
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
