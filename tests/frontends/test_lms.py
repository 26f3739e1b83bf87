"""Grades into the LMS: a Canvas gradebook export and a Moodle grade export, made here in each LMS's documented layout
(hostile names and formulas in them, odd separators, a byte-order mark, CRLF, quoted line breaks), are read as the
roster; the file written keeps every column and row it was given, fills exactly the assignment's column from the
standing, and lists every student it matched to no row or to two. The generators know the truth by construction:
which row is whose, what each student's standing is."""

import csv
import io
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autograder.course.fence import name_text
from autograder.engine.rubric import WRITTEN
from autograder.frontends import exports
from autograder.frontends.lms.canvas import canvas_file
from autograder.frontends.lms.grades import Choices, Graded, Refused
from autograder.frontends.lms.match import Matching, read_mapping
from autograder.frontends.lms.moodle import moodle_file
from autograder.frontends.lms.table import RosterError, read_table
from autograder.frontends.standing import CellGrade, Standing

pytestmark = pytest.mark.quick  # in `make test-quick`: this wing's fast tier (its course-driving tests are slow)

NAME, MAXIMUM = "layernorm", 30.0
FORMULAS = [
    '=HYPERLINK("http://x.example/?"&A1,"click")',
    "+1+1",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1,2)",
    "\tSUM(1)",
    "\r=1",
    '"quoted", name',
    "two\nlines",
    "two\r\nlines",
    "\ufeffbom inside",
    "\u202eright to left",
    "zero\u200bwidth",
    "Lovelace, Ada",
    "Müller, Zoë",
    "",
]
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=10)
NAMES = (st.sampled_from(FORMULAS) | TEXT).filter(lambda t: "Points Possible" not in t)
IDS = (st.sampled_from([f for f in FORMULAS if f]) | TEXT.filter(bool)).filter(lambda t: "Points Possible" not in t)
SCORES = st.sampled_from([0, 0.5, 7, 17.5, 16.6667, 24, 30])
LATE = st.sampled_from([0.0, 0.0, 3.0])
SOMETIMES = st.sampled_from([False, False, False, True])
KEPT_CELLS = st.sampled_from(["", "7", "12.5", "-1.5", "EX", "N/A"])
OTHER_CELLS = st.sampled_from(["", "9", "9.75", "-2", "EX", "N/A", "=1+1"])


def standing(score, stale=False, awaiting=False, late=0.0) -> Standing:
    """A student's standing: `score` after a late penalty of `late` points."""
    written = (CellGrade("q1", "Written question 1", None if awaiting else 2.0, 3.0),)
    return Standing(score, MAXIMUM, {}, written, late, 3600.0 if late else 0.0, stale="points changed" if stale else "")


def roster_text(rows: list[list[str]], separator: str, line_end: str, bom: bool) -> str:
    """The test's own CSV writer: each record quoted where it must be, the records joined by `line_end`."""
    records = []
    for row in rows:
        buffer = io.StringIO()
        csv.writer(buffer, delimiter=separator, lineterminator="\r\n").writerow(row)
        records.append(buffer.getvalue()[:-2])
    return ("\ufeff" if bom else "") + line_end.join(records) + line_end


def written_rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text.removeprefix("\ufeff"), newline="")))


def kept(original: str, written: str) -> bool:
    """A value the LMS had, as the written file holds it: neutralized as every CSV of the kit (`exports.cell`), a
    negative number still that number."""
    if re.fullmatch(r"-\d+(\.\d+)?", original):
        return float(written) == float(original)
    return written == exports.cell(original)


def runs_nothing(rows) -> bool:
    return not [
        value
        for row in rows
        for value in row
        if value.startswith(("=", "+", "-", "@", "\t", "\r")) and not re.fullmatch(r"-\d+(\.\d+)?", value)
    ]


# --- Canvas -------------------------------------------------------------------------------------------------


