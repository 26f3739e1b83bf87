"""Whatever a student writes reaches every writer as text only: a property over generated strings, with terminal
escape sequences (a window title, an OSC 52 clipboard write, the cursor moved up over the score line), C0 and C1
controls, direction overrides and isolates, zero-width and blank characters, line breaks of every kind and
look-alike letters weighted up.

The oracle is Unicode's own classes, not the kit's list (tests/plain_text.py: a character is text when its general
category is a letter, mark, number, punctuation, symbol or the space, and it is not in Default_Ignorable_Code_Point
nor the braille blank). Every writer is
checked on what it writes: the terminal's and the logs' lines, results.json's text, the feedback page, the class
report, formgrader's check cells (HTML and plain), its standing cell (Markdown, rendered), and CSV cells parsed
back. A page is parsed: its text nodes and attribute values are text (the page's own line breaks aside), and
every student string stands isolated, in <bdi> or filling a block element of its own (a cell, a paragraph, an
item: a block is its own bidirectional paragraph).
"""

from __future__ import annotations

import csv
import io
import json
import logging
from html.parser import HTMLParser
from pathlib import Path
from unittest import mock

import mistune
import nbformat
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from autograder.engine.results import CheckResult, SubmissionResult, SubTest
from autograder.frontends import exports, report as report_module, shown
from autograder.frontends.commands import ClassGraded
from autograder.frontends.feedback import feedback_html
from autograder.frontends.gradescope.results import results_json
from autograder.frontends.nbgrader.annotate import annotate
from autograder.frontends.nbgrader.plugins import refuse
from autograder.frontends.report import class_report_html
from autograder.frontends.standing import CellGrade, Standing, stale_line
from catalog.hostile_text import ESCAPE_SEQUENCES, ISSUE_EXAMPLES, LOOKALIKES
from plain_text import assert_text, keeps

pytestmark = pytest.mark.quick  # in `make test-quick`: this wing's fast tier

BIDI = ["\u061c", "\u200e", "\u200f", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069"]
INVISIBLE = ["\u00ad", "\u034f", "\u115f", "\u180e", "\u200b", "\u200c", "\u200d", "\u2060", "\u2800", "\u3164", "\ufe0f"]
INVISIBLE += ["\ufeff", "\uffa0", "\U000e0041", "\u00a0", "\u3000", "\u2028", "\u2029", "\U0001d173", "\U000e0100"]
BREAKS = ["\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x85"]
CONTROLS = [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))]
SURROGATES = ["\udce9", "\ud800"]  # a file name's byte that is not UTF-8, a lone surrogate from JSON
SPECIAL = ESCAPE_SEQUENCES + BIDI + INVISIBLE + BREAKS + CONTROLS + SURROGATES + list(LOOKALIKES)
MARKER = "\u27ea", "\u27eb"  # ⟪ ⟫: where a student's string starts and ends, to find it in a page

hostile = st.lists(
    st.one_of(st.sampled_from(SPECIAL), st.sampled_from(SPECIAL), st.text(max_size=6), st.sampled_from(ISSUE_EXAMPLES)),
    max_size=10,
).map("".join)
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def marked(value: str) -> str:
    return MARKER[0] + value + MARKER[1]


# ---- terminal, logs and results.json -------------------------------------------------------------


@given(hostile)
@example("\x1b]52;c;aGVsbG8=\x07\x1b[1A\x1b[2K\rScore: 24 / 24\x9b2K\u202e42 erocs")
@PROPERTY
def test_a_line_and_a_terminal_show_every_character_as_text(value):
    one = shown.line(value)
    assert_text(one)
    assert keeps(one, value) and "\n" not in one
    lines = shown.terminal(value)
    assert_text(lines, line_breaks=True)
    # the writer's own line breaks stay, and nothing else breaks a line
    assert keeps(lines, value) and lines.count("\n") == value.count("\n")
    assert shown.line(one) == one and shown.terminal(lines) == lines  # text stays as it is
    named = shown.named(value)
    assert named.isascii() and named.isprintable()


STEP = "Step 3 of 10 (ln1 = layer_norm(x)): "  # the kit's words before a first divergence


def result_saying(value: str, name: str | None = None) -> SubmissionResult:
    """A result in which every string a student can reach says `value`."""
    parts = (SubTest(value, 0.0, 1, False, value), SubTest("first shortcut", 1, 1, True))
    checks = (
        CheckResult("forward_order", "Operation order (Pre-LN)", (SubTest("matches", 4, 4, True),), "All parts passed."),
        CheckResult("forward_shortcuts", "Both shortcut additions", parts, value),
    )
    divergence = f"{STEP}{value}"
    # the smallest input it went wrong on, whose words quote the error its forward raised there
    differs = {"kind": "differs", "where": "with one token", "detail": f"your forward raised ValueError: {value}"}
    return SubmissionResult(
        name or value, checks, 17, "cpu", "isolated", 1.5, divergence, (value, value), {}, value, (value,), (differs,)
    )


