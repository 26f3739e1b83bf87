"""Starting and talking to sandbox servers (see `autograder.harness.server`) from the trusted parent.

Layers of isolation, the strongest available used, and named in every result (`extra_data.isolation`):

* always: a fresh forked child per submission, run until done or out of CPU time (code that only waits gets
  `wall_factor` times as long in wall-clock time), then killed with everything it started; limits on memory,
  CPU, file size, open files and processes; a private working directory; a clean environment; the grader's
  own modules blocked from import;
* as root: the child runs as an unprivileged user of its own (one per server), and everything it starts lives
  in one control group (one memory and process limit, one CPU clock) where the host lets the kit make one;
* bubblewrap, when it works: the server runs in a new root holding only the system, Python, the virtual
  environment and the harness, with no network and its own process, IPC and host-name namespaces;
* without bubblewrap, as root: each child gets namespaces of its own (mount, network, IPC, host name): the
  grading files are covered, /tmp, /var/tmp and /dev/shm are small and private, /proc shows only its own
  processes, and there is no network;
* where the kernel refuses namespaces too (a container, say), the grading files lose every permission the
  world had (`containment.lock_down`), sockets other than Unix ones are refused by a seccomp filter, and what
  the child leaves in /tmp is deleted when it ends.

A non-root grader without bubblewrap could keep none of these promises: it refuses to grade, unless asked
with `unsafe=True`, and then every result says so.
"""
from __future__ import annotations

import functools
import glob
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from . import containment, kit
from .harness import jobs
from .harness.processes import processes
from .harness.protocol import FrameReader, ProtocolError, frame

# what CUDA needs from the grader's environment to find the driver and the right GPU
PASSED_ENV = ("LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES",
              "CUDA_MODULE_LOADING")

# Root runs each server's children as a user of their own: this base plus the server's process id, unique
# among live processes, so concurrent grading runs on one machine never share (or kill) each other's users.
SANDBOX_UID_BASE = 200_000
UNSAFE = "UNSAFE: not isolated (no bubblewrap, not root): the submission could read the grading files"


class IsolationUnavailable(Exception):
    """Neither bubblewrap nor root: the kit cannot keep a submission away from the grading files."""


@dataclass(frozen=True)
class Limits:
    load_s: float = 20.0        # CPU seconds to execute the submission's cells
    probe_s: float = 10.0       # CPU seconds for any one check's run of the student's code
    job_s: float = 60.0         # CPU seconds for everything of one submission
    wall_factor: float = 5.0    # code that waits instead of computing gets this many times as long, in wall time
    memory_mb: int = 2048       # for everything the submission starts together (per process where no cgroup)
    processes: int = 64
    file_mb: int = 16
    tmp_mb: int = 64            # the private /tmp, /var/tmp and /dev/shm, each
    output_kb: int = 64         # printed output kept (the rest is read and dropped)
    max_runs: int = 20          # fresh children after crashes

    @property
    def wall_s(self) -> float:
        """The longest one submission can take, whatever it does."""
        return self.job_s * self.wall_factor


