"""`nbgrader export` in a course of the kit: nbgrader's own grades.csv, the kit's assignments' numbers in it taken
from the one standing, and a file with one row per graded cell beside it.

`grades.csv` (or `--to FILE`) is the file nbgrader's CsvExportPlugin writes: a row per assignment and student, in
nbgrader's order (assignments by due date and name, students by last and first name), with nbgrader's columns
in nbgrader's order (`NBGRADER_COLUMNS`); a student who submitted nothing gets nbgrader's row of zeros. On every
assignment that is not the kit's each row is nbgrader's, byte for byte. On the kit's assignments the numbers are
the student's standing (`gradebook.standing_from_gradebook`, what the feedback page says): raw_score before the
late penalty, late_submission_penalty as the course's late rule gives it now, score after it. Where the export
holds one of the kit's assignments, the kit's columns follow nbgrader's (`KIT_COLUMNS`), filled on the kit's rows
with a submission and empty on every other row:

* seconds_late: how late the submission was (0 when on time), under every late rule, nbgrader's default
  ("flag, lose nothing") included, and late_by, the same as a person says it ("5.2 h"; empty when on time);
* awaiting: points of written answers nobody has graded yet.

An export without any of the kit's assignments (`--assignment=hw2`, a course without the kit's) writes exactly
nbgrader's file.

`grades_per_check.csv` beside it: student, assignment, check, points, max, late (1 when the submission was
late), manual (1 when an instructor set the points), one row per graded cell of every submission exported;
points empty where the cell awaits grading.

A kit grade out of date (the course's points changed since grading) holds back only that student's rows of that
assignment: every other row is written, one line names what was left out and how to bring it up to date, and
the command exits with status 3 (`HELD_BACK`), which no complete export has.

No cell of either file can run in a spreadsheet (`exports`: text that starts with =, +, -, @, a tab or a carriage
return gets a leading '), and a value holding a comma, a quote or a line break is quoted; stock nbgrader writes
such values as they are, which breaks its file. Every other value is written as nbgrader writes it.

An export that holds one of the kit's assignments refuses, in one line and writing nothing, while two of the
students it exports have ids that read alike (`ids`: `alice` and the Cyrillic `\u0430lice`): a spreadsheet or an LMS
would show them as one student. Every cell is text only (`exports`: escape sequences, direction overrides and
invisible characters as escapes).

Nothing here imports the grader: an export of other assignments costs what nbgrader's own does.
"""

from __future__ import annotations

import sys
from pathlib import Path

from nbgrader.api import MissingEntry
from nbgrader.plugins import ExportPlugin

from autograder.course import kit
from autograder.engine.rubric import RUBRIC
from autograder.frontends.exports import write_csv
from autograder.frontends.standing import late_text, stale_line
from .gradebook import autograded_notebook, load_submissions, standing_from_gradebook
from .plugins import course_directory, refuse
from .preflight import source_notebooks
from .privacy import guard_or_exit

NBGRADER_COLUMNS = [  # nbgrader.plugins.CsvExportPlugin's, in its order
    "assignment",
    "duedate",
    "timestamp",
    "student_id",
    "last_name",
    "first_name",
    "email",
    "raw_score",
    "late_submission_penalty",
    "score",
    "max_score",
]
KIT_COLUMNS = ["seconds_late", "late_by", "awaiting"]
LONG_COLUMNS = ["student", "assignment", "check", "points", "max", "late", "manual"]
HELD_BACK = 3  # the exit status of an export that left out out-of-date grades


def long_path(to: str | Path) -> Path:
    to = Path(to)
    return to.with_name(f"{to.stem}_per_check{to.suffix or '.csv'}")


def _number(value) -> float | str:
    if value is None:
        return ""
    return int(value) if float(value).is_integer() else round(float(value), 4)


def _stock(value):
    """A value as nbgrader's CsvExportPlugin writes it: None as nothing, a number as Python prints it."""
    return "" if value is None else value


