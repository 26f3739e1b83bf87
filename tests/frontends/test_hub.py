"""A hub a newcomer sets up from docs/deployment.md alone, used as people use it: every block of "Set up a hub" run
as written (tests/hub_setup.py: root's as root, the instructor's in a login shell of theirs with nothing from
root's shell), JupyterHub started by the set-up's own last block on this machine's loopback (PAM, the local
process spawner, configurable-http-proxy), and its people new Unix accounts with passwords: an instructor who is
not root and two students, each driving their own headless Chromium through the hub's login page.

The instructor generates and releases the kit's assignment with formgrader's buttons; each student fetches it from
the Assignments list, does the work (their notebook saved through their own server) and submits it there; the
instructor collects, autogrades each student with formgrader's Autograde button and grades a written answer in
formgrader's view; generates and releases the feedback; a student fetches it from the Assignments list and reads
the page. Then: no traceback in the hub's log (every user's server logs there too) or on any page; students see
neither Formgrader nor Create Assignment; and a student, as that Unix user, can read neither the course's source nor
its gradebook nor the kit's solutions, nor write into a classmate's submitted folder.

Screenshots of formgrader's manual grading and of the student's feedback page go to KIT_SCREENSHOTS, if set."""

import json
import re
import shutil
import stat
import tempfile
import urllib.parse
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from nbgrader.api import Gradebook

import hub_people
import hub_setup
import hub_users
from autograder.course import kit
from autograder.engine.rubric import TOTAL_POINTS, WRITTEN
from browser import Browser, free_port, shots, wait_until
from nbgrader_course import do_kit_homework

pytestmark = pytest.mark.slow

NAME, NOTEBOOK = kit.KIT.name, kit.KIT.notebook_name
FULL = TOTAL_POINTS + sum(WRITTEN.values())
INSTRUCTOR = "hubprof"
STUDENTS = {"hubada": "ada_correct", "hubben": "ben_post_ln"}  # each account, and whose work from the sample class it hands in
ANSWER, POINTS, COMMENT = "answer_zero_branches", 1.5, "Right: each addition adds zero. Now say why the gradient survives too."


@pytest.fixture(scope="module")
def chromium():
    executable = shutil.which("chromium")
    if executable is None:
        pytest.skip("chromium is not installed")
    return executable


@pytest.fixture(scope="module")
def hub(hub_machine, chromium):
    """The set-up of docs/deployment.md on this machine, its people, and the hub running."""
    root = Path(tempfile.mkdtemp(prefix="hub-", dir=hub_machine.root))
    root.chmod(0o755)
    setup = hub_setup.set_up(hub_machine, root, hub_url=f"http://127.0.0.1:{free_port()}")
    with hub_people.accounts():
        yield from people_at_the_hub(setup, root, chromium)


def people_at_the_hub(setup, root: Path, chromium: str):
    instructor, password = hub_people.new_account(INSTRUCTOR, hub_setup.INSTRUCTORS_GROUP)
    students = {name: hub_people.new_account(name, hub_setup.STUDENTS_GROUP) for name in STUDENTS}
    home = hub_users.home(instructor)
    ready = hub_setup.run_instructor_block(setup, instructor, home)
    assert ready.returncode == 0, ready.stdout + ready.stderr
    hub_people.hub_config_for_this_test(setup)
    log = root / "hub.log"
    with hub_people.running_hub(setup, log, users=[instructor, *(login for login, _ in students.values())]):
        yield SimpleNamespace(
            setup=setup,
            root=root,
            log=log,
            chromium=chromium,
            instructor=(instructor, password),
            students=students,
            course=home / "dl101",
            said=setup.said + ready.stdout + ready.stderr,
        )


