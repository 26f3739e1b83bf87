"""Where a student stands on one assignment: the numbers every place shows them (feedback pages, grades.csv, the
class report), from one record.

In a course the record is nbgrader's gradebook (`nbgrader_feedback.standing_from_gradebook`): the checks' points,
an instructor's override, the written answers (graded or awaiting), comments and the late penalty. Outside a
course (`grade`, `grade-class` on a folder) it is the grader's result alone (`standing_of`), the written answers
awaiting an instructor. Pure: no nbgrader, no student code.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from autograder.course import kit
from autograder.engine.results import SubmissionResult, points_text, score_text

AWAITING = "awaiting your instructor"


@dataclass(frozen=True)
class CellGrade:
    grade_id: str
    title: str
    points: float | None          # None: not graded yet (a written answer awaiting the instructor)
    max_points: float
    manual: bool = False          # the instructor set these points (an override, or a written answer graded)
    comment: str = ""             # the instructor's comment on the cell
    answer: str | None = None     # the student's written answer, where the page shows it

    @property
    def text(self) -> str:
        return AWAITING if self.points is None else score_text(self.points, self.max_points)


@dataclass(frozen=True)
class Standing:
    score: float                  # what counts: the total after the late penalty
    max_score: float
    checks: dict                  # check name -> CellGrade
    written: tuple = ()           # CellGrade of each written answer, in notebook order
    late_penalty: float = 0.0
    seconds_late: float = 0.0
    remarks: tuple = ()           # (cell id, comment) on the student's code cells

    @property
    def awaiting(self) -> float:
        """Points of written answers nobody has graded yet."""
        return sum(cell.max_points for cell in self.written if cell.points is None)

    @property
    def raw_score(self) -> float:
        return self.score + self.late_penalty

    @property
    def text(self) -> str:
        return score_text(self.score, self.max_score)

    def summary(self) -> str:
        """One line: "Score: 17 / 30 (6 points of written answers awaiting your instructor; late: -3)"."""
        extra = []
        if self.awaiting:
            extra.append(f"{points_text(self.awaiting)} points of written answers {AWAITING}")
        if self.late_penalty:
            extra.append(f"late submission: {points_text(self.late_penalty)} points deducted")
        return f"Score: {self.text}" + (f" ({'; '.join(extra)})" if extra else "")


def written_title(assignment: kit.Assignment, grade_id: str) -> str:
    """A written answer's name as the notebook puts it: the bold lead of the question above the answer cell
    ("Written question 1"), else its cell id."""
    cells = assignment.cells()
    for before, cell in zip(cells, cells[1:]):
        if cell.grade_id == grade_id:
            lead = re.match(r"\s*\*\*(.+?)\*\*", before.source)
            if lead:
                return re.sub(r"\s*\([^)]*points?\)\s*", " ", lead.group(1)).strip().rstrip(".:").strip()
    return grade_id


def standing_of(result: SubmissionResult, assignment: kit.Assignment = kit.KIT) -> Standing:
    """Outside a course: the checks' points as graded, every written answer awaiting an instructor."""
    checks = {c.check: CellGrade(f"check_{c.check}", c.title, c.points, c.max_points) for c in result.checks}
    written = tuple(CellGrade(grade_id, written_title(assignment, grade_id), None, points)
                    for grade_id, points in assignment.written_points().items())
    return Standing(result.score, result.max_score + sum(c.max_points for c in written), checks, written)
