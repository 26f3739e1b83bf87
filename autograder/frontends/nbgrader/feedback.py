"""The kit's feedback page, made by nbgrader's own feedback commands, always from the gradebook as it stands.

* `KitFeedbackPage` is the exporter of `nbgrader generate_feedback` (and formgrader's Generate Feedback button).
  For a notebook of the kit's assignments it runs nbgrader's feedback preprocessors and then draws the kit's page
  (`feedback.feedback_html`): the grader's findings, kept in the autograded notebook, with every number from the
  gradebook (late penalty, overrides, written answers graded or awaiting, comments). Every other assignment gets
  nbgrader's own page, untouched. Pages of the kit's assignments are always drawn again (nbgrader would skip a
  student whose page exists), so an override or a regrade reaches the page: drawing one takes milliseconds.
* `KitReleaseFeedback` draws the kit's pages again before `nbgrader release_feedback` hands them out, so what a
  student fetches agrees with the gradebook even when nobody ran generate_feedback after a change.
* `FormgraderStanding` opens formgrader's view of a kit notebook with the score the student's page shows: the
  gradebook's, after the late penalty, which formgrader itself never shows.
* `refresh_late_penalty` applies the course's late-penalty plugin again before any of these reads the gradebook:
  nbgrader computes a penalty when it autogrades, so a written answer graded later (or an override) would
  otherwise leave it behind (with `penalty_method = "zero"`, a late student would then score the new points).
* `standing_from_gradebook` is the one reading of the gradebook that the page, grade-class's grades.csv and the
  class report share.
"""
from __future__ import annotations

import logging
from pathlib import Path

import nbformat
from nbconvert.exporters import Exporter, HTMLExporter
from nbconvert.preprocessors import Preprocessor
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.converters import GenerateFeedback
from nbgrader.exchange.default import ExchangeReleaseFeedback
from nbgrader.preprocessors import AssignLatePenalties

from autograder.course import kit
from autograder.course.notebook import HIDDEN_CHECK_PREFIX
from autograder.engine.results import SubmissionResult, points_text
from autograder.engine.rubric import RUBRIC
from autograder.frontends.feedback import feedback_html
from autograder.frontends.standing import CellGrade, Standing, written_title
from .plugins import KIT_KEY, course_directory, kit_source
from .preflight import source_notebooks


def _points(grade) -> float | None:
    """nbgrader's own score (the instructor's where there is one, else the autograder's, plus any extra credit);
    None while neither has given one (a written answer awaiting grading)."""
    return None if grade.manual_score is None and grade.auto_score is None else grade.score


def standing_from_gradebook(gradebook: Gradebook, assignment: kit.Assignment, student: str,
                            notebook=None) -> Standing:
    """The student's standing on a kit assignment as the gradebook holds it. `notebook` (the autograded one)
    supplies the written answers' text for the page."""
    submitted = gradebook.find_submission_notebook(assignment.notebook_id, assignment.name, student)
    grades = {g.name: g for g in submitted.grades}
    comments = {c.name: (c.manual_comment or c.auto_comment or "") for c in submitted.comments}
    texts = {c.metadata.get("nbgrader", {}).get("grade_id"): c.source for c in (notebook.cells if notebook else [])}
    checks, written, remarks = {}, [], []
    for cell in assignment.cells():
        grade = grades.get(cell.grade_id or "")
        if grade is None:
            if cell.nbgrader.get("solution") and comments.get(cell.grade_id):
                remarks.append((cell.grade_id, comments[cell.grade_id]))
            continue
        common = dict(points=_points(grade), max_points=grade.max_score,
                      manual=grade.manual_score is not None or bool(grade.extra_credit),
                      comment=comments.get(cell.grade_id, ""))
        if cell.is_hidden_check:
            name = cell.grade_id.removeprefix(HIDDEN_CHECK_PREFIX)
            title = RUBRIC[name].title if name in RUBRIC else cell.grade_id
            checks[name] = CellGrade(cell.grade_id, title, **common)
        else:
            written.append(CellGrade(cell.grade_id, written_title(assignment, cell.grade_id),
                                     answer=texts.get(cell.grade_id), **common))
    penalty = submitted.late_submission_penalty or 0.0
    seconds_late = gradebook.find_submission(assignment.name, student).total_seconds_late or 0.0
    return Standing(submitted.score - penalty, submitted.max_score, checks, tuple(written), penalty, seconds_late,
                    tuple(remarks))


