"""`nbgrader export` for a course: one row per student, each assignment's columns side by side, and a tidy file
with one row per student and graded cell for analysis.

`grades.csv` (or `--to FILE`): student_id, last_name, first_name, email, then for every assignment, sorted by
name (only those named with `--assignment`): `<assignment>/timestamp`, `/late_penalty`, `/score` (after the
penalty: what the feedback page says), `/max_score`, `/awaiting` (points of written answers nobody graded yet),
and one column per graded cell (`<assignment>/check_forward_order`, ...; with the notebook's name in between
when an assignment has several): the gradebook's points, a manual override included, empty where nothing was
submitted or the cell awaits grading.

`grades_per_check.csv` beside it: student, assignment, check, points, max, late (1 when the submission was
late), manual (1 when an instructor set the points); points empty where the cell awaits grading.

For the kit's assignments every number is the student's standing (`gradebook.standing_from_gradebook`), the one
the feedback page shows; while any of them is out of date (the course's points changed since grading), the
export writes nothing and says so in one line. Other assignments get the gradebook's numbers as nbgrader keeps
them. No cell of either file can run in a spreadsheet (`exports`: a cell that starts with =, +, -, @, a tab or a
carriage return gets a leading ').
"""

from __future__ import annotations

import sys
from pathlib import Path

from nbgrader.api import MissingEntry
from nbgrader.plugins import ExportPlugin

from autograder.course import kit
from autograder.engine.rubric import RUBRIC
from autograder.frontends.exports import write_csv
from autograder.frontends.standing import stale_line
from .gradebook import autograded_notebook, standing_from_gradebook
from .plugins import course_directory
from .preflight import source_notebooks
from .privacy import guard_or_exit

STUDENT_COLUMNS = ["student_id", "last_name", "first_name", "email"]
PER_ASSIGNMENT = ["timestamp", "late_penalty", "score", "max_score", "awaiting"]
LONG_COLUMNS = ["student", "assignment", "check", "points", "max", "late", "manual"]


def cell_columns(assignment) -> dict[tuple[str, str], str]:
    """(notebook, grade_id) -> column name for every graded cell of an assignment."""
    several = len(assignment.notebooks) > 1
    return {
        (notebook.name, cell.name): "/".join([assignment.name, *([notebook.name] if several else []), cell.name])
        for notebook in assignment.notebooks
        for cell in notebook.grade_cells
    }


def long_path(to: str | Path) -> Path:
    to = Path(to)
    return to.with_name(f"{to.stem}_per_check{to.suffix or '.csv'}")


def _number(value) -> float | str:
    if value is None:
        return ""
    return int(value) if float(value).is_integer() else round(float(value), 4)


