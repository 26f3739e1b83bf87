"""Where a student stands on one assignment: the one computation of the numbers every view shows (feedback pages,
grade-class's results.json, grades.csv and pages, the export, the class report, formgrader's view, the Gradescope
run's output). Views render a `Standing`; none adds up points of its own.

In a course the record is nbgrader's gradebook, read into plain `GradeRecord`s by `nbgrader.gradebook.
standing_from_gradebook`, and `standing_from_record` computes: each graded cell's points by nbgrader's rule (the
instructor's score where there is one, else the autograder's, plus extra credit; none yet for a written answer
awaiting grading), the course's late penalty applied to their sum now (so a written answer graded or a score
overridden after autograding is penalised as the feedback says), whether the grade is out of date (the course's
points are not those the gradebook holds, or those the submission was graded against) and the isolation it was
graded under. Outside a course (`grade`, `grade-class` on a folder, Gradescope) `standing_of` takes the grader's
result alone, the written answers awaiting an instructor. Pure: no nbgrader, no student code.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Callable

from autograder.course import kit
from autograder.course.notebook import HIDDEN_CHECK_PREFIX
from autograder.engine.results import SubmissionResult, points_text, score_text
from autograder.engine.rubric import RUBRIC
from .shown import line

AWAITING = "awaiting your instructor"
UNISOLATED = "UNSAFE"  # how the sandbox's description of a run without isolation starts (client.UNSAFE)
UNISOLATED_LINE = (
    "Graded without isolation: nothing kept this submission from the grading files (the course "
    "chose to grade where no sandbox could run)."
)
GRADE_IS = "The student's feedback page, the export and the class report show this number."


@dataclass(frozen=True)
class CellGrade:
    grade_id: str
    title: str
    points: float | None  # None: not graded yet (a written answer awaiting the instructor)
    max_points: float
    manual: bool = False  # the instructor set these points (an override, or a written answer graded)
    comment: str = ""  # the instructor's comment on the cell
    answer: str | None = None  # the student's written answer, where the page shows it

    @property
    def text(self) -> str:
        return AWAITING if self.points is None else score_text(self.points, self.max_points)


@dataclass(frozen=True)
class Standing:
    score: float  # what counts: the total after the late penalty
    max_score: float
    checks: dict  # check name -> CellGrade
    written: tuple = ()  # CellGrade of each written answer, in notebook order
    late_penalty: float = 0.0
    seconds_late: float | None = None  # how late the gradebook says it was; None: not known (outside a course)
    remarks: tuple = ()  # (title of the student's code cell, comment) from the instructor
    stale: str = ""  # why these points are out of date ("" when they are not): no view hands them out
    isolation: str = ""  # the sandbox's description of how the result was graded (kept from students)

    @property
    def awaiting(self) -> float:
        """Points of written answers nobody has graded yet."""
        return sum(cell.max_points for cell in self.written if cell.points is None)

    @property
    def raw_score(self) -> float:
        return round(self.score + self.late_penalty, 6)

    @property
    def late(self) -> bool:
        return bool(self.seconds_late and self.seconds_late > 0)

    @property
    def late_by(self) -> str:
        """How late, as a person says it ("5.2 h"); "" when on time or not known."""
        return late_text(self.seconds_late) if self.late else ""

    @property
    def late_line(self) -> str:
        """What every view says of a late submission, whatever the course's rule ("" when on time): "Late by 5.2 h:
        no points deducted under the course's late rule", or "...: 3 points deducted under the course's late rule
        (17 before the deduction)"."""
        if not self.late:
            return ""
        if not self.late_penalty:
            return f"Late by {self.late_by}: no points deducted under the course's late rule"
        return (
            f"Late by {self.late_by}: {points_text(self.late_penalty)} points deducted under the course's late rule "
            f"({points_text(self.raw_score)} before the deduction)"
        )

    @property
    def unisolated(self) -> bool:
        return self.isolation.startswith(UNISOLATED)

    @property
    def text(self) -> str:
        return score_text(self.score, self.max_score)

    def summary(self) -> str:
        """One line: "Score: 17 / 30 (6 points of written answers awaiting your instructor; late by 5.2 h, 3 points
        deducted)"; a late submission is said whatever its penalty ("late by 34 s, no points deducted")."""
        extra = []
        if self.awaiting:
            extra.append(f"{points_text(self.awaiting)} points of written answers {AWAITING}")
        if self.late:
            deducted = f"{points_text(self.late_penalty)} points" if self.late_penalty else "no points"
            extra.append(f"late by {self.late_by}, {deducted} deducted")
        return f"Score: {self.text}" + (f" ({'; '.join(extra)})" if extra else "")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Standing":
        cell = lambda d: CellGrade(**d)  # noqa: E731
        return cls(
            **{
                **data,
                "checks": {name: cell(c) for name, c in data["checks"].items()},
                "written": tuple(cell(c) for c in data.get("written") or ()),
                "remarks": tuple(tuple(r) for r in data.get("remarks") or ()),
            }
        )


def late_text(seconds: float) -> str:
    """How late, as a person says it: "34 s", "12 min", "5.2 h", "3.1 days"."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def cell_title(assignment: kit.Assignment, grade_id: str) -> str:
    """A cell's name as the notebook puts it: the bold lead of the question above it ("Written question 1") or
    the heading above it ("Task 1: the forward pass of a Pre-LN block"), else its cell id."""
    cells = assignment.cells()
    for before, cell in zip(cells, cells[1:]):
        if cell.grade_id == grade_id:
            lead = re.match(r"\s*\*\*(.+?)\*\*", before.source) or re.match(r"\s*#+\s*(.+)", before.source)
            if lead:
                return re.sub(r"\s*\([^)]*points?\)\s*", " ", lead.group(1)).strip().rstrip(".:").strip()
    return grade_id


def standing_of(result: SubmissionResult, assignment: kit.Assignment = kit.KIT) -> Standing:
    """Outside a course: the checks' points as graded, every written answer awaiting an instructor."""
    checks = {c.check: CellGrade(f"{HIDDEN_CHECK_PREFIX}{c.check}", c.title, c.points, c.max_points) for c in result.checks}
    written = tuple(
        CellGrade(grade_id, cell_title(assignment, grade_id), None, points)
        for grade_id, points in assignment.written_points().items()
    )
    return Standing(
        result.score, round(result.max_score + sum(c.max_points for c in written), 6), checks, written, isolation=result.isolation
    )


