"""The whole course loop on a hub set up from docs/deployment.md alone (its "Set up a hub" blocks, run as written with this
test's own folders: an interpreter every user can run, the environment installed from pyproject.toml's ranges
and on the instructor's PATH, the hub-wide course id and exchange, the course folder only in the instructor's
own configuration, bubblewrap's check), every person an unprivileged Unix user, the students with environments
that lack the kit. The instructor (not root) releases the
kit's assignment, a renamed copy of it and an ordinary one; three students fetch, work and submit (one after the
due date); the instructor collects, autogrades, grades a written answer in formgrader, grades the class again
with `grade-class --course`, releases feedback that the students fetch, exports and writes the class report.
Every student's score is then the same number in every place: the gradebook, `nbgrader export`, the course's
feedback pages, the pages the students fetched, formgrader's view, grade-class's grades.csv, its mean and its
pages and results.json. Every nbgrader command of the instructors' guide (docs/instructors.md, docs/deployment.md)
is one of the commands run here, and none of them prints a traceback or an SAWarning.

At the end, bubblewrap is made to fail for the instructor (a `bwrap` first on PATH that cannot start): the kit
refuses in one line and changes nothing, until the course chooses to grade without isolation, which every
result then records."""

import csv
import json
import re
import shlex
import shutil
import statistics
import subprocess
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from nbgrader.api import Gradebook

import hub_setup
import hub_users
from autograder.course import kit
from autograder.engine.results import points_text
from autograder.engine.rubric import RUBRIC, TOTAL_POINTS, WRITTEN
from browser import FormgraderClient, jupyter_server
from catalog.leaks import secret_lines
from nbgrader_course import ORDINARY, Shell, do_kit_homework, do_ordinary_homework, make_course

pytestmark = pytest.mark.slow

NAME, NOTEBOOK = kit.KIT.name, kit.KIT.notebook_name
SECOND, SECOND_NOTEBOOK = "week5", "block.ipynb"  # the kit's assignment again, renamed
COURSE_ID = "dl101"
ON_TIME, LATE = ("ada_correct", "ben_post_ln"), "cho_missing_shortcut"
STUDENTS = (*ON_TIME, LATE)
FULL = TOTAL_POINTS + sum(WRITTEN.values())
WRITTEN_GRADES = {"ben_post_ln": 1.5, LATE: 2}  # answer_zero_branches, graded in formgrader


def gradebook(course: Path) -> Gradebook:
    return Gradebook(f"sqlite:///{course / 'gradebook.db'}")


def submission(course, assignment, student):
    with gradebook(course) as book:
        found = book.find_submission(assignment, student)
        notebook = found.notebooks[0]
        return {
            "score": found.score,
            "penalty": found.late_submission_penalty,
            "late": found.total_seconds_late,
            "checks": {g.name: g.score for g in notebook.grades},
            "max": found.max_score,
            "notebook_id": notebook.id,
            "grade_ids": {g.name: g.id for g in notebook.grades},
            "comment_ids": {c.name: c.id for c in notebook.comments},
        }


def page_score(page: str) -> str:
    return re.search(r'<span id="score">([^<]+)</span>', page).group(1)


def set_up_the_hub(root: Path, instructor: str, machine) -> SimpleNamespace:
    """The set-up's steps (docs/deployment.md, run as written by tests/hub_setup.py) on this test session's machine:
    root's blocks with this module's places, the instructor (in the instructors' group, as root's account step puts
    them) running their own block in a login shell of theirs, in their home folder here."""
    setup = hub_setup.set_up(machine, root, course_id=COURSE_ID)
    hub_setup.join(instructor, hub_setup.INSTRUCTORS_GROUP)
    home = root / "instructor"
    home.mkdir()
    hub_users.give(home, instructor)
    done = hub_setup.run_instructor_block(setup, instructor, home)
    said = f"{setup.said}\n{done.stdout}{done.stderr}"
    assert done.returncode == 0, f"the instructor's set-up step of docs/deployment.md failed:\n{said[-3000:]}"
    return SimpleNamespace(**{**vars(setup), "said": said}, home=home)


