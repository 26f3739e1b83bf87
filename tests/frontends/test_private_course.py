"""Every door that grades, draws feedback or exports, on a course of the kit's, refuses while other users can read
or write the course, in one line that names the path and the fix, with every file of the course as it was; the
same course made private goes through every door; a course that chose to stay open goes through and says so.

The doors run in-process as the command line and formgrader run them (`course_states.Course`), with the stand-in
grader: the sandbox is not what this is about."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from nbgrader.apps import api
from nbgrader.converters import Autograde

from autograder.frontends.cli import main
from autograder.frontends.nbgrader import privacy
from course_states import NAME, Course, Lines, Refused, StandIn

ALLOW = '\nc.KitCourse.when_open_to_others = "allow"\n'


@pytest.fixture(autouse=True)
def alembic_on_path(monkeypatch):
    """nbgrader starts `alembic` by name to make a gradebook: this environment's, as on a hub's PATH."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")


@pytest.fixture(scope="module")
def place():
    """A folder every user can reach, as a hub's /home is: what the course's own mode gives is what counts."""
    folder = Path(tempfile.mkdtemp(prefix="u19-private-course-", dir="/tmp"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


class Watched(Course):
    """A course whose every action's log is kept (`lines`)."""

    def _logged(self, action):
        self.lines = Lines()

        def watched(log):
            log.addHandler(self.lines)
            return action(log)

        return super()._logged(watched)


def said(course: Watched) -> str:
    return "\n".join(f"{r.levelname}: {message(r)}" for r in course.lines.records)


def message(record) -> str:
    try:
        return record.getMessage()
    except Exception:  # nbgrader logs gradebook rows, which cannot be read once their session has closed
        return str(record.msg)


def course_action(name: str):
    def run(course: Watched):
        done = getattr(course, name)(*([True] if name in ("autograde", "grade_class") else []))
        return (done.line if isinstance(done, Refused) else None), said(course)

    return run


def formgrader_autograde(course: Watched):
    """Formgrader's Autograde button for one student: nbgrader's API, as the button's request runs it."""
    coursedir = course.coursedir()
    coursedir.student_id = "ada"
    app = Autograde(coursedir=coursedir, config=course.config())
    app.force = app.create_student = True
    done = api.capture_log(app)
    if done["success"]:
        return None, done["log"]
    assert "error" not in done, done  # the one line, with no Python traceback under it
    errors = [line for line in done["log"].splitlines() if line.startswith("[ERROR]")]
    assert len(errors) == 1, done["log"]
    return errors[0].removeprefix("[ERROR] "), done["log"]


def class_report(course: Watched):
    done = CliRunner().invoke(main, ["class-report", "--course", str(course.course)])
    if done.exit_code:
        assert done.output.count("\n") == 1 and "Traceback" not in done.output, done.output
        return done.output.strip(), done.output
    return None, done.output


DOORS = {
    "nbgrader autograde": course_action("autograde"),
    "formgrader's Autograde": formgrader_autograde,
    "grade-class --course": course_action("grade_class"),
    "nbgrader generate_feedback": course_action("generate_feedback"),
    "nbgrader release_feedback": course_action("release_feedback"),
    "nbgrader export": course_action("export"),
    "class-report --course": class_report,
}


def snapshot(folder: Path) -> dict:
    """Every path below `folder`: its mode and owner, and a file's bytes (hashed) or a link's target."""
    found = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        content = ""
        if path.is_symlink() or path.is_file():
            content = os.readlink(path) if path.is_symlink() else hashlib.sha256(path.read_bytes()).hexdigest()
        found[str(path.relative_to(folder))] = (stat.filemode(info.st_mode), info.st_uid, info.st_gid, content)
    return found


def test_every_door_refuses_an_open_course_changing_nothing_and_goes_through_once_it_is_private(place):
    with StandIn().active():
        course = Watched(place / "dl101")
        for number, (student, kind) in enumerate([("ada", "correct"), ("ben", "post_ln")]):
            course.collect(student, kind, late=False, number=number)
        collected = course.course / "submitted" / "ada" / NAME
        collected.chmod(0o777)  # as nbgrader's collect leaves it: the exchange's mode
        course.course.chmod(0o700)
        assert not isinstance(course.autograde(force=True), Refused)
        assert stat.S_IMODE(collected.stat().st_mode) == 0o700  # made private as the kit read it

        course.course.chmod(0o755)  # a new home's mode on Debian: every user may read it
        before = snapshot(course.root)
        for door, run in DOORS.items():
            line, _ = run(course)
            assert line is not None, f"{door} went on with a course every user can read"
            assert f"other users can read {course.course} (mode 0755: any user)" in line, (door, line)
            assert f"run `chmod 700 {course.course}`" in line and 'when_open_to_others = "allow"' in line, (door, line)
            assert snapshot(course.root) == before, f"{door} changed the course it refused"

        course.course.chmod(0o700)  # the documented set-up
        for door, run in DOORS.items():
            line, output = run(course)
            assert line is None, (door, line)
            assert "open to other users" not in output, (door, output)

        course.course.chmod(0o755)
        with open(course.course / "nbgrader_config.py", "a") as config:
            config.write(ALLOW)
        for door, run in DOORS.items():
            line, output = run(course)
            assert line is None, (door, line)
            if door != "grade-class --course":  # grade-class says so at the top of its report and in its output
                assert f"the course is open to other users ({privacy.ALLOW}): other users can read" in output, (door, output)
        assert 'id="open_course"' in (course.out / "report.html").read_text()
        assert 'id="open_course"' in (course.course / f"report-{NAME}.html").read_text()


def test_grade_class_says_at_its_end_that_the_course_is_open(place):
    """The command line's last word after grading an open course by the course's choice."""
    from autograder.frontends.commands import ClassGraded

    done = ClassGraded([], 1, place, place, place, [], open_course="the course is open to other users (...)")
    assert done.warning() == "WARNING: the course is open to other users (...)"
    assert ClassGraded([], 1, place, place, place, []).warning() is None


def test_a_course_without_the_kit_s_assignments_is_stock_nbgraders_open_or_not(place):
    course = Course(place / "ordinary")
    shutil.rmtree(course.course / "source" / NAME)
    course.course.chmod(0o777)
    assert privacy.exposure(course.coursedir(), course.config()) is None
    assert privacy.guard(course.coursedir(), course.config(), None, "Not grading") is None


@pytest.mark.slow
def test_each_command_line_says_its_refusal_in_one_line(place):
    """The same refusal from the commands an instructor types: one line, no traceback, a failing status."""
    from nbgrader_course import Shell

    typed = Course(place / "typed")
    typed.collect("ada", "correct", late=False, number=0)
    course = typed.course
    course.chmod(0o700)
    with StandIn().active():  # graded while private: each command then has something to work on
        assert not isinstance(typed.autograde(force=True), Refused)
    course.chmod(0o755)
    shell = Shell()
    exchange, out = f"--Exchange.root={place / 'typed' / 'exchange'}", str(place / "typed-out")
    typed = {
        "autograde": ["nbgrader", "autograde", NAME],
        "generate_feedback": ["nbgrader", "generate_feedback", NAME],
        "release_feedback": ["nbgrader", "release_feedback", NAME, exchange, "--CourseDirectory.course_id=dl101"],
        "export": ["nbgrader", "export"],
        "grade-class": ["python", "-m", "autograder", "grade-class", "submitted", "--out", out, "--course", "."],
        "class-report": ["python", "-m", "autograder", "class-report", "--course", "."],
    }
    for name, command in typed.items():
        done = shell(*command, cwd=course, check=False)
        output = done.stdout + done.stderr
        lines = [line for line in output.splitlines() if f"other users can read {course} (mode 0755: any user)" in line]
        assert done.returncode != 0 and len(lines) == 1 and "Traceback" not in output, (name, output)
        assert lines[0].rstrip(".").endswith("in the course's nbgrader_config.py to go on anyway"), (name, lines[0])
    assert not Path(out).exists()
