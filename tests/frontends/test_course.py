"""The kit in a real nbgrader course: plain nbgrader commands on a course that holds the kit's assignment and an
ordinary one. The kit's plugins act on the kit's assignment only, graded against the course's own source;
everything else is stock nbgrader, and a normal autograde prints nothing an instructor would read as tampering."""

import csv
import html
import io
import json
import re
import shutil
from types import SimpleNamespace

import nbformat
import pytest
from nbgrader.api import Gradebook

from autograder.course import kit
from autograder.engine.rubric import RUBRIC, TOTAL_POINTS, WRITTEN
from autograder.frontends.nbgrader.export import HELD_BACK, KIT_COLUMNS, NBGRADER_COLUMNS
from nbgrader_course import KIT_STUDENTS, ORDINARY, Shell, do_kit_homework, do_ordinary_homework, make_course, sample_submission

pytestmark = pytest.mark.slow

NAME, NOTEBOOK = kit.KIT.name, kit.KIT.notebook_name
ORDINARY_STUDENTS = {"ada_correct": True, "ben_post_ln": False}


def submit(course, assignment, student, notebook, name=None):
    path = course / "submitted" / student / assignment / (name or f"{assignment}.ipynb")
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)


@pytest.fixture(scope="module")
def graded(released, tmp_path_factory):
    course = released.copy(tmp_path_factory.mktemp("course") / "course")  # both assignments generated
    shell = Shell({"AUTOGRADER_SEED": "2024"})
    release = course / "release" / NAME / NOTEBOOK
    for student in KIT_STUDENTS:
        submit(course, NAME, student, do_kit_homework(nbformat.read(release, as_version=4), student), NOTEBOOK)
    for student, correct in ORDINARY_STUDENTS.items():
        release = nbformat.read(course / "release" / ORDINARY / f"{ORDINARY}.ipynb", as_version=4)
        submit(course, ORDINARY, student, do_ordinary_homework(release, correct))
    autograde = {a: shell("nbgrader", "autograde", a, cwd=course) for a in (NAME, ORDINARY)}
    for assignment in (NAME, ORDINARY):
        shell("nbgrader", "generate_feedback", assignment, cwd=course)
    shell("nbgrader", "export", cwd=course)
    return SimpleNamespace(course=course, shell=shell, autograde=autograde)


def scores(course, assignment, student) -> dict:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        notebook = gradebook.find_submission_notebook(
            assignment if assignment != NAME else kit.KIT.notebook_id, assignment, student
        )
        return {"total": notebook.score, **{g.name: (g.score, g.needs_manual_grade) for g in notebook.grades}}