@pytest.fixture(scope="module")
def hub(hub_machine):
    instructor = hub_users.user("inst")
    logins = {student: hub_users.user(student.split("_")[0]) for student in STUDENTS}
    root = Path(tempfile.mkdtemp(prefix="exchange-", dir=hub_machine.root))  # removed with the machine
    root.chmod(0o755)
    return run_the_course(root, instructor, logins, set_up_the_hub(root, instructor, hub_machine))


def run_the_course(root: Path, instructor: str, logins: dict, hub: SimpleNamespace) -> SimpleNamespace:
    python = hub.python
    course = hub.home / COURSE_ID  # made by the instructor's set-up step
    make_course(root / "more", ordinary=True)  # this course's other assignments, beside the kit's
    shutil.copytree(root / "more" / "source" / ORDINARY, course / "source" / ORDINARY)
    (course / "source" / SECOND).mkdir()
    shutil.copy(kit.SOURCE_NOTEBOOK, course / "source" / SECOND / SECOND_NOTEBOOK)
    with open(course / "nbgrader_config.py", "a") as config:  # the course's late-penalty choice (docs/instructors.md)
        config.write('\nc.LateSubmissionPlugin.penalty_method = "zero"\n')
    hub_users.give(hub.home, instructor)
    instructor_env = {**hub.environment, "PATH": f"{python.parent}:/usr/bin:/bin"}  # what the profile gives
    log: list = []
    shell = Shell({"AUTOGRADER_SEED": "2024"}, python=python, user=instructor, home=hub.home)
    shell.log = log
    homes = {}
    for student, login in logins.items():
        home = root / "students" / student
        home.mkdir(parents=True)
        hub_users.give(home, login)
        own = hub_users.python_for(login, with_kit=False)  # a student's environment: no kit in it
        env = {**hub.environment, "PATH": f"{own.parent}:/usr/bin:/bin"}
        homes[student] = (home, env, Shell(python=own, user=login, home=home))
        homes[student][2].log = log

    def as_instructor(*command, **options):
        return shell(*command, cwd=course, env=instructor_env, **options)

    def as_student(student, *command):
        """On a hub the user name is the student id; here the ids are the sample class's, so name them."""
        home, env, student_shell = homes[student]
        named = (f"--student={student}",) if command[1] in ("submit", "fetch_feedback") else ()
        return student_shell(*command, *named, cwd=home, env=env)

    def work(student, assignment):
        home, _, _ = homes[student]
        as_student(student, "nbgrader", "fetch_assignment", assignment)
        notebook = {NAME: NOTEBOOK, SECOND: SECOND_NOTEBOOK}.get(assignment, f"{assignment}.ipynb")
        path = home / assignment / notebook
        released = nbformat.read(path, as_version=4)
        done = (
            do_ordinary_homework(released, correct=student == "ada_correct")
            if assignment == ORDINARY
            else do_kit_homework(released, student)
        )
        nbformat.write(done, path)
        as_student(student, "nbgrader", "submit", assignment)

    assignments = (NAME, ORDINARY, SECOND)
    for assignment in assignments:
        as_instructor("nbgrader", "generate_assignment", assignment)
        as_instructor("nbgrader", "release_assignment", assignment)
    for student in ON_TIME:
        work(student, NAME)
    work("ada_correct", ORDINARY)
    work("ada_correct", SECOND)
    due = datetime.now(timezone.utc)
    as_instructor("nbgrader", "db", "assignment", "add", NAME, f"--duedate={due:%Y-%m-%d %H:%M:%S} UTC")
    time.sleep(2)
    work(LATE, NAME)
    work("ben_post_ln", ORDINARY)
    logs = {}
    for assignment in assignments:
        as_instructor("nbgrader", "collect", assignment)
        logs[assignment] = as_instructor("nbgrader", "autograde", assignment)
    autograded = {s: submission(course, NAME, s) for s in STUDENTS}

    # formgrader, in the instructor's own Jupyter server: the written answers graded by hand
    with jupyter_server(
        course,
        hub.home / ".jupyter",
        root / "server.log",
        python=str(python),
        user=instructor,
        env={**instructor_env, "HOME": str(hub.home), "AUTOGRADER_SEED": "2024"},
    ) as (_, base):
        formgrader = FormgraderClient(base)
        for student, points in WRITTEN_GRADES.items():
            found = submission(course, NAME, student)
            formgrader.put(f"/formgrader/api/grade/{found['grade_ids']['answer_zero_branches']}", {"manual_score": points})
            formgrader.put(
                f"/formgrader/api/comment/{found['comment_ids']['answer_zero_branches']}",
                {"manual_comment": f"Graded by hand for {student}."},
            )
        graded = hub.home / "graded"
        by_class = as_instructor(
            "python",
            "-m",
            "autograder",
            "grade-class",
            "submitted",
            "--out",
            str(graded),
            "--course",
            str(course),
            "--assignment",
            NAME,
            "--seed",
            "2024",
        )
        for assignment in (NAME, ORDINARY):
            as_instructor("nbgrader", "generate_feedback", assignment)
            as_instructor("nbgrader", "release_feedback", assignment)
        for student in STUDENTS:
            as_student(student, "nbgrader", "fetch_feedback", NAME)
        as_instructor("nbgrader", "export")
        as_instructor("nbgrader", "export", f"--assignment={NAME}", "--to=layernorm.csv")
        roster = [["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]]
        roster += [[s.title(), str(i), f"s{i}", s, "A"] for i, s in enumerate(STUDENTS)]
        (course / "canvas-export.csv").write_text("".join(",".join(row) + "\r\n" for row in roster))
        hub_users.give(course / "canvas-export.csv", instructor)
        canvas = (
            "nbgrader",
            "export",
            "--exporter=autograder.frontends.nbgrader.lms.CanvasExport",
            "--to=canvas-import.csv",
            "--CanvasExport.roster=canvas-export.csv",
            "--CanvasExport.match_column=SIS Login ID",
        )
        awaiting = as_instructor(*canvas, check=False)  # as documented: refused while written answers await grading
        as_instructor(*canvas, "--CanvasExport.awaiting_as_zero=True")
        report = as_instructor("python", "-m", "autograder", "class-report", "--course", str(course), "--assignment", NAME)
        views = {s: formgrader.page(f"/formgrader/submissions/{submission(course, NAME, s)['notebook_id']}/") for s in STUDENTS}
        listed = formgrader.page(f"/formgrader/api/submissions/{NAME}")
    return SimpleNamespace(
        root=root,
        course=course,
        homes=homes,
        shell=shell,
        log=log,
        logs=logs,
        graded=graded,
        by_class=by_class,
        autograded=autograded,
        views=views,
        listed=json.loads(listed),
        awaiting=awaiting,
        report=report,
        instructor=instructor,
        instructor_env=instructor_env,
        python=python,
        setup=hub,
        student_said=[x for (_, _, sh) in homes.values() for x in sh.said],
    )


def test_the_hub_was_set_up_from_the_readme_alone(hub):
    said = hub.setup.said
    assert "every user can run the environment" in said and "only instructors can read the kit" in said
    assert "bubblewrap works" in said and "the kit is ready for" in said
    assert "Traceback" not in said and "SAWarning" not in said
    config = (hub.setup.hub_config / "nbgrader_config.py").read_text()
    assert "course_id" in config and "CourseDirectory.root" not in config  # no course folder for students
    ranges = subprocess.run(
        [
            str(hub.python),
            "-c",
            "import sys, sqlalchemy, alembic, nbgrader, nbformat.validator, jsonschema\n"
            "print(sqlalchemy.__version__, alembic.__version__, nbgrader.__version__, 'rfc3987_syntax' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    sqlalchemy, alembic, nbgrader, slow_import = ranges.stdout.split()
    assert sqlalchemy.startswith("1.4.") and nbgrader.startswith("0.9."), ranges.stdout  # installed from the ranges
    assert slow_import == "False", ranges.stdout  # jsonschema below 4.25: no Lark parsers built at every command's start


def test_students_environments_lack_the_kit_and_their_nbgrader_never_needs_it(hub):
    for student, (home, env, shell) in hub.homes.items():
        assert not hub_users.runs(shell.user, shell.python, "autograder")
        assert hub_users.runs(shell.user, shell.python, "nbgrader")
    student_commands = [said for (command, said) in hub.student_said]
    assert student_commands and not [s for s in student_commands if "layernorm kit" in s or "Traceback" in s]


def test_the_whole_loop_prints_no_traceback_and_no_sawarning(hub):
    everything = [(command, said) for command, said in [*hub.shell.said, *hub.student_said]]
    assert len(everything) > 30
    bad = [(" ".join(c), s[-500:]) for c, s in everything if "Traceback" in s or "SAWarning" in s]
    assert not bad, bad


def test_the_instructor_is_not_root_and_the_kit_isolates_with_bubblewrap(hub):
    ran = hub.shell("python", "-c", "import os; print(os.geteuid())", cwd=hub.course)
    assert int(ran.stdout) != 0
    notebook = nbformat.read(hub.course / "autograded" / "ada_correct" / NAME / NOTEBOOK, as_version=4)
    isolation = notebook.metadata["layernorm_kit"]["result"]["isolation"]
    assert "bubblewrap" in isolation and "UNSAFE" not in isolation
    assert (hub.course / "gradebook.db").stat().st_uid != 0


def test_course_id_comes_from_the_hub_not_from_the_course(hub):
    config = (kit.COURSE_DIR / "nbgrader_config.py").read_text()
    assert not re.search(r"^\s*c\.\w+\.course_id", config, flags=re.MULTILINE)
    assert (hub.root / "exchange" / COURSE_ID / "outbound" / NAME / NOTEBOOK).is_file()


def test_every_assignment_is_graded_through_the_exchange(hub):
    ada = hub.autograded["ada_correct"]
    assert ada["score"] == TOTAL_POINTS and ada["penalty"] == 0
    ben = hub.autograded["ben_post_ln"]
    assert ben["checks"]["check_forward_order"] == 0 and 0 < ben["score"] < TOTAL_POINTS
    assert submission(hub.course, SECOND, "ada_correct")["score"] == TOTAL_POINTS
    assert submission(hub.course, ORDINARY, "ada_correct")["checks"]["test_add"] == 2
    assert submission(hub.course, ORDINARY, "ben_post_ln")["checks"]["test_add"] == 0
    for assignment in (NAME, SECOND):
        said = hub.logs[assignment].stdout + hub.logs[assignment].stderr
        assert "has changed!" not in said and "Traceback" not in said


def test_the_late_submission_gets_the_course_penalty(hub):
    late, on_time = submission(hub.course, NAME, LATE), submission(hub.course, NAME, "ben_post_ln")
    assert late["late"] > 0 and late["score"] > 0 and late["penalty"] == late["score"]  # penalty_method "zero"
    assert on_time["late"] == 0 and on_time["penalty"] == 0


def expected(hub) -> dict[str, tuple[str, str]]:
    """Each student's score and maximum: the gradebook's points added up, the course's late penalty ("zero")
    taken off."""
    out = {}
    for student in STUDENTS:
        found = submission(hub.course, NAME, student)
        penalty = found["score"] if found["late"] > 0 else 0
        out[student] = (f"{found['score'] - penalty:g}", f"{found['max']:g}")
    return out


def test_every_place_shows_every_student_the_same_score(hub):
    truth = expected(hub)
    assert truth[LATE][0] == "0" and truth["ben_post_ln"][0] != f"{hub.autograded['ben_post_ln']['score']:g}"
    with open(hub.course / "grades.csv", newline="") as handle:
        exported = {r["student_id"]: r for r in csv.DictReader(handle) if r["assignment"] == NAME}
    with open(hub.course / "grades_per_check.csv", newline="") as handle:
        long = [r for r in csv.DictReader(handle) if r["assignment"] == NAME]
    with open(hub.graded / "grades.csv", newline="") as handle:
        by_class = {r["student"]: r for r in csv.DictReader(handle)}
    listed = {s["student"]: s for s in hub.listed}
    results = {s: json.loads((hub.graded / s / "results.json").read_text()) for s in STUDENTS}

    def checks_sum(student):
        return sum(float(r["points"] or 0) for r in long if r["student"] == student)

    for student, (score, maximum) in truth.items():
        places = {
            "export": tuple(f"{float(exported[student][column]):g}" for column in ("score", "max_score")),
            "per-check export": (f"{checks_sum(student) - float(exported[student]['late_submission_penalty']):g}", maximum),
            "course feedback page": tuple(
                page_score((hub.course / "feedback" / student / NAME / f"{kit.KIT.notebook_id}.html").read_text()).split(" / ")
            ),
            "fetched feedback page": tuple(page_score(fetched(hub, student)).split(" / ")),
            "grade-class grades.csv": (by_class[student]["score"], by_class[student]["max_score"]),
            "grade-class page": tuple(page_score((hub.graded / student / "feedback.html").read_text()).split(" / ")),
            "formgrader's view": tuple(re.search(r"The grade: Score: ([\d.]+) / ([\d.]+)", hub.views[student]).groups()),
            "grade-class results.json": (
                f"{results[student]['score']:g}",
                f"{sum(t['max_score'] for t in results[student]['tests']):g}",
            ),
        }
        assert all(place == (score, maximum) for place in places.values()), (student, truth[student], places)
        raw = submission(hub.course, NAME, student)["score"]  # formgrader's own lists: before the late penalty
        assert listed[student]["score"] == pytest.approx(raw) and listed[student]["max_score"] == float(maximum)
    mean = statistics.mean(float(score) for score, _ in truth.values())
    assert f"mean score {points_text(mean)} of {FULL:g}" in hub.by_class.stdout


def fetched(hub, student) -> str:
    home, _, _ = hub.homes[student]
    pages = sorted((home / NAME / "feedback").glob(f"*/{kit.KIT.notebook_id}.html"), key=lambda p: p.stat().st_mtime)
    return pages[-1].read_text()


def test_the_written_answers_are_graded_or_awaiting_everywhere(hub):
    for student in STUDENTS:
        page = fetched(hub, student)
        graded = WRITTEN_GRADES.get(student)
        cell = re.search(r'data-cell="answer_zero_branches"><td class="title">[^<]*</td><td class="pts">([^<]+)</td>', page)
        assert cell.group(1) == (f"{graded:g} / 2" if graded is not None else "awaiting your instructor")
        if graded is not None:
            assert f"Graded by hand for {student}." in page
        assert ("awaiting your instructor" in page) and "Written answers worth" in page  # the other answers
    late = fetched(hub, LATE)
    assert re.search(r'id="late"[^>]*>Late by [^:]+: [\d.]+ points deducted', late)


def test_students_fetch_their_feedback_and_it_leaks_nothing(hub):
    secret = secret_lines()
    for student in STUDENTS:
        home, _, _ = hub.homes[student]
        text, own = fetched(hub, student), (home / NAME / NOTEBOOK).read_text()  # what they submitted is theirs
        assert "BEGIN HIDDEN" not in text and not [line for line in secret if line in text and line not in own]
        assert all(spec.title in text for spec in RUBRIC.values())
        assert "In&nbsp;[" not in text and "Out[" not in text


def test_grade_class_into_the_hub_course_agrees_with_nbgrader(hub):
    """Same seed, same course source, same late penalty: grade-class wrote what nbgrader autograde wrote, and
    kept the written answers the instructor graded."""
    for student in STUDENTS:
        now = submission(hub.course, NAME, student)
        for name, points in hub.autograded[student]["checks"].items():
            if name.startswith("check_"):
                assert now["checks"][name] == points, (student, name)
        assert now["checks"]["answer_zero_branches"] == WRITTEN_GRADES.get(student, 0)


def test_the_class_report_of_the_course(hub):
    page = (hub.course / f"report-{NAME}.html").read_text()
    assert f"{len(STUDENTS)} students; mean" in page
    late = page.split('id="late"')[1].split("</table>")[0]
    assert LATE in late and "ben_post_ln" not in late
    assert (hub.graded / "report.html").is_file()


def test_one_assignment_exported_alone(hub):
    with open(hub.course / "layernorm.csv", newline="") as handle:
        assert {row["assignment"] for row in csv.DictReader(handle)} == {NAME}


def test_the_documented_canvas_export_fills_the_assignment_for_every_student_on_the_roster(hub):
    said = hub.awaiting.stdout + hub.awaiting.stderr
    assert hub.awaiting.returncode == 1 and "Not writing canvas-import.csv: written answers await grading" in said, said
    with open(hub.course / "canvas-import.csv", newline="", encoding="utf-8-sig") as handle:
        rows = list(csv.DictReader(handle))
    column = next(title for title in rows[0] if title.split(" (")[0] == NAME)
    filled = {row["SIS Login ID"]: row[column] for row in rows if row["SIS Login ID"]}
    assert set(filled) == set(STUDENTS) and all(float(value) >= 0 for value in filled.values())


def readme_commands() -> list[tuple[list[str], dict]]:
    """The nbgrader and grade-class commands of the instructors' guide, docs/instructors.md and docs/deployment.md
    (shell blocks only): each as its tokens and its `[--option VALUE]` optional parts (option -> how many values
    follow it)."""
    guide = kit.documentation("instructors.md") + "\n" + kit.documentation("deployment.md")
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", guide, flags=re.DOTALL):
        if block.startswith("# as "):  # the hub's set-up: run as a whole by `set_up_the_hub`
            continue
        for line in block.replace("\\\n", " ").splitlines():  # a line continued with a backslash is one command
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line.startswith(("nbgrader ", "python -m autograder grade-class")):
                optional = {group.split()[0]: len(group.split()) - 1 for group in re.findall(r"\[([^\]]*)\]", line)}
                commands.append((shlex.split(re.sub(r"\[[^\]]*\]", "", line)), optional))
    return commands


def _matches(written: list[str], optional: dict, ran: list[str]) -> bool:
    """A documented command matches a command run here, `<placeholders>` standing for any value, where the run adds
    only options the documentation shows as optional, or --student=..., which a hub student never types (their user
    name is the student id)."""
    kept, tokens = [], iter(ran)
    for token in tokens:
        if token in optional:
            for _ in range(optional[token]):
                next(tokens, None)
        elif not token.startswith("--student="):
            kept.append(token)
    return len(written) == len(kept) and all(
        re.fullmatch(re.sub(r"<[^>]+>", ".+", re.escape(w)), r) for w, r in zip(written, kept)
    )


def test_every_nbgrader_command_of_the_readme_guide_is_run_here(hub):
    written = readme_commands()
    assert len(written) >= 10
    missing = [" ".join(w) for w, optional in written if not any(_matches(w, optional, ran) for ran in hub.log)]
    assert not missing, f"documented commands no test runs: {missing}"


# --- where bubblewrap does not work for the instructor ------------------------------------------------------------


@pytest.fixture(scope="module")
def without_bubblewrap(hub):
    """A copy of the course, and a `bwrap` first on the instructor's PATH that fails as it does where unprivileged
    user namespaces are off."""
    place = hub.root / "no-bwrap"
    course = place / COURSE_ID
    shutil.copytree(hub.course, course)
    (place / "bin").mkdir()
    (place / "bin" / "bwrap").write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    (place / "bin" / "bwrap").chmod(0o755)
    hub_users.give(place, hub.instructor)
    (place / ".jupyter").mkdir()
    (place / ".jupyter" / "nbgrader_config.py").write_text(f"c.CourseDirectory.root = {str(course)!r}\n")
    hub_users.give(place, hub.instructor)
    env = {
        **hub.instructor_env,
        "PATH": f"{place / 'bin'}:{Path(hub.python).parent}:/usr/bin:/bin",
        "JUPYTER_CONFIG_DIR": str(place / ".jupyter"),
    }
    return SimpleNamespace(course=course, env=env)


def test_without_isolation_the_kit_refuses_in_one_line_and_changes_nothing(hub, without_bubblewrap):
    course, env = without_bubblewrap.course, without_bubblewrap.env
    before = {p: p.read_bytes() for p in (course / "autograded").rglob("*") if p.is_file()}
    scores = {s: submission(course, NAME, s)["checks"] for s in STUDENTS}
    for command in (
        ["nbgrader", "autograde", NAME],
        ["nbgrader", "autograde", NAME, "--force"],
        [
            "python",
            "-m",
            "autograder",
            "grade-class",
            "submitted",
            "--out",
            str(course.parent / "out"),
            "--course",
            ".",
            "--assignment",
            NAME,
        ],
    ):
        refused = hub.shell(*command, cwd=course, env=env, check=False)
        said = (refused.stdout + refused.stderr).strip()
        assert refused.returncode != 0 and "Traceback" not in said, said
        (line,) = [line for line in said.splitlines() if "Not grading" in line]
        assert "nothing here can isolate student code" in line and 'c.KitSandbox.when_unisolated = "unsafe"' in line
    assert {p: p.read_bytes() for p in (course / "autograded").rglob("*") if p.is_file()} == before
    assert {s: submission(course, NAME, s)["checks"] for s in STUDENTS} == scores
    assert not (course.parent / "out").exists()


def test_a_course_may_grade_without_isolation_and_every_result_says_so(hub, without_bubblewrap):
    course, env = without_bubblewrap.course, without_bubblewrap.env
    with open(course / "nbgrader_config.py", "a") as config:
        config.write('\nc.KitSandbox.when_unisolated = "unsafe"\n')
    graded = hub.shell("nbgrader", "autograde", NAME, "--force", cwd=course, env=env)
    assert "grading WITHOUT isolation" in graded.stdout + graded.stderr
    notebook = nbformat.read(course / "autograded" / "ada_correct" / NAME / NOTEBOOK, as_version=4)
    assert notebook.metadata["layernorm_kit"]["result"]["isolation"].startswith("UNSAFE")
    assert submission(course, NAME, "ada_correct")["score"] == TOTAL_POINTS  # graded all the same
    hub.shell("nbgrader", "generate_feedback", NAME, cwd=course, env=env)
    page = (course / "feedback" / "ada_correct" / NAME / f"{kit.KIT.notebook_id}.html").read_text()
    assert "Graded without isolation" in page
    assert page.index('id="unisolated"') < page.index('id="score"')  # at the top of the page
    out = course.parent / "out"
    by_class = hub.shell(
        "python",
        "-m",
        "autograder",
        "grade-class",
        "submitted",
        "--out",
        str(out),
        "--course",
        ".",
        "--assignment",
        NAME,
        cwd=course,
        env=env,
    )
    results = json.loads((out / "ada_correct" / "results.json").read_text())
    assert results["extra_data"]["isolation"].startswith("UNSAFE") and results["score"] == TOTAL_POINTS
    (line,) = [line for line in (by_class.stdout + by_class.stderr).splitlines() if "WITHOUT isolation" in line]
    assert line.startswith(f"WARNING: {len(STUDENTS)} of {len(STUDENTS)} submissions were graded WITHOUT isolation")
    report = (out / "report.html").read_text()
    assert report.index('id="unisolated"') < report.index('id="summary"')


def test_grading_the_course_as_root_leaves_it_the_instructors(hub, without_bubblewrap):
    """A dedicated grading pod, or `sudo`: grade-class as root writes into the instructor's course, which stays
    theirs: they generate and release feedback afterwards as before."""
    course = without_bubblewrap.course
    root = Shell({"AUTOGRADER_SEED": "2024"}, python=hub.python)
    root(
        "python",
        "-m",
        "autograder",
        "grade-class",
        "submitted",
        "--out",
        str(course.parent / "as-root"),
        "--course",
        ".",
        "--assignment",
        NAME,
        "--force",
        cwd=course,
        env=without_bubblewrap.env,
    )
    owner = course.stat().st_uid
    written = [p for kind in ("autograded", "feedback") for p in (course / kind).rglob("*")]
    assert written and [p for p in written if p.stat().st_uid != owner] == []
    assert (course / "gradebook.db").stat().st_uid == owner
    hub.shell("nbgrader", "generate_feedback", NAME, cwd=course, env=without_bubblewrap.env)
