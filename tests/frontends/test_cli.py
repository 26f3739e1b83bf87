"""`python -m autograder grade`: Gradescope-format results, exit status 0 whenever a result was written."""

import json
import os
import re
from pathlib import Path
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.course import kit
from autograder.engine.rubric import RUBRIC, TOTAL_POINTS

pytestmark = pytest.mark.quick  # in `make test-quick`: this wing's fast tier

VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}


def grade(submission, results, *extra):
    return subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(submission), "--results", str(results), *extra],
        capture_output=True,
        text=True,
        timeout=600,
    )


def assert_gradescope_format(data):
    assert isinstance(data["score"], (int, float)) and isinstance(data["execution_time"], (int, float))
    assert isinstance(data["output"], str)
    checks = [t for t in data["tests"] if "written" not in t["extra_data"]]
    assert [t["tags"][0] for t in checks] == list(RUBRIC)  # then one test per written answer
    for test in data["tests"]:
        assert isinstance(test["name"], str) and isinstance(test["output"], str) and test["output"]
        assert 0 <= test["score"] <= test["max_score"]
        assert test.get("status", "awaiting") in {"passed", "failed", "awaiting"} and test["visibility"] in VISIBILITY
    assert data["score"] == pytest.approx(sum(t["score"] for t in data["tests"]))


@pytest.mark.slow
def test_grade_writes_results_for_solution_template_and_garbage(tmp_path):
    garbage = tmp_path / "garbage.ipynb"
    garbage.write_text("{ this is not json")
    for submission, expected in [
        (kit.SOLUTIONS_DIR / kit.KIT.notebook_name, TOTAL_POINTS),
        (kit.TEMPLATE_DIR / kit.KIT.notebook_name, 0),
        (garbage, 0),
    ]:
        results = tmp_path / f"{submission.stem}-{expected}.json"
        run = grade(submission, results, "--seed", "7", "--device", "cpu")
        assert run.returncode == 0, run.stderr
        data = json.loads(results.read_text())
        assert_gradescope_format(data)
        assert data["score"] == expected
        assert data["extra_data"]["seed"] == 7
        if submission == garbage:
            assert all("not valid notebook JSON" in t["output"] for t in data["tests"] if "written" not in t["extra_data"])
        elif expected == 0:
            outputs = {t["tags"][0]: t["output"] for t in data["tests"]}
            assert all("Task 1" in text for name, text in outputs.items() if name.startswith("forward_"))
            assert "Task 2" in outputs["compounding"]


def test_same_seed_same_grade_other_seed_other_questions(grade_source, seed):
    """A seed reproduces a grade exactly, and is what decides the hidden questions: another seed asks others. The
    deep stack is the one exception: its verdict is a threshold on a measured quantity, so every grade measures the
    same stack, whatever the seed."""
    from autograder.engine.questions.plan import Plan
    from catalog.build import submission
    from catalog.wrong_forwards import WRONG

    text = submission(forward=WRONG[0].forward)
    first, second, other = grade_source(text), grade_source(text), grade_source(text, seed=seed + 1)
    same = lambda r: [(c.check, c.points, c.message) for c in r.checks]  # noqa: E731
    assert same(first) == same(second) and first.profile == second.profile
    assert first.profile["student"] == other.profile["student"]  # the same deep stack on every seed
    assert Plan.draw(seed) != Plan.draw(seed + 1) and Plan.draw(seed) == Plan.draw(seed)
    assert Plan.draw(seed).sweep != Plan.draw(seed + 1).sweep  # other inputs from the whole space of valid ones


@pytest.mark.slow
def test_seed_zero_is_a_seed(tmp_path):
    results = tmp_path / "r.json"
    run = grade(kit.SOLUTIONS_DIR / kit.KIT.notebook_name, results, "--seed", "0", "--device", "cpu")
    assert run.returncode == 0, run.stderr
    assert json.loads(results.read_text())["extra_data"]["seed"] == 0