class Person:
    """One person at the hub: their own browser, logged in through the hub's login page, in their JupyterLab."""

    def __init__(self, hub, login: str, password: str, pages: list):
        self.hub, self.login, self.pages = hub, login, pages
        self.browser = Browser(hub.chromium, Path(tempfile.mkdtemp(prefix="chromium-", dir=hub.root)))
        self.base = f"{hub.setup.hub_url}/user/{login}"
        self.browser.open(f"{hub.setup.hub_url}/hub/login", "document.querySelector('#username_input')")
        self.browser.type_into("#username_input", login)
        self.browser.type_into("#password_input", password)
        self.browser.js("document.querySelector('#login_submit').click()")
        in_lab = f"location.pathname.startsWith('/user/{login}/lab') && !!document.querySelector('.lm-MenuBar-item')"
        wait_until(lambda: self.browser.js(in_lab), 300, f"{login}'s JupyterLab")

    def seen(self) -> str:
        """What the page shows now, kept for the check that no page shows a traceback."""
        text = self.browser.js("document.body.innerText")
        self.pages.append((self.login, self.browser.js("location.href"), text))
        return text

    def disabled_plugins(self) -> list[str]:
        config = "JSON.parse(document.getElementById('jupyter-config-data').textContent)"
        return sorted(self.browser.js(f"{config}.disabledExtensions"))

    def formgrader(self, page: str, ready: str) -> None:
        self.browser.open(f"{self.base}/formgrader/{page}", ready)

    def press(self, button: str, what: str) -> str:
        """Press a formgrader button (a JavaScript expression); gives the text of the dialog that says how it went."""
        self.browser.js("document.querySelectorAll('#success-modal, #error-modal').forEach(m => m.remove())")
        self.browser.js(f"({button}).click()")
        wait_until(lambda: self.browser.js("!!document.querySelector('#success-modal, #error-modal')"), 600, what)
        said = self.seen()
        assert self.browser.js("!!document.querySelector('#success-modal')"), said[-3000:]
        return said

    def assignments(self) -> None:
        """Nbgrader > Assignment List, loaded."""
        self.browser.menu("Nbgrader")
        items = "[...document.querySelectorAll('.lm-Menu .lm-Menu-item')]"
        self.browser.click(f"{items}.find(e => e.textContent.trim() === 'Assignment List')")
        lists = ("released", "fetched", "submitted")
        loaded = " && ".join(f"document.querySelector('#{name}_assignments_list_loading')?.hidden" for name in lists)
        wait_until(lambda: self.browser.js(f"!!({loaded})"), 120, "the Assignments list")

    def list_button(self, listing: str, label: str) -> str:
        buttons = f"[...document.querySelectorAll('#{listing}_assignments_list button')]"
        return f"{buttons}.find(e => e.textContent.trim() === {label!r})"

    def save(self, path: str, notebook) -> int:
        """The notebook saved through the person's own server (Jupyter's contents API, as JupyterLab saves)."""
        body = json.dumps({"type": "notebook", "format": "json", "content": notebook})
        return self.browser.js(
            "(async () => { const token = decodeURIComponent((document.cookie.match(/_xsrf=([^;]+)/) || [])[1] || '');"
            f" const reply = await fetch('/user/{self.login}/api/contents/{path}', {{method: 'PUT',"
            " headers: {'X-XSRFToken': token, 'Content-Type': 'application/json'}, body: " + json.dumps(body) + "});"
            " return reply.status; })()"
        )

    def close(self) -> None:
        self.browser.close()


def row(text: str) -> str:
    return f"[...document.querySelectorAll('tbody tr')].find(r => r.textContent.includes({text!r}))"


def gradebook(course) -> Gradebook:
    return Gradebook(f"sqlite:///{course / 'gradebook.db'}")