class PerCheckExport(ExportPlugin):
    """The kit's `nbgrader export` (see the module); `nbgrader export --exporter=...` picks another."""

    def export(self, gradebook) -> None:
        guard_or_exit(self, "Not exporting grades")  # a course others can read or write: nothing is exported
        destination = Path(self.to or "grades.csv")
        wanted_students = {str(s) for s in self.student}
        wanted = {str(a) for a in self.assignment}
        assignments = sorted((a for a in gradebook.assignments if not wanted or a.name in wanted), key=lambda a: a.name)
        missing = wanted - {a.name for a in assignments}
        if missing:
            self.log.error("No assignment %s in the gradebook", ", ".join(sorted(missing)))
        students = sorted((s for s in gradebook.students if not wanted_students or s.id in wanted_students), key=lambda s: s.id)
        columns = {a.name: cell_columns(a) for a in assignments}
        self.standings = self._standings(gradebook, assignments)
        header = STUDENT_COLUMNS + [
            column
            for a in assignments
            for column in [f"{a.name}/{field}" for field in PER_ASSIGNMENT] + list(columns[a.name].values())
        ]
        wide, long = [], []
        for student in students:
            row = {
                "student_id": student.id,
                "last_name": student.last_name or "",
                "first_name": student.first_name or "",
                "email": student.email or "",
            }
            for assignment in assignments:
                row.update(self._assignment(gradebook, assignment, student, columns[assignment.name], long))
            wide.append(row)
        self.log.info(
            "Exporting grades to %s (one row per student) and %s (one row per graded cell)", destination, long_path(destination)
        )
        _write(destination, header, wide)
        _write(long_path(destination), LONG_COLUMNS, long)

    def _standings(self, gradebook, assignments) -> dict:
        """(assignment, student) -> standing, for the kit's assignments; stops, in one line, on any out of date."""
        coursedir = course_directory(self)
        kits = {
            path.parent.name: kit.Assignment(path) for path in source_notebooks(coursedir, "*") if kit.is_kit_source(path, RUBRIC)
        }
        found, stale = {}, {}
        for assignment in assignments:
            if assignment.name not in kits:
                continue
            source = kits[assignment.name]
            for submission in self._submissions(gradebook, assignment.name):
                student = submission.student.id
                try:
                    standing = standing_from_gradebook(
                        gradebook, source, student, autograded_notebook(coursedir, source, student), self.config
                    )
                except MissingEntry:
                    continue
                found[(assignment.name, student)] = standing
                if standing.stale:
                    stale.setdefault(assignment.name, {})[student] = standing.stale
        if stale:
            self.log.error("Not exporting grades: %s.", "; ".join(stale_line(name, s) for name, s in stale.items()))
            sys.exit(1)
        return found

    @staticmethod
    def _submissions(gradebook, name: str) -> list:
        try:
            return list(gradebook.find_assignment(name).submissions)
        except MissingEntry:
            return []

    def _assignment(self, gradebook, assignment, student, columns, long: list) -> dict:
        name = assignment.name
        row = {
            f"{name}/max_score": _number(assignment.max_score),
            f"{name}/score": 0,
            f"{name}/timestamp": "",
            f"{name}/late_penalty": "",
            f"{name}/awaiting": "",
        }
        try:
            submission = gradebook.find_submission(name, student.id)
        except MissingEntry:
            return row
        standing = self.standings.get((name, student.id))
        if standing is not None:
            return {**row, **self._kit_row(name, submission, student.id, standing, columns, long)}
        penalty = submission.late_submission_penalty or 0.0
        late = int((submission.total_seconds_late or 0) > 0)
        awaiting = 0.0
        for notebook in submission.notebooks:
            for grade in notebook.grades:
                points = None if grade.manual_score is None and grade.auto_score is None else grade.score
                if points is None:
                    awaiting += grade.max_score
                column = columns.get((notebook.name, grade.name))
                if column:
                    row[column] = _number(points)
                long.append(
                    {
                        "student": student.id,
                        "assignment": name,
                        "check": grade.name,
                        "points": _number(points),
                        "max": _number(grade.max_score),
                        "late": late,
                        "manual": int(grade.manual_score is not None or bool(grade.extra_credit)),
                    }
                )
        row.update(
            {
                f"{name}/timestamp": submission.timestamp or "",
                f"{name}/late_penalty": _number(penalty),
                f"{name}/score": _number(max(0.0, submission.score - penalty)),
                f"{name}/awaiting": _number(awaiting),
            }
        )
        return row

    @staticmethod
    def _kit_row(name, submission, student: str, standing, columns, long: list) -> dict:
        """A kit assignment's columns: the standing's numbers, nothing else."""
        row = {
            f"{name}/timestamp": submission.timestamp or "",
            f"{name}/late_penalty": _number(standing.late_penalty),
            f"{name}/score": _number(standing.score),
            f"{name}/max_score": _number(standing.max_score),
            f"{name}/awaiting": _number(standing.awaiting),
        }
        late = int(standing.seconds_late > 0)
        by_column = {grade_id: column for (_, grade_id), column in columns.items()}
        for cell in [*standing.checks.values(), *standing.written]:
            if cell.grade_id in by_column:
                row[by_column[cell.grade_id]] = _number(cell.points)
            long.append(
                {
                    "student": student,
                    "assignment": name,
                    "check": cell.grade_id,
                    "points": _number(cell.points),
                    "max": _number(cell.max_points),
                    "late": late,
                    "manual": int(cell.manual),
                }
            )
        return row


def _write(path: Path, header: list[str], rows: list[dict]) -> None:
    write_csv(path, header, rows)  # every cell neutralized: student ids and names are the students'
