"""Formgrader in a real browser: headless Chromium, driven over its DevTools protocol, on a Jupyter server started
in a course that holds the kit's assignment. The Autograde button grades and leaves no process behind; the
submission view opens with the student's standing and shows each check's findings (no "Out[1]" under a check),
the first divergent step and the gradient plot; a score typed in formgrader changes the total; the feedback
generated afterwards (the kit's page) says the overridden points everywhere."""

import re
import shutil

import nbformat
import psutil
import pytest
from nbgrader.api import Gradebook

from autograder.course import kit
from autograder.engine.rubric import RUBRIC, TOTAL_POINTS, WRITTEN
from browser import Browser, jupyter_server, shots, wait_until
from nbgrader_course import Shell, sample_submission

pytestmark = pytest.mark.slow

NAME = kit.KIT.name
STUDENT = "ben_post_ln"
FULL = TOTAL_POINTS + sum(WRITTEN.values())
ANSWER = next(iter(WRITTEN))  # the written answer graded in formgrader


@pytest.fixture(scope="module")
def course(released, tmp_path_factory):
    """A course under nbgrader's default late rule (flag, lose nothing): ada on time, ben 5.2 h late."""
    course = released.copy(tmp_path_factory.mktemp("formgrader") / "course", ordinary=False)
    Shell()("nbgrader", "db", "assignment", "add", NAME, "--duedate=2030-01-01 12:00:00 UTC", cwd=course)
    for student, when in (("ada_correct", "2029-12-31 09:00:00"), (STUDENT, "2030-01-01 17:12:00")):
        path = course / "submitted" / student / NAME / kit.KIT.notebook_name
        path.parent.mkdir(parents=True)
        nbformat.write(sample_submission(student), path)
        (path.parent / "timestamp.txt").write_text(f"{when}.000000 UTC")
    return course


@pytest.fixture(scope="module")
def server(course, tmp_path_factory):
    """The instructor's Jupyter server, started in the course folder, with the hub-wide settings of docs/deployment.md."""
    hub = tmp_path_factory.mktemp("hub")
    (hub / "exchange").mkdir(mode=0o777)
    (hub / "nbgrader_config.py").write_text(
        f"c = get_config()\nc.CourseDirectory.course_id = 'dl101'\nc.Exchange.root = {str(hub / 'exchange')!r}\n"
    )
    with jupyter_server(course, hub, course.parent / "server.log") as running:
        yield running


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    executable = shutil.which("chromium")
    if executable is None:
        pytest.skip("chromium is not installed")
    browser = Browser(executable, tmp_path_factory.mktemp("chromium-profile"))
    yield browser
    browser.close()


# A submission's view is ready once formgrader's script has fetched its grades and comments and made their boxes:
# only then does each score box hold its autograded points as a placeholder, and save what is typed into it.
VIEW_READY = (
    "window.formgrader?.grades?.loaded && window.formgrader?.comments?.loaded"
    " && !!document.querySelector('input.score#check_forward_order')"
)


def gradebook(course):
    return Gradebook(f"sqlite:///{course / 'gradebook.db'}")


def leftovers(process) -> list[str]:
    return [" ".join(p.cmdline()[:3]) for p in psutil.Process(process.pid).children(recursive=True)]


def row(student: str) -> str:
    return f"[...document.querySelectorAll('tr')].find(r => r.textContent.includes('{student}'))"


@pytest.fixture(scope="module")
def autograded(course, server, browser):
    """The instructor presses formgrader's Autograde button for one student."""
    process, base = server
    browser.open(f"{base}/formgrader/manage_submissions/{NAME}", f"{row(STUDENT)}?.querySelector('.autograde a')")
    assert leftovers(process) == []
    browser.js(f"{row(STUDENT)}.querySelector('.autograde a').click()")
    wait_until(lambda: browser.js("!!document.querySelector('#success-modal, #error-modal')"), 300, "autograding")
    assert browser.js("!!document.querySelector('#success-modal')"), browser.js("document.body.innerText")
    with gradebook(course) as book:
        notebook = book.find_submission_notebook(kit.KIT.notebook_id, NAME, STUDENT)
        return {"id": notebook.id, "score": notebook.score, "max": notebook.max_score, "leftovers": leftovers(process)}


def test_the_autograde_button_grades_and_leaves_no_process(autograded):
    assert 0 < autograded["score"] < TOTAL_POINTS
    assert autograded["leftovers"] == []