@pytest.fixture(scope="module")
def course(hub, tmp_path_factory):
    """The course played through the hub, in the browsers of its people."""
    pages: list = []
    seen = SimpleNamespace(pages=pages, menus={}, plugins={}, formgrader_status={}, dialogs=[], submitted={})
    folder = shots(tmp_path_factory.mktemp("hub-shots"))
    instructor = Person(hub, *hub.instructor, pages)
    seen.menus[INSTRUCTOR] = instructor.browser.menu("Nbgrader")
    seen.plugins[INSTRUCTOR] = instructor.disabled_plugins()
    generate, release = (f"{row(NAME)}?.querySelector('td.{kind} a')" for kind in ("assign", "release"))
    instructor.formgrader("manage_assignments", generate)
    seen.dialogs.append(instructor.press(generate, "Generate"))
    instructor.formgrader("manage_assignments", release)
    seen.dialogs.append(instructor.press(release, "Release"))

    for name, sample in STUDENTS.items():
        login, password = hub.students[name]
        student = Person(hub, login, password, pages)
        seen.menus[name] = student.browser.menu("Nbgrader")
        seen.plugins[name] = student.disabled_plugins()
        student.browser.open(f"{student.base}/formgrader/manage_assignments")
        seen.formgrader_status[name] = student.browser.js("document.body.innerText")
        student.browser.open(f"{student.base}/lab")
        wait_until(lambda: student.browser.js("!!document.querySelector('.lm-MenuBar-item')"), 120, "JupyterLab")
        student.assignments()
        student.browser.click(student.list_button("released", "Fetch"))
        notebook = hub_users.home(login) / NAME / NOTEBOOK
        wait_until(notebook.is_file, 60, "the fetched notebook")
        assert student.save(f"{NAME}/{NOTEBOOK}", do_kit_homework(nbformat.read(notebook, as_version=4), sample)) == 200
        wait_until(lambda: student.browser.js(f"!!({student.list_button('fetched', 'Submit')})"), 60, "the Submit button")
        student.browser.click(student.list_button("fetched", "Submit"))
        submitted = "!!document.querySelector('#submitted_assignments_list .list_item')"
        wait_until(lambda: student.browser.js(submitted), 120, "the submission")
        seen.submitted[name] = student.seen()
        student.close()

    # a hub administrator: the admin page, but not a student's server (running now)
    instructor.browser.open(f"{hub.setup.hub_url}/hub/admin", "document.body.innerText.includes('Add Users')", timeout=120)
    seen.admin_page = instructor.seen()
    student_server = f"{hub.setup.hub_url}/user/{hub.students['hubada'][0]}/api/contents"
    instructor.browser.open(student_server, "document.body.innerText.length > 0")
    seen.students_server = instructor.seen()
    collect = f"{row(NAME)}?.querySelector('td.collect a')"
    instructor.formgrader("manage_assignments", collect)
    seen.dialogs.append(instructor.press(collect, "Collect"))
    seen.collected_modes = {
        name: stat.S_IMODE((hub.course / "submitted" / hub.students[name][0] / NAME).stat().st_mode) for name in STUDENTS
    }
    for name in STUDENTS:
        login = hub.students[name][0]
        autograde = f"{row(login)}?.querySelector('.autograde a')"
        instructor.formgrader(f"manage_submissions/{NAME}", autograde)
        seen.dialogs.append(instructor.press(autograde, f"autograding {login}"))
    with gradebook(hub.course) as book:
        seen.autograded = {name: book.find_submission(NAME, hub.students[name][0]).score for name in STUDENTS}

    # the written answer of the second student, graded in formgrader's view of their submission
    graded = hub.students["hubben"][0]
    instructor.formgrader(f"gradebook/{NAME}/{kit.KIT.notebook_id}", f"{row(graded)}?.querySelector('a')")
    view_ready = (
        "window.formgrader?.grades?.loaded && window.formgrader?.comments?.loaded"
        f" && !!document.querySelector('input.score#{ANSWER}')"
    )
    instructor.browser.open(instructor.browser.js(f"{row(graded)}.querySelector('a').href"), view_ready)
    instructor.browser.type_into(f"input.score#{ANSWER}", f"{POINTS:g}")
    instructor.browser.type_into(f"textarea#{ANSWER}-comment", COMMENT)

    def saved():
        with gradebook(hub.course) as book:
            grade = book.find_grade(ANSWER, kit.KIT.notebook_id, NAME, graded)
            comment = book.find_comment(ANSWER, kit.KIT.notebook_id, NAME, graded)
            return grade.manual_score == POINTS and comment.manual_comment == COMMENT

    wait_until(saved, 60, "the written answer's score and comment to be saved")
    instructor.browser.open(instructor.browser.js("location.href"), view_ready)  # as the instructor sees it afterwards
    seen.grading_view = instructor.seen()
    seen.grading_shot = instructor.browser.screenshot(
        folder / "hub-formgrader-manual-grading.png", around=f"document.querySelector('input.score#{ANSWER}').closest('.panel')"
    )
    top = folder / "hub-formgrader-submission-top.png"
    seen.grading_top = instructor.browser.screenshot(top, around="document.body", height=700)

    for kind in ("generate-feedback", "release-feedback"):
        button = f"{row(NAME)}?.querySelector('td.{kind} a')"
        instructor.formgrader("manage_assignments", button)
        seen.dialogs.append(instructor.press(button, kind))
    instructor.close()

    # the student fetches the feedback from the Assignments list, finds it where the list points, and reads it
    student = Person(hub, *hub.students["hubben"], pages)
    student.assignments()
    student.browser.click(student.list_button("submitted", "Fetch Feedback"))
    view = "[...document.querySelectorAll('#submitted_assignments_list a')].find(e => e.textContent.includes('view feedback'))"
    wait_until(lambda: student.browser.js(f"!!({view})"), 120, "the feedback to be fetched")
    student.browser.click(view)
    listed = "[...document.querySelectorAll('.jp-DirListing-itemName')].map(e => e.textContent)"
    wait_until(lambda: f"{kit.KIT.notebook_id}.html" in student.browser.js(listed), 60, "the file browser at the feedback")
    (page,) = (hub_users.home(graded) / NAME / "feedback").glob(f"*/{kit.KIT.notebook_id}.html")
    relative = urllib.parse.quote(str(page.relative_to(hub_users.home(graded))))
    student.browser.open(f"{student.base}/files/{relative}", "document.querySelector('#score')")  # Open in New Browser Tab
    seen.feedback = student.seen()
    seen.feedback_html = page.read_text()
    seen.feedback_shot = student.browser.screenshot(folder / "hub-student-feedback.png", around="document.body", height=1600)
    written = f"document.querySelector('[data-cell=\"{ANSWER}\"]').closest('table')"
    seen.written_shot = student.browser.screenshot(
        folder / "hub-student-feedback-written-answers.png", around=written, height=900
    )
    student.close()
    return seen