@st.composite
def canvas_courses(draw):
    """A gradebook (student -> standing) and Canvas's export of the same course, with the truth: for each roster
    row, whose it is."""
    ids = draw(st.lists(IDS, min_size=1, max_size=6, unique=True))
    standings = {s: standing(draw(SCORES), draw(SOMETIMES), draw(SOMETIMES), draw(LATE)) for s in ids}
    presence = {s: draw(st.sampled_from(["once", "once", "absent", "twice"])) for s in ids}
    owners = [s for s in ids for _ in range({"once": 1, "absent": 0, "twice": 2}[presence[s]])]
    strangers = draw(st.lists(IDS.filter(lambda t: t not in ids) | st.just(""), max_size=3))
    owners += [("stranger", value) for value in strangers]
    owners = draw(st.permutations(owners))
    existing = draw(st.booleans())
    others = draw(st.integers(0, 2))
    header = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *[f"Quiz {i} ({100 + i})" for i in range(others)]]
    if existing:
        header.insert(5 + draw(st.integers(0, others)), f"{NAME} (77)")
    totals = ["Current Score", "Unposted Current Score", "Final Score", "Unposted Final Score"] if draw(st.booleans()) else []
    header += totals
    rows = []
    if draw(st.booleans()):
        rows.append(["", "", "", "", "", *["Manual Posting" if t.endswith(")") else "" for t in header[5:]]])
    rows.append(["    Points Possible", "", "", "", "", *["10" if t.endswith(")") else "(read only)" for t in header[5:]]])
    whose = {}
    for number, owner in enumerate(owners):
        login = owner[1] if isinstance(owner, tuple) else owner
        values = [draw(KEPT_CELLS) if t == f"{NAME} (77)" else draw(OTHER_CELLS) for t in header[5:]]
        whose[len(rows)] = owner if not isinstance(owner, tuple) else None
        rows.append([draw(NAMES), str(1000 + number), draw(TEXT), login, draw(NAMES), *values])
    layout = (draw(st.sampled_from([",", ";", "\t"])), draw(st.sampled_from(["\r\n", "\n"])), draw(st.booleans()))
    return standings, presence, header, rows, whose, layout


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(course=canvas_courses(), missing_as_zero=st.booleans(), awaiting_as_zero=st.booleans())
def test_canvas_keeps_every_row_and_column_and_fills_the_assignments_from_the_standing(
    tmp_path, course, missing_as_zero, awaiting_as_zero
):
    standings, presence, header, rows, whose, (separator, line_end, bom) = course
    path = tmp_path / "canvas.csv"
    path.write_bytes(roster_text([header, *rows], separator, line_end, bom).encode())
    choices = Choices(missing_as_zero, awaiting_as_zero)
    graded = [Graded(NAME, MAXIMUM, standings)]
    matched = {s for s, where in presence.items() if where == "once"}
    waiting = {s for s in matched if standings[s].awaiting and not standings[s].stale}
    if waiting and not awaiting_as_zero:
        with pytest.raises(Refused) as refused:
            canvas_file(read_table(path), graded, Matching("SIS Login ID"), choices)
        assert all(f'"{name_text(s)}"' in str(refused.value) for s in sorted(waiting)[:5]) and "\n" not in str(refused.value)
        return
    done = canvas_file(read_table(path), graded, Matching("SIS Login ID"), choices)
    text = done.text()
    assert text.startswith("\ufeff") == bom
    out = written_rows(text)
    new = f"{NAME} (77)" not in header
    column = header.index(f"{NAME} (77)") if not new else next((i for i, t in enumerate(header) if "Score" in t), len(header))
    assert out[0] == (header[:column] + [NAME] + header[column:] if new else [exports.cell(t) for t in header])
    assert len(out) == len(rows) + 1  # every row, and nothing else
    missing = set()
    for index, (given_row, row) in enumerate(zip(rows, out[1:])):
        filled = row.pop(column) if new else row[column]
        others = [v for i, v in enumerate(given_row) if new or i != column]
        assert all(kept(a, b) for a, b in zip(others, [v for i, v in enumerate(row) if new or i != column])), index
        before = "" if new else given_row[column]
        student = whose.get(index)
        if "Points Possible" in given_row[0]:
            assert float(filled) == MAXIMUM
        elif index not in whose:  # the row of assignments posted by hand
            assert kept(before, filled)
        elif student is not None and presence[student] == "once" and not standings[student].stale:
            if before in ("EX", "N/A"):
                assert filled == before
                missing.add(student)
            else:
                assert float(filled) == pytest.approx(standings[student].score, abs=1e-4)
        elif student is None or presence[student] == "absent":
            assert float(filled) == 0 if missing_as_zero and before not in ("EX", "N/A") else kept(before, filled)
        else:
            assert kept(before, filled), (index, before, filled)  # twice: left as Canvas has it
    missing |= {s for s, where in presence.items() if where != "once" or standings[s].stale}
    assert {s for s, _ in done.missing} == missing and done.complete == (not missing)
    said = "\n".join(done.lines)
    assert all(f'"{name_text(s)}"' in said for s, where in presence.items() if where != "once")
    strangers = [index for index, owner in whose.items() if owner is None]  # a row with no submission: said
    assert all(any(line.startswith(f"row {index + 2} (") for line in done.lines) for index in strangers)
    assert ("out of date" in done.held_back) == any(standings[s].stale for s in matched)
    assert runs_nothing(out)
    assert all("\n" not in line for line in done.lines)


