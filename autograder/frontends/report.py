"""The class report: one standalone page for the instructor after grading a class.

The score distribution, the pass rate of each check, the most common first divergent steps and mistake families
(each with its count and one anonymised message), late submissions and grader errors, with figures. Pure over
(student, SubmissionResult, Standing) rows: `grade-class` writes it as it finishes, and `python -m autograder
class-report` writes it from a results folder or from a course's gradebook. The numbers are the standing's (the
gradebook's, in a course). Example messages name no student: ids, file names, paths and e-mail addresses are
taken out. The functions here compute each section's numbers, rows and figures; the page is the Jinja2 template
`templates/report.html.j2`, which escapes every string.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter, defaultdict
from pathlib import Path

from markupsafe import Markup

from autograder.engine.results import SubmissionResult, points_text
from .files import write_atomically
from .pages import render
from .plots import bars_png, histogram_png
from .shown import html
from .standing import Standing

TOP = 12


def anonymised(message: str, names: list[str]) -> str:
    """The message with nothing that names a student: their ids (and file names made of them), paths, e-mail
    addresses."""
    text = re.sub(r"[\w.+-]+@[\w-]+(\.[\w-]+)+", "<e-mail>", message)
    text = re.sub(r"(?<![\w.])/(?:[\w.-]+/)+[\w.-]*", "<path>", text)
    for name in sorted({n for n in names if n and len(n) > 1}, key=len, reverse=True):
        text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(name)}(?![A-Za-z0-9])", "<student>", text, flags=re.IGNORECASE)
    return text


def family(message: str) -> str:
    """A mistake's family: the message with its numbers left out (sizes, coefficients, line numbers differ)."""
    return re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "#", message).strip()


def _names(student: str, result: SubmissionResult) -> list[str]:
    """What names this student: their ids, and a submission file called after them."""
    ids = [student, result.student or ""]
    named = [result.submission, Path(result.submission).stem] if any(i and i in result.submission for i in ids) else []
    return ids + named


def distribution(rows) -> tuple[str, bytes]:
    """The class's scores in a sentence, and their histogram."""
    scores = [standing.score for _, _, standing in rows]
    maximum = max((standing.max_score for _, _, standing in rows), default=0)
    awaiting = sum(1 for _, _, standing in rows if standing.awaiting)
    text = (
        f"{len(rows)} student{'s' * (len(rows) != 1)}; mean {points_text(statistics.mean(scores))}, median "
        f"{points_text(statistics.median(scores))}, lowest {points_text(min(scores))}, highest "
        f"{points_text(max(scores))} of {points_text(maximum)}."
    )
    if awaiting:
        text += (
            f" {awaiting} of them {'have' if awaiting != 1 else 'has'} written answers awaiting grading (not in "
            "these scores yet)."
        )
    return text, histogram_png(scores, maximum, "Score distribution", f"score (of {points_text(maximum)})")


def pass_rates(rows) -> tuple[bytes, list[list]]:
    """Each check's pass rate, as bars and as rows. Who passed each check is the grader's finding; the mean points
    are the standing's (an override counts)."""
    passed, points, maximum, titles = Counter(), defaultdict(float), defaultdict(float), {}
    for _, result, standing in rows:
        for check in result.checks:
            titles[check.check] = check.title
            passed[check.check] += check.passed
            grade = standing.checks.get(check.check)
            points[check.check] += (grade.points or 0.0) if grade else check.points
            maximum[check.check] += grade.max_points if grade else check.max_points
    names = list(titles)
    rates = [round(100 * passed[n] / len(rows), 1) for n in names]
    table = [
        [
            titles[n],
            f"{passed[n]} of {len(rows)}",
            f"{rate:g}%",
            f"{points_text(points[n] / len(rows))} of {points_text(maximum[n] / len(rows))}",
        ]
        for n, rate in zip(names, rates)
    ]
    png = bars_png([titles[n] for n in names], rates, "Students who passed every part of each check", "% of students", limit=110)
    return png, table