class PerCheckExport(ExportPlugin):
    """The kit's `nbgrader export` (see the module); `nbgrader export --exporter=...` picks another."""

    def export(self, gradebook) -> None:
        guard_or_exit(self, "Not exporting grades")  # a course others can read or write: nothing is exported
        destination = Path(self.to or "grades.csv")
        wanted_students = {str(s) for s in self.student}
        wanted = {str(a) for a in self.assignment}
        assignments = [a for a in gradebook.assignments if not wanted or a.name in wanted]
        missing = wanted - {a.name for a in assignments}
        if missing:
            self.log.warning("No assignment %s in the gradebook", ", ".join(sorted(missing)))
        students = [s for s in gradebook.students if not wanted_students or s.id in wanted_students]
        kits = self._kit_assignments(assignments)
        if kits:
            self._refuse_alike([s.id for s in students])
        rows, long, stale = [], [], {}
        for assignment in assignments:
            source = kits.get(assignment.name)
            standings = self._standings(gradebook, source) if source else {}
            for student in students:
                standing = standings.get(student.id)
                if standing is not None and standing.stale:
                    stale.setdefault(assignment.name, {})[student.id] = standing.stale
                    continue
                row, cells = self._row(gradebook, assignment, student, source, standing)
                rows.append(row)
                long.extend(cells)
        header = NBGRADER_COLUMNS + (KIT_COLUMNS if kits else [])
        self.log.info("Exporting grades to %s and %s (one row per graded cell)", destination, long_path(destination))
        write_csv(destination, header, rows, line_end="\n")  # nbgrader's line ends
        write_csv(long_path(destination), LONG_COLUMNS, long)
        if stale:
            self.log.error(
                "Not exported to %s (every other row is): %s.",
                destination,
                "; ".join(stale_line(name, held) for name, held in stale.items()),
            )
            sys.exit(HELD_BACK)

    def _refuse_alike(self, students: list[str]) -> None:
        from autograder.frontends.ids import refusal as alike

        why = alike(students)
        if why:
            refuse(self.log, "Not exporting grades", why)  # logs the one line
            sys.exit(1)

    def _kit_assignments(self, assignments) -> dict:
        """name -> the course's source, for each exported assignment that is one of the kit's."""
        coursedir = course_directory(self)
        found = {}
        for assignment in assignments:
            sources = [p for p in source_notebooks(coursedir, assignment.name) if kit.is_kit_source(p, RUBRIC)]
            if sources:
                found[assignment.name] = kit.Assignment(sources[0])
        return found

    def _standings(self, gradebook, source: kit.Assignment) -> dict:
        """student -> standing, for every student with a submission of the kit's assignment."""
        coursedir = course_directory(self)
        held = load_submissions(gradebook, source)  # noqa: F841  (one query for all; kept while the rows are read)
        found = {}
        for submission in _submissions(gradebook, source.name):
            student = submission.student.id
            try:
                found[student] = standing_from_gradebook(
                    gradebook, source, student, autograded_notebook(coursedir, source, student), self.config
                )
            except MissingEntry:
                continue
        return found

    def _row(self, gradebook, assignment, student, source, standing) -> tuple[dict, list[dict]]:
        """The student's row of grades.csv for the assignment, and their rows of grades_per_check.csv."""
        row = {
            "assignment": assignment.name,
            "duedate": _stock(assignment.duedate),
            "student_id": student.id,
            "last_name": _stock(student.last_name),
            "first_name": _stock(student.first_name),
            "email": _stock(student.email),
            "max_score": _stock(assignment.max_score),
        }
        try:
            submission = gradebook.find_submission(assignment.name, student.id)
        except MissingEntry:
            return {**row, "timestamp": "", "raw_score": 0.0, "late_submission_penalty": 0.0, "score": 0.0}, []
        row["timestamp"] = _stock(submission.timestamp)
        seconds = submission.total_seconds_late or 0.0
        if standing is None:  # nbgrader's numbers, as nbgrader exports them
            penalty = submission.late_submission_penalty
            row.update(
                raw_score=_stock(submission.score),
                late_submission_penalty=_stock(penalty),
                score=max(0.0, submission.score - (penalty or 0.0)),
            )
            cells = [_gradebook_cell(grade) for notebook in submission.notebooks for grade in notebook.grades]
            if source is not None:  # the kit's, without a notebook in the gradebook: its late columns still
                row.update(seconds_late=float(seconds), late_by=late_text(seconds) if seconds > 0 else "")
        else:
            row.update(
                raw_score=float(standing.raw_score),
                late_submission_penalty=float(standing.late_penalty),
                score=float(standing.score),
                max_score=float(standing.max_score),
                seconds_late=float(standing.seconds_late),
                late_by=late_text(standing.seconds_late) if standing.seconds_late > 0 else "",
                awaiting=float(standing.awaiting),
            )
            seconds = standing.seconds_late
            cells = [(c.grade_id, c.points, c.max_points, c.manual) for c in [*standing.checks.values(), *standing.written]]
        late = int(seconds > 0)
        long = [
            {
                "student": student.id,
                "assignment": assignment.name,
                "check": check,
                "points": _number(points),
                "max": _number(maximum),
                "late": late,
                "manual": int(manual),
            }
            for check, points, maximum, manual in cells
        ]
        return row, long


def _gradebook_cell(grade) -> tuple:
    """(grade id, points, maximum, set by an instructor) of a graded cell as nbgrader keeps it; points None while
    nobody has given any (a written answer awaiting grading)."""
    points = None if grade.manual_score is None and grade.auto_score is None else grade.score
    return grade.name, points, grade.max_score, grade.manual_score is not None or bool(grade.extra_credit)


def _submissions(gradebook, name: str) -> list:
    try:
        return list(gradebook.find_assignment(name).submissions)
    except MissingEntry:
        return []