def canvas_roster(tmp_path, rows, header=None, name="canvas.csv"):
    header = header or ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Quiz 1 (101)", "Current Score"]
    path = tmp_path / name
    path.write_text(roster_text([header, *rows], ",", "\r\n", False))
    return path


def test_a_canvas_column_titled_as_the_assignment_is_filled_and_its_points_possible_set(tmp_path):
    header = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", f"{NAME} (55)", "Current Score"]
    path = canvas_roster(
        tmp_path, [["    Points Possible", "", "", "", "", "100", "(read only)"], ["Ada", "1", "", "ada", "A", "3", "50"]], header
    )
    done = canvas_file(read_table(path), [Graded(NAME, MAXIMUM, {"ada": standing(24)})], Matching("SIS Login ID"))
    assert written_rows(done.text()) == [
        header,
        ["    Points Possible", "", "", "", "", "30", "(read only)"],
        ["Ada", "1", "", "ada", "A", "24", "50"],
    ]
    assert any('has "100" points possible; written as 30' in line for line in done.lines)


def test_two_canvas_columns_titled_as_the_assignment_or_a_total_as_its_title_are_refused(tmp_path):
    two = ["Student", "ID", "SIS Login ID", "Section", f"{NAME} (5)", f"{NAME} (6)"]
    path = canvas_roster(tmp_path, [["Ada", "1", "ada", "A", "", ""]], two)
    with pytest.raises(Refused, match="name one with --column"):
        canvas_file(read_table(path), [Graded(NAME, MAXIMUM, {})], Matching("SIS Login ID"))
    done = canvas_file(
        read_table(path), [Graded(NAME, MAXIMUM, {"ada": standing(3)})], Matching("SIS Login ID"), Choices(column=f"{NAME} (6)")
    )
    assert written_rows(done.text())[1] == ["Ada", "1", "ada", "A", "", "3"]
    with pytest.raises(Refused, match="would not read a column titled"):
        canvas_file(read_table(path), [Graded("Final Score", MAXIMUM, {})], Matching("SIS Login ID"))


def test_a_file_that_is_not_canvass_export_is_refused_in_one_line(tmp_path):
    path = canvas_roster(tmp_path, [["ada", "1"]], ["Name", "Login"])
    with pytest.raises(Refused) as refused:
        canvas_file(read_table(path), [Graded(NAME, MAXIMUM, {})], Matching("Login"))
    assert "not Canvas's gradebook export" in str(refused.value) and "\n" not in str(refused.value)


