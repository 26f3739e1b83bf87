"""The student's feedback page: one standalone HTML file per submission, the one design of every path.

`feedback_html(result, standing)` draws what the grader found (`SubmissionResult`) with the numbers of the
student's standing (`standing.Standing`): in a course, the gradebook's (late penalty, overrides, written answers
graded or awaiting, comments), rendered by nbgrader's own feedback exporter
(`autograder.frontends.nbgrader.feedback`); outside one, the grader's. `findings_html` is the same check findings
as a fragment, for the check cells formgrader shows.

Pure functions: no student code runs here, nothing from the solution or the hidden checks is read. The page is
the Jinja2 template `templates/feedback.html.j2`, which escapes every string that comes from a result or a
notebook (messages can quote student-controlled text). The page has no JavaScript and no external resources, so
it opens the same from a download, an e-mail or a disk.
"""

from __future__ import annotations

import re
from pathlib import Path

from autograder.engine.results import CheckResult, SubmissionResult, points_text
from .files import write_atomically
from .pages import macro, render
from .plots import CURVES, MAX_BLOCKS, _series, profile_figure_png  # noqa: F401  (CURVES: the plot's styles, for tests)
from .standing import AWAITING, UNISOLATED_LINE, Standing, standing_of


def failures_apart(check: CheckResult) -> bool:
    """Whether the check's parts failed for different reasons: then each reason stands next to its part, instead
    of the check's message saying the one reason once."""
    return len({s.message for s in check.subtests if not s.passed and s.message}) > 1


def findings_html(check: CheckResult) -> str:
    """The check's message and its parts (`templates/findings.html.j2`), as the page shows them."""
    return str(macro("findings.html.j2", "findings")(check, failures_apart(check)))


def paragraphs(text: str) -> list[str]:
    """A written answer as the student wrote it: blank lines part paragraphs, single line breaks are the
    editor's."""
    return [" ".join(block.split()) for block in re.split(r"\n\s*\n", text) if block.strip()]


def feedback_html(result: SubmissionResult, standing: Standing | None = None) -> str:
    """One standalone page (`templates/feedback.html.j2`): score, first divergence, checks with their parts,
    written answers, notes, the gradient plot. `standing` gives every number shown (default: the grader's own,
    see `standing_of`)."""
    student = (result.profile or {}).get("student")
    has_student_profile = _series(student) is not None
    # a profile of the right form with no value a log axis can show: the block ran, its gradients were 0 or not finite
    blank_profile = not has_student_profile and isinstance(student, (list, tuple)) and 0 < len(student) <= MAX_BLOCKS
    return render(
        "feedback.html.j2",
        result=result,
        standing=standing or standing_of(result),
        plot=profile_figure_png(result.profile),
        has_student_profile=has_student_profile,
        blank_profile=blank_profile,
        failures_apart=failures_apart,
        paragraphs=paragraphs,
        points_text=points_text,
        AWAITING=AWAITING,
        UNISOLATED_LINE=UNISOLATED_LINE,
    )


def write_feedback_page(result: SubmissionResult, path: str | Path, standing: Standing | None = None) -> None:
    write_atomically(path, feedback_html(result, standing))
