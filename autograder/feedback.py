"""The student's feedback page: one standalone HTML file per submission, made from its SubmissionResult alone.

Pure functions over results: no student code runs here, and nothing from the solution or the hidden checks
is read. Every string that comes from a result is escaped, because messages can quote student-controlled
text (exception messages, cell names). The page has no JavaScript and no external resources, so it opens
the same from a Gradescope download, an e-mail attachment or a local disk.
"""
from __future__ import annotations

import base64
import functools
import html
import io
import math
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from .gradescope import write_atomically
from .results import CheckResult, SubmissionResult

# (profile key, legend label, line style). The student's line is drawn wide and underneath, the references
# thin on top, so a block that matches one of them shows as that reference's line running through the wide one.
CURVES = (
    ("student", "your block", {"color": "#d62728", "lw": 4, "alpha": 0.55, "marker": "o", "ms": 5, "zorder": 1}),
    ("reference", "Pre-LN (what the task asks for)", {"color": "#1f3b99", "lw": 1.6, "ls": "--", "zorder": 4}),
    ("Post-LN", "Post-LN (norm after each addition)", {"color": "#ff7f0e", "lw": 1.6, "zorder": 3}),
    ("no shortcuts", "no shortcuts", {"color": "#2ca02c", "lw": 1.6, "ls": ":", "zorder": 2}),
)
MAX_BLOCKS = 500   # the student's profile comes back from the sandbox: never trust its length


def _series(values) -> tuple[tuple[float, ...], bool] | None:
    """Plottable y values (NaN where a log axis cannot show the value) and whether any were dropped."""
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__len__"):
        return None
    if not 0 < len(values) <= MAX_BLOCKS:
        return None
    try:
        numbers = [float(v) for v in values]
    except (TypeError, ValueError, OverflowError):
        return None
    shown = tuple(v if math.isfinite(v) and v > 0 else math.nan for v in numbers)
    if all(math.isnan(v) for v in shown):
        return None
    return shown, any(math.isnan(v) for v in shown)


def _minor_label(value: float, _position) -> str:
    leading = value / 10 ** math.floor(math.log10(value)) if value > 0 else 0
    return f"{value:g}" if round(leading) in (2, 5) else ""


def profile_figure_png(profiles: dict) -> bytes | None:
    """The gradient-profile plot as PNG bytes; None when not even a reference profile can be drawn.

    A missing student profile (the block raised, say) still gets the reference lines, and the title says why
    the student's line is absent: the references alone show what the student was aiming for.
    """
    profiles = profiles if isinstance(profiles, dict) else {}
    return _render(tuple((key, label, _series(profiles.get(key))) for key, label, _ in CURVES))


@functools.lru_cache(maxsize=32)
def _render(curves: tuple) -> bytes | None:
    """Draw once per distinct set of curves: every page and notebook of one submission shares the picture."""
    figure = Figure(figsize=(8, 5), dpi=100)
    FigureCanvasAgg(figure)   # attaches an Agg canvas to this figure only: no global backend is touched
    figure.subplots_adjust(left=0.1, right=0.97, top=0.92, bottom=0.23)   # fixed margins: layout engines are slow
    axes = figure.add_subplot()
    styles = {key: style for key, _, style in CURVES}
    blocks = 0
    for key, label, series in curves:
        if series is None:
            continue
        ys, dropped = series
        if dropped:
            label += " (zero or invalid values not shown)"
        axes.plot(range(1, len(ys) + 1), ys, label=label, **styles[key])
        blocks = max(blocks, len(ys))
    if blocks == 0:
        return None
    student_missing = curves[0][2] is None
    title = "Gradient at each block's input"
    axes.set_title(title + (": your block produced no profile, references only" if student_missing else ""))
    axes.set_yscale("log")
    axes.set_xlabel("block (1 = nearest the input)")
    axes.set_ylabel("gradient at each block's input")
    axes.set_xlim(0.5, blocks + 0.5)
    axes.xaxis.get_major_locator().set_params(integer=True)
    # plain numbers (1, 2, 5, 10, 20, ...) read more easily than powers of ten for most students
    axes.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axes.yaxis.set_minor_formatter(FuncFormatter(_minor_label))
    axes.grid(True, which="both", alpha=0.25)
    # below the axes, so the legend never hides a line
    figure.legend(loc="lower center", ncols=2, fontsize="small", frameon=False)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _points(value: float) -> str:
    return f"{value:g}"


def _status(passed: bool) -> str:
    return "passed" if passed else "failed"


