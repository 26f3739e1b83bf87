"""What an LMS's file says of one student on one assignment: the standing's score (late penalty taken off, an
instructor's override or extra credit included), and nothing of its own.

* A grade out of date (the course's points changed since grading) is held back, as `nbgrader export` holds it
  back: every other value is written, one line names the students and how to bring them up to date
  (`standing.stale_line`), and the file is incomplete.
* Written answers awaiting grading: nothing is written (`Refused`, one line naming the students) unless the
  instructor counts them as 0 (`Choices.awaiting_as_zero`): an LMS's grade cell holds a number or nothing, so a
  file cannot say that part of a grade is still to come.
* No submission: left out, or 0 where the instructor asks for missing work as 0 (`Choices.missing_as_zero`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autograder.engine.results import points_text
from autograder.frontends.standing import stale_line
from .table import student as named, table_text

NAMED = 5  # students a refusal names before "and N more"


class Refused(Exception):
    """Nothing is written, for the reason its message gives in one line."""


@dataclass(frozen=True)
class Graded:
    """One assignment as the gradebook holds it: its maximum and each student's standing (those with a submission)."""

    name: str
    maximum: float
    standings: dict


@dataclass(frozen=True)
class Choices:
    missing_as_zero: bool = False
    awaiting_as_zero: bool = False
    column: str = ""  # the LMS's column for the assignment (one assignment only); default: its name
    identifier: str = ""  # Moodle: the roster column written to identify each student; default: the match column
    awaiting_option: str = "--awaiting-as-zero"  # how the door asks for awaiting answers as 0


@dataclass
class Written:
    header: list
    rows: list
    lines: list = field(default_factory=list)  # one per row or student left out, or kept as the LMS had it
    held_back: str = ""  # the line for grades out of date ("" when none)
    missing: set = field(default_factory=set)  # (student, assignment) with a grade that is not in the file
    filled: int = 0  # rows given a value
    bom: bool = False
    line_end: str = "\r\n"
    names: tuple = ()  # the assignments written

    @property
    def complete(self) -> bool:
        """Every grade the gradebook holds for the assignments, for every student with a submission, is in the file."""
        return not self.missing

    def text(self) -> str:
        return table_text(self.header, self.rows, self.line_end, self.bom)


def number(points: float):
    """A grade as the file writes it: 17, 17.5, 16.6667."""
    points = round(float(points), 4)
    return int(points) if points.is_integer() else points


def value(graded: Graded, student: str | None, choices: Choices) -> tuple[object, str]:
    """(what the file says, why not the standing) for a row: (the score, ""); (None, "... out of date"); with no
    submission, (None, "no submission of ...") or (0, the same) where missing work counts as 0."""
    standing = graded.standings.get(student) if student is not None else None
    if standing is None:
        return 0 if choices.missing_as_zero else None, f"no submission of {graded.name}"
    if standing.stale:
        return None, f"{graded.name} held back (out of date)"
    return number(standing.score), ""


def check_awaiting(assignments: list[Graded], students: set, choices: Choices) -> None:
    """Refused where a student whose grade would be written has written answers nobody graded yet."""
    if choices.awaiting_as_zero:
        return
    waiting = [
        f"{named(student)}: {points_text(s.awaiting)} points of {graded.name}"
        for graded in assignments
        for student, s in sorted(graded.standings.items())
        if student in students and s.awaiting and not s.stale
    ]
    if waiting:
        more = f" and {len(waiting) - NAMED} more" if len(waiting) > NAMED else ""
        raise Refused(
            f"written answers await grading ({', '.join(waiting[:NAMED])}{more}): grade them (formgrader), or "
            f"count them as 0 ({choices.awaiting_option})"
        )


def stale_lines(assignments: list[Graded], students: set) -> str:
    """The held-back line for the written students whose grades are out of date ("" when none)."""
    held = []
    for graded in assignments:
        stale = {s: st.stale for s, st in sorted(graded.standings.items()) if s in students and st.stale}
        if stale:
            held.append(stale_line(graded.name, stale))
    return "; ".join(held)


def missing_grades(assignments: list[Graded], written: set) -> set:
    """(student, assignment) of every grade the gradebook holds that `written` (the same pairs) leaves out."""
    return {(s, g.name) for g in assignments for s in g.standings if (s, g.name) not in written}


def written_file(header, rows, lines, table, assignments: list[Graded], students: set, written: set, filled: int) -> Written:
    """An LMS's file in `table`'s own encoding (byte-order mark, line ends), with what it holds back (`students`: those
    it matched) and the gradebook's grades it leaves out (`written`: the (student, assignment) pairs it holds)."""
    return Written(
        header,
        rows,
        lines,
        held_back=stale_lines(assignments, students),
        missing=missing_grades(assignments, written),
        filled=filled,
        bom=table.bom,
        line_end=table.line_end,
    )