# --- Moodle -------------------------------------------------------------------------------------------------

MOODLE_HEADER = [
    "First name", "Last name", "ID number", "Institution", "Department", "Email address",
    f"Assignment: {NAME} (Real)", "Course total (Real)", "Last downloaded from this course",
]  # fmt: skip


@st.composite
def moodle_courses(draw):
    ids = draw(st.lists(IDS, min_size=1, max_size=6, unique=True))
    standings = {s: standing(draw(SCORES), draw(SOMETIMES), draw(SOMETIMES), draw(LATE)) for s in ids}
    presence = {s: draw(st.sampled_from(["once", "once", "absent", "twice"])) for s in ids}
    owners = [s for s in ids for _ in range({"once": 1, "absent": 0, "twice": 2}[presence[s]])]
    owners += [None] * draw(st.integers(0, 3))
    owners = draw(st.permutations(owners))
    emails = st.sampled_from(["a@x.org", "b@x.org", "=c@x.org", ""]) | TEXT.map(lambda t: t + "@example.org")
    rows, whose = [], {}
    for owner in owners:
        whose[len(rows)] = owner
        idnumber = owner if owner is not None else draw(IDS.filter(lambda t: t not in ids) | st.just(""))
        rows.append([draw(NAMES), draw(NAMES), idnumber, draw(TEXT), draw(TEXT), draw(emails), "-", "12.5", "1700000000"])
    return standings, presence, rows, whose, draw(st.sampled_from([",", ";", "\t"]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(course=moodle_courses(), missing_as_zero=st.booleans())
def test_moodle_writes_the_identifier_and_the_standing_of_every_student_it_can_and_lists_the_rest(
    tmp_path, course, missing_as_zero
):
    standings, presence, rows, whose, separator = course
    path = tmp_path / "moodle.csv"
    path.write_text(roster_text([MOODLE_HEADER, *rows], separator, "\n", False))
    choices = Choices(missing_as_zero, awaiting_as_zero=True, identifier="Email address")
    done = moodle_file(read_table(path), [Graded(NAME, MAXIMUM, standings)], Matching("ID number"), choices)
    fillable = {}
    for index, owner in whose.items():
        if owner is not None and presence[owner] == "once" and not standings[owner].stale:
            fillable[index] = standings[owner].score
        elif (owner is None or presence[owner] == "absent") and missing_as_zero:
            fillable[index] = 0
    emails = [rows[i][5] for i in fillable]
    expected = [
        [exports.cell(rows[i][5]), score] for i, score in fillable.items() if rows[i][5] and emails.count(rows[i][5]) == 1
    ]
    out = written_rows(done.text())
    assert out[0] == ["Email address", NAME]
    assert [[email, pytest.approx(float(score), abs=1e-4)] for email, score in out[1:]] == expected
    written = {whose[i] for i in fillable if rows[i][5] and emails.count(rows[i][5]) == 1}
    assert {s for s, _ in done.missing} == set(standings) - written
    said = "\n".join(done.lines)
    assert all(f'"{name_text(s)}"' in said for s, where in presence.items() if where != "once")
    strangers = [index for index, owner in whose.items() if owner is None]  # a row with no submission: said
    assert all(any(line.startswith(f"row {index + 2} (") for line in done.lines) for index in strangers)
    assert runs_nothing(out)


def test_moodle_leaves_out_a_row_it_cannot_fill_whole(tmp_path):
    path = tmp_path / "moodle.csv"
    path.write_text(
        roster_text(
            [
                MOODLE_HEADER,
                ["Ada", "L", "ada", "", "", "ada@x.org", "-", "1", "2"],
                ["Ben", "M", "ben", "", "", "ben@x.org", "-", "1", "2"],
            ],
            ",",
            "\r\n",
            False,
        )
    )
    graded = [Graded(NAME, MAXIMUM, {"ada": standing(24), "ben": standing(3)}), Graded("hw2", 10.0, {"ada": standing(7)})]
    done = moodle_file(read_table(path), graded, Matching("ID number"), Choices(identifier="Email address"))
    assert written_rows(done.text()) == [["Email address", NAME, "hw2"], ["ada@x.org", "24", "7"]]
    assert done.lines == ['row 3 ("Ben M"): no submission of hw2; left out'] and done.missing == {("ben", NAME)}


# --- matching by a mapping file ------------------------------------------------------------------------------


def test_a_mapping_file_matches_by_equality_and_every_doubtful_row_is_left_out_and_said(tmp_path):
    mapping = tmp_path / "mapping.csv"
    mapping.write_text(
        "student_id,SIS User ID\r\nada,S1\r\nben,S2\r\neve,S2\r\ncho,S3\r\ncho,S4\r\n=evil,S5\r\nbad row\r\nfay,\r\n"
    )
    matching, notes = read_mapping(mapping)
    assert matching.column == "SIS User ID" and matching.mapping["cho"] == ("S3", "S4")
    assert notes == [
        "row 8: 1 values where the header has 2 columns; left aside",
        f"the mapping file {name_text(str(mapping))} row 9: an empty value; left aside",
    ]
    rows = [["Ada", "1", f"S{n}", f"login{n}", "A", "", ""] for n in range(1, 7)] + [["Ada twin", "9", "s1", "x", "A", "", ""]]
    path = canvas_roster(tmp_path, rows)
    standings = {s: standing(n) for n, s in enumerate(["ada", "ben", "cho", "dee", "=evil", "eve"], start=1)}
    done = canvas_file(read_table(path), [Graded(NAME, MAXIMUM, standings)], matching)
    filled = [row[6] for row in written_rows(done.text())[1:]]  # before Current Score
    assert filled == ["1", "", "", "", "5", "", ""]  # S1 ada; S5 =evil; "s1" is not "S1"
    said = "\n".join(done.lines)
    assert '"ben" and "eve"' in said and '"cho" 2 values' in said and '"dee": in the gradebook, not in' in said
    assert {s for s, _ in done.missing} == {"ben", "cho", "dee", "eve"}


def test_two_rows_with_one_students_value_are_both_left_out(tmp_path):
    path = canvas_roster(tmp_path, [["A", "1", "", "ada", "A", "", ""], ["A2", "2", "", "ada", "A", "", ""]])
    done = canvas_file(
        read_table(path), [Graded(NAME, MAXIMUM, {"ada": standing(9)})], Matching("SIS Login ID"), Choices(missing_as_zero=True)
    )
    assert [row[6] for row in written_rows(done.text())[1:]] == ["", ""]
    assert done.lines == [
        'row 2 ("A"): student "ada" has rows 2 and 3 ("SIS Login ID" "ada"); left out',
        'row 3 ("A2"): student "ada" has rows 2 and 3 ("SIS Login ID" "ada"); left out',
    ]


# --- the roster, read inside a fence ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data, said",
    [
        (b"Student,ID\r\nL\xe9a,1\r\n", "is not UTF-8 (line 2: byte 0xe9)"),
        ("Student,ID\r\n".encode("utf-16"), "is UTF-16 text: save it as CSV UTF-8"),
        (b'Student,ID\r\n"Ada,1\r\n', 'row 2: unexpected end of data'),
        (b'Student,ID\r\n"Ada"x,1\r\n', "row 2: ',' expected after"),
        (b"", "is empty"),
        (b"\r\n\r\n", "is empty"),
    ],
)
def test_a_roster_that_cannot_be_read_is_refused_in_one_line(tmp_path, data, said):
    path = tmp_path / "roster.csv"
    path.write_bytes(data)
    with pytest.raises(RosterError) as refused:
        read_table(path)
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_a_missing_column_names_the_columns_there_are(tmp_path):
    path = canvas_roster(tmp_path, [["Ada", "1", "", "ada", "A", "", ""]])
    with pytest.raises(RosterError) as refused:
        canvas_file(read_table(path), [Graded(NAME, MAXIMUM, {})], Matching("Login"))
    assert 'no column called "Login"' in str(refused.value) and '"SIS Login ID"' in str(refused.value)


def test_malformed_rows_are_said_one_line_each_and_kept_by_canvas_left_out_by_moodle(tmp_path):
    path = tmp_path / "canvas.csv"
    path.write_bytes(
        b"\xef\xbb\xbfStudent;ID;SIS Login ID;Section;Quiz (1)\n    Points Possible;;;;5\nAda;1;ada;A\n"
        b"Ben;2;ben;A;4;extra;more\n\"Cho\nC\";3;cho;A;2\n"
    )
    table = read_table(path)
    assert table.bom and table.line_end == "\n" and table.rows[3][0] == "Cho\nC"
    graded = [Graded(NAME, MAXIMUM, {"ada": standing(1), "ben": standing(2), "cho": standing(3)})]
    done = canvas_file(table, graded, Matching("SIS Login ID"))
    text = done.text()
    assert text.startswith("\ufeff") and "\r" not in text
    assert written_rows(text)[1:] == [
        ["    Points Possible", "", "", "", "5", "30"],
        ["Ada", "1", "ada", "A", "", ""],
        ["Ben", "2", "ben", "A", "4", ""],
        ["Cho\\nC", "3", "cho", "A", "2", "3"],  # kept, neutralized as every CSV cell: the line break an escape
    ]
    assert done.lines[:2] == [
        "row 3: 4 values where the header has 5; kept with its missing values empty, matched to nobody",
        "row 4: 7 values where the header has 5; kept with the 2 past the last column dropped, matched to nobody",
    ]
    moodle = moodle_file(table, graded, Matching("SIS Login ID"))
    assert written_rows(moodle.text()) == [["SIS Login ID", NAME], ["cho", "3"]]


# --- a course: the command line and nbgrader export, the standing of each student ------------------------------


@pytest.fixture
def alembic_on_path(monkeypatch):
    """nbgrader starts `alembic` by name to make a gradebook: this environment's, as on a hub's PATH."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")


CANVAS_HEADER = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Quiz 1 (101)", "Current Score", "Final Score"]
CANVAS_ROWS = [
    ["    Points Possible", "", "", "", "", "10", "(read only)", "(read only)"],
    ['=HYPERLINK("http://x.example","Ada")', "11", "S1", "ada", "Sec A", "9", "90", "90"],
    ["Ben, \"B\"\nsecond line", "12", "S2", "ben", "Sec A", "-1.5", "0", "0"],
    ["@Cho", "13", "S3", "cho", "Sec B", "EX", "", ""],
    ["Dee, Dan", "14", "S4", "dee", "Sec B", "", "", ""],
    ["Student, Test", "15", "", "", "", "", "", ""],
]


def graded_course(tmp_path):
    """ada (correct, on time, a check overridden in formgrader), ben (Post-LN, 5.2 h late under the course's rule
    "zero"), cho (the untouched template) and eve (correct, in no roster), graded by `nbgrader autograde` with the
    stand-in grader; `Model` says what each standing must be."""
    from course_states import Course, Model, StandIn

    course, model = Course(tmp_path / "example"), Model()
    for number, (student, kind, late) in enumerate(
        [("ada", "correct", False), ("ben", "post_ln", True), ("cho", "blank", False), ("eve", "correct", False)]
    ):
        course.collect(student, kind, late, number, 18720)
        model.submitted[student], model.delay[student] = (kind, late, number), 18720.0 if late else 0.0
        model.grade(student, by_nbgrader=True)
    with StandIn().active():
        assert course.autograde(False) is None
    course.set_score("ada", "check_forward_order", 1)
    model.instructor_scores("ada", "check_forward_order", 1)
    return course, model


def run_cli(*arguments):
    from click.testing import CliRunner

    from autograder.frontends.cli import main

    return CliRunner().invoke(main, ["lms-export", *map(str, arguments)])


@pytest.mark.slow
def test_the_lms_files_of_a_course_are_its_standings_through_the_command_line_and_nbgrader_export(tmp_path, alembic_on_path):
    from nbgrader_course import Shell

    course, model = graded_course(tmp_path)
    roster = canvas_roster(tmp_path, CANVAS_ROWS, CANVAS_HEADER)
    out = tmp_path / "canvas-import.csv"
    common = ["--course", course.course, "--roster", roster, "--match-column", "SIS Login ID", "--out", out]

    refused = run_cli("--lms", "canvas", *common)  # ada's, ben's and eve's written answers await grading
    assert refused.exit_code == 1 and not out.exists() and refused.stderr.count("\n") == 1
    assert '("ada": 6 points of layernorm, "ben": 6 points of layernorm)' in refused.stderr  # eve is in no row
    for grade_id in WRITTEN:
        course.set_score("ada", grade_id, 1.5)
        model.instructor_scores("ada", grade_id, 1.5)

    done = run_cli("--lms", "canvas", "--awaiting-as-zero", *common)
    assert done.exit_code == 3, done.stderr  # eve's grade is in no row
    rows = written_rows(out.read_text())
    assert rows[0] == CANVAS_HEADER[:6] + [NAME] + CANVAS_HEADER[6:] and len(rows) == len(CANVAS_ROWS) + 1
    filled = [row.pop(6) for row in rows[1:]]
    assert all(kept(a, b) for given, row in zip(CANVAS_ROWS, rows[1:]) for a, b in zip(given, row))
    assert float(filled[0]) == MAXIMUM and filled[4:] == ["", ""]  # Points Possible; dee and the test student
    for student, score in zip(("ada", "ben", "cho"), filled[1:4]):
        assert float(score) == pytest.approx(model.expected(student)["score"]), student
    assert model.expected("ben")["score"] == 0 < model.expected("ben")["raw"]  # the late rule's penalty, taken off
    assert model.expected("ada")["checks"]["forward_order"] == 1  # the override
    assert done.stderr.splitlines() == [
        '"eve": in the gradebook, but no roster row has "eve" in "SIS Login ID"; left out',
        'row 6 ("Dee, Dan"): no submission of layernorm; left as Canvas has it',
        'row 7 ("Student, Test"): no submission of layernorm; left as Canvas has it',
    ]
    assert done.stdout.startswith(f"wrote {out}: layernorm for 3 roster rows")
    assert out.stat().st_mode & 0o777 == 0o600  # every student's grade: the instructor's alone

    mapping = tmp_path / "ids.csv"  # the same students by their SIS User ID, eve left out of it
    mapping.write_text("student_id,SIS User ID\nada,S1\nben,S2\ncho,S3\n")
    mapped = tmp_path / "mapped.csv"
    done = run_cli("--lms", "canvas", "--awaiting-as-zero", *common[:4], "--mapping", mapping, "--out", mapped)
    assert done.exit_code == 3 and mapped.read_bytes() == out.read_bytes()
    assert done.stderr.splitlines()[0] == f'"eve": in the gradebook, not in the mapping file {mapping}; left out'
    for wrong in (["--mapping", mapping], ["--match-column", "SIS Login ID", "--mapping", mapping]):
        refused = run_cli("--lms", "canvas", *common[:4], *wrong, "--out", roster)
        assert refused.exit_code == 1 and refused.stderr.count("\n") == 1 and roster.read_text().startswith("Student")

    plugin = "autograder.frontends.nbgrader.lms.CanvasExport"
    by_nbgrader = tmp_path / "by-nbgrader.csv"
    ran = Shell()(
        "nbgrader", "export", f"--exporter={plugin}", f"--to={by_nbgrader}", f"--CanvasExport.roster={roster}",
        "--CanvasExport.match_column=SIS Login ID", "--CanvasExport.awaiting_as_zero=True", cwd=course.course, check=False,
    )  # fmt: skip
    assert ran.returncode == 3 and by_nbgrader.read_bytes() == out.read_bytes(), ran.stdout + ran.stderr
    assert '"eve": in the gradebook' in ran.stdout + ran.stderr
    ran = Shell()(
        "nbgrader", "export", f"--exporter={plugin}", f"--to={tmp_path / 'refused.csv'}", f"--CanvasExport.roster={roster}",
        "--CanvasExport.match_column=SIS Login ID", cwd=course.course, check=False,
    )  # fmt: skip
    errors = [line for line in (ran.stdout + ran.stderr).splitlines() if "ERROR" in line or "Traceback" in line]
    assert ran.returncode == 1 and not (tmp_path / "refused.csv").exists() and len(errors) == 1, ran.stdout + ran.stderr
    assert (
        '("ben": 6 points of layernorm): grade them (formgrader), or count them as 0 (--CanvasExport.awaiting_as_zero=True)'
        in errors[0]
    )

    moodle = tmp_path / "moodle.csv"
    people = [("Ada", "ada"), ("Ben", "ben"), ("Cho", "cho"), ("Dee", "dee")]
    moodle.write_text(roster_text([MOODLE_HEADER, *[
        [first, "L", login, "", "", f"{login}@x.org", "-", "", "1"] for first, login in people]], ",", "\r\n", True))  # fmt: skip
    moodle_out = tmp_path / "moodle-import.csv"
    done = run_cli(
        "--lms", "moodle", "--course", course.course, "--roster", moodle, "--match-column", "ID number", "--identifier",
        "Email address", "--missing-as-zero", "--awaiting-as-zero", "--out", moodle_out,
    )  # fmt: skip
    assert done.exit_code == 3 and moodle_out.read_text().startswith("\ufeff")
    rows = written_rows(moodle_out.read_text())
    assert rows[0] == ["Email address", NAME] and [row[0] for row in rows[1:]] == [f"{s}@x.org" for _, s in people]
    expected = [model.expected(s)["score"] for s in ("ada", "ben", "cho")] + [0]
    assert [float(row[1]) for row in rows[1:]] == pytest.approx(expected)

    course.change_points({"check_forward_gradients": 6}, generate=False)  # every grade out of date until regraded
    done = run_cli("--lms", "canvas", "--awaiting-as-zero", *common)
    assert done.exit_code == 3 and [row[6] for row in written_rows(out.read_text())[2:]] == [""] * 5
    assert "the grades of 3 students of layernorm are out of date" in done.stderr.splitlines()[-1]


@pytest.mark.slow
def test_a_course_others_can_read_is_refused_before_anything_is_read(tmp_path, alembic_on_path):
    place = Path(tempfile.mkdtemp(prefix="u19-lms-", dir="/tmp"))
    try:
        course, _ = graded_course(place)  # graded while nobody else could reach it
        for folder in (place, place / "example", course.course):
            folder.chmod(0o755)  # now every user reaches the course, a folder of mode 0755 as in a new home
        roster = canvas_roster(tmp_path, CANVAS_ROWS, CANVAS_HEADER)
        out = tmp_path / "out.csv"
        done = run_cli("--lms", "canvas", "--course", course.course, "--roster", roster, "--match-column", "SIS Login ID",
                       "--out", out)  # fmt: skip
    finally:
        shutil.rmtree(place, ignore_errors=True)
    assert done.exit_code == 1 and not out.exists() and done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"Error: Not writing {out}: other users can read {course.course} (mode 0755: any user)")