@functools.lru_cache(maxsize=None)
def bubblewrap_works() -> bool:
    binary = shutil.which("bwrap")
    if not binary:
        return False
    try:
        probe = subprocess.run([binary, "--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "--die-with-parent",
                                "true"], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def isolation_available() -> bool:
    """Can submissions be kept from the grading files here: bubblewrap works (for any user), or the grader is root?"""
    return os.geteuid() == 0 or bubblewrap_works()


def _bubblewrap_command(limits: Limits, groups: dict) -> list[str]:
    """A new root holding only the system, Python, the virtual environment and the harness package."""
    command = ["bwrap", "--die-with-parent", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-pid",
               "--dev", "/dev", "--proc", "/proc", "--size", str(limits.tmp_mb * 2**20), "--tmpfs", "/tmp",
               "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64"):
        path = Path("/") / name
        if path.is_symlink():
            command += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            command += ["--ro-bind", str(path), str(path)]
    devices = sorted(glob.glob("/dev/nvidia*"))     # nvidiactl, nvidia0..., nvidia-uvm(-tools), nvidia-caps/
    for device in devices:
        command += ["--dev-bind", device, device]
    if devices:     # CUDA reads the PCI topology under /sys; some images keep the driver in /usr/local/nvidia
        command += ["--ro-bind-try", "/sys", "/sys", "--ro-bind-try", "/usr/local/nvidia", "/usr/local/nvidia"]
    for folder in groups.values():                  # the server makes its children's job groups in these
        command += ["--bind", folder, folder]
    keep = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), Path(sys.executable).resolve().parent,
            kit.ROOT / "autograder" / "__init__.py", kit.ROOT / "autograder" / "harness"}
    made = set()
    for path in sorted(keep):
        if not any(parent in keep for parent in path.parents) and not str(path).startswith(("/usr/", "/etc/")):
            # bubblewrap would make the missing folders above a mount private to root (0700), and the
            # sandbox user could then not reach Python's own modules: make them plain, readable folders
            for parent in reversed(path.parents[:-1]):
                if parent not in made:
                    command += ["--perms", "0755", "--dir", str(parent)]
                    made.add(parent)
            command += ["--ro-bind", str(path), str(path)]
    return command


