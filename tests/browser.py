"""Headless Chromium driven over its DevTools protocol, and an instructor's Jupyter server started in a course,
for the tests that look at formgrader and the feedback pages as people do."""

import base64
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import websocket

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--hide-scrollbars",
    "--remote-allow-origins=*",
    "--window-size=1280,1600",
]


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
        self.process = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
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

    def click(self, expression: str) -> None:
        """A mouse click in the middle of the element (a JavaScript expression), as a person's: JupyterLab's menus
        open on the pointer's events, not on a script's click()."""
        middle = "return [r.x + r.width / 2, r.y + r.height / 2]"
        x, y = self.js(f"(() => {{ const r = ({expression}).getBoundingClientRect(); {middle}; }})()")
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def menu(self, title: str, timeout: float = 60) -> list[str]:
        """Open JupyterLab's menu `title` in its menu bar; gives the items it shows (hidden ones left out)."""
        bar = f"[...document.querySelectorAll('.lm-MenuBar-item')].find(e => e.textContent.trim() === {title!r})"
        items = "[...document.querySelectorAll('.lm-Menu .lm-Menu-item')]"
        shown = f"{items}.filter(e => e.getClientRects().length && e.textContent.trim())"

        def opened():
            if not self.js(f"{shown}.length"):
                self.js("document.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape'}))")
                self.click(bar)
                time.sleep(0.5)
            return self.js(f"{shown}.map(e => e.textContent.trim())")

        return wait_until(opened, timeout, f"the {title} menu")

    def type_into(self, selector: str, text: str) -> None:
        """Focus the field, type as a user types, then leave it (which fires its change event)."""
        self.js(f"document.querySelector({selector!r}).focus()")
        self.call("Input.insertText", text=text)
        self.js(f"document.querySelector({selector!r}).blur()")

    def screenshot(self, path: Path, around: str | None = None, height: int = 1400) -> Path:
        """The whole page; or, with `around` (a JavaScript expression for an element), `height` pixels of it from a
        little above that element (a long page's part that matters, at a size a person can read)."""
        options = {"format": "png", "captureBeyondViewport": True}
        if around:
            top, width = self.js(
                f"(() => {{ const r = ({around}).getBoundingClientRect();"
                " return [Math.max(0, r.top + window.scrollY - 80), document.documentElement.scrollWidth]; })()"
            )
            options["clip"] = {"x": 0, "y": top, "width": width, "height": height, "scale": 1}
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", **options)["data"]))
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


@contextmanager
def jupyter_server(
    course: Path, config_dir: Path, log: Path, python: str = sys.executable, user: str | None = None, env: dict | None = None
):
    """The instructor's Jupyter server, started in the course folder with the hub-wide settings in `config_dir`
    (local only: bound to 127.0.0.1 with authentication off, so the browser needs no login); yields
    (process, base url). `user`: started as that Unix user, as on a hub."""
    port = free_port()
    command = [
        python,
        "-m",
        "jupyter",
        "server",
        "--no-browser",
        f"--port={port}",
        "--ServerApp.ip=127.0.0.1",
        "--IdentityProvider.token=",
        "--ServerApp.password=",
        f"--ServerApp.root_dir={course}",
    ]
    environment = {
        **os.environ,
        **(env or {}),
        "JUPYTER_CONFIG_DIR": str(config_dir),
        "PATH": f"{Path(python).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    if user:
        import hub_users

        environment.update(USER=user, LOGNAME=user, HOME=(env or {}).get("HOME", str(hub_users.home(user))))
        command = hub_users.command_as(user, command)
    else:
        command.append("--allow-root")
    with open(log, "w") as output:
        process = subprocess.Popen(command, cwd=course, env=environment, stdout=subprocess.DEVNULL, stderr=output)
        base = f"http://127.0.0.1:{port}"

        def up():
            if process.poll() is not None:
                raise AssertionError(Path(log).read_text())
            try:
                with urllib.request.urlopen(f"{base}/api/status", timeout=2):
                    return True
            except OSError:
                return False

        try:
            wait_until(up, 120, "the Jupyter server")
            yield process, base
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def shots(default: Path) -> Path:
    """Where screenshots go: KIT_SCREENSHOTS (to look at them after a run), else `default`."""
    folder = Path(os.environ.get("KIT_SCREENSHOTS") or default)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class FormgraderClient:
    """Formgrader's own HTTP API, as its pages call it (a score or a comment typed in, a page opened), for tests
    that need formgrader's answers rather than its pixels."""

    def __init__(self, base: str):
        import http.cookiejar

        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        self.page("/formgrader/manage_assignments")  # sets the _xsrf cookie formgrader's forms send back

    def page(self, path: str) -> str:
        with self.opener.open(f"{self.base}{path}", timeout=120) as reply:
            return reply.read().decode()

    def put(self, path: str, data: dict) -> dict:
        token = next(c.value for c in self.jar if c.name == "_xsrf")
        request = urllib.request.Request(
            f"{self.base}{path}",
            data=json.dumps(data).encode(),
            method="PUT",
            headers={"X-XSRFToken": token, "Content-Type": "application/json"},
        )
        with self.opener.open(request, timeout=120) as reply:
            return json.loads(reply.read() or b"{}")
