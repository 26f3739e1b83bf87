"""Which roster row is which student: an equality the instructor names, never a likeness.

Either a column of the roster holds nbgrader's student ids (`--match-column`), or a mapping file gives, for each
nbgrader id, the value of one roster column (its header names that column). A row belongs to a student when its
value in that column is exactly the student's (no case folding, no trimming, no near matches). A student is
matched when exactly one row is theirs and that row is nobody else's; every other case is said in one line and
the rows involved are left out:

* a student of the gradebook (with a submission) whose value no row holds, or whom the mapping file leaves out;
* two rows holding one student's value, or one row claimed by two students (a mapping file's doing);
* a row whose value is no student's: a roster row with no submission (given 0 only where the instructor asks).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .table import RosterError, Table, quoted, read_table, student as named


@dataclass(frozen=True)
class Matching:
    column: str  # the roster's column holding each student's value
    mapping: dict | None = None  # nbgrader id -> the values the mapping file gives it; None: the column holds the ids
    source: str = ""  # where the mapping came from, as lines name it

    def values(self, student: str) -> tuple:
        return (student,) if self.mapping is None else tuple(self.mapping.get(student, ()))


@dataclass
class Matched:
    students: dict = field(default_factory=dict)  # row index -> the one student it belongs to
    unclaimed: list = field(default_factory=list)  # row indexes whose value is no student's (no submission)
    left_out: set = field(default_factory=set)  # students with a submission whose grades are not written
    lines: list = field(default_factory=list)


def read_mapping(path: Path) -> tuple[Matching, list[str]]:
    """A two-column mapping file: nbgrader's ids in the first column, under any title; the second column's title
    names the roster column its values are in. Returns the matching and one line per row left aside."""
    table = read_table(path, "the mapping file")
    if len(table.header) != 2:
        raise RosterError(
            f"{table.name} has {len(table.header)} columns: a mapping file has two, nbgrader's student id and the "
            "roster column it maps to (its title, e.g. SIS Login ID)"
        )
    mapping, lines = {}, table.problems("left aside")
    for index, row in enumerate(table.rows):
        if table.malformed(index) or not row:
            continue
        student, value = row
        if not student or not value:
            lines.append(f"{table.name} row {index + 2}: an empty value; left aside")
            continue
        mapping.setdefault(student, [])
        if value not in mapping[student]:
            mapping[student].append(value)
    return Matching(table.header[1], {s: tuple(v) for s, v in mapping.items()}, table.name), lines


def match(table: Table, rows: list[int], matching: Matching, students: set, who) -> Matched:
    """Each of `rows` (indexes of the roster's student rows) to a student of `students` (those with a
    submission), as the module says. `who(index)` names a row in a line."""
    column = table.column(matching.column, " (the column to match students by)")
    value = {index: table.rows[index][column] for index in rows}
    rows_of: dict = {}
    for index in rows:
        rows_of.setdefault(value[index], []).append(index)
    claimants = students if matching.mapping is None else set(matching.mapping) | students
    claims: dict = {}
    for student in sorted(claimants):
        for held in matching.values(student):
            for index in rows_of.get(held, ()):
                claims.setdefault(index, []).append(student)
    found = Matched()
    doubled = set()
    for index in rows:
        theirs = claims.get(index, [])
        if not theirs:
            found.unclaimed.append(index)
            continue
        student = theirs[0]
        others = [i for v in matching.values(student) for i in rows_of.get(v, ()) if i != index]
        if len(theirs) == 1 and len(matching.values(student)) == 1 and not others:
            found.students[index] = student
            continue
        doubled |= set(theirs)
        rows_held = sorted([index, *others])
        found.lines.append(f"row {index + 2} ({who(index)}): {_why(theirs, rows_held, value[index], matching)}; left out")
    for student in sorted(students):
        if student in doubled:
            found.left_out.add(student)
        elif student not in found.students.values():
            found.left_out.add(student)
            found.lines.append(f"{named(student)}: {_missing(student, matching)}; left out")
    return found


def _why(claimants: list, rows: list, value: str, matching: Matching) -> str:
    names = " and ".join(named(s) for s in claimants)
    if len(claimants) > 1:
        return f"{matching.source} gives it to {names} (its {quoted(matching.column)} is {quoted(value)})"
    given = matching.values(claimants[0])
    if len(given) > 1:
        return f"{matching.source} gives {names} {len(given)} values ({', '.join(quoted(v) for v in given)})"
    numbers = [str(i + 2) for i in rows]
    held = ", ".join(numbers[:-1]) + " and " + numbers[-1]
    return f"student {names} has rows {held} ({quoted(matching.column)} {quoted(value)})"


def _missing(student: str, matching: Matching) -> str:
    if matching.mapping is not None and student not in matching.mapping:
        return f"in the gradebook, not in {matching.source}"
    held = " or ".join(quoted(v) for v in matching.values(student))
    return f"in the gradebook, but no roster row has {held} in {quoted(matching.column)}"
