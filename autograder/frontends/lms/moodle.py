"""Moodle: the grade export Moodle writes (Grades > Export > Plain text file) is the roster, and the file written is
one for Moodle's Grades > Import > CSV file: the identifier column the instructor picks, then one column per
assignment.

Moodle's export has a header row (First name, Last name, then the user fields the site exports: ID number,
Institution, Department, Email address by default, Username where the site adds it), then a column per grade item
and `Last downloaded from this course`, and a row per student. Its import finds each student by one column the
instructor maps to a user field (`Map from` / `Map to`: username, email address, ID number or user id), and stops
the whole import at a row whose identifier matches no user or is empty; a grade cell left empty clears that grade.
So the file written holds only rows it can fill whole: a student left out (no submission, a grade held back, a row
matched twice, no identifier, an identifier two rows share) has no row, and keeps their grade in Moodle. Columns:
the identifier column under its title in the roster (`--identifier`, default the match column), and each
assignment's score under its name (or `--column`).
"""

from __future__ import annotations

from .grades import Choices, Graded, Refused, Written, check_awaiting, value, written_file
from .match import Matching, match
from .table import Table, quoted


def moodle_file(table: Table, assignments: list[Graded], matching: Matching, choices: Choices = Choices()) -> Written:
    if choices.column and len(assignments) > 1:
        raise Refused("--column names the column of one assignment: export one with --assignment")
    identifier = table.column(choices.identifier or matching.column, " (the identifier Moodle's import maps from)")
    students = {s for graded in assignments for s in graded.standings}
    student_rows = [index for index, row in enumerate(table.rows) if row and not table.malformed(index)]
    who = lambda i: quoted(" ".join(table.rows[i][:2]).strip())  # noqa: E731 (Moodle's first two: the name)
    found = match(table, student_rows, matching, students, who)
    check_awaiting(assignments, set(found.students.values()), choices)
    lines, filled, zeros = table.problems("left out") + found.lines, {}, {}
    for index in sorted([*found.students, *found.unclaimed]):
        student = found.students.get(index)
        cells = [value(graded, student, choices) for graded in assignments]
        why = [reason for said, reason in cells if said is None]
        if why:  # a grade held back alone is said by the held-back line
            if len(assignments) > 1 or any(reason.startswith("no submission") for reason in why):
                lines.append(f"row {index + 2} ({who(index)}): {', '.join(why)}; left out")
            continue
        filled[index] = [said for said, _ in cells]
        zeros[index] = [reason for _, reason in cells if reason]  # missing work, given 0
    shared: dict = {}
    for index in filled:
        shared.setdefault(table.rows[index][identifier], []).append(index)
    rows, written = [], set()
    for index, cells in filled.items():
        held = table.rows[index][identifier]
        if not held.strip():
            lines.append(f"row {index + 2} ({who(index)}): no {quoted(table.header[identifier])}; left out")
        elif len(shared[held]) > 1:
            others = " and ".join(str(i + 2) for i in shared[held] if i != index)
            lines.append(f"row {index + 2} ({who(index)}): {quoted(held)} is row {others}'s too; left out")
        else:
            rows.append([held, *cells])
            lines += [f"row {index + 2} ({who(index)}): {', '.join(zeros[index])}; given 0"] if zeros[index] else []
            written |= {(found.students.get(index), graded.name) for graded in assignments}
    header = [table.header[identifier], *[choices.column or graded.name for graded in assignments]]
    return written_file(header, rows, lines, table, assignments, set(found.students.values()), written, len(rows))