# --- in a course: from the gradebook ------------------------------------------------------------------


@dataclass(frozen=True)
class GradeRecord:
    """One graded cell of one submission as the gradebook holds it."""

    grade_id: str
    max_score: float
    auto_score: float | None = None
    manual_score: float | None = None
    extra_credit: float | None = None
    comment: str = ""

    @property
    def points(self) -> float | None:
        """nbgrader's rule: the instructor's score, else the autograder's, plus any extra credit; None while
        neither has given one."""
        given = self.manual_score if self.manual_score is not None else self.auto_score
        return None if given is None else round(given + (self.extra_credit or 0.0), 6)


@dataclass(frozen=True)
class Record:
    """What the gradebook (and the autograded notebook beside it) holds of one student's submission."""

    grades: dict  # grade_id -> GradeRecord
    seconds_late: float = 0.0
    comments: dict = field(default_factory=dict)  # grade_id of a code cell -> the instructor's comment
    answers: dict = field(default_factory=dict)  # grade_id -> the student's written answer
    graded: SubmissionResult | None = None  # the kit's result kept in the autograded notebook


def stale_reason(assignment: kit.Assignment, record: Record) -> str:
    """Why the gradebook's points for this submission are not the course's now, in one clause ("" if they are)."""
    source = {**{f"{HIDDEN_CHECK_PREFIX}{n}": p for n, p in assignment.check_points().items()}, **assignment.written_points()}
    differ = [
        f"{gid} gives {points_text(points)} points in the source, {points_text(record.grades[gid].max_score)} in the gradebook"
        for gid, points in source.items()
        if gid in record.grades and abs(record.grades[gid].max_score - points) > 1e-9
    ]
    if differ:
        return "; ".join(differ)
    checks = [gid for gid in source if gid.startswith(HIDDEN_CHECK_PREFIX) and gid in record.grades]
    if record.graded is None or any(record.grades[gid].auto_score is None for gid in checks):
        return "not graded by the kit yet"
    graded = {f"{HIDDEN_CHECK_PREFIX}{c.check}": c.max_points for c in record.graded.checks}
    moved = [
        f"{gid} was graded out of {points_text(graded[gid])} points, the course gives {points_text(source[gid])}"
        for gid in checks
        if gid in graded and abs(graded[gid] - source[gid]) > 1e-9
    ]
    return "; ".join(moved)


def standing_from_record(
    assignment: kit.Assignment, record: Record, penalty: Callable[[float, float], float | None] = lambda score, late: None
) -> Standing:
    """THE standing of a course's student. `penalty(score, seconds_late)` is the course's late-penalty rule
    (nbgrader's plugin), applied to the points as they are now and kept between 0 and the score, as nbgrader
    keeps it."""
    checks, written, remarks = {}, [], []
    for cell in assignment.cells():
        grade = record.grades.get(cell.grade_id or "")
        if grade is None:
            if cell.nbgrader.get("solution") and record.comments.get(cell.grade_id):
                remarks.append((cell_title(assignment, cell.grade_id), record.comments[cell.grade_id]))
            continue
        manual = grade.manual_score is not None or bool(grade.extra_credit)
        if cell.is_hidden_check:
            name = cell.grade_id.removeprefix(HIDDEN_CHECK_PREFIX)
            title = RUBRIC[name].title if name in RUBRIC else cell.grade_id
            checks[name] = CellGrade(cell.grade_id, title, grade.points, grade.max_score, manual, grade.comment)
        else:
            written.append(
                CellGrade(
                    cell.grade_id,
                    cell_title(assignment, cell.grade_id),
                    grade.points,
                    grade.max_score,
                    manual,
                    grade.comment,
                    record.answers.get(cell.grade_id),
                )
            )
    raw = round(sum(g.points or 0.0 for g in record.grades.values()), 6)
    late = penalty(raw, record.seconds_late) if record.seconds_late > 0 else None
    late = min(max(float(late or 0.0), 0.0), raw)
    maximum = round(sum(g.max_score for g in record.grades.values()), 6)
    return Standing(
        round(raw - late, 6),
        maximum,
        checks,
        tuple(written),
        late,
        record.seconds_late,
        tuple(remarks),
        stale_reason(assignment, record),
        record.graded.isolation if record.graded else "",
    )


def stale_line(assignment: str, stale: dict) -> str:
    """One line for out-of-date grades (student -> reason), naming the commands that bring them up to date; the
    student's id as one line of text (`shown.line`)."""
    first, reason = next(iter(stale.items()))
    first = line(first)
    others = f" and {len(stale) - 1} more" if len(stale) > 1 else ""
    fix = (
        f"run `nbgrader generate_assignment {assignment} --force`, then grade again"
        if "in the gradebook" in reason
        else "grade again"
    )
    return (
        f"the grades of {len(stale)} student{'s' * (len(stale) > 1)} of {assignment} are out of date "
        f"({first}{others}: {reason}): {fix} (`nbgrader autograde {assignment} --force`, or `grade-class --course "
        "--force`)"
    )
