"""The student's feedback page: one standalone HTML file per submission, the one design of every path.

`feedback_html(result, standing)` draws what the grader found (`SubmissionResult`) with the numbers of the
student's standing (`standing.Standing`): in a course, the gradebook's (late penalty, overrides, written answers
graded or awaiting, comments), rendered by nbgrader's own feedback exporter (`nbgrader_feedback`); outside one,
the grader's. `findings_html` is the same check findings as a fragment, for the check cells formgrader shows.

Pure functions: no student code runs here, nothing from the solution or the hidden checks is read, and every
string that comes from a result or a notebook is escaped (messages can quote student-controlled text). The
page has no JavaScript and no external resources, so it opens the same from a download, an e-mail or a disk.
"""
from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from autograder.engine.results import CheckResult, SubmissionResult, points_text
from autograder.frontends.gradescope.results import write_atomically
from .plots import CURVES, _series, profile_figure_png  # noqa: F401  (CURVES: the plot's styles, for tests)
from .standing import AWAITING, UNISOLATED_LINE, Standing, late_text, standing_of


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _status(passed: bool) -> str:
    return "passed" if passed else "failed"


def findings_html(check: CheckResult) -> str:
    """The check's message and its parts (passed or not, never their points: the points shown are the
    gradebook's, which an instructor may override), saying each failure once: where the parts failed for
    different reasons, each reason stands next to its part."""
    reasons = list(dict.fromkeys(s.message for s in check.subtests if not s.passed and s.message))
    per_part = len(reasons) > 1
    out = [] if per_part else [f'<p class="message">{_e(check.message)}</p>']
    out.append('<ul class="parts">')
    for part in check.subtests:
        mark = "&#10003;" if part.passed else "&#10007;"
        reason = f'<div class="reason">{_e(part.message)}</div>' if per_part and not part.passed and part.message else ""
        out.append(f'<li class="part {_status(part.passed)}"><span class="mark">{mark}</span> {_e(part.name)}{reason}</li>')
    out.append("</ul>")
    return "".join(out)


def _points_cell(standing: Standing, check: CheckResult) -> str:
    grade = standing.checks.get(check.check)
    if grade is None:
        return '<td class="pts">-</td>'
    by_hand = '<div class="muted">set by your instructor</div>' if grade.manual else ""
    return f'<td class="pts">{_e(grade.text)}{by_hand}</td>'


def _checks_table(result: SubmissionResult, standing: Standing) -> str:
    rows = []
    for check in result.checks:
        comment = standing.checks.get(check.check)
        note = f'<p class="comment">Your instructor: {_e(comment.comment)}</p>' if comment and comment.comment else ""
        rows.append(f'<tr class="check {_status(check.passed)}" data-check="{_e(check.check)}">'
                    f'<td class="title">{_e(check.title)}</td>{_points_cell(standing, check)}'
                    f'<td><span class="badge">{_status(check.passed)}</span></td>'
                    f'<td>{findings_html(check)}{note}</td></tr>')
    return ('<table id="checks"><thead><tr><th>Check</th><th>Points</th><th>Result</th><th>What we found</th>'
            '</tr></thead><tbody>' + "".join(rows) + "</tbody></table>")


def _written_section(standing: Standing) -> str:
    if not standing.written:
        return ""
    with_answers = any(cell.answer or cell.comment for cell in standing.written)   # outside a course: none known
    rows = []
    for cell in standing.written:
        answer = f'<div class="answer">{_paragraphs(cell.answer)}</div>' if cell.answer else ""
        comment = f'<p class="comment">Your instructor: {_e(cell.comment)}</p>' if cell.comment else ""
        state = "awaiting" if cell.points is None else "graded"
        rows.append(f'<tr class="written {state}" data-cell="{_e(cell.grade_id)}"><td class="title">{_e(cell.title)}'
                    f'</td><td class="pts">{_e(cell.text)}</td>' + (f"<td>{answer}{comment}</td>" if with_answers else "")
                    + "</tr>")
    header = "<th>Question</th><th>Points</th>" + ("<th>Your answer</th>" if with_answers else "")
    return (f'<h2>Written answers</h2><table id="written"><thead><tr>{header}</tr></thead><tbody>' + "".join(rows)
            + "</tbody></table>")


def _paragraphs(text: str) -> str:
    """A written answer as the student wrote it, escaped (never rendered as HTML): blank lines part paragraphs,
    single line breaks are the editor's."""
    blocks = [" ".join(block.split()) for block in re.split(r"\n\s*\n", text) if block.strip()]
    return "".join(f"<p>{_e(block)}</p>" for block in blocks)


