"""Starting and talking to sandbox servers (see `autograder.sandbox.inside.server`) from the trusted parent.

The process children descend from never holds a student's data. The server (a zygote) imports torch and warms
up on the public kit code, then only forks: for each job the parent makes a socket pair and passes one end to
the server beside a one-line request; the server forks a supervisor for the job, hands it that end and closes
its own copy unread. The parent writes the student's cells into its end, the supervisor (which alone reads
them) runs the job's children and writes the reply back, then exits with everything of the job.

Layers of isolation, the strongest available used, and named in every result (`extra_data.isolation`):

* always: a fresh forked child per run, until done or out of CPU time (code that only waits gets
  `wall_factor` times as long in wall-clock time), killed with everything it started; limits on memory, CPU,
  file size, open files and processes; a clean environment; the grader's modules blocked from import; a
  seccomp allowlist (only the system calls grading needs, no other ABI); a new session key ring for the
  server, each job and each child, and a user namespace per child where the kernel allows one; a bound on the
  answers' total size (the kinds of kernel object and how each layer closes them: `autograder.sandbox.kinds`);
* as root: each job runs as an unprivileged user of its own, and everything it starts lives in one control
  group (one memory and process limit, one CPU clock) where the host lets the kit make one;
* bubblewrap, or namespaces as root: each child gets a root of its own with only the system, Python and the code
  the sandbox runs, its own sized /tmp, /var/tmp, /dev/shm and /run/lock, its own network, IPC and host name
  (`inside.rootfs`);
* Landlock, where the kernel has it, in every layer: reads only below the system, Python and the sandbox's own code,
  writes only in its own places (`inside.landlock`);
* permissions alone (root where the kernel refuses namespaces, as in a container): sockets and System V/POSIX
  IPC refused (seccomp); what the job's user left in places others can write, and its IPC objects, removed
  when it ends; the size of its working directory watched (`watch.DiskWatch`); Landlock keeps it to its own
  entries of the host's /proc. Without Landlock too (the grading folders closed for as long as grading runs,
  `hostperms.Lease`, and permission changes refused to the child) /proc and the world-readable files of the
  machine stay open: it refuses to grade unless asked with `unsafe=True`, and every result says so.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import asdict

from autograder.course import kit
from autograder.sandbox.isolation import UNSAFE, describe  # noqa: F401  (UNSAFE: named here for the grader)
from autograder.sandbox.inside import cleanup, jobs
from autograder.sandbox.inside.processes import kill_user
from autograder.sandbox.inside.protocol import MAX_ANSWER_BYTES, control_pair, hand_over, receive_within, send_message
from . import bubblewrap, containment, hostperms
from .policy import PERMISSIONS_ONLY, IsolationUnavailable, Limits, choose_layers

# the server's whole environment, with PATH, PYTHONPATH and PASSED_ENV
SERVER_ENV = {"LANG": "C.UTF-8", "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
# what CUDA needs from the grader's environment to find the driver and the right GPU
PASSED_ENV = ("LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES", "CUDA_MODULE_LOADING")
# Root runs each job as a user of its own: a block of JOB_UIDS uids per server, from this base plus the
# server's process id (unique among live processes), so concurrent graders never share (or kill) each other's.
SANDBOX_UID_BASE = 200_000
JOB_UIDS = 256
# AUTOGRADER_JOB_UIDS=N: the jobs of a server take turns over N uids of its block only (tests: N=1 makes every job
# of a server reuse one uid, as job 257 reuses job 1's)
REPLY_LIMIT = 2 * MAX_ANSWER_BYTES + (8 << 20)


class SandboxServer:
    """One warmed server process. `grade` is thread-safe for one caller at a time (use one per worker).

    `private`: folders besides the kit's checkout and the assignment's course that submissions must not read (a
    class's submissions, the results). `bubblewrap`, `namespaces` and `landlock` ("auto"/"off") choose layers (tests
    switch them off). `warm_up`: every question run once before the first job (one server, one job: skipped).
    `checks_off`: argument checks of the seccomp allowlist left out (`syscalls.SWITCHES`), for the tests that show
    a channel they close is a real one; no front end passes it, and nothing a job sends reaches it."""

    def __init__(
        self,
        limits: Limits = Limits(),
        bubblewrap: str | None = None,
        start: bool = True,
        assignment: kit.Assignment = kit.KIT,
        private=(),
        namespaces: str | None = None,
        unsafe: bool = False,
        landlock: str | None = None,
        warm_up: bool = True,
        checks_off: tuple = (),
        alone: bool = False,
    ):
        self.limits, self.assignment, self.unsafe, self.warm_up = limits, assignment, unsafe, warm_up
        # the machine holds this one submission and nothing a submission must not see (a Gradescope container):
        # there the permissions layer without Landlock closes all there is to close
        self.alone = alone
        self.checks_off = tuple(checks_off)  # tests only: argument checks of the allowlist left out
        self.root = os.geteuid() == 0
        self.use_bubblewrap, self.namespaces, self.landlock = choose_layers(bubblewrap, namespaces, landlock, unsafe, alone)
        self.extra_private, self.keep = tuple(private), containment.keep_folders()
        self.process = self.control = self.lease = self.scratch = self.parent_thread_ends = None
        self.layers: dict = {}
        self.groups: dict = {}
        self.private: list[str] = []
        self.jobs, self.last_uid = 0, None
        self.lock = threading.Lock()
        if self.root:
            hostperms.restore_abandoned()
        if start:
            self.start()

    @property
    def isolation(self) -> str:
        return describe(self.layers, self.use_bubblewrap, self.root, self.alone)

    @property
    def uids(self) -> range | None:
        """The uids this server's jobs run as (root only)."""
        if not self.root or self.process is None:
            return None
        first = SANDBOX_UID_BASE + (self.process.pid % (1 << 22)) * JOB_UIDS
        return range(first, first + JOB_UIDS)

    @property
    def sandbox_uid(self) -> int | None:
        """The uid of the latest job (None without root)."""
        return self.last_uid

    def start(self) -> None:
        self.launch()
        self.wait_until_ready()

    def spawn(self) -> None:
        """Start the server's process: it imports torch and its own code while the caller goes on, and waits
        for `launch` to tell it what to grade. It is started from a thread of its own that lives until `close`:
        bubblewrap's --die-with-parent follows the thread that started it, and a server started again from a
        grading thread (`grade`, after a job lost its worker) died with that thread, after one job."""
        # groups where this user may make them: root, or an instructor her administrator delegated a group to
        self.groups = jobs.server_groups(f"autograder-{os.getpid()}-{id(self)}")
        command = [sys.executable, "-m", "autograder.sandbox.inside.server"]
        if self.use_bubblewrap:
            command = bubblewrap.command(self.limits.tmp_mb, self.groups) + command
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(kit.ROOT), **SERVER_ENV}
        env |= {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
        self.control, theirs = control_pair()
        try:
            self.process, self.parent_thread_ends = _started_from_own_thread(command, env, theirs, list(self.groups.values()))
        finally:
            theirs.close()

    def launch(self) -> None:
        """Tell the server (spawned now if it was not) the assignment's public code, its limits and what to hide;
        it then warms up on its own. `assignment` and the private folders may change until this is called."""
        if self.process is None:
            self.spawn()
        self.private = containment.private_folders(self.assignment, self.extra_private)
        keep = [*self.keep, *map(str, containment.child_code())]
        own_root = self.use_bubblewrap or (self.root and self.namespaces != "off")
        view = {"tmp_mb": self.limits.tmp_mb, "network": not self.use_bubblewrap} if own_root else None
        if view is None and self.scratch is None:  # the jobs' folders on the host: all removed at `close`
            self.scratch = tempfile.mkdtemp(prefix=f"layernorm-kit-{os.getpid()}-")
            os.chmod(self.scratch, 0o711)
        send_message(
            self.control,
            {
                "questions": kit.QUESTIONS,
                "kit_code": self.assignment.public_code(),
                "limits": asdict(self.limits),
                "hide_root": str(kit.ROOT),
                "groups": self.groups,
                "keep": keep,
                "view": view,
                "landlock": self.landlock != "off",
                "sandbox_users": self.root,
                "user_namespace": self.namespaces != "off",
                "scratch": self.scratch,
                "warm_up": self.warm_up,
                "checks_off": list(self.checks_off),
            },
        )

    def wait_until_ready(self) -> None:
        ready = receive_within(self.control, 300)
        if not (isinstance(ready, dict) and ready.get("ready")):
            self.close()
            raise RuntimeError("the sandbox server did not start")
        self.layers = ready.get("layers") or {}
        layered = self.use_bubblewrap or self.layers.get("namespaces") or self.layers.get("landlock")
        if self.root and not (layered or self.unsafe or self.alone):
            self.close()  # what the machine said it could do, the server could not
            raise IsolationUnavailable(PERMISSIONS_ONLY)
        if self.root and not self.use_bubblewrap and not self.layers.get("namespaces") and self.lease is None:
            self.lease = hostperms.Lease(containment.lock_plan(self.private, self.keep, lock=not self.layers.get("landlock")))
            if self.lease.changed:
                print(
                    f"sandbox: no namespaces here; changed the permissions of {len(self.lease.changed)} paths "
                    "for as long as grading runs",
                    file=sys.stderr,
                )

    def grade(self, cells: list, plan: dict, probes: list) -> dict:
        """Observations of the student's cells under `plan`; never raises for anything the student did. A
        worker that stops answering, and any cleanup problem, is the grader's failure and says so. A server
        found dead before the job could start (an earlier job may have killed it) is started again first."""
        with self.lock:
            for attempt in (1, 2):
                self.jobs += 1
                turns = min(JOB_UIDS, max(1, int(os.environ.get("AUTOGRADER_JOB_UIDS") or JOB_UIDS)))
                uid = self.uids[self.jobs % turns] if self.uids else None
                self.last_uid = uid
                spawned, reply = self._run_job(self.jobs, uid, {"cells": cells, "plan": plan, "probes": probes})
                answered = isinstance(reply, dict) and ("observations" in reply or reply.get("grader_error"))
                problems = self._after_job(uid, answered)
                if answered:
                    reported = reply.get("cleanup") if isinstance(reply.get("cleanup"), list) else []
                    reply["cleanup"] = [str(p)[:300] for p in reported[:10]] + problems
                    return reply
                self.close()
                self.start()
                if spawned:  # a job that started and then lost its worker is not run twice
                    break
            lost = {"observations": {}, "loaded": None, "runs": ["worker lost"], "output": "", "seconds": 0.0}
            return lost | {"grader_error": "the grading worker stopped responding", "cleanup": problems}

    def _run_job(self, number: int, uid: int | None, job: dict) -> tuple[bool, object]:
        return hand_over(self.control, {"job": number, "uid": uid}, job, self.limits.wall_s + 60, REPLY_LIMIT)

    def _after_job(self, uid: int | None, answered: bool) -> list[str]:
        """Make sure nothing of the job is left (see `inside.cleanup.after_job`). A supervisor that answered
        has killed everything of the job's user already; one that did not, may not have."""
        namespaced = self.use_bubblewrap or bool(self.layers.get("namespaces"))
        if uid is None:
            return []
        return cleanup.after_job(uid, namespaced, bool(self.layers.get("landlock")), processes=not answered)

    def close(self) -> None:
        """End the server and everything any submission started, wherever it went (new sessions included),
        and give back any permission change."""
        uids = self.uids
        if self.process and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except OSError:
                self.process.kill()
            self.process.wait()
        if self.parent_thread_ends is not None:
            self.parent_thread_ends.set()
            self.parent_thread_ends = None
        if self.control is not None:
            self.control.close()
        for folder in self.groups.values():
            jobs.kill_group(folder)
        if uids is not None:
            kill_user(-1, uids)
        if self.lease is not None:
            self.lease.release()
            self.lease = None
        if self.scratch is not None:
            for problem in cleanup.remove_tree(self.scratch):
                print(f"sandbox: {problem}", file=sys.stderr)
            self.scratch = None
        self.process = self.control = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _started_from_own_thread(command: list, env: dict, stdin, groups: list) -> tuple[subprocess.Popen, threading.Event]:
    """The server's process, started from a thread that lives until the event is set (see `SandboxServer.spawn`)."""
    started, ended = queue.Queue(maxsize=1), threading.Event()

    def parent() -> None:
        try:
            started.put(
                subprocess.Popen(
                    command,
                    stdin=stdin.fileno(),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    env=env,
                    cwd="/",
                    start_new_session=True,
                    preexec_fn=(lambda: jobs.join_groups(groups)) if groups else None,
                )
            )
        except BaseException as error:  # handed to the caller
            started.put(error)
            return
        ended.wait()

    threading.Thread(target=parent, name="sandbox-server-parent", daemon=True).start()
    process = started.get()
    if isinstance(process, BaseException):
        raise process
    return process, ended
