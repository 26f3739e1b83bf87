"""The kit and the machine it is installed on: grading leaves the host's permissions as it found them (other
users of the same install keep working), and an nbgrader course stops, running nothing, when the kit cannot
be loaded."""

import fcntl
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from autograder.course import kit
from autograder.engine.rubric import TOTAL_POINTS
from autograder.sandbox.parent import hostperms
from autograder.sandbox.parent.containment import keep_folders, lock_plan
from autograder.sandbox.parent.policy import bubblewrap_works
from catalog.build import submission
import hub_users
from nbgrader_course import Shell, do_kit_homework, make_course

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: to grade in the permissions layer and to act as another user"),
]
ROOT_ONLY_LAYER = {"AUTOGRADER_BUBBLEWRAP": "off", "AUTOGRADER_NAMESPACES": "off", "AUTOGRADER_LANDLOCK": "off"}


@pytest.fixture
def instructor():
    """An unprivileged instructor of the tests, a Python with the kit they can run (`hub_users`, the one way any
    test acts as another user) and a folder of theirs (in their home, removed after)."""
    login = hub_users.user("inst")
    python = hub_users.python_for(login)
    folder = Path(tempfile.mkdtemp(dir=hub_users.home(login)))
    shutil.chown(folder, login, login)
    yield login, python, folder
    shutil.rmtree(folder, ignore_errors=True)


def _modes(paths) -> dict:
    return {str(p): stat.S_IMODE(os.lstat(p).st_mode) for p in paths if os.path.lexists(p)}


def _at_rest(paths) -> dict:
    """Each path's mode as it is when no root grader runs. Graders of other tests may run meanwhile (xdist's
    other worker) and hold a change to a shared path (/root, where Python lives): for a path a live process
    holds in the journal, its original mode, read with the modes under the journal's lock. A path only dead
    graders hold (one that never gave its change back) keeps the mode it has, so a leftover shows."""
    journal = hostperms.JOURNAL_DIR / "permissions.json"
    if not journal.exists():
        return _modes(paths)
    with open(journal) as handle:
        fcntl.flock(handle, fcntl.LOCK_SH)
        text, modes = handle.read(), _modes(paths)
    entries = json.loads(text) if text.strip() else {}
    held = {
        path: entry["original"]
        for path, entry in entries.items()
        if any(os.path.exists(f"/proc/{token.split(':')[0]}") for token in entry["holders"])
    }
    return {path: held.get(path, mode) for path, mode in modes.items()}


def _watched(*extra) -> list[Path]:
    """Every path the permissions layer could change: the kit's checkout and its folders, Python's folders
    and their ancestors, and the folders of the class being graded."""
    paths = {kit.ROOT, *kit.ROOT.iterdir(), *(kit.ROOT / "autograder").iterdir(), *extra}
    for python in (sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))):
        paths |= {Path(python), *Path(os.path.realpath(python)).parents}
    return sorted(paths)


# A cell that keeps its grading going until the test says so (a file appears that every user may see), or 60 s
# pass (within the wall time its loading may take).
SLOW_CELL = """import os, time
_until = time.monotonic() + 60
while not os.path.exists({flag!r}) and time.monotonic() < _until:
    time.sleep(0.1)
"""


def _closed_to_others(path: Path) -> bool:
    return not os.stat(path).st_mode & stat.S_IROTH


