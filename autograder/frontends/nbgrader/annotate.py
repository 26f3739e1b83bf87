"""Writing a grade into a kit notebook, the same way for `nbgrader autograde` and for `grade-class --course`.

Every hidden-check cell (`check_<name>`) gets the check's findings as its output: an HTML fragment in the
feedback page's design (formgrader shows it), with a plain-text copy, and the gradient plot in the gradient
check's cell. Its points go in as nbgrader's partial credit (a number as the cell's result, which nbgrader's
SaveAutoGrades reads); `without_score_outputs` then takes that number out again, so that formgrader shows no
"Out[1]: 3" under a check: the points a person reads are the gradebook's. The whole result goes into the
notebook's metadata, with the version of the source graded against: the feedback page is drawn from it.

Jupyter draws a text/plain output through its ANSI colour parser, and formgrader shows the HTML fragment as
markup: every message, note and remark in either (they quote a student's code and errors) is `shown`, as one line
of text in the plain copy, escaped and isolated in the fragment.
"""

from __future__ import annotations

import base64
import textwrap

import nbformat

from autograder.course import kit
from autograder.course.notebook import HIDDEN_CHECK_PREFIX
from autograder.engine.results import CheckResult, SubmissionResult
from autograder.frontends.feedback import findings_html
from autograder.frontends.plots import profile_figure_png
from autograder.frontends.shown import html, line
from .plugins import KIT_KEY, SCORE_OUTPUT

WIDTH = 100  # plain-text lines wrap here: nbgrader shows text outputs preformatted, without wrapping
FRAGMENT_STYLE = (
    "<style>.kit-findings ul.parts{list-style:none;margin:4px 0;padding:0}.kit-findings li.passed "
    ".mark{color:#1a7f37}.kit-findings li.failed .mark{color:#b3261e}.kit-findings .reason"
    "{margin:2px 0 6px 18px}.kit-findings .remark{color:#953800}.kit-findings .muted{color:#57606a}"
    "</style>"
)


def _wrap(text: str, indent: str = "") -> str:
    return textwrap.fill(
        text, WIDTH, initial_indent=indent, subsequent_indent=indent + "    ", break_long_words=False, break_on_hyphens=False
    )


def check_text(check: CheckResult, result: SubmissionResult) -> str:
    """What a check cell says in plain text. No points: the cell's points are the gradebook's, shown beside it,
    so after a manual override a person reads one number, the instructor's."""
    lines = [line(check.title), _wrap(line(check.message))]
    if check.check == "forward_order":
        if result.first_divergence and not check.passed and result.first_divergence not in check.message:
            lines.append(_wrap("Where your block first went wrong: " + line(result.first_divergence)))
        lines += [_wrap(f"Note: {line(note)}") for note in result.notes]
    lines += [_wrap(f"[{'x' if s.passed else ' '}] {line(s.name)}", "  ") for s in check.subtests]
    if check.check == "forward_order":
        lines.append(f"(hidden inputs drawn from seed {result.seed}: `--seed {result.seed}` reproduces this grade)")
    return "\n".join(lines) + "\n"


def _check_html(check: CheckResult, result: SubmissionResult, remark: str | None) -> str:
    parts = [f'<div class="kit-findings"><p><strong>{html(check.title)}</strong></p>']
    if remark:
        parts.append(f'<p class="remark">{html(remark)}</p>')
    if check.check == "forward_order":
        if result.first_divergence and not check.passed:
            parts.append(f"<p>Where the block first went wrong: {html(result.first_divergence)}</p>")
        parts += [f'<p class="remark">Note: {html(note)}</p>' for note in result.notes]
    parts.append(findings_html(check))
    if check.check == "forward_order":
        parts.append(
            f'<p class="muted">Hidden inputs drawn from seed {result.seed}: `--seed {result.seed}` reproduces this grade.</p>'
        )
    return FRAGMENT_STYLE + "".join(parts) + "</div>"


def _check_outputs(check: CheckResult, result: SubmissionResult, remark: str | None) -> list:
    text = check_text(check, result)
    if remark:
        text = _wrap(line(remark)) + "\n" + text
    outputs = [_output("display_data", data={"text/html": _check_html(check, result, remark), "text/plain": text})]
    if check.check == "forward_gradients":
        png = profile_figure_png(result.profile)
        if png:
            alt = "Gradient at each block's input: the student's block next to Pre-LN, Post-LN and no shortcuts"
            outputs.append(
                _output(
                    "display_data",
                    data={"image/png": base64.b64encode(png).decode(), "text/plain": "gradient profile plot"},
                    metadata={"image/png": {"alt": alt}},
                )
            )
    outputs.append(
        _output("execute_result", data={"text/plain": f"{check.points:g}"}, execution_count=1, metadata={KIT_KEY: SCORE_OUTPUT})
    )
    return outputs


def _output(output_type: str, data: dict, metadata: dict | None = None, **fields) -> nbformat.NotebookNode:
    """An output as `nbformat.v4.new_output` makes it, without validating each one on its own: the notebook it goes
    into is validated whole when it is written."""
    return nbformat.from_dict({"output_type": output_type, "data": data, "metadata": metadata or {}, **fields})


def _grade_id(cell) -> str:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")


def annotate(
    notebook: nbformat.NotebookNode, result: SubmissionResult, assignment: kit.Assignment = kit.KIT
) -> nbformat.NotebookNode:
    """Write each check's result into its `check_<name>` cell and the whole result into the notebook's metadata;
    put back check cells the student deleted."""
    checks = {f"{HIDDEN_CHECK_PREFIX}{c.check}": c for c in result.checks}
    edited = [
        _grade_id(c)
        for c in notebook.cells
        if c.get("metadata", {}).get(KIT_KEY, {}).get("edited") and _grade_id(c) not in checks
    ]
    first_remark = (
        (f"You had edited locked cells ({', '.join(edited)}); they were put back as released before grading.") if edited else None
    )
    present = set()
    for cell in notebook.cells:
        if cell.cell_type == "code" and _grade_id(cell) in checks:
            present.add(_grade_id(cell))
            remark, first_remark = first_remark, None
            if cell.metadata.get(KIT_KEY, {}).get("edited"):
                remark = " ".join(
                    filter(None, [remark, "You had edited this locked cell; it was put back as released before grading."])
                )
            _fill(cell, checks[_grade_id(cell)], result, remark)
    sources = {c.grade_id: c for c in assignment.cells()}
    for name, check in checks.items():
        if name in present or name not in sources:
            continue
        source = sources[name]
        cell = nbformat.v4.new_code_cell(
            source.source, metadata={"nbgrader": dict(source.nbgrader), "deletable": False, "editable": False}
        )
        _fill(cell, check, result, "This graded cell was missing from your notebook; it was added back for grading.")
        notebook.cells.append(cell)
    notebook.metadata[KIT_KEY] = {"result": result.to_dict(), "source": assignment.key}
    return notebook


def _fill(cell, check: CheckResult, result: SubmissionResult, remark: str | None) -> None:
    cell.outputs = _check_outputs(check, result, remark)
    cell.execution_count = 1
    cell.metadata[KIT_KEY] = {
        **cell.metadata.get(KIT_KEY, {}),
        "check": check.check,
        "title": check.title,
        "remark": remark or "",
    }