def test_the_hub_was_set_up_from_the_docs_alone(hub):
    for line in ("every user can run the environment", "only instructors can read the kit", "the proxy is installed"):
        assert line in hub.said, line
    assert f"the kit is ready for {hub.instructor[0]} in {hub.course}" in hub.said
    assert "Traceback" not in hub.said and "cannot toggle" not in hub.said and "Validation failed" not in hub.said
    assert stat.S_IMODE(hub.course.stat().st_mode) == 0o700
    # the instructor's home folder as a new account has it: open to every user, so the course folder's own mode is what closes it
    assert stat.S_IMODE(hub.course.parent.stat().st_mode) & 0o005 == 0o005


def test_the_instructor_administers_the_hub_but_cannot_open_a_students_server(course):
    assert "Add Users" in course.admin_page
    assert '"message": "Forbidden"' in course.students_server and '"content"' not in course.students_server


def test_only_the_instructor_has_formgrader_and_create_assignment(course):
    assert {"Formgrader", "Create assignment"} <= set(course.menus[INSTRUCTOR]) and course.plugins[INSTRUCTOR] == []
    for name in STUDENTS:
        assert course.menus[name] == ["Assignment List", "Course List"], course.menus[name]
        assert course.plugins[name] == ["@jupyter/nbgrader:create-assignment", "@jupyter/nbgrader:formgrader"]
        assert "404" in course.formgrader_status[name]  # and no formgrader in their server at all


def test_students_fetch_and_submit_from_the_assignments_list(hub, course):
    for name in STUDENTS:
        login = hub.students[name][0]
        assert re.search(rf"{NAME}\s+dl101\s+Fetch Feedback\s+\d{{4}}-\d\d-\d\d [\d:.]+ UTC", course.submitted[name])
        assert (hub.course / "submitted" / login / NAME / NOTEBOOK).is_file()


def test_the_autograde_button_grades_each_student_isolated_with_bubblewrap(hub, course):
    assert course.autograded["hubada"] == TOTAL_POINTS
    assert 0 < course.autograded["hubben"] < TOTAL_POINTS  # Post-LN
    for name in STUDENTS:
        graded = nbformat.read(hub.course / "autograded" / hub.students[name][0] / NAME / NOTEBOOK, as_version=4)
        isolation = graded.metadata["layernorm_kit"]["result"]["isolation"]
        assert "bubblewrap" in isolation and "UNSAFE" not in isolation


def test_collected_submissions_are_writable_by_everyone_inside_the_private_course(course):
    """What docs/deployment.md says to explain the course folder's mode: nbgrader's collect carries the exchange's
    mode over (its sandbox grades them afterwards; until then the folder's own mode is what keeps them)."""
    assert all(mode & 0o002 for mode in course.collected_modes.values()), course.collected_modes


def test_the_written_answer_graded_in_formgrader_reaches_the_students_page(hub, course):
    total = course.autograded["hubben"] + POINTS
    assert f"The grade: Score: {total:g} / {FULL:g}" in course.grading_view
    assert re.search(rf"Score:\s*{total:g} / {FULL:g}", course.feedback)
    assert re.search(
        rf'data-cell="{ANSWER}"><td class="title">[^<]*</td><td class="pts">{POINTS:g} / {WRITTEN[ANSWER]:g}</td>',
        course.feedback_html,
    )
    assert COMMENT in course.feedback
    with gradebook(hub.course) as book:
        assert book.find_submission(NAME, hub.students["hubben"][0]).score == total  # the page says the gradebook's number
    for shot in (course.grading_shot, course.grading_top, course.feedback_shot, course.written_shot):
        assert shot.stat().st_size > 20_000


