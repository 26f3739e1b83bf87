"""The kit's feedback page, made by nbgrader's own feedback commands, always from the gradebook as it stands.

* `KitFeedbackPage` is the exporter of `nbgrader generate_feedback` (and formgrader's Generate Feedback button).
  For a notebook of the kit's assignments it draws the kit's page (`feedback.feedback_html`; nbgrader's
  preprocessors, which prepare nbconvert's page, do not run): the grader's findings, kept in the autograded
  notebook, with the student's standing (`gradebook.standing_from_gradebook`: every number from the gradebook,
  the late penalty as the course's plugin gives it now). Every other assignment gets nbgrader's own page,
  untouched. Pages of the kit's assignments are always drawn again (nbgrader would skip a student whose page
  exists), so an override or a regrade reaches the page. While any student's grade is out of date (the course's
  points changed since they were graded), it draws nothing and says so in one line.
* `KitReleaseFeedback` draws the kit's pages again before `nbgrader release_feedback` hands them out, so what a
  student fetches agrees with the gradebook even when nobody ran generate_feedback after a change (and nothing
  is handed out while a grade is out of date).
* `FormgraderStanding` opens formgrader's view of a kit notebook with the student's standing: the grade the
  student's page shows, which formgrader's own totals (before the late penalty) are not. A Markdown cell: the
  student's id in it is `shown.markdown` (text, never their emphasis, link or HTML).
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

import nbformat
from nbconvert.exporters import HTMLExporter
from nbconvert.preprocessors import Preprocessor
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.converters import GenerateFeedback
from nbgrader.exchange.default import ExchangeReleaseFeedback

from autograder.course import kit
from autograder.engine.results import points_text
from autograder.engine.rubric import RUBRIC
from autograder.frontends.shown import markdown
from autograder.frontends.standing import GRADE_IS, UNISOLATED_LINE, stale_line
from .gradebook import course_standings, recorded_result, stale_students, standing_from_gradebook
from .plugins import KIT_KEY, KitRefusal, course_directory, kit_source, refuse
from .preflight import source_notebooks
from .privacy import guard


def kit_page(notebook, resources: dict, assignment: kit.Assignment, config=None, standing=None) -> str:
    """The kit's page of one student; `standing`: theirs, read from the gradebook for this very run of the
    exporter (read here when not given)."""
    info = resources["nbgrader"]
    if standing is None:
        with Gradebook(info["db_url"]) as gradebook:
            standing = standing_from_gradebook(gradebook, assignment, info["student"], notebook, config)
    if standing.stale:
        raise KitRefusal(
            f"Not drawing feedback for {assignment.name}: " + stale_line(assignment.name, {info["student"]: standing.stale})
        )
    from autograder.frontends.feedback import feedback_html  # its figures import matplotlib: only for the kit's pages

    return feedback_html(recorded_result(notebook, info["student"]), standing)


def kit_assignment_in(coursedir) -> kit.Assignment | None:
    found = [p for p in source_notebooks(coursedir, coursedir.assignment_id) if kit.is_kit_source(p, RUBRIC)]
    return kit.Assignment(found[0]) if found else None


def refuse_stale_feedback(converter, assignment: kit.Assignment) -> dict:
    """Stop a feedback command, in one line, while the grade of any student it would draw is out of date; else
    the standing of each of them (student -> Standing), read once for the whole command."""
    coursedir = converter.coursedir
    autograded = Path(coursedir.format_path(coursedir.autograded_directory, "*", assignment.name))
    students = [p.parent.parent.name for p in autograded.parent.parent.glob(f"*/{assignment.name}/{assignment.notebook_name}")]
    students = sorted(s for s in students if fnmatch.fnmatch(s, coursedir.student_id or "*"))
    standings = course_standings(coursedir, converter.config, assignment, students)
    stale = stale_students(standings)
    if stale:
        raise refuse(converter.log, f"Not drawing feedback for {assignment.name}", stale_line(assignment.name, stale))
    return standings


class KitFeedbackPage(HTMLExporter):
    """nbgrader's feedback exporter, drawing the kit's page for the kit's notebooks (see the module)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        converter = self.parent
        if isinstance(converter, GenerateFeedback):  # a course others can read or write: nothing is drawn
            guard(
                converter.coursedir, self.config, converter.log, f"Not drawing feedback for {converter.coursedir.assignment_id}"
            )
        assignment = kit_assignment_in(converter.coursedir) if isinstance(converter, GenerateFeedback) else None
        self.standings: dict = {}  # student -> standing, read from the gradebook once, as the command starts
        if assignment is not None:
            converter.force = True  # always from the gradebook as it stands now
            self.standings = refuse_stale_feedback(converter, assignment)

    def from_notebook_node(self, nb, resources=None, **kw):
        source = kit_source(self, resources) if resources and "nbgrader" in resources else None
        if source is None:
            return super().from_notebook_node(nb, resources, **kw)
        # The kit's page is drawn from the gradebook and from what the grader kept in the notebook: nbgrader's
        # preprocessors (GetGrades, the CSS header, a course's own) shape a copy of the notebook for nbconvert's
        # page, which is not drawn here, and cost most of the time of a page.
        resources = self._init_resources(resources)
        standing = self.standings.get(resources["nbgrader"]["student"])
        return kit_page(nb, resources, kit.Assignment(source), self.config, standing), resources


class KitReleaseFeedback(ExchangeReleaseFeedback):
    """`nbgrader release_feedback`, which first draws the kit's pages again from the gradebook."""

    def init_src(self):
        guard(self.coursedir, self.config, self.log, f"Not releasing feedback for {self.coursedir.assignment_id}")
        if kit_assignment_in(self.coursedir):
            converter = GenerateFeedback(coursedir=self.coursedir, parent=self)
            converter.force = True
            converter.start()
        super().init_src()


class FormgraderStanding(Preprocessor):
    """Formgrader's submission view of a kit notebook opens with the student's standing, read from the gradebook
    when the view is opened: the grade their page shows, whether it is out of date, and whether it was graded
    without isolation. Acts only in formgrader (its exporter has no nbgrader converter above it) and only on the
    kit's notebooks."""

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
            with Gradebook(coursedir.db_url) as gradebook:
                standing = standing_from_gradebook(gradebook, kit.Assignment(source), resources["student"], nb, self.config)
        except MissingEntry:
            return nb, resources
        lines = [f"**The grade: {standing.summary()}.** {GRADE_IS}"]
        if standing.stale:
            lines.append(
                f"**Out of date:** {stale_line(resources['assignment_id'], {markdown(resources['student']): standing.stale})}. "
                "No feedback is drawn until then."
            )
        if standing.late_penalty:
            lines.append(
                f"Formgrader's own totals, here and in its lists ({points_text(standing.raw_score)}), are before the "
                f"late penalty ({points_text(standing.late_penalty)})."
            )
        if standing.unisolated:
            lines.insert(0, f"**{UNISOLATED_LINE}**")
        nb.cells.insert(0, nbformat.v4.new_markdown_cell("\n\n".join(lines), metadata={KIT_KEY: "standing"}))
        return nb, resources
