"""The one reading of a course's gradebook for the kit's assignments: each view (the feedback page, formgrader's
view, the export, grade-class's files, the class report) asks here for a student's standing and renders it.

`standing_from_gradebook` reads one submission's rows into the plain record `standing.standing_from_record`
computes from (nothing here adds points up), with the result the kit kept in the autograded notebook (what the
page explains, the points it was graded against, its isolation) and the course's own late-penalty plugin.
`course_standings` does it for every graded student of an assignment, `stale_students` says whose grades are out
of date.
"""

from __future__ import annotations

import logging
from pathlib import Path

import nbformat
from sqlalchemy.orm import joinedload, selectinload, undefer
from nbgrader.api import Assignment, Comment, Grade, Gradebook, MissingEntry, Notebook, SubmittedNotebook
from nbgrader.preprocessors import AssignLatePenalties

from autograder.course import kit
from autograder.engine.results import SubmissionResult
from autograder.frontends.standing import GradeRecord, Record, Standing, standing_from_record
from .plugins import KIT_KEY


def kept_result(notebook) -> SubmissionResult | None:
    """The grader's result kept in an autograded notebook (None where the kit has not graded it)."""
    record = (notebook.metadata.get(KIT_KEY, {}) if notebook is not None else {}).get("result")
    try:
        return SubmissionResult.from_dict(record)
    except Exception:
        return None


def recorded_result(notebook, student: str) -> SubmissionResult:
    """The result a page explains: the one kept in the notebook, with the remarks written into its check cells."""
    from autograder.grading.submission import unreadable

    result = kept_result(notebook)
    if result is None:
        return unreadable(
            f"{student}'s notebook", "This notebook has not been graded by the kit's grader yet.", 0, "none", student
        )
    remarks = [c.metadata[KIT_KEY].get("remark") for c in notebook.cells if c.get("metadata", {}).get(KIT_KEY)]
    notes = tuple(dict.fromkeys([*filter(None, remarks), *result.notes]))
    return SubmissionResult(**{**result.__dict__, "notes": notes})


def late_rule(config, student: str):
    """The course's late penalty (nbgrader's AssignLatePenalties plugin, as configured) for one student, as
    (score, seconds late) -> points; quiet (nbgrader's plugin logs every late submission it looks at)."""
    quiet = logging.getLogger("autograder.late")
    quiet.setLevel(logging.CRITICAL)
    assigner = AssignLatePenalties(config=config, log=quiet)
    plugin = assigner.plugin_class(parent=assigner, log=quiet)
    return lambda score, seconds: plugin.late_submission_penalty(student, score, seconds)


def standing_from_gradebook(
    gradebook: Gradebook, assignment: kit.Assignment, student: str, notebook=None, config=None
) -> Standing:
    """The student's standing on a kit assignment as the gradebook holds it now. `notebook`: the autograded one
    (the kit's result and the written answers' text); `config`: the course's (its late-penalty plugin).
    MissingEntry where the student has no submission."""
    submitted = gradebook.find_submission_notebook(assignment.notebook_id, assignment.name, student)
    # the instructor's own words only: nbgrader's automatic comment ("No response.") is not theirs
    comments = {c.name: c.manual_comment or "" for c in submitted.comments}
    grades = {
        g.name: GradeRecord(g.name, float(g.max_score), g.auto_score, g.manual_score, g.extra_credit, comments.get(g.name, ""))
        for g in submitted.grades
    }
    texts = {c.metadata.get("nbgrader", {}).get("grade_id"): c.source for c in (notebook.cells if notebook else [])}
    seconds = gradebook.find_submission(assignment.name, student).total_seconds_late or 0.0
    record = Record(
        grades,
        float(seconds),
        {k: v for k, v in comments.items() if k not in grades and v},
        {k: v for k, v in texts.items() if k in grades},
        kept_result(notebook),
    )
    from traitlets.config import Config

    return standing_from_record(assignment, record, late_rule(config or Config(), student))


def autograded_notebook(coursedir, assignment: kit.Assignment, student: str):
    path = Path(coursedir.format_path(coursedir.autograded_directory, student, assignment.name)) / assignment.notebook_name
    try:
        return nbformat.read(path, as_version=4)
    except (OSError, ValueError):
        return None


def graded_students(gradebook: Gradebook, assignment: kit.Assignment) -> list[str]:
    try:
        return sorted(s.student.id for s in gradebook.find_assignment(assignment.name).submissions)
    except MissingEntry:
        return []


def load_submissions(gradebook: Gradebook, assignment: kit.Assignment) -> list:
    """Every submitted notebook of the assignment, with its grades, comments, their cells and its submission, in
    a few queries: the session then holds them, and reading each student's rows asks nothing more of the database
    (read one by one, a student's standing took some thirty queries)."""
    return (
        gradebook.db.query(SubmittedNotebook)
        .join(Notebook, SubmittedNotebook.notebook_id == Notebook.id)
        .join(Assignment, Notebook.assignment_id == Assignment.id)
        .filter(Notebook.name == assignment.notebook_id, Assignment.name == assignment.name)
        .options(
            selectinload(SubmittedNotebook.grades).options(joinedload(Grade.cell), undefer(Grade.max_score)),
            selectinload(SubmittedNotebook.comments).joinedload(Comment.cell),
            joinedload(SubmittedNotebook.assignment),
        )
        .all()
    )


def course_standings(coursedir, config, assignment: kit.Assignment, students=None) -> dict[str, Standing]:
    """student -> standing, for every student the gradebook holds a submission of (or those of `students`)."""
    found = {}
    with Gradebook(coursedir.db_url) as gradebook:
        held = load_submissions(gradebook, assignment)  # noqa: F841  (kept in the session while the rows are read)
        for student in graded_students(gradebook, assignment) if students is None else students:
            try:
                found[student] = standing_from_gradebook(
                    gradebook, assignment, student, autograded_notebook(coursedir, assignment, student), config
                )
            except MissingEntry:
                continue
    return found


def stale_students(standings: dict[str, Standing]) -> dict[str, str]:
    """student -> why their grade is out of date, for those whose grade is."""
    return {student: s.stale for student, s in standings.items() if s.stale}
