"""Formgrader in a real browser: headless Chromium, driven over its DevTools protocol, on a Jupyter server started
in a course that holds the kit's assignment. The Autograde button grades and leaves no process behind; the
submission view shows each check's findings, the first divergent step and the gradient plot; a score typed in
formgrader changes the total; the feedback generated afterwards says the overridden points everywhere."""
import base64
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import psutil
import pytest
import websocket
from nbgrader.api import Gradebook

from autograder import kit
from autograder.rubric import RUBRIC, TOTAL_POINTS
from nbgrader_course import Shell, make_course, sample_submission

pytestmark = pytest.mark.slow

NAME = kit.KIT.name
STUDENT = "ben_post_ln"
STALE = r"(?<![\d.])0(\.0)?\s*/\s*4(\.0)?(?![\d.])"     # "0 / 4", "0.0 / 4.0": the check's autograded points
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--no-first-run", "--disable-sync", "--hide-scrollbars", "--remote-allow-origins=*", "--window-size=1280,1600"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


class Browser:
    """Just enough of the Chrome DevTools protocol: open pages, run JavaScript, type, take screenshots."""

    def __init__(self, executable: str, profile: Path):
        self.process = subprocess.Popen([executable, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
                                         "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        active = profile / "DevToolsActivePort"
        port = wait_until(lambda: active.is_file() and active.read_text().split("\n")[0], 60, "Chromium to start")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/version") as reply:
            url = json.load(reply)["webSocketDebuggerUrl"]
        self.socket = websocket.create_connection(url, timeout=120, suppress_origin=True)
        self.counter, self.session = 0, None
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]

    def call(self, method: str, **params) -> dict:
        self.counter += 1
        message = {"id": self.counter, "method": method, "params": params}
        if self.session:
            message["sessionId"] = self.session
        self.socket.send(json.dumps(message))
        while True:
            reply = json.loads(self.socket.recv())
            if reply.get("id") == self.counter:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def js(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str, ready: str = "true", timeout: float = 60) -> None:
        self.call("Page.navigate", url=url)
        time.sleep(0.5)
        wait_until(lambda: self.js(f"document.readyState === 'complete' && !!({ready})"), timeout, f"{url} to show {ready}")

    def type_into(self, selector: str, text: str) -> None:
        """Focus the field, type as a user types, then leave it (which fires its change event)."""
        self.js(f"document.querySelector({selector!r}).focus()")
        self.call("Input.insertText", text=text)
        self.js(f"document.querySelector({selector!r}).blur()")

    def screenshot(self, path: Path) -> Path:
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png",
                                                    captureBeyondViewport=True)["data"]))
        return path

    def close(self) -> None:
        try:
            self.session = None
            self.call("Browser.close")
        except Exception:
            pass
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = make_course(tmp_path_factory.mktemp("formgrader") / "course", ordinary=False)
    Shell()("nbgrader", "generate_assignment", NAME, cwd=course)
    for student in ("ada_correct", STUDENT):
        path = course / "submitted" / student / NAME / kit.KIT.notebook_name
        path.parent.mkdir(parents=True)
        nbformat.write(sample_submission(student), path)
    return course


@pytest.fixture(scope="module")
def server(course, tmp_path_factory):
    """The instructor's Jupyter server, started in the course folder, with the hub-wide settings of the README
    (local only: bound to 127.0.0.1 with authentication off, so the browser needs no login)."""
    hub = tmp_path_factory.mktemp("hub")
    (hub / "exchange").mkdir(mode=0o777)
    (hub / "nbgrader_config.py").write_text(f"c = get_config()\nc.CourseDirectory.course_id = 'dl101'\n"
                                            f"c.Exchange.root = {str(hub / 'exchange')!r}\n")
    port = free_port()
    log = open(course.parent / "server.log", "w")
    process = subprocess.Popen([sys.executable, "-m", "jupyter", "server", "--no-browser", "--allow-root",
                                f"--port={port}", "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=",
                                "--ServerApp.password=", f"--ServerApp.root_dir={course}"],
                               cwd=course, env={**os.environ, "JUPYTER_CONFIG_DIR": str(hub)},
                               stdout=subprocess.DEVNULL, stderr=log)
    base = f"http://127.0.0.1:{port}"

    def up():
        if process.poll() is not None:
            pytest.fail((course.parent / "server.log").read_text())
        try:
            with urllib.request.urlopen(f"{base}/api/status", timeout=2):
                return True
        except OSError:
            return False
    wait_until(up, 120, "the Jupyter server")
    yield process, base
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
    log.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    executable = shutil.which("chromium")
    if executable is None:
        pytest.skip("chromium is not installed")
    browser = Browser(executable, tmp_path_factory.mktemp("chromium-profile"))
    yield browser
    browser.close()


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