class SandboxServer:
    """One warmed server process. `grade` is thread-safe for one caller at a time (use one per worker).

    `private`: folders besides the kit's checkout and the assignment's course that submissions must not read
    (a class's submissions, the results). `bubblewrap` and `namespaces` ("auto" or "off") choose layers;
    tests switch them off to check what holds without them."""

    def __init__(self, limits: Limits = Limits(), bubblewrap: str = "auto", start: bool = True,
                 assignment: kit.Assignment = kit.KIT, private=(), namespaces: str | None = None,
                 unsafe: bool = False):
        self.limits, self.assignment, self.unsafe = limits, assignment, unsafe
        self.root = os.geteuid() == 0
        self.use_bubblewrap = bubblewrap == "on" or (bubblewrap == "auto" and bubblewrap_works())
        if not (self.use_bubblewrap or self.root or unsafe):
            raise IsolationUnavailable(
                "refusing to grade: bubblewrap does not work here and the grader is not root, so a submission could "
                "read the solution and other students' files. Install bubblewrap (Debian: apt-get install "
                "bubblewrap), or grade as root, or pass --unsafe to grade anyway (every result will say so).")
        self.extra_private = tuple(private)
        self.keep = containment.keep_folders()
        # AUTOGRADER_NAMESPACES=off behaves like a container that refuses namespaces (for tests of that layer)
        self.namespaces = namespaces or os.environ.get("AUTOGRADER_NAMESPACES", "auto")
        self.sandbox_uid = None      # set when spawned
        self.process = None
        self.layers: dict = {}
        self.groups: dict = {}
        self.private: list[str] = []
        self.locked: list[str] = []
        self.lock = threading.Lock()
        if start:
            self.start()

    @property
    def isolation(self) -> str:
        if not (self.use_bubblewrap or self.root):
            return UNSAFE
        layers = ["fresh child process per submission", "CPU-time, memory, process and output limits",
                  "private working directory"]
        if self.sandbox_uid is not None:
            layers.append("unprivileged sandbox user")
        if self.layers.get("cgroups"):
            layers.append("one control group per submission")
        if self.use_bubblewrap:
            layers.append("bubblewrap: only Python and the harness visible, no network, own process namespace")
        elif self.layers.get("namespaces"):
            layers.append("namespaces: grading files covered, private /tmp, own /proc view, no network")
        else:
            layers.append("grading files closed to other users by permissions")
            layers.append("sockets refused (seccomp)" if self.layers.get("no_sockets") else "NETWORK OPEN")
        return "; ".join(layers)

    def start(self) -> None:
        self.launch()
        self.wait_until_ready()

    def spawn(self) -> None:
        """Start the server's process: it imports torch and the harness while the caller goes on, and waits
        for `launch` to tell it what to grade. Call from a long-lived thread: bubblewrap's --die-with-parent
        follows the thread."""
        self.groups = jobs.server_groups(f"autograder-{os.getpid()}-{id(self)}") if self.root else {}
        command = [sys.executable, "-m", "autograder.harness.server"]
        if self.use_bubblewrap:
            command = _bubblewrap_command(self.limits, self.groups) + command
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "MPLBACKEND": "Agg",
               "OMP_NUM_THREADS": "1", "PYTHONPATH": str(kit.ROOT), "PYTHONDONTWRITEBYTECODE": "1",
               **{name: os.environ[name] for name in PASSED_ENV if name in os.environ}}
        groups = list(self.groups.values())
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, env=env, cwd="/", start_new_session=True,
                                        preexec_fn=(lambda: _join(groups)) if groups else None)
        self.sandbox_uid = SANDBOX_UID_BASE + self.process.pid if self.root else None

    def launch(self) -> None:
        """Tell the server (spawned now if it was not) the assignment's public code, its limits and what to hide;
        it then warms up on its own. `assignment` and the private folders may change until this is called."""
        if self.process is None:
            self.spawn()
        self.private = containment.private_folders(self.assignment, self.extra_private)
        view = None
        if self.root and not self.use_bubblewrap and self.namespaces != "off":
            view = {"hide": self.private, "keep": self.keep, "tmp_mb": self.limits.tmp_mb}
        self._send({"kit_code": self.assignment.public_code(), "limits": {**asdict(self.limits)},
                    "sandbox_uid": self.sandbox_uid, "hide_root": str(kit.ROOT), "groups": self.groups,
                    "view": view, "network": self.use_bubblewrap})

    def wait_until_ready(self) -> None:
        ready = self._receive(timeout=300)
        if not (isinstance(ready, dict) and ready.get("ready")):
            self.close()
            raise RuntimeError("the sandbox server did not start")
        self.layers = ready.get("layers") or {}
        if self.root and not self.use_bubblewrap and not self.layers.get("namespaces"):
            self.locked = containment.lock_down(self.private, self.keep)
            if self.locked:
                print(f"sandbox: no bubblewrap and no namespaces here; took the world's permissions off "
                      f"{len(self.locked)} grading folders and files", file=sys.stderr)

    def _send(self, obj) -> None:
        self.process.stdin.write(frame(obj))
        self.process.stdin.flush()

    def _receive(self, timeout: float):
        fd, reader, deadline = self.process.stdout.fileno(), FrameReader(limit=256_000_000), time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                return None
            data = os.read(fd, 1 << 20)
            if not data:
                return None
            frames = reader.feed(data)
            if frames:
                return frames[0]

    def grade(self, cells: list, plan: dict, probes: list) -> dict:
        """Observations of the student's cells under `plan`; never raises for anything the student did."""
        with self.lock:
            try:
                self._send({"cells": cells, "plan": plan, "probes": probes})
                reply = self._receive(timeout=self.limits.wall_s + 60)
            except (OSError, ProtocolError, ValueError, RecursionError):
                reply = None
            if isinstance(reply, dict) and "observations" in reply:
                return reply
            self.close()
            self.start()
            failure = {"ok": False, "error": {"type": "Crashed", "message": "the grading worker stopped responding"}}
            return {"observations": {p: failure for p in probes}, "loaded": None, "runs": ["worker lost"],
                    "output": "", "seconds": 0.0}

    def close(self) -> None:
        """End the server and everything any submission started, wherever it went (new sessions included)."""
        if self.process and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except OSError:
                self.process.kill()
            self.process.wait()
        if self.process:
            for pipe in (self.process.stdin, self.process.stdout):
                try:
                    pipe.close()
                except OSError:
                    pass
        for folder in self.groups.values():
            jobs.kill_group(folder)
        if self.sandbox_uid is not None:
            for _ in range(100):
                alive = [pid for pid, _, _, uid in processes() if uid == self.sandbox_uid]
                for pid in alive:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                if not alive:
                    break
                time.sleep(0.01)
        self.process = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _join(folders: list[str]) -> None:
    """In the server's process, before it runs: into the groups its children's job groups will live in."""
    for folder in folders:
        try:
            Path(folder, "cgroup.procs").write_text(str(os.getpid()))
        except OSError:
            pass