def test_no_traceback_in_the_hubs_log_or_on_any_page(hub, course):
    log = hub.log.read_text()
    assert "Traceback" not in log, log[log.index("Traceback") - 2000 : log.index("Traceback") + 3000]
    assert len(course.pages) >= 10 and len(course.dialogs) == 7
    assert not [(who, url) for who, url, text in course.pages if "Traceback" in text]


def test_a_student_of_the_hub_runs_the_visible_tests_with_nothing_installed(hub, course):
    """docs/students.md: on the hub, `python run_tests.py` in a terminal, in the fetched folder (the student's
    server has the hub's environment first on its PATH, as `run_as` gives it)."""
    login = hub.students["hubada"][0]
    done = hub_users.run_as(login, [hub.setup.python, "run_tests.py"], cwd=hub_users.home(login) / NAME)
    assert done.returncode == 0 and re.search(r"^\d+ passed, 0 failed$", done.stdout, flags=re.MULTILINE), done.stdout


def probe_as(login: str, python: Path, probes: dict) -> dict:
    """What `login` gets, as that Unix user, for each probe: reading a file's first bytes ("read"), listing a folder
    ("list") or creating and removing a file in it ("write")."""
    script = (
        "import json, os, sys\n"
        "out = {}\n"
        "for name, (kind, path) in json.loads(sys.argv[1]).items():\n"
        "    try:\n"
        "        if kind == 'read':\n"
        "            open(path, 'rb').read(16)\n"
        "        elif kind == 'list':\n"
        "            os.listdir(path)\n"
        "        else:\n"
        "            planted = os.path.join(path, '.probe-' + str(os.getpid()))\n"
        "            open(planted, 'w').close()\n"
        "            os.remove(planted)\n"
        "        out[name] = 'allowed'\n"
        "    except OSError as error:\n"
        "        out[name] = type(error).__name__\n"
        "print(json.dumps(out))\n"
    )
    spec = json.dumps({name: [kind, str(path)] for name, (kind, path) in probes.items()})
    done = hub_users.run_as(login, [python, "-c", script, spec], cwd="/")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_student_can_read_neither_the_course_nor_the_kit_nor_write_into_a_classmates_submission(hub, course):
    classmate = hub.students["hubben"][0]
    probes = {
        "the course's source": ("read", hub.course / "source" / NAME / NOTEBOOK),
        "the gradebook": ("read", hub.course / "gradebook.db"),
        "the course folder": ("list", hub.course),
        "a classmate's submitted folder": ("write", hub.course / "submitted" / classmate / NAME),
        "a classmate's autograded notebook": ("read", hub.course / "autograded" / classmate / NAME / NOTEBOOK),
        "the kit's solutions": ("read", hub.setup.kit / "solutions" / NOTEBOOK),
        "the kit's annotated source": ("read", hub.setup.kit / "assignments" / "source" / NAME / NOTEBOOK),
        "the exchange's submissions": ("list", hub.setup.exchange / "dl101" / "inbound"),
    }
    for path in {path for _, path in probes.values()}:
        assert path.exists(), path
    student = hub.students["hubada"][0]
    assert set(probe_as(student, hub.setup.python, probes).values()) == {"PermissionError"}
    # the same probes as the instructor, whose course it is: each of them can succeed
    assert set(probe_as(hub.instructor[0], hub.setup.python, probes).values()) == {"allowed"}


def test_jupyters_own_user_level_enable_refuses_formgrader_as_the_docs_say(hub):
    """Why the instructor's block writes formgrader into their own jupyter_server_config.py instead."""
    login, _ = hub_people.new_account("hubnew", hub_setup.STUDENTS_GROUP)
    command = ["jupyter", "server", "extension", "enable", "--user", "nbgrader.server_extensions.formgrader"]
    done = hub_users.run_as(login, [hub.setup.python.parent / command[0], *command[1:]], cwd=hub_users.home(login))
    assert "Validation failed" in done.stdout + done.stderr
    assert not (hub_users.home(login) / ".jupyter" / "jupyter_server_config.json").exists()


def test_an_instructor_outside_the_instructors_group_is_never_told_the_kit_is_ready(hub):
    """A new instructor whom root has not put in the instructors' group runs their block as pasted into a terminal
    (no `set -e`): the kit cannot be read, the block says why, and it does not end with "the kit is ready"."""
    login, _ = hub_people.new_account("hubnew", hub_setup.STUDENTS_GROUP)
    done = hub_setup.run_instructor_block(hub.setup, login, hub_users.home(login), strict=False)
    said = done.stdout + done.stderr
    assert "the kit is ready" not in said and "PermissionError" in said, said