def test_a_user_who_cannot_run_the_kits_python_is_refused_in_one_line_by_every_door(monkeypatch, tmp_path):
    """Where the sandbox could not start its server with this Python (the user cannot run it), `grade`,
    `grade-class` and nbgrader's preflight refuse in one line that names the path, before anything starts."""
    from click.testing import CliRunner

    from autograder.frontends import interpreter
    from autograder.frontends.cli import main
    from autograder.frontends.nbgrader import preflight
    from nbgrader_course import make_course

    why = "this user (uid 65534) cannot run the kit's Python, /closed/python: /closed is closed to them"
    monkeypatch.setattr(interpreter, "interpreter_refusal", lambda executable=None: why)
    monkeypatch.setattr(preflight, "interpreter_refusal", lambda executable=None: why)
    (tmp_path / "class").mkdir()
    for command in (
        ["grade", str(kit.SOLUTIONS_DIR / kit.KIT.notebook_name), "--results", str(tmp_path / "r.json")],
        ["grade-class", str(tmp_path / "class"), "--out", str(tmp_path / "out")],
    ):
        done = CliRunner().invoke(main, command)
        assert done.exit_code == 1 and done.output.strip() == f"Error: Not grading: {why}.", done.output
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "out").exists()
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config

    course = make_course(tmp_path / "course", ordinary=False)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")  # nbgrader's `alembic`
    assert preflight.refusal(CourseDirectory(config=Config(), root=str(course)), Config(), kit.KIT.name) == why


@pytest.mark.slow  # the quick tier runs the others
def test_the_interpreter_check_names_the_closed_folder():
    """As another user (`hub_users`), a Python below a folder of root's (mode 0700) is named, with that folder."""
    import shutil
    import subprocess
    import tempfile

    import hub_users
    from autograder.frontends.interpreter import interpreter_refusal

    assert interpreter_refusal() is None  # this process runs its own Python
    login = hub_users.user("inst")
    python = hub_users.python_for(login)
    closed = Path(tempfile.mkdtemp(dir="/tmp"))  # root's, mode 0700
    try:
        code = (
            "from autograder.frontends.interpreter import interpreter_refusal as r; "
            f"print(r({str(closed / 'python')!r})); print(r())"
        )
        done = hub_users.run_as(login, [python, "-c", code], cwd="/")
        assert done.returncode == 0, done.stderr
        line, own = done.stdout.strip().splitlines()
        assert line.startswith(f"this user (uid {subprocess.check_output(['id', '-u', login], text=True).strip()})")
        assert f"{closed / 'python'}: {closed} is closed to them" in line and own == "None"
    finally:
        shutil.rmtree(closed)


@pytest.mark.slow  # the quick tier runs the others
def test_the_process_ends_with_the_commands_status_and_says_everything_first(tmp_path):
    """`python -m autograder` skips the interpreter's teardown once a command is done (see autograder/__main__.py),
    and still ends as a normal exit would: the status, a refusal's text and every line it printed."""
    (tmp_path / "submitted").mkdir()
    runs = {
        "refused": [
            "grade",
            str(kit.SOLUTIONS_DIR / kit.KIT.notebook_name),
            "--results",
            str(tmp_path / "r.json"),
            "--device",
            "nope",
        ],
        "no course": ["grade-class", str(tmp_path / "submitted"), "--out", str(tmp_path / "out"), "--course", str(tmp_path)],
        "help": ["--help"],
    }
    done = {
        name: subprocess.run([sys.executable, "-m", "autograder", *argv], capture_output=True, text=True, timeout=300)
        for name, argv in runs.items()
    }
    assert done["refused"].returncode == 2 and "--device" in done["refused"].stderr
    assert done["no course"].returncode == 1, done["no course"].stderr
    assert done["no course"].stderr.strip() == f"{tmp_path}: no assignment of the kit in its source folder"
    assert done["help"].returncode == 0 and "grade-class" in done["help"].stdout


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.booleans(), st.sampled_from([11, 12, 623870172])),  # graded by this run; seed of an earlier one
        min_size=0,
        max_size=14,
    ),
    st.sampled_from([7, 12]),
)
def test_grade_class_says_how_many_it_graded_and_skipped_and_with_which_seeds(students, seed):
    """A resumed grade-class: the students it graded (with this run's seed), the students it skipped as up to
    date, and the seed each skipped student's results keep (up to five ids a seed are named, then how many more)."""
    from autograder.frontends.commands import ClassGraded

    rows = [
        {"student": f"s{n}", "seed": seed if now else earlier, "score": "1", "max_score": "5"}
        for n, (now, earlier) in enumerate(students)
    ]
    graded = tuple(f"s{n}" for n, (now, _) in enumerate(students) if now)
    line = ClassGraded(rows, seed, Path("out"), Path("source"), None, [], graded).summary()
    said = re.match(r"graded (\d+) students? \(seed (\d+)\)", line)
    if graded:
        assert said and int(said.group(1)) == len(graded) and int(said.group(2)) == seed, line
    else:
        assert line.startswith("graded no student"), line
    skipped = [row for row in rows if row["student"] not in graded]
    count = re.search(r"skipped (\d+) whose results were up to date", line)
    assert (int(count.group(1)) if count else 0) == len(skipped), line
    keep = {}
    for kept_seed, names in re.findall(r"seed (\d+): ([^;)]+)", line):
        listed, more = re.fullmatch(r"(.+?)(?: and (\d+) more)?", names).groups()
        keep[int(kept_seed)] = (listed.split(", "), int(more or 0))
    for kept_seed in {row["seed"] for row in skipped}:
        mine = [row["student"] for row in skipped if row["seed"] == kept_seed]
        listed, more = keep[kept_seed]
        assert set(listed) <= set(mine) and len(listed) + more == len(mine) and len(listed) <= 5, (line, kept_seed)
    assert set(keep) == {row["seed"] for row in skipped}, line