def standing_saying(value: str, late: bool = False, stale: str = "") -> Standing:
    checks = {"forward_shortcuts": CellGrade("check_forward_shortcuts", "Both", 1, 3, manual=True, comment=value)}
    written = (CellGrade(value, value, 2, 2, manual=True, answer=f"{value}\n\n{value}", comment=value),)
    return Standing(3, 5, checks, written, 0.5 if late else 0.0, 3600.0 if late else None, ((value, value),), stale)


@given(hostile)
@example("boom\nScore: 24 / 24")
@PROPERTY
def test_results_json_is_text_and_only_the_kit_breaks_its_lines(value):
    data = results_json(result_saying(value), standing_saying(value))
    assert data["output_format"] == data["test_output_format"] == data["test_name_format"] == "text"
    lines = data["output"].split("\n")
    assert len(lines) == 4 and lines[0].startswith("Score: 3 / 5")  # the score, the divergence and two notes
    for line in lines:
        assert_text(line)
    assert keeps(lines[1], value) and keeps(lines[2], value)
    for test in data["tests"]:
        assert_text(test["name"])
        assert_text(test["output"])
    json.loads(json.dumps(data))


@given(hostile)
@PROPERTY
def test_an_unreadable_submission_s_line_on_stderr_is_text_on_one_line(value):
    from autograder.course.notebook import SubmissionError
    from autograder.grading import submission

    def unreadable(path):
        raise SubmissionError(f"could not read {value}")

    server = mock.Mock(assignment=None)
    err = io.StringIO()
    with mock.patch.object(submission, "read_submission", unreadable), mock.patch.object(submission.sys, "stderr", err):
        with mock.patch.object(submission, "unreadable", lambda *a, **k: None):
            submission.grade_file(Path("ada.ipynb"), server, seed=1, student=value)
    said = err.getvalue()
    assert said.endswith("\n") and "\n" not in said[:-1] and keeps(said, value)
    assert_text(said[:-1])


@given(hostile)
@PROPERTY
def test_grade_class_summary_and_refusals_are_text_on_one_line_each(value):
    rows = [
        {"student": value, "score": "3", "max_score": "5", "seed": 11},
        {"student": "ann", "score": "4", "max_score": "5", "seed": 11},
    ]
    done = ClassGraded(rows, 11, Path("out"), Path("source.ipynb"), None, [value], ())
    summary = done.summary()
    assert "\n" not in summary and keeps(summary, value)
    assert_text(summary)
    assert_text(done.warning(), line_breaks=True)
    records: list[logging.LogRecord] = []
    log = logging.getLogger("kit-writers-test")
    handler = logging.Handler()
    handler.emit = records.append
    log.addHandler(handler)
    try:
        refusal = refuse(log, f"Not grading {value}", stale_line("ps1", {value: "not graded by the kit yet"}))
    finally:
        log.removeHandler(handler)
    assert len(records) == 1
    for said in (str(refusal), records[0].getMessage()):
        assert_text(said)
        assert keeps(said, value)


# ---- HTML: the feedback page, the class report, formgrader's cells ---------------------------------------

BLOCKS = {"p", "li", "td", "th", "div", "h1", "h2", "figcaption", "footer"}
# a field the kit wrote around a student's text, which fills its block whole (the report's "parts it fails")
FIELDS = ("", STEP, "Both shortcut additions: ")


class Tree(HTMLParser):
    """Every text node with the element it stands in and that element's other children; attribute values."""

    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.stack = [{"tag": "#root", "children": []}]
        self.texts, self.values = [], []
        self.feed(page)
        self.close()

    def handle_starttag(self, tag, attrs):
        element = {"tag": tag, "children": []}
        self.stack[-1]["children"].append(element)
        self.values += [value for _, value in attrs if value is not None]
        if tag not in ("meta", "img", "br", "link"):
            self.stack.append(element)

    def handle_endtag(self, tag):
        while len(self.stack) > 1 and self.stack.pop()["tag"] != tag:
            pass

    def handle_data(self, data):
        self.stack[-1]["children"].append(data)
        self.texts.append((data, self.stack[-1], [e["tag"] for e in self.stack]))


