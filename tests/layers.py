"""The isolation layers the sandbox tests run in, and whether this machine gives each one.

`LAYERS` are the layers a grader run by this test process gives (root: bubblewrap, namespaces, permissions). `HUB` is
the layer most instructors run: **bubblewrap started by an instructor who is not root**, as on a hub. There the whole
grader runs as another user (`hub_users`, `u19-hub`), and the sandboxed child has the same uid as the zygote server
and the spare supervisor that fork every later student. `EVERY_LAYER` is all four; a test module that runs in the
hub's layer grades there through a `HubServer` (a grader of that user's, holding one sandbox server for the module,
graded through as a `SandboxServer` is) or runs the grader's commands as that user (`hub_command`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path

from autograder.sandbox.parent.policy import Limits, bubblewrap_works

LAYERS = {
    "bubblewrap": {"bubblewrap": "on"},
    "namespaces": {"bubblewrap": "off"},
    "permissions": {"bubblewrap": "off", "namespaces": "off"},
}
HUB = "hub"
EVERY_LAYER = (*LAYERS, HUB)
HUB_LOGIN = "hub"  # hub_users.user(HUB_LOGIN): u19-hub


def layer_available(layer: str) -> str | None:
    """Why this machine cannot give `layer`, or None."""
    if layer in ("bubblewrap", HUB) and not bubblewrap_works():
        return "bubblewrap is not installed or cannot start here"
    if layer == HUB and os.geteuid() != 0:
        return "grading as another user (an instructor who is not root) needs root, to create that user"
    if layer not in ("bubblewrap", HUB) and os.geteuid() != 0:
        return "the layers without bubblewrap need root (a sandbox user of its own)"
    return None


def one_layer() -> str:
    """Where a test runs that no layer changes the outcome of: bubblewrap, the default layer, where this machine has
    it, else the first layer it has (where it has none, the first of all, whose tests then skip saying why)."""
    return next((layer for layer in EVERY_LAYER if layer_available(layer) is None), EVERY_LAYER[0])


def environment(layer: str) -> dict:
    """The environment that chooses `layer` for a grading command (`grade`, `grade-class`, nbgrader)."""
    choice = LAYERS.get(layer, {"bubblewrap": "on"})
    return {"AUTOGRADER_BUBBLEWRAP": choice.get("bubblewrap", "auto"), "AUTOGRADER_NAMESPACES": choice.get("namespaces", "auto")}


_HUB_USERS: dict[str, tuple[str, Path]] = {}
_HUB_USERS_LOCK = threading.Lock()


def hub_user(name: str = HUB_LOGIN) -> tuple[str, Path]:
    """The hub's instructor (`u19-<name>`) and a Python with the kit they can run: found once per test process (the
    Python is tried by importing torch, the kit and nbgrader as that user, seconds each time), for every server and
    command of theirs after."""
    with _HUB_USERS_LOCK:
        if name not in _HUB_USERS:
            import hub_users

            login = hub_users.user(name)
            _HUB_USERS[name] = login, hub_users.python_for(login)
        return _HUB_USERS[name]


def hub_command(login: str, python, argv: list, cwd, env: dict | None = None, timeout: float = 900):
    """`python argv...` run as `login` (the hub's instructor), in `cwd`."""
    import hub_users

    return hub_users.run_as(login, [str(python), *map(str, argv)], cwd=cwd, env=env, timeout=timeout)


def user_processes(login: str) -> list[str]:
    """'pid command' of every live process of `login`: a zombie (an ended process its parent has yet to reap, whose
    command line reads empty) is no longer one."""
    import pwd

    uid, alive = pwd.getpwnam(login).pw_uid, []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if os.stat(f"/proc/{pid}").st_uid == uid and state not in ("Z", "X"):
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                alive.append(f"{pid} {command[:100]}")
        except OSError:
            pass
    return alive


SERVE = r"""
import json, os, sys
from pathlib import Path
reply = os.fdopen(os.dup(1), "w")                 # answers on the original stdout; whatever else prints, to stderr
os.dup2(2, 1)
from autograder.course import kit
from autograder.grading.submission import grade_file
from autograder.sandbox.parent.client import Limits, SandboxServer

spec = json.loads(sys.argv[1])
folder = Path(spec["folder"])


def state(server):
    process = server.process
    return {"pid": process.pid if process is not None else None, "isolation": server.isolation, "layers": server.layers,
            "bubblewrap": server.use_bubblewrap}


def made(request):
    path = folder / request["name"]
    kind = request.get("make")
    if kind == "symlink":
        path.symlink_to(kit.SOLUTIONS_DIR / kit.KIT.notebook_name)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path.symlink_to("/dev/zero")
    elif kind == "oversized":
        with open(path, "wb") as handle:
            handle.truncate(30_000_000)
    else:
        path.write_text(request["text"])
    return path


with SandboxServer(limits=Limits(**spec["limits"]), bubblewrap="on", private=spec["private"],
                   checks_off=tuple(spec["checks_off"])) as server:
    reply.write(json.dumps(state(server)) + "\n")
    reply.flush()
    for line in sys.stdin:
        request = json.loads(line)
        if "job" in request:  # the sandbox's own answer to one job (`SandboxServer.grade`), only its peak memory
            raw = server.grade(*request["job"])
            reply.write(json.dumps({"memory_peak": raw.get("memory_peak"), **state(server)}) + "\n")
            reply.flush()
            continue
        path = made(request)
        try:
            result = grade_file(path, server, seed=request["seed"])
        finally:
            path.unlink()
        reply.write(json.dumps({"result": result.to_dict(), **state(server)}, default=float) + "\n")
        reply.flush()
"""


class _Process:
    """The hub grader's sandbox server process, as the root test process sees it."""

    def __init__(self, pid: int):
        self.pid = pid

    def poll(self):
        state = _state(self.pid)
        return None if state not in (None, "Z") else 0

    def wait(self, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        return 0


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


class HubServer:
    """A sandbox server of the hub's instructor (`u19-hub`, not root, with bubblewrap), used as a `SandboxServer` is
    by the tests: the grader itself runs as that user, holding one server from start to `close`. `grade_file`
    grades a file's text there (the user cannot read the root test's folders); `process.pid` is the sandbox
    server's process id (bubblewrap's), for the tests that look at it from outside."""

    root, sandbox_uid, scratch, use_bubblewrap = False, None, None, True

    def __init__(self, limits: Limits = Limits(), private=(), checks_off=(), login: str = HUB_LOGIN, delegated=False):
        import hub_users
        from delegation import Delegated

        self.login, python = hub_user(login)
        # `delegated`: the grader starts in control groups handed to the instructor (`delegation`), as on a hub whose
        # administrator delegates them; else in none of hers, and the kit limits memory per process
        self.groups = Delegated(self.login, f"kit-hub-{os.getpid()}-{id(self)}") if delegated else None
        self.folder = Path(tempfile.mkdtemp(prefix="hub-grader-", dir=hub_users.home(self.login)))
        shutil.chown(self.folder, self.login, self.login)
        spec = {"limits": asdict(limits), "private": [str(p) for p in private], "checks_off": list(checks_off)}
        spec["folder"] = str(self.folder)
        self._grader = subprocess.Popen(
            hub_users.command_as(self.login, [python, "-c", SERVE, json.dumps(spec)]),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=self.folder,
            env=hub_users.user_env(self.login, python),
            text=True,
            start_new_session=True,
            preexec_fn=self.groups.join if self.groups else None,
        )
        try:
            self._take(self._answer())
        except BaseException:
            self.close()
            raise

    def _answer(self) -> dict:
        line = self._grader.stdout.readline()
        if not line:
            self._grader.kill()
            raise RuntimeError(f"the hub's grader ended: {self._grader.stderr.read()[-3000:]}")
        return json.loads(line)

    def _take(self, state: dict) -> None:
        self.process = _Process(state["pid"]) if state["pid"] else None
        self.isolation, self.layers = state["isolation"], state["layers"]

    def grade_file(self, path, seed: int, name: str | None = None, make: str | None = None):
        """The result of grading `path`'s text (or, with `make`, an odd file made there: see SERVE) as the hub's
        grader grades it."""
        from autograder.engine.results import SubmissionResult

        request = {"name": name or Path(path).name, "seed": seed, "make": make}
        if make is None:
            request["text"] = Path(path).read_text()
        return SubmissionResult.from_dict(self._ask(request)["result"])

    def grade(self, code: str, plan: dict, probes: list) -> dict:
        """What `SandboxServer.grade` answers for one job, as far as the tests read it here: its peak memory."""
        return {"memory_peak": self._ask({"job": [code, plan, probes]})["memory_peak"]}

    def _ask(self, request: dict) -> dict:
        """One request to the hub's grader (see SERVE) and its answer, the server's state taken from it."""
        self._grader.stdin.write(json.dumps(request) + "\n")
        self._grader.stdin.flush()
        answer = self._answer()
        self._take(answer)
        return answer

    def leftovers(self, wait: float = 5.0) -> list[str]:
        """Processes of the grader's user other than the grader, its bubblewrap, its sandbox server and the one spare
        supervisor waiting for the next job (a child of the server, with no child of its own), once the supervisor
        of the last job has had `wait` seconds to end (it replies, then exits)."""
        deadline = time.monotonic() + wait
        while True:
            left = self._leftovers()
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.1)

    def _leftovers(self) -> list[str]:
        children = _children()
        keep = {self._grader.pid}
        for pid in _descendants(self._grader.pid, children):
            command = _command(pid)
            server = SERVER in command and _command(_parent(pid)) != command  # not a supervisor it forked
            if command.startswith(b"bwrap") or server:
                keep.add(pid)
            if server:
                keep |= set([child for child in children.get(pid, []) if not children.get(child)][:1])
        return [line for line in user_processes(self.login) if int(line.split()[0]) not in keep]

    def close(self) -> None:
        if self._grader.poll() is None:
            self._grader.stdin.close()
            try:
                self._grader.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
        if self._grader.poll() is None:
            os.killpg(self._grader.pid, signal.SIGKILL)
            self._grader.wait()
        shutil.rmtree(self.folder, ignore_errors=True)
        if self.groups:
            self.groups.remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


SERVER = b"autograder.sandbox.inside.server"


def _children() -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        found.setdefault(parent, []).append(int(pid))
    return found


def _descendants(pid: int, children: dict) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _command(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def sandbox_server(layer: str, **options):
    """A sandbox server in `layer` for a test: a `SandboxServer` of this process, or the hub's `HubServer`."""
    if layer == HUB:
        allowed = {"limits", "private", "checks_off", "delegated"}
        return HubServer(**{key: value for key, value in options.items() if key in allowed})
    from autograder.sandbox.parent.client import SandboxServer

    options.pop("delegated", None)  # root's own graders make their groups where root can
    return SandboxServer(**options, **LAYERS[layer])


def grade(server, path, seed: int, **named):
    """`grade_file` on any server `sandbox_server` makes."""
    if isinstance(server, HubServer):
        return server.grade_file(path, seed=seed, **named)
    from autograder.grading.submission import grade_file

    return grade_file(path, server, seed=seed)