def test_submission_view_shows_the_standing_each_check_and_no_score_outputs(course, server, browser, autograded, tmp_path):
    _, base = server
    browser.open(f"{base}/formgrader/submissions/{autograded['id']}", VIEW_READY)
    text = browser.js("document.body.innerText")
    score = f"{autograded['score']:g} / {FULL:g}"
    assert f"The grade: Score: {score} (" in text and "late by 5.2 h, no points deducted)" in text
    for title in ("Operation order (Pre-LN)", "Both shortcut additions", "Task 2: gradient compounding"):
        assert title in text
    assert re.search(r"Step 2 of 10 \(normalize with norm1\)", text) and "Post-LN" in text
    assert not re.search(r"Out\s*\[\d*\]", text), "a check's points shown as the cell's output"
    assert browser.js("document.querySelectorAll('.kit-findings li.part').length") >= sum(len(s.parts) for s in RUBRIC.values())
    assert browser.js("[...document.images].some(i => i.src.startsWith('data:image/png') && i.naturalWidth > 400)")
    shown = browser.js("Object.fromEntries([...document.querySelectorAll('input.score')].map(i => [i.id, i.placeholder]))")
    with gradebook(course) as book:
        notebook = book.find_submission_notebook(kit.KIT.notebook_id, NAME, STUDENT)
        stored = {g.name: g.auto_score for g in notebook.grades}
    checks = {name: float(points) for name, points in shown.items() if name.startswith("check_")}
    assert set(checks) == {f"check_{name}" for name in RUBRIC}
    assert checks == {name: stored[name] for name in checks}  # each check's autograded points, per check
    assert browser.screenshot(shots(tmp_path) / "formgrader-submission.png").stat().st_size > 50_000


def test_a_manual_override_changes_the_total_and_the_regenerated_feedback(course, server, browser, autograded, tmp_path):
    process, base = server
    browser.open(f"{base}/formgrader/submissions/{autograded['id']}", VIEW_READY)
    browser.type_into("input.score#check_forward_order", "2")
    browser.type_into(f"input.score#{ANSWER}", "1")  # a written answer graded, without a comment

    def overridden():
        with gradebook(course) as book:
            grade = book.find_grade("check_forward_order", kit.KIT.notebook_id, NAME, STUDENT)
            answer = book.find_grade(ANSWER, kit.KIT.notebook_id, NAME, STUDENT)
            done = grade.manual_score == 2 and answer.manual_score == 1 and not answer.needs_manual_grade
            return done and book.find_submission(NAME, STUDENT).score

    total = wait_until(overridden, 30, "the manual scores to be saved")
    assert total == autograded["score"] + 3  # the check gave 0 of 4, the instructor gives 2; and 1 for the answer

    browser.open(
        f"{base}/formgrader/manage_submissions/{NAME}", f"{row(STUDENT)}?.querySelector('.score')?.textContent.includes('/')"
    )
    shown = browser.js(f"{row(STUDENT)}.querySelector('.score').textContent").replace(" ", "")
    assert shown == f"{total:g}/{autograded['max']:g}"
    browser.js(f"{row(STUDENT)}.querySelector('.generate-feedback a').click()")
    wait_until(lambda: browser.js("!!document.querySelector('#success-modal, #error-modal')"), 120, "feedback")
    assert browser.js("!!document.querySelector('#success-modal')"), browser.js("document.body.innerText")
    assert leftovers(process) == []

    page = course / "feedback" / STUDENT / NAME / f"{kit.KIT.notebook_id}.html"
    html = page.read_text()
    assert f'<span id="score">{total:g} / {FULL:g}</span>' in html
    assert "Late by 5.2 h: no points deducted under the course&#x27;s late rule." in html  # nbgrader's default rule
    assert re.search(
        r'data-check="forward_order"><td class="title">Operation order \(Pre-LN\)</td>'
        r'<td class="pts">2 / 4<div class="muted">set by your instructor</div>',
        html,
    )
    assert not re.search(r"\b0 / 4\b", html), "the overridden check still says the autograder's points"
    answer = re.search(rf'data-cell="{ANSWER}">(.*?)</tr>', html).group(1)
    assert "No comment from your instructor." in answer and "Your instructor:" not in html, answer
    browser.open(page.as_uri(), "document.querySelector('#checks')")
    shown = browser.js("document.body.innerText")
    assert f"Score: {total:g} / {FULL:g}" in shown and "set by your instructor" in shown
    assert "Late by 5.2 h: no points deducted under the course's late rule." in shown
    assert browser.screenshot(shots(tmp_path) / "feedback-after-override.png").stat().st_size > 50_000


