"""Canvas: the gradebook file Canvas exports (Grades > Export) is the roster, and the file written is that file with
exactly the assignment's column filled, for Canvas's Grades > Import.

Canvas's layout, as its importer reads it: a header row starting `Student, ID` (or `LastName, FirstName, ID`), then
`SIS User ID`, `SIS Login ID` (and `Integration ID`, `Root Account` where the course shows them) and `Section`,
custom columns, one column per assignment titled `<title> (<Canvas id>)`, then read-only totals (`Current Score`,
`Final Grade`, ...); a row whose first value holds `Points Possible`; perhaps a row above it marking assignments
whose grades are posted by hand (`Manual Posting`, or `Muted` in older exports); then a row per student, the test
student last. Canvas finds each student by the `ID` column (then SIS ids, then the name), and each assignment by the
id in its title; a column without an id is a new assignment of that title, its points taken from the Points Possible
row.

Written: every column and row as given (values neutralized as every CSV of the kit is; a malformed row kept with
its missing values empty), and in the assignment's column, the column titled as the assignment (without Canvas's id,
or `--column`) or, where there is none, a new one titled with the assignment's name before Canvas's totals: its
Points Possible the assignment's maximum, and each matched student's score. Every other cell of that column keeps
what Canvas had: a student left out keeps their grade in Canvas, and an excused (`EX`) or unassigned (`N/A`) cell
stays as it was, said in one line.
"""

from __future__ import annotations

import re

from .grades import Choices, Graded, Refused, Written, check_awaiting, number, value, written_file
from .match import Matching, match
from .table import Table, quoted

TOTALS = re.compile(
    "Current Score|Current Points|Current Grade|Final Score|Final Points|Final Grade|Override Score|Override Grade|"
    "Override Status"
)
INFO = {"Student", "LastName", "FirstName", "ID", "SIS User ID", "SIS Login ID", "Section", "Integration ID", "Root Account"}
MUTED = re.compile(r"\s*(Muted|Manual Posting.*)?\s*", re.IGNORECASE)
TITLE_ID = re.compile(r"(.*)\s+\((\d+)\)", re.DOTALL)
READ_ONLY = re.compile(r"read\s+only")
KEPT = {"EX": "excused in Canvas (EX)", "N/A": "not assigned to them in Canvas (N/A)"}


def canvas_file(table: Table, assignments: list[Graded], matching: Matching, choices: Choices = Choices()) -> Written:
    first = _first_assignment_column(table)
    kinds = [_kind(table, index) for index in range(len(table.rows))]
    students = {s for graded in assignments for s in graded.standings}
    student_rows = [index for index, kind in enumerate(kinds) if kind == "student"]
    found = match(table, student_rows, matching, students, lambda i: quoted(table.rows[i][0]))
    check_awaiting(assignments, set(found.students.values()), choices)
    width = len(table.header)
    header, rows = list(table.header), [(row + [""] * width)[:width] for row in table.rows]
    lines, written, filled = _malformed(table) + found.lines, set(), set()
    for graded in assignments:
        column = _column(header, first, graded, choices, rows, kinds, lines)
        for index, kind in enumerate(kinds):
            if kind == "points":
                rows[index][column] = number(graded.maximum)
            if kind != "student" or (index not in found.students and index not in found.unclaimed):
                continue
            student = found.students.get(index)
            said, why = value(graded, student, choices)
            held, row = rows[index][column].strip().upper(), f"row {index + 2} ({quoted(table.rows[index][0])})"
            if said is not None and held in KEPT:
                lines.append(f"{row}: {graded.name} {KEPT[held]}; kept")
            elif said is not None:
                rows[index][column] = said
                written.add((student, graded.name))
                filled.add(index)
                lines += [f"{row}: {why}; given 0"] if why else []
            elif why.startswith("no submission"):
                lines.append(f"{row}: {why}; left as Canvas has it")
    return written_file(header, rows, lines, table, assignments, set(found.students.values()), written, len(filled))


def _first_assignment_column(table: Table) -> int:
    header = table.header
    canvas = (len(header) > 3 and "Student" in header[0] and "ID" in header[1]) or (
        len(header) > 4 and "LastName" in header[0] and "FirstName" in header[1] and "ID" in header[2]
    )
    section = next((i for i, title in enumerate(header[:8]) if "Section" in title), None)
    if not canvas or section is None:
        begins = ", ".join(quoted(t, 20) for t in header[:3])
        raise Refused(
            f"{table.name} is not Canvas's gradebook export: its header begins {begins}; Canvas's begins "
            '"Student", "ID" and has a "Section" column (download it from Grades > Export)'
        )
    return section + 1


def _kind(table: Table, index: int) -> str:
    row = table.rows[index]
    if table.malformed(index) or not row:
        return "other"
    if "Points Possible" in row[0]:
        return "points"
    if all(MUTED.fullmatch(v) for v in row):
        return "other"  # the row of assignments posted by hand (or an empty one): no student
    return "student"


def _malformed(table: Table) -> list[str]:
    lines = []
    for index, row in enumerate(table.rows):
        if table.malformed(index):
            width, what = len(table.header), f"row {index + 2}: {len(row)} values where the header has {len(table.header)}"
            fate = "its missing values empty" if len(row) < width else f"the {len(row) - width} past the last column dropped"
            lines.append(f"{what}; kept with {fate}, matched to nobody")
    return lines


def _column(header: list, first: int, graded: Graded, choices: Choices, rows: list, kinds: list, lines: list) -> int:
    """The index of the assignment's column, inserted (before Canvas's totals) where there is none."""
    wanted = choices.column or graded.name
    found = [i for i in range(first, len(header)) if not TOTALS.search(header[i]) and wanted in (header[i], _title(header[i]))]
    if len(found) > 1:
        titles = ", ".join(quoted(header[i]) for i in found)
        raise Refused(f"{len(found)} columns of the roster are {quoted(wanted)} ({titles}): name one with --column")
    if found:
        column = found[0]
        points = next((rows[i][column] for i, kind in enumerate(kinds) if kind == "points"), "")
        if READ_ONLY.search(str(points)):
            raise Refused(f"Canvas's column {quoted(header[column])} is read only")
        if str(points).strip() and _points(points) != round(graded.maximum, 2):
            lines.append(
                f"Canvas's {quoted(header[column])} has {quoted(str(points))} points possible; written as "
                f"{number(graded.maximum)}, the maximum of {graded.name} (Canvas changes it as it imports the file)"
            )
        return column
    if TOTALS.search(wanted) or wanted in INFO or TITLE_ID.fullmatch(wanted) or not wanted.strip():
        raise Refused(f"Canvas would not read a column titled {quoted(wanted)} as an assignment: give it another with --column")
    column = next((i for i in range(first, len(header)) if TOTALS.search(header[i])), len(header))
    header.insert(column, wanted)
    for row in rows:
        row.insert(column, "")
    return column


def _title(header: str) -> str:
    found = TITLE_ID.fullmatch(header)
    return found.group(1) if found else header


def _points(text: str) -> float | None:
    try:
        return round(float(text.strip().replace(",", ".")), 2)
    except ValueError:
        return None