def _plot_section(profiles: dict) -> str:
    png = profile_figure_png(profiles)
    if png is None:
        return '<p class="muted">No gradient profile is available for this submission.</p>'
    source = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    has_student = _series((profiles or {}).get("student")) is not None
    reading = ("The gradient travels backwards, from the last block to block 1: in a Pre-LN stack the shortcuts "
               "carry it through every block, so its line does not fall towards block 1. Your line should lie on "
               "the dashed Pre-LN line." if has_student else
               "Your block did not produce a gradient profile (it raised an error or did not run), so only the "
               "reference arrangements are shown.")
    return (f'<figure><img id="gradient-plot" src="{source}" width="800" height="500" '
            f'alt="Gradient at each block\'s input, your block next to the references">'
            f'<figcaption>{_e(reading)}</figcaption></figure>')


def _score_section(standing: Standing) -> list[str]:
    parts = [f'<p id="unisolated" class="late">{_e(UNISOLATED_LINE)}</p>'] if standing.unisolated else []
    parts.append(f'<p class="score-line">Score: <span id="score">{_e(standing.text)}</span></p>')
    if standing.awaiting:
        parts.append(f'<p id="awaiting" class="muted">Written answers worth {points_text(standing.awaiting)} points are '
                     f'{AWAITING}; they are not in the score yet.</p>')
    if standing.late_penalty:
        parts.append(f'<p id="late" class="late">Late submission (by {late_text(standing.seconds_late)}): '
                     f'{points_text(standing.late_penalty)} points deducted (before the deduction: '
                     f'{points_text(standing.raw_score)}).</p>')
    return parts


STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;background:#f6f8fa;margin:0}
main{max-width:960px;margin:0 auto;padding:24px 32px;background:#fff;min-height:100vh}
h1{font-size:1.6em;margin:0 0 4px}h2{font-size:1.2em;margin:28px 0 8px}
.score-line{font-size:1.25em;margin:4px 0 4px}#score{font-weight:700}.late{color:#b3261e}
.divergence{border-left:6px solid #bc4c00;background:#fff1e5;padding:12px 16px;margin:16px 0;border-radius:4px}
.divergence h2{margin:0 0 6px;color:#953800}.divergence p{margin:0;font-size:1.05em}
table{border-collapse:collapse;width:100%}th,td{text-align:left;vertical-align:top;padding:8px;
border-bottom:1px solid #d0d7de}th{background:#f6f8fa}td.title{font-weight:600;width:22%}td.pts{white-space:nowrap}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:.85em;color:#fff}
tr.passed .badge{background:#1a7f37}tr.failed .badge{background:#b3261e}tr.failed td.title{color:#b3261e}
.message{margin:0 0 6px}ul.parts{list-style:none;margin:0;padding:0;font-size:.92em}
li.part{margin:2px 0}li.passed .mark{color:#1a7f37}li.failed .mark{color:#b3261e}.reason{margin:2px 0 6px 18px}
.comment{margin:6px 0 0;padding:6px 10px;background:#ddf4ff;border-radius:4px}
.answer{font-size:.92em;background:#f6f8fa;padding:2px 10px;border-radius:4px}.answer p{margin:6px 0}
tr.awaiting td.pts{color:#9a6700}
ul.notes li{margin:4px 0}figure{margin:8px 0}img{max-width:100%;height:auto;border:1px solid #d0d7de}
figcaption,.muted{color:#57606a}footer{margin-top:32px;font-size:.85em;color:#57606a}
"""


def feedback_html(result: SubmissionResult, standing: Standing | None = None) -> str:
    """One standalone page: score, first divergence, checks with their parts, written answers, notes, the
    gradient plot. `standing` gives every number shown (default: the grader's own, see `standing_of`)."""
    standing = standing or standing_of(result)
    parts = [f'<h1>Feedback for {_e(result.submission)}</h1>', *_score_section(standing)]
    if result.first_divergence:
        parts.append('<section id="first-divergence" class="divergence"><h2>Where your block first went wrong</h2>'
                     f'<p>{_e(result.first_divergence)}</p></section>')
    parts += ["<h2>Checks</h2>", _checks_table(result, standing), _written_section(standing)]
    if standing.remarks:
        parts.append('<h2>Your instructor on your code</h2><ul id="remarks" class="notes">' + "".join(
            f"<li><strong>{_e(cell)}</strong>: {_e(comment)}</li>" for cell, comment in standing.remarks) + "</ul>")
    if result.notes:
        parts.append('<h2>Notes</h2><ul id="notes" class="notes">'
                     + "".join(f"<li>{_e(note)}</li>" for note in result.notes) + "</ul>")
    parts += ["<h2>Gradient through a deep stack</h2>", _plot_section(result.profile)]
    # seed and device let a student and an instructor reproduce the run; isolation details stay private
    parts.append(f'<footer id="run-info">Graded with seed {_e(result.seed)} on {_e(result.device)}.</footer>')
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>Feedback: {_e(result.submission)}</title><style>{STYLE}</style></head>"
            "<body><main>" + "\n".join(p for p in parts if p) + "</main></body></html>\n")


def write_feedback_page(result: SubmissionResult, path: str | Path, standing: Standing | None = None) -> None:
    write_atomically(path, feedback_html(result, standing))