def test_submission_view_shows_each_check_the_first_divergent_step_and_the_plot(course, server, browser, autograded,
                                                                             tmp_path):
    _, base = server
    browser.open(f"{base}/formgrader/submissions/{autograded['id']}",
                 "document.querySelector('input.score#check_forward_order')")
    text = browser.js("document.body.innerText")
    for title in ("Operation order (Pre-LN)", "Both shortcut additions", "Task 2: gradient compounding"):
        assert title in text
    assert re.search(r"Step 2 of 10 \(normalize with norm1\)", text) and "Post-LN" in text
    assert browser.js("[...document.images].some(i => i.src.startsWith('data:image/png') && i.naturalWidth > 400)")
    shown = browser.js("Object.fromEntries([...document.querySelectorAll('input.score')].map(i => [i.id, i.placeholder]))")
    with gradebook(course) as book:
        notebook = book.find_submission_notebook(kit.KIT.notebook_id, NAME, STUDENT)
        stored = {g.name: g.auto_score for g in notebook.grades}
    checks = {name: float(points) for name, points in shown.items() if name.startswith("check_")}
    assert set(checks) == {f"check_{name}" for name in RUBRIC}
    assert checks == {name: stored[name] for name in checks}      # each check's autograded points, per check
    assert browser.screenshot(tmp_path / "formgrader-submission.png").stat().st_size > 50_000


def test_a_manual_override_changes_the_total_and_the_regenerated_feedback(course, server, browser, autograded,
                                                                          tmp_path):
    process, base = server
    browser.open(f"{base}/formgrader/submissions/{autograded['id']}",
                 "document.querySelector('input.score#check_forward_order')")
    browser.type_into("input.score#check_forward_order", "2")

    def overridden():
        with gradebook(course) as book:
            grade = book.find_grade("check_forward_order", kit.KIT.notebook_id, NAME, STUDENT)
            return grade.manual_score == 2 and book.find_submission(NAME, STUDENT).score
    total = wait_until(overridden, 30, "the manual score to be saved")
    assert total == autograded["score"] + 2          # the check gave 0 of 4; the instructor gives 2

    browser.open(f"{base}/formgrader/manage_submissions/{NAME}",
                 f"{row(STUDENT)}?.querySelector('.score')?.textContent.includes('/')")
    assert browser.js(f"{row(STUDENT)}.querySelector('.score').textContent").replace(" ", "") == f"{total:g}/{autograded['max']:g}"
    browser.js(f"{row(STUDENT)}.querySelector('.generate-feedback a').click()")
    wait_until(lambda: browser.js("!!document.querySelector('#success-modal, #error-modal')"), 120, "feedback")
    assert browser.js("!!document.querySelector('#success-modal')"), browser.js("document.body.innerText")
    assert leftovers(process) == []

    page = course / "feedback" / STUDENT / NAME / f"{kit.KIT.notebook_id}.html"
    html = page.read_text()
    maximum = f"{autograded['max']:.1f}"
    assert f"(Score: {total:.1f} / {maximum})" in html and f"(Score: {autograded['score']:.1f} / {maximum})" not in html
    summary = re.search(r'href="#check_forward_order">Operation order \(Pre-LN\)</a> \(Score: ([\d.]+) / 4\.0\)', html)
    assert summary and summary.group(1) == "2.0"
    cell = html.split('name="check_forward_order"', 1)[1].split('name="check_', 1)[0]
    assert "Score: 2.0 / 4.0" in cell and "Operation order (Pre-LN)" in cell
    assert not re.search(STALE, cell), "the overridden check's cell still says the autograder's points"
    browser.open(page.as_uri(), "document.querySelector('#toc')")
    shown = browser.js("document.body.innerText")
    assert f"Score: {total:.1f} / {maximum}" in shown and "Operation order (Pre-LN) (Score: 2.0 / 4.0)" in shown
    assert browser.screenshot(tmp_path / "feedback-after-override.png").stat().st_size > 50_000