@pytest.mark.skipif(not bubblewrap_works(), reason="the other user grades with bubblewrap, which is not here")
def test_while_and_after_root_grades_without_namespaces_another_user_grades(tmp_path, instructor):
    """Root grades a class in the layer that changes the most (no namespaces, no Landlock: the checkout and the
    grading folders closed to other users for as long as it runs). Meanwhile an unprivileged instructor grades
    with their own copy of the kit (`hub_users`: no user reads the checkout); afterwards every permission is as
    it was."""
    root, out = tmp_path / "class", tmp_path / "graded"
    root.mkdir()
    (root / "ada.py").write_text(submission())
    signal = Path(tempfile.mkdtemp(prefix="kit-slow-cell-"))  # in /tmp, open to every user: no namespace here
    signal.chmod(0o755)
    (root / "cy.py").write_text(submission(extra=SLOW_CELL.format(flag=str(signal / "done"))))  # closed while she waits
    before = _at_rest(_watched(root, out))
    grading = subprocess.Popen(
        [sys.executable, "-m", "autograder", "grade-class", str(root), "--out", str(out), "--seed", "3", "--workers", "1"]
        + ["--unsafe"],  # the layer grades only where the instructor opts in
        env={**os.environ, **ROOT_ONLY_LAYER},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while grading.poll() is None and not _closed_to_others(kit.ROOT):
            time.sleep(0.05)
        closed = _closed_to_others(kit.ROOT)
        login, python, home = instructor
        (home / "ben.py").write_text(submission())
        shutil.chown(home / "ben.py", login, login)
        graded = hub_users.run_as(
            login, [python, "-m", "autograder", "grade", "ben.py", "--results", "ben.json", "--seed", "3"], cwd=home
        )
        still_closed = _closed_to_others(kit.ROOT)
        (signal / "done").touch()
        _, stderr = grading.communicate(timeout=600)
    finally:
        grading.kill()
        shutil.rmtree(signal, ignore_errors=True)
    assert closed, "the root grader never closed the checkout to other users"
    assert still_closed, "the root grader's class was graded before she finished: she did not grade while it ran"
    assert graded.returncode == 0, graded.stderr[-3000:]
    results = json.loads((home / "ben.json").read_text())
    assert results["score"] == TOTAL_POINTS and "bubblewrap" in results["extra_data"]["isolation"]
    assert grading.returncode == 0, stderr[-3000:]
    assert "closed to other users by permissions" in (out / "ada" / "results.json").read_text()
    after = _at_rest(_watched(root, out))
    assert {p: (before[p], after.get(p)) for p in before if before[p] != after.get(p)} == {}


CANARY_CELL = "open({path!r}, 'w').write('a kernel ran this student notebook')"


def _course_with_a_canary(folder: Path) -> tuple[Path, Path]:
    """A course whose kit assignment is released, with one submission whose first cell writes a canary file
    if any kernel ever runs it."""
    course = make_course(folder / "course", ordinary=False)
    Shell()("nbgrader", "generate_assignment", kit.KIT.name, cwd=course)
    canary = folder / "ran" / "canary"
    canary.parent.mkdir()
    canary.parent.chmod(0o777)
    released = nbformat.read(course / "release" / kit.KIT.name / kit.KIT.notebook_name, as_version=4)
    notebook = do_kit_homework(released, "ada_correct")
    notebook.cells.insert(0, nbformat.v4.new_code_cell(CANARY_CELL.format(path=str(canary))))
    path = course / "submitted" / "ada" / kit.KIT.name / kit.KIT.notebook_name
    path.parent.mkdir(parents=True)
    nbformat.write(notebook, path)
    return course, canary


@pytest.mark.parametrize("install", ["broken", "unreadable"])
def test_nbgrader_stops_and_runs_nothing_when_the_kit_cannot_be_loaded(tmp_path, instructor, install):
    login, python, folder = instructor
    course, canary = _course_with_a_canary(folder)
    command = [sys.executable, "-m", "nbgrader", "autograde", kit.KIT.name, "--force"]
    if install == "broken":  # an install whose package fails to import, found first on the path
        shadow = tmp_path / "broken" / "autograder"
        shadow.mkdir(parents=True)
        (shadow / "__init__.py").write_text("raise ImportError('a half-finished upgrade of the kit')\n")
        done = subprocess.run(
            command, cwd=course, capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(shadow.parent)}
        )
    else:  # an instructor for whom the kit's package cannot be read
        hub_users.give(course, login)
        done = hub_users.run_as(login, [python, *command[1:]], cwd=course, cover=[hub_users.kit_root_for(login) / "autograder"])
    output = done.stdout + done.stderr
    assert done.returncode != 0 and "the layernorm kit could not be loaded" in output, output[-3000:]
    assert not canary.exists(), "a kernel ran a student's notebook of the kit's assignment"
    assert not (course / "autograded" / "ada").exists()


def test_a_users_python_stays_hers_while_a_root_grader_opens_the_way_to_pythons_folders(instructor):
    """A root grader without namespaces opens a way through to Python's folders for as long as it grades (here the
    very lease it takes, `containment.lock_plan` with nothing to close). The Python another test's user is given
    meanwhile is the one she is given at rest, so it still runs for her once the grading ends."""
    login, _, _ = instructor
    at_rest = hub_users.interpreter_for(login)
    lease = hostperms.Lease(lock_plan([], keep_folders(), lock=False))
    try:
        during = hub_users.interpreter_for(login)
    finally:
        lease.release()
    assert during == at_rest, (lease.changed, during, at_rest)
    assert hub_users.runs(login, during, imports="")