def test_after_a_points_change_every_view_says_the_gradebooks_numbers(course, server, browser, autograded, tmp_path):
    """The instructor raises a check's points (and generate_assignment --force) after the override above: formgrader's
    view says the grade is out of date, its Generate Feedback button refuses in one line (no traceback), and once
    the Autograde button has graded again, the view, the feedback page and the class report say the gradebook's
    numbers, the override included. Each is looked at as a picture (KIT_SCREENSHOTS keeps them)."""
    from autograder.frontends.nbgrader.bridge import course_config
    from autograder.frontends.nbgrader.gradebook import course_standings
    from nbgrader.coursedir import CourseDirectory

    _, base = server
    folder = shots(tmp_path)
    source = course / "source" / NAME / kit.KIT.notebook_name
    notebook = nbformat.read(source, as_version=4)
    next(
        c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "check_forward_shortcuts"
    ).metadata.nbgrader["points"] = 6
    nbformat.write(notebook, source)
    Shell()("nbgrader", "generate_assignment", NAME, "--force", cwd=course)

    view = f"{base}/formgrader/submissions/{autograded['id']}"
    browser.open(view, VIEW_READY)
    text = browser.js("document.body.innerText")
    assert "Out of date" in text and "check_forward_shortcuts was graded out of 3 points, the course gives 6" in text
    browser.screenshot(folder / "formgrader-out-of-date.png")

    browser.open(f"{base}/formgrader/manage_submissions/{NAME}", f"{row(STUDENT)}?.querySelector('.generate-feedback a')")
    browser.js(f"{row(STUDENT)}.querySelector('.generate-feedback a').click()")
    wait_until(lambda: browser.js("!!document.querySelector('#success-modal, #error-modal')"), 120, "feedback")
    modal = browser.js("document.querySelector('#error-modal').innerText")
    assert "Not drawing feedback for layernorm" in modal and "Traceback" not in modal, modal
    browser.screenshot(folder / "formgrader-refuses-feedback.png")
    browser.js("document.querySelector('#error-modal button.close, #error-modal .btn-primary').click()")

    browser.open(f"{base}/formgrader/manage_submissions/{NAME}", f"{row(STUDENT)}?.querySelector('.autograde a')")
    browser.js(f"{row(STUDENT)}.querySelector('.autograde a').click()")
    wait_until(lambda: browser.js("!!document.querySelector('#success-modal, #error-modal')"), 300, "autograding")
    assert browser.js("!!document.querySelector('#success-modal')"), browser.js("document.body.innerText")
    browser.screenshot(folder / "formgrader-submissions.png")

    config = course_config(course)
    standing = course_standings(CourseDirectory(config=config, root=str(course)), config, kit.Assignment(source))[STUDENT]
    assert not standing.stale and standing.checks["forward_order"].points == 2 and standing.max_score == FULL + 3
    score = f"{standing.score:g} / {standing.max_score:g}"
    browser.open(view, VIEW_READY)
    text = browser.js("document.body.innerText")
    assert f"The grade: Score: {score}" in text and "Out of date" not in text
    browser.screenshot(folder / "formgrader-after-regrade.png")

    browser.open(f"{base}/formgrader/manage_submissions/{NAME}", f"{row(STUDENT)}?.querySelector('.generate-feedback a')")
    browser.js(f"{row(STUDENT)}.querySelector('.generate-feedback a').click()")
    wait_until(lambda: browser.js("!!document.querySelector('#success-modal, #error-modal')"), 120, "feedback")
    assert browser.js("!!document.querySelector('#success-modal')"), browser.js("document.body.innerText")
    page = course / "feedback" / STUDENT / NAME / f"{kit.KIT.notebook_id}.html"
    browser.open(page.as_uri(), "document.querySelector('#checks')")
    shown = browser.js("document.body.innerText")
    shortcuts = standing.checks["forward_shortcuts"]
    assert f"Score: {score}" in shown and "2 / 4" in shown and f"{shortcuts.points:g} / 6" in shown
    browser.screenshot(folder / "feedback-after-points-change.png")

    Shell()("python", "-m", "autograder", "class-report", "--course", ".", "--out", str(folder / "report.html"), cwd=course)
    browser.open((folder / "report.html").as_uri(), "document.querySelector('#checks')")
    report = browser.js("document.body.innerText")
    assert f"1 student; mean {standing.score:g}" in report and "2 of 4" in report  # the override, in the mean
    assert re.search(rf"{STUDENT}\s+5\.2 h\s+none\s+{standing.score:g} / {standing.max_score:g}", report), report
    browser.screenshot(folder / "report-after-points-change.png")