def _check_details(check: CheckResult) -> str:
    """The check's message and its parts, saying each failure once.

    The check's message is the failed parts' messages joined: when the parts failed for different reasons,
    each reason is shown next to its part instead, so the student sees which part each sentence is about.
    """
    reasons = list(dict.fromkeys(s.message for s in check.subtests if not s.passed and s.message))
    per_part = len(reasons) > 1
    out = [] if per_part else [f'<p class="message">{_e(check.message)}</p>']
    out.append('<ul class="parts">')
    for part in check.subtests:
        mark = "&#10003;" if part.passed else "&#10007;"
        reason = f'<div class="reason">{_e(part.message)}</div>' if per_part and not part.passed and part.message else ""
        out.append(f'<li class="part {_status(part.passed)}"><span class="mark">{mark}</span> {_e(part.name)} '
                   f'<span class="pts">{_points(part.points)} / {_points(part.max_points)}</span>{reason}</li>')
    out.append("</ul>")
    return "".join(out)


def _checks_table(result: SubmissionResult) -> str:
    rows = [
        f'<tr class="check {_status(c.passed)}" data-check="{_e(c.check)}"><td class="title">{_e(c.title)}</td>'
        f'<td class="pts">{_points(c.points)} / {_points(c.max_points)}</td>'
        f'<td><span class="badge">{_status(c.passed)}</span></td><td>{_check_details(c)}</td></tr>'
        for c in result.checks
    ]
    return ('<table id="checks"><thead><tr><th>Check</th><th>Points</th><th>Result</th><th>What we found</th>'
            '</tr></thead><tbody>' + "".join(rows) + "</tbody></table>")


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


STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;background:#f6f8fa;margin:0}
main{max-width:960px;margin:0 auto;padding:24px 32px;background:#fff;min-height:100vh}
h1{font-size:1.6em;margin:0 0 4px}h2{font-size:1.2em;margin:28px 0 8px}
.score-line{font-size:1.25em;margin:4px 0 16px}#score{font-weight:700}
.divergence{border-left:6px solid #bc4c00;background:#fff1e5;padding:12px 16px;margin:16px 0;border-radius:4px}
.divergence h2{margin:0 0 6px;color:#953800}.divergence p{margin:0;font-size:1.05em}
table{border-collapse:collapse;width:100%}th,td{text-align:left;vertical-align:top;padding:8px;
border-bottom:1px solid #d0d7de}th{background:#f6f8fa}td.title{font-weight:600;width:22%}td.pts{white-space:nowrap}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:.85em;color:#fff}
tr.passed .badge{background:#1a7f37}tr.failed .badge{background:#b3261e}tr.failed td.title{color:#b3261e}
.message{margin:0 0 6px}ul.parts{list-style:none;margin:0;padding:0;font-size:.92em}
li.part{margin:2px 0}li.part .pts{color:#57606a;margin-left:6px}li.passed .mark{color:#1a7f37}
li.failed .mark{color:#b3261e}.reason{margin:2px 0 6px 18px}
ul.notes li{margin:4px 0}figure{margin:8px 0}img{max-width:100%;height:auto;border:1px solid #d0d7de}
figcaption,.muted{color:#57606a}footer{margin-top:32px;font-size:.85em;color:#57606a}
"""


def feedback_html(result: SubmissionResult) -> str:
    """One standalone page: score, first divergence, checks with their parts, notes, the gradient plot."""
    parts = [f'<h1>Feedback for {_e(result.submission)}</h1>',
             f'<p class="score-line">Score: <span id="score">{_points(result.score)} / '
             f'{_points(result.max_score)}</span></p>']
    if result.first_divergence:
        parts.append('<section id="first-divergence" class="divergence"><h2>Where your block first went wrong</h2>'
                     f'<p>{_e(result.first_divergence)}</p></section>')
    parts += ["<h2>Checks</h2>", _checks_table(result)]
    if result.notes:
        parts.append('<h2>Notes</h2><ul id="notes" class="notes">'
                     + "".join(f"<li>{_e(note)}</li>" for note in result.notes) + "</ul>")
    parts += ["<h2>Gradient through a deep stack</h2>", _plot_section(result.profile)]
    # seed and device let a student and an instructor reproduce the run; isolation details stay private
    parts.append(f'<footer id="run-info">Graded with seed {_e(result.seed)} on {_e(result.device)}.</footer>')
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>Feedback: {_e(result.submission)}</title><style>{STYLE}</style></head>"
            "<body><main>" + "\n".join(parts) + "</main></body></html>\n")


def write_feedback_page(result: SubmissionResult, path: str | Path) -> None:
    write_atomically(path, feedback_html(result))