def test_ordinary_assignment_is_graded_by_stock_nbgrader_in_a_kernel(graded):
    right, wrong = scores(graded.course, ORDINARY, "ada_correct"), scores(graded.course, ORDINARY, "ben_post_ln")
    assert right["test_add"] == (2, False) and wrong["test_add"] == (0, False)
    assert right["explain"][1] is True  # the written answer waits for a person
    autograded = nbformat.read(graded.course / "autograded" / "ben_post_ln" / ORDINARY / f"{ORDINARY}.ipynb", 4)
    test_cell = next(c for c in autograded.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_add")
    assert test_cell.outputs[0].output_type == "error" and test_cell.outputs[0].ename == "AssertionError"
    assert "layernorm_kit" not in json.dumps(autograded.cells)


def test_kit_assignment_is_graded_in_the_sandbox_per_check(graded):
    ada, ben = scores(graded.course, NAME, "ada_correct"), scores(graded.course, NAME, "ben_post_ln")
    assert ada["total"] == TOTAL_POINTS
    assert ben["check_forward_order"] == (0, False) and 0 < ben["total"] < TOTAL_POINTS
    gil = scores(graded.course, NAME, "gil_edits_locked_cells")
    assert gil["total"] == TOTAL_POINTS  # the edited test and the deleted check cell did not cost anything


def test_a_normal_autograde_prints_nothing_that_reads_as_tampering(graded):
    kit_log = graded.autograde[NAME].stdout + graded.autograde[NAME].stderr
    assert not re.search(r"Attribute 'checksum' for cell check_\w+ has changed", kit_log)
    assert "SAWarning" not in kit_log and "Traceback" not in kit_log
    # a real edit is still reported: gil rewrote the visible test test_block_shape
    assert re.search(r"Attribute 'checksum' for cell test_block_shape has changed", kit_log)
    assert len(re.findall(r"has changed!", kit_log)) == 1
    # the ordinary assignment keeps stock nbgrader's behaviour, its hidden-test report included (nbgrader#1961)
    ordinary_log = graded.autograde[ORDINARY].stdout + graded.autograde[ORDINARY].stderr
    assert re.search(r"Attribute 'checksum' for cell test_add has changed", ordinary_log)
    assert "SAWarning" not in ordinary_log


def test_feedback_of_the_ordinary_assignment_is_stock_nbgraders(graded, tmp_path):
    stock = tmp_path / "stock"
    shutil.copytree(graded.course, stock, ignore=shutil.ignore_patterns("feedback"))
    (stock / "nbgrader_config.py").write_text("c = get_config()\n")
    graded.shell("nbgrader", "generate_feedback", ORDINARY, cwd=stock)
    for student in ORDINARY_STUDENTS:
        page = f"feedback/{student}/{ORDINARY}/{ORDINARY}.html"
        assert (graded.course / page).read_text() == (stock / page).read_text()
    # and the same stock configuration would have shown students the kit's hidden checks: the kit's does not
    graded.shell("nbgrader", "generate_feedback", NAME, cwd=stock)
    assert "BEGIN HIDDEN TESTS" in (stock / "feedback" / "ben_post_ln" / NAME / "layernorm.html").read_text()
    assert "BEGIN HIDDEN TESTS" not in (graded.course / "feedback" / "ben_post_ln" / NAME / "layernorm.html").read_text()


HEAVY = ("torch", "numpy", "matplotlib", "autograder.grading", "autograder.engine.questions", "autograder.engine.checks",
         "autograder.frontends.feedback", "autograder.frontends.plots")  # fmt: skip
ON_THE_ORDINARY_ASSIGNMENT = f"""
import json, sys
from nbgrader.tests import run_nbgrader

for command in (["generate_assignment", "{ORDINARY}", "--force"], ["autograde", "{ORDINARY}", "--force"],
                ["generate_feedback", "{ORDINARY}", "--force"], ["export", "--assignment={ORDINARY}"]):
    run_nbgrader(command)
print(json.dumps(sorted(name for name in sys.modules if name.startswith({HEAVY!r}))))
"""


def test_the_kits_commands_import_nothing_heavy_for_an_ordinary_assignment(graded, tmp_path):
    """One process runs nbgrader's commands on the ordinary assignment of a course that holds the kit's too, as
    nbgrader's own tests run them: none of them imports torch, the grader or the pages' figures (they are the
    kit's, for its notebooks). The same commands on the kit's assignment import them."""
    course = tmp_path / "course"
    shutil.copytree(graded.course, course)
    (course / "grades_per_check.csv").unlink()
    said = graded.shell("python", "-c", ON_THE_ORDINARY_ASSIGNMENT, cwd=course)
    assert json.loads(said.stdout.splitlines()[-1]) == []
    assert (course / "grades_per_check.csv").is_file()  # the kit's exporter: its configuration was in force
    on_the_kits = ON_THE_ORDINARY_ASSIGNMENT.replace(f'"{ORDINARY}"', f'"{NAME}"').replace(f"={ORDINARY}", f"={NAME}")
    said = graded.shell("python", "-c", on_the_kits, cwd=course, env={"AUTOGRADER_SEED": "2024"})
    assert {"torch", "autograder.grading", "autograder.frontends.feedback"} <= set(json.loads(said.stdout.splitlines()[-1]))


def test_kit_feedback_is_the_kits_page_with_the_gradebooks_numbers(graded):
    page = (graded.course / "feedback" / "ben_post_ln" / NAME / "layernorm.html").read_text()
    rows = re.findall(
        r'<tr class="check (passed|failed)" data-check="(\w+)"><td class="title">([^<]+)</td>'
        r'<td class="pts">([^<]+)</td>',
        page,
    )
    book = scores(graded.course, NAME, "ben_post_ln")
    assert [(name, html.unescape(title)) for _, name, title, _ in rows] == [(n, s.title) for n, s in RUBRIC.items()]
    assert [points for *_, points in rows] == [f"{book[f'check_{n}'][0]:g} / {s.points:g}" for n, s in RUBRIC.items()]
    total = TOTAL_POINTS + sum(WRITTEN.values())
    assert f'<span id="score">{book["total"]:g} / {total:g}</span>' in page
    assert "awaiting your instructor" in page  # ben's written answers, not graded yet
    assert "Step 2 of 10" in page and "Post-LN" in page  # the first divergent step
    assert "Test cell" not in page and "In&nbsp;[" not in page and "In [" not in page and "Out[" not in page
    assert not re.search(r"worth \d+ points?\)", page)  # check text names no points
    ordinary = (graded.course / "feedback" / "ben_post_ln" / ORDINARY / f"{ORDINARY}.html").read_text()
    assert '<a href="#test_add">Test cell</a>' in ordinary  # nbgrader's own page, left alone


def test_export_is_nbgraders_file_with_the_kits_numbers_and_columns(graded, tmp_path):
    """The oracle is stock nbgrader's own exporter on the same gradebook."""

    def export(*options) -> list[str]:
        graded.shell("nbgrader", "export", *options, cwd=graded.course)
        return (tmp_path / options[0].removeprefix("--to=")).read_text().splitlines()

    stock = export(f"--to={tmp_path / 'stock.csv'}", "--exporter=nbgrader.plugins.CsvExportPlugin")
    ours = (graded.course / "grades.csv").read_text().splitlines()
    extra = KIT_COLUMNS
    assert ours[0] == stock[0] + "," + ",".join(extra) == ",".join(NBGRADER_COLUMNS + KIT_COLUMNS)  # the kit's after
    assert len(ours) == len(stock) == 1 + 2 * len({*KIT_STUDENTS, *ORDINARY_STUDENTS})  # a row per assignment and student
    for mine, theirs in zip(ours[1:], stock[1:]):
        if theirs.startswith(f"{ORDINARY},"):
            assert mine == theirs + "," * len(extra)  # nbgrader's row, byte for byte; the kit's columns empty
    rows = {(r["assignment"], r["student_id"]): r for r in csv.DictReader(open(graded.course / "grades.csv", newline=""))}
    stock_rows = {(r["assignment"], r["student_id"]): r for r in csv.DictReader(io.StringIO("\n".join(stock)))}
    total = TOTAL_POINTS + sum(WRITTEN.values())
    for student in KIT_STUDENTS:  # the standing's numbers, what the page says: every written answer awaiting
        book, row = scores(graded.course, NAME, student), rows[(NAME, student)]
        assert {k: row[k] for k in ("duedate", "timestamp", "email")} == {
            k: stock_rows[(NAME, student)][k] for k in ("duedate", "timestamp", "email")
        }
        assert float(row["raw_score"]) == float(row["score"]) == book["total"] and float(row["max_score"]) == total
        assert float(row["late_submission_penalty"]) == 0 and float(row["seconds_late"]) == 0 and row["late_by"] == ""
        page = (graded.course / "feedback" / student / NAME / f"{kit.KIT.notebook_id}.html").read_text()
        assert f'<span id="score">{float(row["score"]):g} / {total:g}</span>' in page
        assert float(row["awaiting"]) == sum(WRITTEN.values())
    assert rows[(ORDINARY, "gil_edits_locked_cells")]["timestamp"] == ""  # did not submit hw2: nbgrader's zero row
    with open(graded.course / "grades_per_check.csv", newline="") as handle:
        long = list(csv.DictReader(handle))
    assert list(long[0]) == ["student", "assignment", "check", "points", "max", "late", "manual"]
    for student in KIT_STUDENTS:
        book, mine = scores(graded.course, NAME, student), {r["check"]: r for r in long if r["student"] == student}
        assert {f"check_{n}": float(mine[f"check_{n}"]["points"]) for n in RUBRIC} == {
            f"check_{n}": book[f"check_{n}"][0] for n in RUBRIC
        }
        assert all(mine[grade_id]["points"] == "" for grade_id in WRITTEN)  # awaiting the instructor
    ada = {(r["assignment"], r["check"]): r for r in long if r["student"] == "ada_correct"}
    assert float(ada[(NAME, "check_forward_order")]["points"]) == 4 and ada[(NAME, "answer_last_block")]["points"] == ""
    assert float(ada[(ORDINARY, "test_add")]["points"]) == 2 and ada[(ORDINARY, "test_add")]["manual"] == "0"
    # an export without the kit's assignment is exactly nbgrader's
    alone = export(f"--to={tmp_path / 'one.csv'}", f"--assignment={ORDINARY}")
    stock_alone = export(
        f"--to={tmp_path / 'stock-one.csv'}", f"--assignment={ORDINARY}", "--exporter=nbgrader.plugins.CsvExportPlugin"
    )
    assert alone == stock_alone
    assert (tmp_path / "one_per_check.csv").is_file()


# --- the course's source is the truth ---------------------------------------------------------------


def _edit_source(course, assignment, notebook_name, edit):
    path = course / "source" / assignment / notebook_name
    notebook = nbformat.read(path, as_version=4)
    edit(notebook)
    nbformat.write(notebook, path)


def _cell(notebook, grade_id):
    return next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def test_the_points_in_the_course_source_are_the_points_graded_and_nothing_is_deleted(tmp_path):
    """The course gives a check other points: graded out of them, by both paths. Changed again after grading, the
    gradebook still holds the old ones: plain autograde and grade-class refuse in one line and delete nothing;
    once generate_assignment has recorded the new points, autograde says who was graded with the old ones and
    --force grades them again."""
    course = make_course(tmp_path / "course", ordinary=False)
    _edit_source(course, NAME, NOTEBOOK, lambda nb: _cell(nb, "check_forward_order").metadata.nbgrader.update(points=6))
    shell = Shell({"AUTOGRADER_SEED": "11"})
    shell("nbgrader", "generate_assignment", NAME, cwd=course)
    for student in ("ada_correct", "ben_post_ln"):
        submit(course, NAME, student, sample_submission(student), NOTEBOOK)
    shell("nbgrader", "autograde", NAME, cwd=course)
    ada, ben = scores(course, NAME, "ada_correct"), scores(course, NAME, "ben_post_ln")
    assert ada["check_forward_order"] == (6, False) and ada["total"] == TOTAL_POINTS + 2
    assert ben["check_forward_order"] == (0, False)

    _edit_source(course, NAME, NOTEBOOK, lambda nb: _cell(nb, "check_forward_shortcuts").metadata.nbgrader.update(points=9))
    autograded = course / "autograded" / "ben_post_ln" / NAME / NOTEBOOK
    before = autograded.read_bytes()
    for command in (
        ["nbgrader", "autograde", NAME],
        ["nbgrader", "autograde", NAME, "--force"],
        ["python", "-m", "autograder", "grade-class", "submitted", "--out", str(tmp_path / "out"), "--course", "."],
    ):
        refused = shell(*command, cwd=course, check=False)
        said = (refused.stdout + refused.stderr).strip()
        assert refused.returncode != 0 and "Traceback" not in said, said
        (line,) = [line for line in said.splitlines() if "Not grading" in line]
        assert "check_forward_shortcuts gives 9 points in the source, 3 in the gradebook" in line
        assert "generate_assignment layernorm --force" in line
    assert autograded.read_bytes() == before and not (tmp_path / "out").exists()
    assert scores(course, NAME, "ben_post_ln") == ben

    shell("nbgrader", "generate_assignment", NAME, "--force", cwd=course)
    for command, said, status in (
        (["nbgrader", "generate_feedback", NAME], "Not drawing feedback for layernorm", None),
        (["nbgrader", "export"], "Not exported to grades.csv (every other row is)", HELD_BACK),
    ):  # out of date: nothing handed out
        refused = shell(*command, cwd=course, check=False)
        output = (refused.stdout + refused.stderr).strip()
        assert refused.returncode == status if status else refused.returncode != 0, output
        assert "Traceback" not in output, output
        (line,) = [line for line in output.splitlines() if said in line]
        assert "check_forward_shortcuts was graded out of 3 points, the course gives 9" in line, line
    assert not (course / "feedback").exists()
    assert (course / "grades.csv").read_text().splitlines() == [",".join(NBGRADER_COLUMNS + KIT_COLUMNS)]  # no row
    report = shell("python", "-m", "autograder", "class-report", "--course", ".", cwd=course)
    assert "WARNING: the grades of 2 students of layernorm are out of date" in report.stderr
    assert 'id="stale"' in (course / "report-layernorm.html").read_text()
    skipped = shell("nbgrader", "autograde", NAME, cwd=course)
    assert "2 students were graded against an earlier version" in skipped.stdout + skipped.stderr
    shell("nbgrader", "autograde", NAME, "--force", cwd=course)
    again = scores(course, NAME, "ben_post_ln")
    assert again["check_forward_shortcuts"][0] == pytest.approx(ben["check_forward_shortcuts"][0] * 3)
    shell(
        "python",
        "-m",
        "autograder",
        "grade-class",
        "submitted",
        "--out",
        str(tmp_path / "out"),
        "--course",
        ".",
        "--seed",
        "11",
        cwd=course,
    )
    assert scores(course, NAME, "ben_post_ln") == again
    page = (course / "feedback" / "ben_post_ln" / NAME / "layernorm.html").read_text()
    assert f"{again['check_forward_shortcuts'][0]:g} / 9" in page


def test_a_renamed_kit_assignment_is_recognised_and_graded_from_the_course_source(tmp_path):
    """Recognised by its content, not its name; the cells put back come from this course's source."""
    course = tmp_path / "course"
    (course / "source" / "transformer_hw").mkdir(parents=True)
    source = nbformat.read(kit.SOURCE_NOTEBOOK, as_version=4)
    _cell(source, "check_compounding").source = (
        "# Our course's own words for this check.\n" + _cell(source, "check_compounding").source
    )
    nbformat.write(source, course / "source" / "transformer_hw" / "block.ipynb")
    shutil.copy(kit.COURSE_DIR / "nbgrader_config.py", course / "nbgrader_config.py")
    shell = Shell({"AUTOGRADER_SEED": "7"})
    shell("nbgrader", "generate_assignment", "transformer_hw", cwd=course)
    gil = sample_submission("gil_edits_locked_cells")  # deleted check_compounding
    submit(course, "transformer_hw", "gil_edits_locked_cells", gil, "block.ipynb")
    shell("nbgrader", "autograde", "transformer_hw", cwd=course)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        assert gradebook.find_submission("transformer_hw", "gil_edits_locked_cells").score == TOTAL_POINTS
    autograded = nbformat.read(course / "autograded" / "gil_edits_locked_cells" / "transformer_hw" / "block.ipynb", 4)
    assert "Our course's own words" in _cell(autograded, "check_compounding").source


def test_written_answers_in_the_kit_notebook_wait_for_a_person(tmp_path):
    """A manually graded answer cell beside the checks: both grading paths leave it to the instructor, and
    grade-class keeps the score the instructor gave it."""
    course = make_course(tmp_path / "course", ordinary=False)

    def add_answer(notebook):
        notebook.cells.insert(
            -1,
            nbformat.v4.new_markdown_cell(
                "YOUR ANSWER HERE",
                metadata={
                    "nbgrader": {
                        "grade_id": "answer_why_preln",
                        "grade": True,
                        "solution": True,
                        "locked": False,
                        "task": False,
                        "points": 2,
                        "schema_version": 3,
                    }
                },
            ),
        )

    _edit_source(course, NAME, NOTEBOOK, add_answer)
    shell = Shell({"AUTOGRADER_SEED": "5"})
    shell("nbgrader", "generate_assignment", NAME, cwd=course)
    work = do_kit_homework(nbformat.read(course / "release" / NAME / NOTEBOOK, as_version=4), "ada_correct")
    _cell(work, "answer_why_preln").source = "Normalizing inside each branch keeps the shortcut path clean."
    submit(course, NAME, "ada_correct", work, NOTEBOOK)
    shell("nbgrader", "autograde", NAME, cwd=course)
    graded = scores(course, NAME, "ada_correct")
    assert graded["answer_why_preln"][1] is True and graded["total"] == TOTAL_POINTS
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        gradebook.find_grade("answer_why_preln", kit.KIT.notebook_id, NAME, "ada_correct").manual_score = 2
        gradebook.db.commit()
    shell(
        "python",
        "-m",
        "autograder",
        "grade-class",
        "submitted",
        "--out",
        str(tmp_path / "out"),
        "--course",
        ".",
        "--seed",
        "5",
        cwd=course,
    )
    again = scores(course, NAME, "ada_correct")
    assert again["answer_why_preln"] == (2, True) and again["total"] == TOTAL_POINTS + 2
    assert {k: v for k, v in again.items() if k.startswith("check_")} == {
        k: v for k, v in graded.items() if k.startswith("check_")
    }
    # grade-class had nbgrader draw the page: the graded answer, the others awaiting, the same total everywhere
    page = (course / "feedback" / "ada_correct" / NAME / "layernorm.html").read_text()
    total, maximum = TOTAL_POINTS + 2, TOTAL_POINTS + 2 + sum(WRITTEN.values())
    assert f'<span id="score">{total:g} / {maximum:g}</span>' in page
    assert re.search(r'data-cell="answer_why_preln"><td class="title">[^<]*</td><td class="pts">2 / 2</td>', page)
    assert "Normalizing inside each branch keeps the shortcut path clean." in page
    assert (tmp_path / "out" / "ada_correct" / "feedback.html").read_text() == page
    with open(tmp_path / "out" / "grades.csv", newline="") as handle:
        (row,) = list(csv.DictReader(handle))
    assert (row["score"], row["max_score"], row["answer_why_preln"]) == (f"{total:g}", f"{maximum:g}", "2")
