"""The student's feedback page: made from results alone, escaped, standalone, and free of the solution."""

import base64
import dataclasses
import html
import json
import re
from dataclasses import replace
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.course import kit
from autograder.engine.results import CheckResult, Diverged, SubmissionResult, SubTest
from autograder.engine.rubric import TOTAL_POINTS, WRITTEN
from autograder.frontends.feedback import feedback_html, write_feedback_page
from autograder.frontends.plots import profile_figure_png
from autograder.frontends.standing import CellGrade, Standing, standing_of
from catalog.build import submission
from catalog.wrong_forwards import WRONG
from markup import HOSTILE, Parsed

pytestmark = pytest.mark.quick  # in `make test-quick`: this wing's fast tier

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PROFILE = [60.0 / (k**0.3) for k in range(1, 25)]
PROFILES = {
    "student": PROFILE,
    "reference": PROFILE,
    "Post-LN": [p * 0.8 for p in PROFILE],
    "no shortcuts": [p * k / 30 for k, p in enumerate(PROFILE, 1)],
}
SCRIPT = "<script>alert(1)</script>"


def _result(message="", divergence=None, notes=(), profile=None, name="sub.py") -> SubmissionResult:
    passed = CheckResult(
        "forward_order", "Operation order (Pre-LN)", (SubTest("output matches a Pre-LN block", 4, 4, True),), "All parts passed."
    )
    failed = CheckResult(
        "forward_shortcuts",
        "Both shortcut additions",
        (
            SubTest("identity", 0.0, 1, False, message or "identity failed"),
            SubTest("first shortcut", 1, 1, True),
            SubTest("second shortcut", 0.0, 1, False, "second failed"),
        ),
        message or "identity failed. second failed.",
    )
    return SubmissionResult(
        name,
        (passed, failed),
        17,
        "cpu",
        "SECRET-ISOLATION-DETAILS",
        1.5,
        divergence,
        tuple(notes),
        PROFILES if profile is None else profile,
    )


def _rows(page: str) -> dict[str, str]:
    """data-check -> the row's class ("check passed" / "check failed")."""
    return {check: cls for cls, check in re.findall(r'<tr class="([^"]*)" data-check="([^"]*)"', page)}


