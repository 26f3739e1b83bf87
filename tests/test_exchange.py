"""The whole nbgrader exchange, as on a hub: the instructor releases the kit's assignment and an ordinary one,
three students fetch, work and submit (one of them after the due date), the instructor collects, autogrades,
releases feedback that the students fetch, and exports. Every nbgrader command of the README's instructor
guide is one of the commands run here."""
import csv
import re
import shlex
import time
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from nbgrader.api import Gradebook

from autograder import kit
from autograder.rubric import RUBRIC, TOTAL_POINTS
from catalog.leaks import secret_lines
from nbgrader_course import ORDINARY, Shell, do_kit_homework, do_ordinary_homework, make_course

pytestmark = pytest.mark.slow

NAME, NOTEBOOK = kit.KIT.name, kit.KIT.notebook_name
COURSE_ID = "dl101"
ON_TIME, LATE = ("ada_correct", "ben_post_ln"), "cho_missing_shortcut"
README = Path(__file__).resolve().parent.parent / "README.md"


def hub_config(folder: Path, **settings) -> dict:
    """A Jupyter config folder holding nbgrader_config.py, as a hub sets one up for each user."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["c = get_config()"] + [f"c.{key.replace('__', '.')} = {value!r}" for key, value in settings.items()]
    (folder / "nbgrader_config.py").write_text("\n".join(lines) + "\n")
    return {"JUPYTER_CONFIG_DIR": str(folder)}


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    exchange = root / "exchange"
    exchange.mkdir(mode=0o777)
    exchange.chmod(0o777)
    course = make_course(root / "instructor" / COURSE_ID)
    with open(course / "nbgrader_config.py", "a") as config:      # the course's late-penalty choice (README)
        config.write('\nc.LateSubmissionPlugin.penalty_method = "zero"\n')
    shell = Shell({"AUTOGRADER_SEED": "2024"})
    instructor = hub_config(root / "instructor" / ".jupyter", CourseDirectory__course_id=COURSE_ID,
                            CourseDirectory__root=str(course), Exchange__root=str(exchange))
    homes = {}
    for student in (*ON_TIME, LATE):
        home = root / "students" / student
        homes[student] = (home, hub_config(home / ".jupyter", CourseDirectory__course_id=COURSE_ID,
                                           Exchange__root=str(exchange), Exchange__cache=str(home / ".cache")))

    def as_instructor(*command, **options):
        return shell(*command, cwd=course, env=instructor, **options)

    def as_student(student, *command):
        """On a hub the user name is the student id; here every student is one Unix user, so name them."""
        home, env = homes[student]
        named = (f"--student={student}",) if command[1] in ("submit", "fetch_feedback") else ()
        return shell(*command, *named, cwd=home, env=env)

    def work(student, assignment):
        home, _ = homes[student]
        as_student(student, "nbgrader", "fetch_assignment", assignment)
        path = home / assignment / (NOTEBOOK if assignment == NAME else f"{assignment}.ipynb")
        released = nbformat.read(path, as_version=4)
        done = do_kit_homework(released, student) if assignment == NAME else \
            do_ordinary_homework(released, correct=student == "ada_correct")
        nbformat.write(done, path)
        as_student(student, "nbgrader", "submit", assignment)

    for assignment in (NAME, ORDINARY):
        as_instructor("nbgrader", "generate_assignment", assignment)
        as_instructor("nbgrader", "release_assignment", assignment)
    for student in ON_TIME:
        work(student, NAME)
    work("ada_correct", ORDINARY)
    due = datetime.now(timezone.utc)
    as_instructor("nbgrader", "db", "assignment", "add", NAME, f"--duedate={due:%Y-%m-%d %H:%M:%S} UTC")
    time.sleep(2)
    work(LATE, NAME)
    work("ben_post_ln", ORDINARY)
    logs = {}
    for assignment in (NAME, ORDINARY):
        as_instructor("nbgrader", "collect", assignment)
        logs[assignment] = as_instructor("nbgrader", "autograde", assignment)
        as_instructor("nbgrader", "generate_feedback", assignment)
        as_instructor("nbgrader", "release_feedback", assignment)
    for student in (*ON_TIME, LATE):
        as_student(student, "nbgrader", "fetch_feedback", NAME)
    as_instructor("nbgrader", "export")
    nbgrader_scores = {s: submission(course, NAME, s) for s in (*ON_TIME, LATE)}
    as_instructor("python", "-m", "autograder", "grade-class", "submitted", "--out", str(root / "graded"),
                  "--course", str(course), "--seed", "2024")
    return SimpleNamespace(root=root, course=course, homes=homes, shell=shell, logs=logs,
                           nbgrader_scores=nbgrader_scores)


def submission(course, assignment, student):
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        found = gradebook.find_submission(assignment, student)
        notebook = found.notebooks[0]
        return {"score": found.score, "penalty": found.late_submission_penalty, "late": found.total_seconds_late,
                "checks": {g.name: g.score for g in notebook.grades}}


def test_course_id_comes_from_the_hub_not_from_the_course(hub):
    config = (kit.COURSE_DIR / "nbgrader_config.py").read_text()
    assert not re.search(r"^\s*c\.\w+\.course_id", config, flags=re.MULTILINE)
    assert (hub.root / "exchange" / COURSE_ID / "outbound" / NAME / NOTEBOOK).is_file()


def test_both_assignments_are_graded_through_the_exchange(hub):
    ada = submission(hub.course, NAME, "ada_correct")
    assert ada["score"] == TOTAL_POINTS and ada["penalty"] == 0
    ben = submission(hub.course, NAME, "ben_post_ln")
    assert ben["checks"]["check_forward_order"] == 0 and 0 < ben["score"] < TOTAL_POINTS
    assert submission(hub.course, ORDINARY, "ada_correct")["checks"]["test_add"] == 2
    assert submission(hub.course, ORDINARY, "ben_post_ln")["checks"]["test_add"] == 0
    assert "has changed!" not in hub.logs[NAME].stdout + hub.logs[NAME].stderr


def test_the_late_submission_gets_the_course_penalty(hub):
    late, on_time = submission(hub.course, NAME, LATE), submission(hub.course, NAME, "ben_post_ln")
    assert late["late"] > 0 and late["score"] > 0 and late["penalty"] == late["score"]     # penalty_method "zero"
    assert on_time["late"] == 0 and on_time["penalty"] == 0
    with open(hub.course / "grades.csv", newline="") as handle:
        rows = {(r["assignment"], r["student_id"]): r for r in csv.DictReader(handle)}
    assert float(rows[(NAME, LATE)]["score"]) == 0 and float(rows[(NAME, LATE)]["raw_score"]) == late["score"]
    assert float(rows[(NAME, LATE)][f"{NAME}/check_compounding"]) == late["checks"]["check_compounding"]


def test_students_fetch_their_feedback_and_it_leaks_nothing(hub):
    secret = secret_lines()
    for student in (*ON_TIME, LATE):
        home, _ = hub.homes[student]
        (page,) = (home / NAME / "feedback").glob(f"*/{kit.KIT.notebook_id}.html")
        text, own = page.read_text(), (home / NAME / NOTEBOOK).read_text()     # what they submitted is theirs
        assert "BEGIN HIDDEN" not in text and not [line for line in secret if line in text and line not in own]
        assert all(spec.title in text for spec in RUBRIC.values())
    late = next((hub.homes[LATE][0] / NAME / "feedback").glob("*/*.html")).read_text()
    assert "Late submission penalty" in late


def test_grade_class_into_the_hub_course_agrees_with_nbgrader(hub):
    """Same seed, same course source, same late penalty: grade-class writes what nbgrader autograde wrote."""
    assert {s: submission(hub.course, NAME, s) for s in (*ON_TIME, LATE)} == hub.nbgrader_scores
    assert (hub.course / "feedback" / LATE / NAME / f"{kit.KIT.notebook_id}.html").is_file()


def readme_commands() -> list[tuple[list[str], dict]]:
    """The nbgrader and grade-class commands of the README's instructor guide (shell blocks only): each as its
    tokens and its `[--option VALUE]` optional parts (option -> how many values follow it)."""
    guide = README.read_text().split("## For instructors", 1)[1].split("\n## ", 1)[0]
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", guide, flags=re.DOTALL):
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line.startswith(("nbgrader ", "python -m autograder grade-class")):
                optional = {group.split()[0]: len(group.split()) - 1 for group in re.findall(r"\[([^\]]*)\]", line)}
                commands.append((shlex.split(re.sub(r"\[[^\]]*\]", "", line)), optional))
    return commands


def _matches(written: list[str], optional: dict, ran: list[str]) -> bool:
    """A README command matches a command run here, `<placeholders>` standing for any value, where the run adds
    only options the README shows as optional, or --student=..., which a hub student never types (their user
    name is the student id)."""
    kept, tokens = [], iter(ran)
    for token in tokens:
        if token in optional:
            for _ in range(optional[token]):
                next(tokens, None)
        elif not token.startswith("--student="):
            kept.append(token)
    return len(written) == len(kept) and all(re.fullmatch(re.sub(r"<[^>]+>", ".+", re.escape(w)), r)
                                             for w, r in zip(written, kept))


def test_every_nbgrader_command_of_the_readme_guide_is_run_here(hub):
    written = readme_commands()
    assert len(written) >= 10
    missing = [" ".join(w) for w, optional in written if not any(_matches(w, optional, ran) for ran in hub.shell.log)]
    assert not missing, f"README commands no test runs: {missing}"