def refresh_late_penalty(config, db_url: str, assignment: str, notebook_id: str, student: str) -> None:
    """nbgrader's AssignLatePenalties once more, on the scores as they are now (quietly: nbgrader logs a warning
    for every late submission it looks at)."""
    quiet = logging.getLogger("autograder.late")
    quiet.setLevel(logging.ERROR)
    resources = {"nbgrader": {"notebook": notebook_id, "assignment": assignment, "student": student, "db_url": db_url}}
    AssignLatePenalties(config=config, log=quiet).preprocess(nbformat.v4.new_notebook(), resources)


def recorded_result(notebook, student: str) -> SubmissionResult:
    """The grader's result kept in an autograded notebook, with the remarks written into its check cells."""
    from autograder.grading.submission import unreadable

    record = notebook.metadata.get(KIT_KEY, {}).get("result")
    try:
        result = SubmissionResult.from_dict(record)
    except Exception:
        return unreadable(f"{student}'s notebook", "This notebook has not been graded by the kit's grader yet.",
                          0, "none", student)
    remarks = [c.metadata[KIT_KEY].get("remark") for c in notebook.cells if c.get("metadata", {}).get(KIT_KEY)]
    notes = tuple(dict.fromkeys([*filter(None, remarks), *result.notes]))
    return SubmissionResult(**{**result.__dict__, "notes": notes})


def kit_page(notebook, resources: dict, assignment: kit.Assignment) -> str:
    info = resources["nbgrader"]
    with Gradebook(info["db_url"]) as gradebook:
        standing = standing_from_gradebook(gradebook, assignment, info["student"], notebook)
    return feedback_html(recorded_result(notebook, info["student"]), standing)


def kit_assignment_in(coursedir) -> bool:
    return any(kit.is_kit_source(p, RUBRIC) for p in source_notebooks(coursedir, coursedir.assignment_id))


class KitFeedbackPage(HTMLExporter):
    """nbgrader's feedback exporter, drawing the kit's page for the kit's notebooks (see the module)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        converter = self.parent
        if isinstance(converter, GenerateFeedback) and kit_assignment_in(converter.coursedir):
            converter.force = True       # always from the gradebook as it stands now

    def from_notebook_node(self, nb, resources=None, **kw):
        source = kit_source(self, resources) if resources and "nbgrader" in resources else None
        if source is None:
            return super().from_notebook_node(nb, resources, **kw)
        info = resources["nbgrader"]
        refresh_late_penalty(self.config, info["db_url"], info["assignment"], info["notebook"], info["student"])
        notebook, resources = Exporter.from_notebook_node(self, nb, resources, **kw)   # nbgrader's preprocessors
        return kit_page(notebook, resources, kit.Assignment(source)), resources


class KitReleaseFeedback(ExchangeReleaseFeedback):
    """`nbgrader release_feedback`, which first draws the kit's pages again from the gradebook."""

    def init_src(self):
        if kit_assignment_in(self.coursedir):
            converter = GenerateFeedback(coursedir=self.coursedir, parent=self)
            converter.force = True
            converter.start()
        super().init_src()



class FormgraderStanding(Preprocessor):
    """Formgrader's submission view of a kit notebook opens with the standing the student's page shows, read
    from the gradebook when the view is opened (formgrader's own totals leave the late penalty out). Acts only
    in formgrader (its exporter has no nbgrader converter above it) and only on the kit's notebooks."""

    enabled = True

    def preprocess(self, nb, resources):
        if "submission_id" not in resources or "nbgrader" in resources:
            return nb, resources
        coursedir = course_directory(self)
        folder = Path(coursedir.format_path(coursedir.source_directory, ".", resources["assignment_id"]))
        source = folder / f"{resources['notebook_id']}.ipynb"
        if not (source.is_file() and kit.is_kit_source(source, RUBRIC)):
            return nb, resources
        try:
            refresh_late_penalty(self.config, coursedir.db_url, resources["assignment_id"], resources["notebook_id"],
                                 resources["student"])
            with Gradebook(coursedir.db_url) as gradebook:
                standing = standing_from_gradebook(gradebook, kit.Assignment(source), resources["student"])
        except MissingEntry:
            return nb, resources
        lines = [f"**The student's feedback page says: {standing.summary()}.**"]
        if standing.late_penalty:
            lines.append(f"Late by {standing.seconds_late / 3600:.1f} h: the totals formgrader shows here and in "
                         f"its lists ({points_text(standing.raw_score)}) are before the late penalty.")
        nb.cells.insert(0, nbformat.v4.new_markdown_cell("\n\n".join(lines), metadata={KIT_KEY: "standing"}))
        return nb, resources