def assert_page_is_text(page: str, value: str) -> None:
    tree = Tree(page)
    for text, _, _ in tree.texts:
        assert_text(text, line_breaks=True)
    for attribute in tree.values:
        if not attribute.startswith("data:image/png"):
            assert_text(attribute)
    students = [(text, parent, path) for text, parent, path in tree.texts if MARKER[0] in text and "title" not in path]
    assert students, "the student's text is not on the page"
    for text, parent, path in students:
        whole = parent["children"] == [text] and text.split(MARKER[0])[0] in FIELDS  # a field that fills its block
        assert parent["tag"] == "bdi" or (parent["tag"] in BLOCKS and whole), (path, text, parent["children"])
    assert any(keeps(text, value) for text, _, _ in students)


@given(hostile)
@example("\u202e42 erocs")
@example("alice\u3164 \u0430lice\u2800")
@PROPERTY
def test_the_feedback_page_shows_a_student_s_text_as_isolated_text(value):
    text = marked(value)
    assert_page_is_text(feedback_html(result_saying(text), standing_saying(text, late=True)), value)


@given(hostile)
@example("\u202e42 erocs")
@PROPERTY
def test_the_class_report_shows_a_student_s_text_as_isolated_text(value):
    text = marked(value)
    rows = [
        (text, result_saying(text, "sub.py"), standing_saying(text, late=True, stale="not graded by the kit yet")),
        ("ann", result_saying(text, "ann.py"), standing_saying("fine", late=True)),
    ]
    with (
        mock.patch.object(report_module, "histogram_png", lambda *a, **k: b""),
        mock.patch.object(report_module, "bars_png", lambda *a, **k: b""),
    ):  # the figures are drawn text, not what this is about
        page = class_report_html(rows, title=text)
    assert_page_is_text(page, value)


@given(hostile)
@PROPERTY
def test_formgrader_s_check_cells_are_isolated_text_and_one_line_per_field(value):
    text = marked(value)
    notebook = annotate(nbformat.v4.new_notebook(), result_saying(text))
    fragments = [o["data"] for cell in notebook.cells for o in cell.outputs if "text/html" in o.get("data", {})]
    assert len(fragments) == 2  # the two checks of the result, in the cells put back
    for data in fragments:
        assert_page_is_text(data["text/html"], value)
        assert_text(data["text/plain"], line_breaks=True)


@given(hostile)
@example("*alice* <b>x</b> [a](javascript:x) `code` \\")
@PROPERTY
def test_a_student_id_in_markdown_renders_as_its_own_text(value):
    rendered = mistune.html(shown.markdown(value))
    tree = Tree(rendered)
    assert {element["tag"] for element in tree.stack[0]["children"] if isinstance(element, dict)} <= {"p"}
    assert all(path == ["#root", "p"] for text, _, path in tree.texts if text.strip())
    said = "".join(text for text, _, _ in tree.texts).strip("\n")
    assert_text(said)
    assert keeps(said, value)


# ---- CSV ----------------------------------------------------------------------------------------------


@given(hostile, hostile)
@example("=HYPERLINK(\"x\")", "\t=1+1")
@example("alice\u3164", "-2")
@PROPERTY
def test_a_csv_cell_is_text_that_runs_nothing(value, other):
    header = ["student", value, "score"]
    rows = [{"student": value, value: other, "score": -1.5}, {"student": other, "score": 3}]
    table = list(csv.reader(io.StringIO(exports.csv_text(header, rows), newline="")))
    assert len(table) == 3 and all(len(row) == 3 for row in table)  # no line break of a student's made a row
    for row in table:
        for written in row:
            assert_text(written)
            assert not written.startswith(("=", "+", "-", "@")) or written == "-1.5"
    assert keeps(table[1][0], value) and keeps(table[1][1], other) and table[1][2] == "-1.5"


def test_the_issue_s_strings_read_as_their_escapes():
    """The cases that were reported, as each medium writes them (regression examples of the properties)."""
    osc52 = "\x1b]52;c;cm0gLXJmIH4=\x07"
    assert shown.line(f"boom{osc52}") == "boom\\x1b]52;c;cm0gLXJmIH4=\\x07"
    assert shown.line("\x1b[1A\x1b[2K\rScore: 24 / 24") == "\\x1b[1A\\x1b[2K\\rScore: 24 / 24"
    assert shown.line("\x9b1A\x9d0;t\x9c") == "\\x9b1A\\x9d0;t\\x9c"
    assert shown.html("\u202e42 erocs") == "<bdi>\\u202e42 erocs</bdi>"
    assert [exports.cell(n) for n in ("alice", "\u0430lice", "alice\u2800", "alice\u3164")] == [
        "alice",
        "\u0430lice",
        "alice\\u2800",
        "alice\\u3164",
    ]
    assert shown.named("\u0430lice") == "'\\u0430lice'" and shown.named("jose\u0301") == "'jose\\u0301'"
