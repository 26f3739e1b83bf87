"""The class report: one standalone page for the instructor after grading a class.

The score distribution, the pass rate of each check, the most common first divergent steps and mistake families
(each with its count and one anonymised message), late submissions and grader errors, with figures. Pure over
(student, SubmissionResult, Standing) rows: `grade-class` writes it as it finishes, and `python -m autograder
class-report` writes it from a results folder or from a course's gradebook. The numbers are the standing's (the
gradebook's, in a course). Example messages name no student: ids, file names, paths and e-mail addresses are
taken out.
"""
from __future__ import annotations

import base64
import html
import re
import statistics
from collections import Counter, defaultdict
from pathlib import Path

from autograder.engine.results import SubmissionResult, points_text
from autograder.frontends.gradescope.results import write_atomically
from .plots import bars_png, histogram_png
from .standing import Standing, late_text

STEP = re.compile(r"^((?:In (?:eval|train) mode only: )?Step \d+ of \d+ \([^)]*\))")
TOP = 12


def _e(value) -> str:
    return html.escape(str(value), quote=True)


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


def _figure(png: bytes, alt: str, element_id: str) -> str:
    return (f'<img id="{element_id}" src="data:image/png;base64,{base64.b64encode(png).decode()}" '
            f'alt="{_e(alt)}">')


def _table(element_id: str, header: list[str], rows: list[list]) -> str:
    if not rows:
        return '<p class="muted">None.</p>'
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    return f'<table id="{element_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _names(student: str, result: SubmissionResult) -> list[str]:
    """What names this student: their ids, and a submission file called after them."""
    ids = [student, result.student or ""]
    named = [result.submission, Path(result.submission).stem] if any(i and i in result.submission for i in ids) else []
    return ids + named


def distribution(rows) -> str:
    scores = [standing.score for _, _, standing in rows]
    maximum = max((standing.max_score for _, _, standing in rows), default=0)
    awaiting = sum(1 for _, _, standing in rows if standing.awaiting)
    text = (f"{len(rows)} student{'s' * (len(rows) != 1)}; mean {points_text(statistics.mean(scores))}, median "
            f"{points_text(statistics.median(scores))}, lowest {points_text(min(scores))}, highest "
            f"{points_text(max(scores))} of {points_text(maximum)}.")
    if awaiting:
        text += (f" {awaiting} of them {'have' if awaiting != 1 else 'has'} written answers awaiting grading (not in "
                 "these scores yet).")
    png = histogram_png(scores, maximum, "Score distribution", f"score (of {points_text(maximum)})")
    return f'<p id="summary">{_e(text)}</p>' + _figure(png, "Score distribution", "score-histogram")


def pass_rates(rows) -> str:
    """Who passed each check is the grader's finding; the mean points are the standing's (an override counts)."""
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
    table = [[titles[n], f"{passed[n]} of {len(rows)}", f"{rate:g}%",
              f"{points_text(points[n] / len(rows))} of {points_text(maximum[n] / len(rows))}"]
             for n, rate in zip(names, rates)]
    png = bars_png([titles[n] for n in names], rates, "Students who passed every part of each check", "% of students",
                   limit=110)
    return _figure(png, "Pass rate of each check", "pass-rates") + _table(
        "checks", ["Check", "Passed", "Pass rate", "Mean points"], table)


def divergences(rows) -> str:
    counts, example = Counter(), {}
    for student, result, _ in rows:
        match = STEP.match(result.first_divergence or "")
        if match:
            counts[match.group(1)] += 1
            example.setdefault(match.group(1), anonymised(result.first_divergence, _names(student, result)))
    common = counts.most_common(TOP)
    if not common:
        return '<p class="muted">No block diverged from Pre-LN.</p>'
    png = bars_png([step for step, _ in common], [n for _, n in common], "First divergent steps", "students",
                   color="#bc4c00")
    return _figure(png, "Most common first divergent steps", "divergence-steps") + _table(
        "divergences", ["First divergent step", "Students", "One message"], [[s, n, example[s]] for s, n in common])


def mistakes(rows) -> str:
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
    return _table("mistakes", ["Students", "One message", "Parts it fails"],
                  [[len(students[k]), example[k], "; ".join(sorted(where[k]))] for k in common])


def late(rows) -> str:
    found = [[student, late_text(standing.seconds_late), points_text(standing.late_penalty), standing.text]
             for student, _, standing in rows if standing.seconds_late > 0]
    return _table("late", ["Student", "Late by", "Penalty", "Score"], found)


def grader_errors(rows) -> str:
    found = [[student, error] for student, result, _ in rows for error in result.grader_errors]
    return _table("grader-errors", ["Student", "Grader error (the grader's failure, not the student's)"], found)


STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;background:#f6f8fa;margin:0}
main{max-width:1000px;margin:0 auto;padding:24px 32px;background:#fff;min-height:100vh}
h1{font-size:1.6em;margin:0 0 8px}h2{font-size:1.2em;margin:28px 0 8px}
table{border-collapse:collapse;width:100%;font-size:.92em}th,td{text-align:left;vertical-align:top;padding:6px 8px;
border-bottom:1px solid #d0d7de}th{background:#f6f8fa}img{max-width:100%;height:auto;margin:8px 0}
.muted{color:#57606a}.warning{border-left:6px solid #b3261e;background:#ffebe9;padding:10px 14px;font-weight:600}
"""


def warnings(rows) -> list[str]:
    """What the instructor must know before reading any number: grades out of date, grading without isolation."""
    found = []
    stale = [(student, standing.stale) for student, _, standing in rows if standing.stale]
    if stale:
        found.append(("stale", f"The grades of {len(stale)} students are out of date ({stale[0][0]}: {stale[0][1]}): grade "
                     "again before handing them out; the numbers below are as they were graded."))
    unsafe = [student for student, _, standing in rows if standing.unisolated]
    if unsafe:
        found.append(("unisolated", f"{len(unsafe)} of {len(rows)} submissions were graded WITHOUT isolation (c.KitSandbox."
                     "when_unisolated = \"unsafe\", or --unsafe): they could read the solution and other students' "
                     "files."))
    return [f'<p class="warning" id="{name}">{_e(text)}</p>' for name, text in found]


def class_report_html(rows: list[tuple[str, SubmissionResult, Standing]], title: str = "Class report") -> str:
    sections = [f"<h1>{_e(title)}</h1>", *warnings(rows)]
    if not rows:
        sections.append('<p class="muted">No graded submissions.</p>')
    else:
        sections += ["<h2>Score distribution</h2>", distribution(rows), "<h2>Pass rate of each check</h2>",
                     pass_rates(rows), "<h2>Most common first divergent steps</h2>", divergences(rows),
                     "<h2>Mistake families</h2><p class=\"muted\">The same finding, numbers aside, with the students "
                     "it concerns.</p>", mistakes(rows), "<h2>Late submissions</h2>", late(rows),
                     "<h2>Grader errors</h2>", grader_errors(rows)]
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{_e(title)}</title><style>{STYLE}</style></head><body><main>"
            + "\n".join(sections) + "</main></body></html>\n")


def write_class_report(path: str | Path, rows, title: str = "Class report") -> Path:
    write_atomically(path, class_report_html(rows, title))
    return Path(path)
