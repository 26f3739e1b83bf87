"""The due-date step of docs/instructors.md, tried with nbgrader's own command in a course of the kit: each spelling
the page recommends is stored as the instant it names (the oracle is Python's zoneinfo, not nbgrader's parser), each
spelling it warns against is stored as wrongly as it says, and a due date set after autograding leaves the late
penalty nbgrader stored untouched until the submission is autograded again with --force, as the page says."""

import re
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import nbformat
import pytest
from nbgrader.api import Gradebook

from autograder.course import kit
from nbgrader_course import ORDINARY, Shell, do_ordinary_homework

pytestmark = pytest.mark.slow

WALL = datetime(2026, 12, 11, 17, 0, 0)  # the page's example: 17:00 on 11 December 2026
UTC = timezone.utc
# the spelling, as the page writes it, and the instant it names (None where the page warns against it)
RECOMMENDED = {
    "2026-12-11 17:00:00 UTC": WALL.replace(tzinfo=UTC),
    "2026-12-11 17:00:00 Europe/Berlin": WALL.replace(tzinfo=ZoneInfo("Europe/Berlin")),
    "2026-12-11T17:00:00+01:00": WALL.replace(tzinfo=ZoneInfo("Etc/GMT-1")),  # POSIX names: GMT-1 is UTC+01:00
}
# what nbgrader makes of the spellings the page warns against, as the page says it (in UTC)
WARNED = {"2026-12-11 17:00:00 +0100": "16:58:20", "2026-12-11 17:00:00 +01:00": "17:00:00"}


def due_date_section() -> str:
    page = kit.documentation("instructors.md")
    return page.split("**Due date and late penalty.**", 1)[1].split("\n**", 1)[0]


def stored_due_date(course, assignment) -> datetime:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as book:
        return book.find_assignment(assignment).duedate  # naive, in UTC


@pytest.fixture(scope="module")
def course(released, tmp_path_factory):
    return released.copy(tmp_path_factory.mktemp("due") / "course", ordinary=True)  # both assignments generated


def test_the_documented_spellings_are_the_ones_tried_here():
    section = due_date_section().replace("\n", " ")
    for spelling in [*RECOMMENDED, *WARNED]:
        assert f'"{spelling}"' in section, spelling
    for wrong_as in WARNED.values():
        if wrong_as != "17:00:00":
            assert f"{wrong_as} UTC" in section
    (command,) = re.findall(r"^nbgrader db assignment add .*$", due_date_section(), flags=re.MULTILINE)
    assert command.endswith(' UTC"')  # the command as the page gives it: the time in UTC


def test_each_recommended_spelling_is_stored_as_the_instant_it_names(course):
    for spelling, instant in RECOMMENDED.items():
        Shell()("nbgrader", "db", "assignment", "add", ORDINARY, f"--duedate={spelling}", cwd=course)
        stored = stored_due_date(course, ORDINARY).replace(tzinfo=UTC)
        assert stored == instant.astimezone(UTC), (spelling, stored)


def test_each_spelling_the_page_warns_against_is_stored_wrongly_as_it_says(course):
    for spelling, wrong_as in WARNED.items():
        Shell()("nbgrader", "db", "assignment", "add", ORDINARY, f"--duedate={spelling}", cwd=course)
        stored = stored_due_date(course, ORDINARY)
        assert f"{stored:%H:%M:%S}" == wrong_as, (spelling, stored)
        truth = datetime.fromisoformat(spelling.replace(" +", "+")).astimezone(UTC).replace(tzinfo=None)
        assert stored != truth


def test_a_due_date_set_after_autograding_changes_no_stored_penalty_until_autograde_force(course):
    """A submission an hour after the due date, in a course whose late rule gives late work zero: the due date set
    only after autograding leaves nbgrader's stored penalty at 0 (though the gradebook knows the submission is
    late), and so does autograding again without --force; `autograde --force` stores the penalty."""
    with open(course / "nbgrader_config.py", "a") as config:
        config.write('\nc.LateSubmissionPlugin.penalty_method = "zero"\n')
    shell = Shell()
    shell("nbgrader", "db", "assignment", "add", ORDINARY, cwd=course)  # no due date (the tests above set some)
    folder = course / "submitted" / "ada" / ORDINARY
    folder.mkdir(parents=True)
    released = nbformat.read(course / "release" / ORDINARY / f"{ORDINARY}.ipynb", as_version=4)
    nbformat.write(do_ordinary_homework(released, correct=True), folder / f"{ORDINARY}.ipynb")
    (folder / "timestamp.txt").write_text("2026-12-11 18:00:00.000000 UTC")

    def standing():
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as book:
            found = book.find_submission(ORDINARY, "ada")
            return found.score, found.total_seconds_late, found.late_submission_penalty

    shell("nbgrader", "autograde", ORDINARY, cwd=course)
    score, late, penalty = standing()
    assert score > 0 and late == 0 and penalty == 0
    shell("nbgrader", "db", "assignment", "add", ORDINARY, "--duedate=2026-12-11 17:00:00 UTC", cwd=course)
    assert standing() == (score, 3600, 0)  # late by an hour, and no penalty stored
    shell("nbgrader", "autograde", ORDINARY, cwd=course)
    assert standing() == (score, 3600, 0)
    shell("nbgrader", "autograde", ORDINARY, "--force", cwd=course)
    assert standing() == (score, 3600, score)  # penalty_method "zero": the whole score