def _embedded_png(page: str) -> bytes:
    match = re.search(r'<img id="gradient-plot" src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert match, "the gradient plot is not embedded"
    return base64.b64decode(match.group(1))


def _solution_lines() -> set[str]:
    public = {line.strip() for _, code in kit.KIT.public_code() for line in code.splitlines()}
    lines = set()
    for label, code in kit.KIT.reference_code():
        if "task1_forward" in label or "task2_compounding" in label:
            for line in code.splitlines():
                text = line.strip()
                if len(text) > 12 and text not in public:
                    lines.add(text)
                    code_part = text.split("#")[0].strip()
                    if len(code_part) > 12 and code_part not in public:
                        lines.add(code_part)
    return lines


def _assert_nothing_secret(page: str) -> None:
    lines = _solution_lines()
    assert lines, "found no solution lines to look for"
    leaked = [line for line in lines if line in page or html.escape(line) in page]
    assert not leaked, leaked
    assert "BEGIN HIDDEN TESTS" not in page and "report(" not in page
    assert "SECRET-ISOLATION-DETAILS" not in page


def _assert_standalone(page: str) -> None:
    lowered = page.lower()
    assert "<script" not in lowered and "javascript:" not in lowered and "<link" not in lowered
    for attribute in re.findall(r'(?:src|href)="([^"]*)"', page):
        assert attribute.startswith("data:"), attribute


# ---- the plot ------------------------------------------------------------------------------------------


def test_profile_plot_is_a_png():
    assert profile_figure_png(PROFILES).startswith(PNG_SIGNATURE)


def test_missing_student_profile_still_shows_the_references():
    assert profile_figure_png({**PROFILES, "student": None}).startswith(PNG_SIGNATURE)
    page = feedback_html(_result(profile={**PROFILES, "student": None}))
    assert _embedded_png(page).startswith(PNG_SIGNATURE)
    assert "did not produce a gradient profile" in page


def test_a_profile_with_no_finite_value_is_said_to_be_so_and_a_partial_one_is_drawn():
    """A stack whose gradient overflowed at every block sends a profile of nulls (JSON holds no NaN or inf): the
    block ran, so the caption says what its profile held; one that overflowed at some blocks is drawn where it can."""
    blank = feedback_html(_result(profile={**PROFILES, "student": [None] * 24}))
    assert "zero, NaN or infinite" in blank and "did not produce" not in blank
    some = [None] * 6 + [float(v) for v in range(18, 0, -1)]
    partial = feedback_html(_result(profile={**PROFILES, "student": some}))
    assert "should lie on the" in partial and "did not produce" not in partial and "zero, NaN or infinite" not in partial


def test_nothing_to_plot_gives_none_and_the_page_says_so():
    assert profile_figure_png({}) is None
    assert profile_figure_png({"student": None, "reference": None}) is None
    page = feedback_html(_result(profile={}))
    assert 'id="gradient-plot"' not in page and "No gradient profile" in page


def test_malformed_profiles_never_break_the_plot():
    odd = {
        "student": ["x", None],
        "reference": [0.0, -1.0, float("nan"), 3.0, float("inf")],
        "Post-LN": "not a list",
        "no shortcuts": [[1, 2], [3]],
    }
    assert profile_figure_png(odd).startswith(PNG_SIGNATURE)  # the one usable value of "reference"
    assert profile_figure_png({"student": list(range(1, 10_000))}) is None
    assert profile_figure_png({"student": [10**400]}) is None
    assert profile_figure_png(None) is None


# ---- the page ------------------------------------------------------------------------------------------


def test_page_structure():
    page = feedback_html(
        _result(divergence="Step 2 of 10 (normalize with norm1): attention ran first", notes=["cell 3 raised ValueError: oops"])
    )
    assert f'<span id="score">5 / {7 + sum(WRITTEN.values()):g}</span>' in page  # the written answers count
    assert "awaiting your instructor" in page and 'id="late"' not in page
    assert 'id="first-divergence"' in page and "Where your block first went wrong" in page
    assert "Step 2 of 10 (normalize with norm1)" in page
    assert _rows(page) == {"forward_order": "check passed", "forward_shortcuts": "check failed"}
    assert "identity failed" in page and "second failed" in page  # each failed part says why
    assert "cell 3 raised ValueError: oops" in page
    assert "seed 17" in page and "cpu" in page
    assert _embedded_png(page).startswith(PNG_SIGNATURE)
    _assert_standalone(page)
    _assert_nothing_secret(page)


def test_every_number_comes_from_the_standing():
    """In a course the numbers are the gradebook's: an override, written answers graded or awaiting, comments and
    the late penalty; the parts say passed or failed and never their points, which an override would contradict."""
    result = _result()
    checks = {
        "forward_order": CellGrade("check_forward_order", "Operation order (Pre-LN)", 4, 4),
        "forward_shortcuts": CellGrade(
            "check_forward_shortcuts", "Both shortcut additions", 2.5, 3, manual=True, comment=f"Close {SCRIPT}"
        ),
    }
    written = (
        CellGrade("answer_a", "Written question 1", 2, 2, manual=True, answer=f"Because\nof {SCRIPT}.\n\nAnd so."),
        CellGrade("answer_b", "Written question 2", None, 3, answer="YOUR ANSWER HERE"),
    )
    standing = Standing(6.5, 12, checks, written, late_penalty=2, seconds_late=3600, remarks=(("task1_forward", "Nice loop"),))
    page = feedback_html(result, standing)
    assert '<span id="score">6.5 / 12</span>' in page
    assert "Late by 1.0 h: 2 points deducted under the course&#x27;s late rule (8.5 before the deduction)." in page
    assert re.search(
        r'data-check="forward_shortcuts"><td class="title">[^<]*</td><td class="pts">2.5 / 3'
        r'<div class="muted">set by your instructor',
        page,
    )
    assert "Written answers worth 3 points are awaiting your instructor" in page
    assert "<p>Because of &lt;script&gt;alert(1)&lt;/script&gt;.</p><p>And so.</p>" in page
    assert re.search(r'data-cell="answer_b"><td class="title">Written question 2</td><td class="pts">awaiting', page)
    assert "Nice loop" in page and "Close &lt;script&gt;" in page and "<script" not in page.lower()
    parts = re.findall(r'<li class="part[^"]*">(.*?)</li>', page)
    assert parts and not [p for p in parts if re.search(r"\d\s*/\s*\d", p)]
    _assert_standalone(page)


def test_outside_a_course_the_written_answers_await_the_instructor():
    standing = standing_of(_result())
    assert standing.score == 5 and standing.max_score == 7 + sum(WRITTEN.values())
    assert [c.grade_id for c in standing.written] == list(WRITTEN) and standing.awaiting == sum(WRITTEN.values())
    assert all(c.title and c.title != c.grade_id for c in standing.written)  # named as the notebook asks them
    written = sum(WRITTEN.values())
    assert standing.summary() == f"Score: 5 / {7 + written:g} ({written:g} points of written answers awaiting your instructor)"


def test_no_divergence_box_without_a_divergence():
    assert 'id="first-divergence"' not in feedback_html(_result())


def test_student_controlled_text_is_escaped_everywhere():
    page = feedback_html(_result(message=SCRIPT, divergence=SCRIPT, notes=[SCRIPT], name=f'"{SCRIPT}.py'))
    assert "<script" not in page.lower()
    assert html.escape(SCRIPT) in page
    assert page.count(html.escape(SCRIPT)) >= 4  # message, divergence, note, name
    _assert_standalone(page)


def test_hostile_student_text_is_text_never_markup():
    """Whatever a student controls (the file name, messages and part names quoting their code, the first
    divergence, notes, a written answer, comments quoting them, a cell's id in an attribute) is escaped as
    `html.escape` spells it, reads back as the very text it was, and adds no element or attribute: the page's
    markup is that of the same page with harmless text."""

    def page(text):
        result = _result(message=text, divergence=text, notes=[text], name=f"{text}.py")
        failed = result.checks[1]
        parts = (replace(failed.subtests[0], name=text), *failed.subtests[1:])
        result = replace(result, checks=(result.checks[0], replace(failed, subtests=parts)))
        checks = {"forward_shortcuts": CellGrade("check_forward_shortcuts", "Both", 1, 3, manual=True, comment=text)}
        written = (CellGrade(text, "Written question 1", 2, 2, manual=True, answer=text, comment=text),)
        return feedback_html(result, Standing(3, 5, checks, written, remarks=((text, text),)))

    hostile, harmless = page(HOSTILE), page("harmless words")
    assert Parsed(hostile).markup == Parsed(harmless).markup
    assert "<script" not in hostile.lower() and "<img src=x" not in hostile
    # as text: the name (title and heading), the part's name and its reason, the divergence, the note, the comment
    # on the check, the answer and the comment on it, the remark's cell and text; as an attribute: the answer's id
    assert Parsed(hostile).text.count(HOSTILE) == 11 and Parsed(hostile).values.count(HOSTILE) == 1
    assert hostile.count(html.escape(HOSTILE)) == 12 and f'data-cell="{html.escape(HOSTILE)}"' in hostile


def test_write_feedback_page(tmp_path):
    path = tmp_path / "out" / "feedback.html"
    write_feedback_page(_result(), path)
    assert path.read_text(encoding="utf-8") == feedback_html(_result())
    assert [p.name for p in path.parent.iterdir()] == ["feedback.html"]  # no temporary file left behind


# ---- end to end, through the real sandbox ---------------------------------------------------------------


def test_solution_page_shows_full_marks(grade_source):
    result = grade_source(submission())
    page = feedback_html(result)
    assert result.score == TOTAL_POINTS
    full = TOTAL_POINTS + sum(WRITTEN.values())
    assert f'<span id="score">{TOTAL_POINTS:g} / {full:g}</span>' in page
    assert 'id="first-divergence"' not in page
    assert set(_rows(page).values()) == {"check passed"}
    assert result.isolation not in page
    assert _embedded_png(page).startswith(PNG_SIGNATURE)
    _assert_standalone(page)
    _assert_nothing_secret(page)


def test_post_ln_page_explains_where_it_went_wrong(grade_source):
    post_ln = next(w for w in WRONG if w.name == "post_ln")
    result = grade_source(submission(forward=post_ln.forward))
    page = feedback_html(result)
    assert result.first_divergence
    assert html.escape(result.first_divergence) in page
    assert 'id="first-divergence"' in page
    assert _rows(page)[post_ln.check] == "check failed"
    assert f'<span id="score">{result.score:g} / {TOTAL_POINTS + sum(WRITTEN.values()):g}</span>' in page
    assert result.isolation not in page
    _assert_standalone(page)
    _assert_nothing_secret(page)


# ---- the standing: one computation from the gradebook's record ------------------------------------------


def test_the_standing_of_a_record_follows_nbgraders_rules():
    """Each cell's points as nbgrader counts them, the course's penalty on their sum now (kept between 0 and it),
    written answers awaiting or graded, and whether the grade is out of date."""
    from autograder.frontends.standing import GradeRecord, Record, late_text, standing_from_record
    from autograder.sandbox.parent.client import UNSAFE

    points = kit.KIT.check_points()
    graded = _result()
    result = SubmissionResult(
        graded.submission,
        tuple(CheckResult(name, name, (SubTest("all", p, p, True),), "") for name, p in points.items()),
        1,
        "cpu",
        UNSAFE,
        0.1,
    )
    grades = {f"check_{n}": GradeRecord(f"check_{n}", p, auto_score=p) for n, p in points.items()}
    grades["check_forward_order"] = GradeRecord("check_forward_order", 4, auto_score=0, manual_score=3, extra_credit=0.5)
    grades.update({g: GradeRecord(g, p) for g, p in WRITTEN.items()})
    first = next(iter(WRITTEN))
    grades[first] = GradeRecord(first, WRITTEN[first], manual_score=1.5)
    standing = standing_from_record(kit.KIT, Record(grades, 7200, graded=result), lambda score, late: score + 99)
    raw = TOTAL_POINTS - 4 + 3.5 + 1.5
    assert standing.raw_score == raw and standing.late_penalty == raw and standing.score == 0  # kept at the score
    assert standing.checks["forward_order"].points == 3.5 and standing.checks["forward_order"].manual
    assert [c.points for c in standing.written] == [1.5, None, None] and standing.awaiting == sum(WRITTEN.values()) - 2
    assert standing.max_score == TOTAL_POINTS + sum(WRITTEN.values()) and standing.unisolated and not standing.stale
    moved = {**grades, "check_compounding": GradeRecord("check_compounding", 5, auto_score=3)}
    assert (
        "check_compounding gives 3 points in the source, 5 in the gradebook"
        in standing_from_record(kit.KIT, Record(moved, 0, graded=result)).stale
    )
    other = SubmissionResult(
        **{
            **result.__dict__,
            "checks": tuple(CheckResult(c.check, c.title, (SubTest("all", 1, 1, True),), "") for c in result.checks),
        }
    )
    assert "was graded out of 1 points, the course gives" in standing_from_record(kit.KIT, Record(grades, 0, graded=other)).stale
    assert standing_from_record(kit.KIT, Record(grades, 0)).stale == "not graded by the kit yet"
    assert [late_text(s) for s in (34, 600, 3 * 3600, 4 * 86400)] == ["34 s", "10 min", "3.0 h", "4.0 days"]


def test_results_json_and_the_printed_line_are_the_standing():
    from autograder.frontends.gradescope.results import results_json, result_from_json, standing_from_json

    result = _result()
    standing = Standing(
        3,
        12,
        {
            "forward_order": CellGrade("check_forward_order", "Operation order (Pre-LN)", 2, 4, True),
            "forward_shortcuts": CellGrade("check_forward_shortcuts", "Both shortcut additions", 1, 3),
        },
        (CellGrade("answer_a", "Written question 1", None, 5),),
        late_penalty=0,
        seconds_late=0,
    )
    data = results_json(result, standing)
    assert data["score"] == 3 and data["output"].startswith("Score: 3 / 12 (5 points of written answers awaiting")
    assert [(t["tags"][0], t["score"], t["max_score"]) for t in data["tests"]] == [
        ("forward_order", 2, 4),
        ("forward_shortcuts", 1, 3),
        ("answer_a", 0, 5),
    ]
    assert standing_from_json(data, result_from_json(data)) == standing
    assert [c.check for c in result_from_json(data).checks] == ["forward_order", "forward_shortcuts"]


@pytest.mark.parametrize("diverged", [Diverged(4, "train", True), Diverged(None), None])
def test_the_first_step_travels_as_data_through_results_json_and_a_kept_result(diverged):
    """What the report and the tests read: the step and its run, as fields, wherever a result is kept; one kept by an
    earlier version, with the verified cause's kind beside them, reads the same."""
    from autograder.frontends.gradescope.results import results_json, result_from_json

    result = replace(_result(), diverged=diverged)
    data = json.loads(json.dumps(results_json(result)))
    assert data["extra_data"]["diverged"] == (None if diverged is None else dataclasses.asdict(diverged))
    assert result_from_json(data).diverged == diverged
    assert SubmissionResult.from_dict(json.loads(json.dumps(result.to_dict()))).diverged == diverged
    assert SubmissionResult.from_dict({k: v for k, v in result.to_dict().items() if k != "diverged"}).diverged is None
    if diverged is not None:
        kept = {**result.to_dict(), "diverged": {**dataclasses.asdict(diverged), "cause": "dropout_moved"}}
        assert SubmissionResult.from_dict(json.loads(json.dumps(kept))).diverged == diverged


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.booleans(),  # the instructor graded it
            st.sampled_from([0, 0.5, 2]),
            st.text(alphabet="Abc <>&'\". ", max_size=12).filter(lambda t: "comment" not in t.lower()),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_only_the_instructor_speaks_as_the_instructor(cells):
    """A written answer's comment on the page and in results.json is the instructor's own; one they graded without
    a comment says "no comment"; one nobody graded (nbgrader's zero for an answer left as released) says neither."""
    from autograder.frontends.gradescope.results import results_json

    written = tuple(
        CellGrade(f"answer_{n}", f"Question {n}", points, 2, manual=graded, comment=text, answer="An answer.")
        for n, (graded, points, text) in enumerate(cells)
    )
    standing = Standing(1, 9, {}, written)
    page = feedback_html(_result(profile={}), standing)
    tests = {t["tags"][0]: t["output"] for t in results_json(_result(profile={}), standing)["tests"]}
    for n, (graded, _, text) in enumerate(cells):
        row = html.unescape(re.sub("</?bdi>", "", re.search(rf'data-cell="answer_{n}">(.*?)</tr>', page).group(1)))
        for view in (row, tests[f"answer_{n}"]):
            if text:
                assert f"Your instructor: {text}" in view, view
            else:
                assert "Your instructor:" not in view and ("no comment" in view.lower()) == graded, view


LATE_RULES = {  # the course's late-penalty plugin: (score, seconds late) -> points, or None for no penalty
    "none (nbgrader's default)": lambda score, late: None,
    "zero": lambda score, late: score,
    "a point an hour": lambda score, late: late / 3600,
    "more than the score": lambda score, late: score + 99,
}


@settings(max_examples=80, deadline=None)
@given(
    seconds=st.one_of(st.just(0.0), st.floats(0.01, 90 * 86400)),
    rule=st.sampled_from(sorted(LATE_RULES)),
    shares=st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=len(kit.KIT.check_points()), max_size=len(kit.KIT.check_points())),
)
def test_every_view_says_a_submission_was_late_and_by_how_much_under_any_rule(seconds, rule, shares):
    """Under any late rule, nbgrader's default (flag, lose nothing) included: the page, results.json (its output
    and extra_data), grade-class's grades.csv row and the class report say that the submission was late, by a
    duration that covers the true delay, and what it cost; an on-time submission is called late by none."""
    from autograder.frontends.classgrade import grade_row
    from autograder.frontends.gradescope.results import results_json
    from autograder.frontends import report as report_module
    from autograder.frontends.report import class_report_html
    from autograder.frontends.standing import GradeRecord, Record, standing_from_record
    from lateness import duration_range, says_late, says_late_by

    points = kit.KIT.check_points()
    result = SubmissionResult(
        "sub.ipynb", tuple(CheckResult(n, n, (SubTest("all", p, p, True),), "") for n, p in points.items()), 1, "cpu", "", 0.1
    )
    grades = {f"check_{n}": GradeRecord(f"check_{n}", p, auto_score=share * p) for (n, p), share in zip(points.items(), shares)}
    grades.update({g: GradeRecord(g, p) for g, p in WRITTEN.items()})
    standing = standing_from_record(kit.KIT, Record(grades, seconds, graded=result), LATE_RULES[rule])
    raw = sum(share * p for p, share in zip(points.values(), shares))
    penalty = min(max(LATE_RULES[rule](raw, seconds) or 0.0, 0.0), raw) if seconds else 0.0

    def covers(duration: str) -> bool:
        low, high = duration_range(duration)
        return low - 1e-6 <= seconds <= high + 1e-6

    def costs(text: str) -> bool:
        if penalty == 0:
            return "no points deducted" in text
        said = re.search(r"(\d+(?:\.\d+)?) points deducted", text)
        return said is not None and abs(float(said.group(1)) - penalty) <= 0.006

    page = feedback_html(result, standing)
    data = results_json(result, standing)
    row = grade_row("ann", result, standing)
    with (
        mock.patch.object(report_module, "histogram_png", lambda *a, **k: b""),
        mock.patch.object(report_module, "bars_png", lambda *a, **k: b""),
    ):  # the figures are not what this is about, and take most of the time
        report = class_report_html([("ann", result, standing)])
    late_table = report.split('id="late"')[1].split("</table>")[0] if 'id="late"' in report else ""
    if not seconds:
        assert 'id="late"' not in page and not says_late(data["output"]) and not says_late(html.unescape(page))
        assert data["extra_data"]["late_by"] == row["late_by"] == "" and float(row["seconds_late"]) == 0
        assert "<td>ann</td>" not in late_table
        return
    line = html.unescape(re.search(r'<p id="late"[^>]*>(.*?)</p>', page).group(1))
    assert says_late_by(line, seconds) and costs(line), line
    assert says_late_by(data["output"], seconds) and costs(data["output"]), data["output"]
    extra = data["extra_data"]
    assert extra["seconds_late"] == seconds and covers(extra["late_by"]) and abs(extra["late_penalty"] - penalty) <= 1e-6
    assert covers(row["late_by"]) and abs(float(row["seconds_late"]) - seconds) <= 0.006
    assert abs(float(row["late_penalty"]) - penalty) <= 0.006
    cells = re.search(r"<tr><td>ann</td><td>([^<]+)</td><td>([^<]+)</td>", late_table).groups()
    assert covers(cells[0]) and (cells[1] == "none" if penalty == 0 else abs(float(cells[1]) - penalty) <= 0.006), cells


def test_outside_a_course_nobody_knows_how_late():
    """`grade` and grade-class on a folder know no due date: no view calls the submission late or on time."""
    from autograder.frontends.classgrade import grade_row
    from autograder.frontends.gradescope.results import results_json

    standing = standing_of(_result())
    assert standing.seconds_late is None and not standing.late
    assert results_json(_result(), standing)["extra_data"]["seconds_late"] is None
    assert grade_row("ann", _result(), standing)["seconds_late"] == ""