def divergences(rows) -> tuple[bytes | None, list[list]]:
    """The most common first divergent steps, as bars and as rows with one anonymised message each (none: no
    block diverged). A result is counted by the step it carries (`SubmissionResult.diverged`), never by what its
    message says; one whose values show where but not which step is not counted."""
    counts, example = Counter(), {}
    for student, result, _ in rows:
        step = result.diverged.label() if result.diverged else None
        if step:
            counts[step] += 1
            example.setdefault(step, anonymised(result.first_divergence or "", _names(student, result)))
    common = counts.most_common(TOP)
    if not common:
        return None, []
    png = bars_png([step for step, _ in common], [n for _, n in common], "First divergent steps", "students", color="#bc4c00")
    return png, [[s, n, example[s]] for s, n in common]


def mistakes(rows) -> list[list]:
    """Failed parts grouped by what their message says, numbers aside: one family may touch several checks (a
    forward that raises fails them all, with one message)."""
    students, example, where = defaultdict(set), {}, defaultdict(set)
    for student, result, _ in rows:
        for check in result.checks:
            for part in check.subtests:
                if part.passed or not part.message or check.grader_error:
                    continue
                key = family(part.message)
                students[key].add(student)
                example.setdefault(key, anonymised(part.message, _names(student, result)))
                where[key].add(f"{check.title}: {part.name}")
    common = sorted(students, key=lambda k: (-len(students[k]), k))[:TOP]
    return [[len(students[k]), example[k], "; ".join(sorted(where[k]))] for k in common]


def late(rows) -> list[list]:
    """Every late submission, how late and what the course's rule took off it (none, under nbgrader's default)."""
    return [
        [student, standing.late_by, points_text(standing.late_penalty) if standing.late_penalty else "none", standing.text]
        for student, _, standing in rows
        if standing.late
    ]


def grader_errors(rows) -> list[list]:
    return [[student, error] for student, result, _ in rows for error in result.grader_errors]


def warnings(rows) -> list[tuple[str, str]]:
    """What the instructor must know before reading any number: grades out of date, grading without isolation.
    A student's id in a warning is isolated there (`shown.html`): the warning is one paragraph of the kit's."""
    found = []
    stale = [(student, standing.stale) for student, _, standing in rows if standing.stale]
    if stale:
        found.append(
            (
                "stale",
                Markup(
                    f"The grades of {len(stale)} students are out of date ({html(stale[0][0])}: "
                    f"{html(stale[0][1], isolated=False)}): grade again before handing them out; the numbers below are "
                    "as they were graded."
                ),
            )
        )
    unsafe = [student for student, _, standing in rows if standing.unisolated]
    if unsafe:
        found.append(
            (
                "unisolated",
                f"{len(unsafe)} of {len(rows)} submissions were graded WITHOUT isolation (c.KitSandbox."
                "when_unisolated = \"unsafe\", or --unsafe): they could read the solution and other students' "
                "files.",
            )
        )
    return found


def open_course_note(warning: str | None) -> tuple:
    """The report's line at its top for a course that other users can read or write, by the course's choice."""
    return (("open_course", f"{warning[:1].upper()}{warning[1:]}."),) if warning else ()


def class_report_html(rows: list[tuple[str, SubmissionResult, Standing]], title: str = "Class report", notes: tuple = ()) -> str:
    """The page (`templates/report.html.j2`): the warnings (`notes`, (id, text) of the class as a whole, first),
    then each section's figures and rows."""
    sections = {}
    if rows:
        summary, histogram = distribution(rows)
        pass_rates_png, checks = pass_rates(rows)
        divergence_steps, divergence_rows = divergences(rows)
        sections = dict(
            summary=summary,
            histogram=histogram,
            pass_rates=pass_rates_png,
            checks=checks,
            divergence_steps=divergence_steps,
            divergences=divergence_rows,
            mistakes=mistakes(rows),
            late=late(rows),
            grader_errors=grader_errors(rows),
        )
    return render("report.html.j2", title=title, warnings=[*notes, *warnings(rows)], class_size=len(rows), **sections)


def write_class_report(path: str | Path, rows, title: str = "Class report", notes: tuple = ()) -> Path:
    write_atomically(path, class_report_html(rows, title, notes))
    return Path(path)
