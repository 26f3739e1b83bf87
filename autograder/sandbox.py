"""Starting and talking to sandbox servers (see `autograder.harness.server`) from the trusted parent.

Layers of isolation, strongest available used, and named in every result:
* always: a fresh forked child per submission, killed by the server at its time limit with everything it
  started; limits on memory, CPU, file size, open files and processes; a private empty working directory;
  a clean environment; the grader's own modules blocked from import;
* when running as root: the child switches to an unprivileged user of its own (one per server), so the
  process limit holds and nothing the grader owns can be written;
* when bubblewrap works: the server runs inside it, without network, in a new root that holds only the
  system, Python, the virtual environment and the harness package: no grading files, no other submissions.
"""
from __future__ import annotations

import functools
import glob
import os
import select
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from . import kit
from .harness.protocol import FrameReader, ProtocolError, frame

# what CUDA needs from the grader's environment to find the driver and the right GPU
PASSED_ENV = ("LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES",
              "CUDA_MODULE_LOADING")

# Root runs each server's children as a user of their own: this base plus the server's process id, unique
# among live processes, so concurrent grading runs on one machine never share (or kill) each other's users.
SANDBOX_UID_BASE = 200_000


@dataclass(frozen=True)
class Limits:
    load_s: float = 20.0        # executing the submission's cells
    probe_s: float = 10.0       # any one check's run of the student's code
    job_s: float = 60.0         # everything for one submission
    memory_mb: int = 2048       # on top of what the warmed server already maps
    processes: int = 64
    file_mb: int = 16
    output_kb: int = 64         # printed output kept (the rest is read and dropped)
    max_runs: int = 20          # fresh children after crashes


@functools.lru_cache(maxsize=None)
def bubblewrap_works() -> bool:
    binary = shutil.which("bwrap")
    if not binary:
        return False
    try:
        probe = subprocess.run([binary, "--ro-bind", "/", "/", "--unshare-net", "--die-with-parent", "true"],
                               capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def _bubblewrap_command() -> list[str]:
    """A new root holding only the system, Python, the virtual environment and the harness package."""
    command = ["bwrap", "--die-with-parent", "--unshare-net", "--unshare-ipc", "--unshare-uts",
               "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
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
    """One warmed server process. `grade` is thread-safe for one caller at a time (use one per worker)."""

    def __init__(self, limits: Limits = Limits(), bubblewrap: str = "auto", start: bool = True,
                 assignment: kit.Assignment = kit.KIT):
        self.limits, self.assignment = limits, assignment
        self.use_bubblewrap = bubblewrap == "on" or (bubblewrap == "auto" and bubblewrap_works())
        self.sandbox_uid = None      # set when launched
        self.process = None
        self.lock = threading.Lock()
        if start:
            self.start()

    @property
    def isolation(self) -> str:
        layers = ["fresh child process per submission", "time/memory/process/output limits", "private working directory"]
        if self.sandbox_uid is not None:
            layers.append("unprivileged sandbox user")
        layers.append("bubblewrap: no network, only the harness and Python visible" if self.use_bubblewrap
                      else "no bubblewrap: grading files readable if their path is known")
        return "; ".join(layers)

    def start(self) -> None:
        self.launch()
        self.wait_until_ready()

    def launch(self) -> None:
        """Start the process. Call from a long-lived thread: bubblewrap's --die-with-parent follows the thread."""
        command = [sys.executable, "-m", "autograder.harness.server"]
        if self.use_bubblewrap:
            command = _bubblewrap_command() + command
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "MPLBACKEND": "Agg",
               "OMP_NUM_THREADS": "1", "PYTHONPATH": str(kit.ROOT), "PYTHONDONTWRITEBYTECODE": "1",
               **{name: os.environ[name] for name in PASSED_ENV if name in os.environ}}
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, env=env, cwd="/", start_new_session=True)
        self.sandbox_uid = SANDBOX_UID_BASE + self.process.pid if os.geteuid() == 0 else None
        self._send({"kit_code": self.assignment.public_code(), "limits": asdict(self.limits),
                    "sandbox_uid": self.sandbox_uid, "hide_root": str(kit.ROOT)})

    def wait_until_ready(self) -> None:
        ready = self._receive(timeout=300)
        if not (isinstance(ready, dict) and ready.get("ready")):
            self.close()
            raise RuntimeError("the sandbox server did not start")

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
                reply = self._receive(timeout=self.limits.job_s + 60)
            except (OSError, ProtocolError, ValueError):
                reply = None
            if isinstance(reply, dict) and "observations" in reply:
                return reply
            self.close()
            self.start()
            failure = {"ok": False, "error": {"type": "Crashed", "message": "the grading worker stopped responding"}}
            return {"observations": {p: failure for p in probes}, "loaded": None, "runs": ["worker lost"],
                    "output": "", "seconds": 0.0}

    @classmethod
    def start_many(cls, count: int, **options) -> list["SandboxServer"]:
        """`count` servers warming up side by side (launched from this thread, so they live as long as it)."""
        servers = [cls(start=False, **options) for _ in range(count)]
        for server in servers:
            server.launch()
        for server in servers:
            server.wait_until_ready()
        return servers

    def close(self) -> None:
        if self.process and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, 9)
            except OSError:
                self.process.kill()
            self.process.wait()
        self.process = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