HOSTILE_INIT = r'''
def __init__(self, cfg):
    super().__init__()
    class Sneaky(Exception):
        pass
    Sneaky.__name__ = "\x1b]0;grades are in\x07Sneaky"
    raise Sneaky(
        "\x1b]52;c;ZWNobyBvd25lZA==\x07\x1b]2;pwned\x1b\\\x1b[1A\x1b[2K\rScore: 24 / 24\n"
        "Score: 24 / 24\x9b1A\x9b2K\x9d0;t\x9c\x85\u202e42 erocs\u2066\x07\x08\x08"
    )
'''


def run_on_a_terminal(argv: list[str], timeout: float = 600) -> tuple[int, bytes]:
    """`argv` run with a pseudo-terminal as its standard input, output and error, as an instructor runs it: its
    status and every byte the terminal received."""
    import pty
    import select
    import time

    master, slave = pty.openpty()
    process = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    received, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer of the terminal has closed it
                break
            if not data:
                break
            received.append(data)
        elif process.poll() is not None:
            break
    os.close(master)
    return process.wait(timeout=60), b"".join(received)


@pytest.mark.slow
def test_grade_on_a_terminal_prints_no_escape_a_student_wrote(tmp_path):
    """An exception message (and class name) with a window title, an OSC 52 clipboard write, the cursor moved up
    and the line erased before a score line of the student's, C1 controls, NEL, a right-to-left override: `grade` on
    a pty prints every one of them as its escape, and the one line that starts with "Score:" is the kit's."""
    from catalog.build import submission

    path = tmp_path / "hostile.py"
    path.write_text(submission(init=HOSTILE_INIT))
    results = tmp_path / "results.json"
    argv = [sys.executable, "-m", "autograder", "grade", str(path), "--results", str(results), "--seed", "7"]
    status, received = run_on_a_terminal([*argv, "--device", "cpu"])
    text = received.decode("utf-8")
    assert status == 0, text
    assert b"\x1b" not in received and b"\x07" not in received and b"\x08" not in received, text
    assert not [c for c in text if 0x80 <= ord(c) <= 0x9F or 0x2066 <= ord(c) <= 0x2069 or 0x202A <= ord(c) <= 0x202E]
    assert text.replace("\r\n", "\n").count("\r") == 0  # the terminal's own line ends (\r\n), no bare carriage return
    lines = text.replace("\r\n", "\n").splitlines()
    output = json.loads(results.read_text())["output"]
    assert [line for line in lines if line.startswith("Score:")] == [output.split("\n")[0]]
    (note,) = [line for line in lines if "TransformerBlock.__init__(cfg) raised" in line]
    assert "\\x1b]0;grades are in\\x07Sneaky" in note and "\\x1b]52;c;ZWNobyBvd25lZA==\\x07" in note, note
    assert "\\x1b[1A\\x1b[2K\\rScore: 24 / 24\\nScore: 24 / 24\\x9b1A" in note and "\\u202e42 erocs" in note, note
