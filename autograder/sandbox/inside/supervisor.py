"""One job's supervisor: forked by the pristine server for one job of a submission (its first questions, or a
group the parent asks later: `grading/asking.py`), it is the only process besides the
job's own children that ever holds the submission's code and answers, and it ends with the job.

It reads the job (the student's cells, the plan, the probes) from the job's own channel, which the parent
passed to the server as a descriptor the server never read from. It forks a fresh, confined child for every
run (after a crash or a time-out the next child goes on where the last stopped), follows each child
(`watch.Run`; without a file system of its own, the size of its working directory too: `watch.DiskWatch`), kills
it and everything it started when its time is up, removes what it wrote, and writes one reply on the channel.
Cleanup problems are the grader's, reported in the reply as such.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import tempfile
import time
from dataclasses import dataclass

from . import cleanup, fresh
from .child import start_child
from .jobs import Job
from .processes import cpu_seconds_below, exit_watch, has_exited, kill_everything_from
from .protocol import ProtocolError, frame, read_frame
from .watch import SKIPPED, DiskWatch, Run, blamed_cell, failure

PR_SET_CHILD_SUBREAPER, PR_SET_DUMPABLE = 36, 4
CUDA_FAILED = 71  # the child's exit status when CUDA could not start: the grader's fault, not the student's
CONFINE_FAILED = 72  # ... when the child could not be confined: the grader's fault too
WHY, WHY_LIMIT = "sandbox set-up failed: ", 300  # how such a child begins its line saying why (`say_why`)


@dataclass(frozen=True)
class Setup:
    """What the server worked out once, before any job: the public kit, the limits and the layers that work."""

    questions: object  # the module a child runs its job with (see server.py)
    kit: dict
    limits: dict
    hide_root: str | None
    groups: dict
    keep: tuple  # what a child must read besides the system: Python, its packages
    view: dict | None  # a private root per child (namespaces, or inside bubblewrap), or None
    scratch: str | None  # without one: the folder the jobs' working directories go in (the parent's)
    landlock: int  # the Landlock ABI the children restrict themselves with (0: none)
    grants: tuple | None  # what the seccomp allowlist grants besides its own calls (see syscalls.GRANTS)
    programs: dict  # the seccomp program per device ("cpu", "cuda"); empty where seccomp does not work
    user_namespace: bool  # each child makes a user namespace of its own
    nproc_base: int  # threads the grader's own user runs already (no sandbox user: RLIMIT_NPROC counts them)
    checks_off: tuple = ()  # argument checks the seccomp filter leaves out (tests only: `syscalls.SWITCHES`)


class Supervisor:
    def __init__(self, setup: Setup, uid: int | None, number: int):
        self.setup, self.limits, self.uid, self.number, self.runs = setup, setup.limits, uid, number, 0

    def serve(self, channel: int) -> None:
        """Read the job, run it, reply, clean up. Called in the freshly forked supervisor; never returns."""
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # its memory (this student's) is no child's to read
        try:
            fresh.new_session_keyring()  # the job's own key ring, shared with no other job
        except OSError:
            pass
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        with os.fdopen(channel, "rb") as stream:
            try:
                job = read_frame(stream)
            except (ProtocolError, ValueError):
                job = None
            reply = self.grade(job) if isinstance(job, dict) else {"grader_error": "the job did not arrive whole"}
            view = memoryview(frame(reply))
            while view:
                view = view[os.write(channel, view) :]

    def grade(self, job: dict) -> dict:
        """Run all of the job's probes, in as many children as crashes and time-outs make necessary.

        A crash or time-out while a cell loads is that cell's error, like an exception: the next child loads
        the cells without it. One during a probe fails that probe; the next child goes on with the others.
        """
        limits, started = self.limits, time.monotonic()
        budget = {"cpu": 0.0, "deadline": started + limits["job_s"] * limits["wall_factor"], "problems": []}
        pending, observations, runs, output, loaded, skipped = list(job["probes"]), {}, [], bytearray(), None, []
        while pending:
            mark = len(output)
            run = self._run_child({**job, "skipped": skipped}, pending, budget, output)
            runs.append(run["cause"])
            for code, what in (
                (CUDA_FAILED, "CUDA could not be started in the sandbox (is the GPU visible to it?)"),
                (CONFINE_FAILED, "the sandbox could not confine the child (limits, user or namespaces)"),
            ):
                if run["status"] == f"exit {code}" and not run["reported"]:  # not a student's os._exit(71)
                    why = said_why(bytes(output[mark:]))
                    return {
                        "observations": {},
                        "loaded": None,
                        "runs": runs,
                        "output": "",
                        "seconds": 0.0,
                        "grader_error": what + (f": {why}" if why else ""),
                        "cleanup": budget["problems"],
                    }
            loaded = loaded or run["loaded"]
            observations.update(run["observations"])
            if run["done"]:
                break
            left = [p for p in pending if p not in run["observations"]]
            if run["cause"] == "over budget":
                observations.update({p: failure("over budget", "", 0, limits) for p in left})
                break
            out_of_time = (
                time.monotonic() >= budget["deadline"] or budget["cpu"] >= limits["job_s"] or len(runs) >= limits["max_runs"]
            )
            if run["loaded"] is None:
                cell = run["cell"]
                if out_of_time or cell is None or not 0 <= cell < len(job["cells"]) or cell in dict(skipped):
                    failed = failure(run["cause"], "while loading your code", limits["load_s"], limits)
                    observations.update({p: failed for p in left})
                    break
                error = failure(run["cause"], "in this cell", limits["load_s"], limits)["error"]
                skipped.append([cell, {**error, "message": error["message"] + "; the grader skipped this cell"}])
                continue
            victim = run["in_flight"] or (left[0] if left else None)
            if victim is None:
                break
            observations[victim] = failure(run["cause"], f"during the '{victim}' check", limits["probe_s"], limits)
            left.remove(victim)
            forward = self.setup.questions.FORWARD_PROBES
            if run["cause"] in ("timeout", "waiting") and victim in forward:
                observations.update({p: SKIPPED for p in left if p in forward})
                left = [p for p in left if p not in forward]
            if out_of_time and left:
                failed = failure("timeout", "before these checks could run", limits["job_s"], limits)
                observations.update({p: failed for p in left})
                break
            pending = left
        return {
            "observations": observations,
            "loaded": loaded,
            "runs": runs,
            "cpu_s": budget["cpu"],
            "memory_peak": budget.get("memory_peak"),
            "output": output.decode("utf-8", "replace"),
            "seconds": time.monotonic() - started,
            "cleanup": budget["problems"],
        }

    def _run_child(self, job: dict, probes: list, budget: dict, output: bytearray) -> dict:
        """One child: runs until it is done, crashes, or spends its phase's CPU time (or, for code that only
        waits, `wall_factor` times as much wall-clock time)."""
        limits = self.limits
        report_r, report_w = os.pipe()
        out_r, out_w = os.pipe()
        # with a private root the child makes its folder in its own /tmp, which vanishes with it
        scratch = self.setup.scratch if self.setup.scratch and os.path.isdir(self.setup.scratch) else None
        workdir = None if self.setup.view else tempfile.mkdtemp(prefix="submission-", dir=scratch)
        self.runs += 1
        group = (
            Job(self.setup.groups, f"job-{self.number}-{self.runs}", limits["memory_mb"] * 2**20, limits["processes"])
            if self.setup.groups
            else None
        )
        pid = os.fork()
        if pid == 0:
            start_child(self.setup, self.uid, {**job, "probes": probes}, workdir, report_w, out_w, group)
        os.close(report_w)
        os.close(out_w)
        ended = exit_watch(pid)  # the run ends when the child does, even if something it started holds its pipes
        if group is not None and group.cpu_seconds() is not None:
            clock = group.cpu_seconds
        else:  # every process of the job: the child and all below the supervisor, never less than seen before
            seen, me = [0.0], os.getpid()

            def clock() -> float:
                seen[0] = max(seen[0], cpu_seconds_below(me))
                return seen[0]

        run = Run(limits, clock, budget, output, report_r, self.setup.questions.PROBES)
        disk = DiskWatch(workdir, limits["tmp_mb"] << 20) if workdir is not None else None  # no tmpfs of its own
        cause, open_fds = None, [report_r, out_r]
        while cause is None:
            cpu, now = clock() or 0.0, time.monotonic()
            if cpu - run.phase_cpu > run.phase_limit or budget["cpu"] + cpu > limits["job_s"]:
                cause = "timeout"
                break
            if now >= min(run.phase_wall, budget["deadline"]):
                cause = "waiting"
                break
            if disk is not None and disk.over():
                cause = "disk"
                break
            watched = open_fds + ([ended] if ended is not None else [])
            wait = min(0.1, run.phase_wall - now, budget["deadline"] - now, disk.wait(now) if disk else 0.1)
            ready, _, _ = select.select(watched, [], [], max(0.0, wait if ended is not None else min(wait, 0.05)))
            for fd in ready:
                if fd != ended and not run.take(fd):
                    open_fds.remove(fd)
            if run.garbage:
                cause = "over budget" if run.over_budget else "protocol"
            elif (ended in ready) if ended is not None else has_exited(pid):
                break
        stopped = time.monotonic()
        budget["cpu"] += clock() or 0.0
        status = _wait(pid, 0)
        if group is not None:
            budget["memory_peak"] = max(budget.get("memory_peak") or 0, group.memory_peak() or 0)
            group.end()
        kill_everything_from(pid, self.uid)
        if cause is not None:  # killed: what it reports no longer counts, what it printed still shows
            open_fds = [fd for fd in open_fds if fd != report_r]
        run.drain(open_fds)  # what it wrote before it ended
        if cause is None and run.garbage:
            cause = "over budget" if run.over_budget else "protocol"
        for fd in (report_r, out_r) + ((ended,) if ended is not None else ()):
            os.close(fd)
        if workdir is not None:
            budget["problems"] += cleanup.remove_tree(workdir)
        return {
            "loaded": run.loaded,
            "observations": run.observations,
            "in_flight": run.in_flight,
            "done": run.done,
            "reported": run.reported,
            "cell": blamed_cell(run.cells, cause, stopped),
            "cause": cause or ("finished" if run.done else status),
            "status": status,
        }


def say_why(error: BaseException) -> None:
    """In a child whose set-up failed, before it loaded any student code: one line on its output saying why,
    which `said_why` reads into the grader error."""
    text = " ".join(f"{type(error).__name__}: {error}".split())
    try:
        os.write(2, f"{WHY}{text}\n".encode("utf-8", "replace"))
    except OSError:
        pass


def said_why(output: bytes) -> str | None:
    """What a child whose set-up failed said of why (its line that starts with WHY), then what it printed before,
    as one line of at most WHY_LIMIT characters; None where it wrote no such line. Only the failed child's own output is read:
    it failed before it loaded any student code, so everything there is the grader's (torch's warnings, say)."""
    text = output.decode("utf-8", "replace")
    if WHY not in text:
        return None
    said = " ".join(text[: text.rindex(WHY)].split())
    reason = " ".join(text[text.rindex(WHY) + len(WHY) :].split())
    return (f"{reason} (printed before: {said})" if said else reason)[:WHY_LIMIT]


def _wait(pid: int, deadline: float) -> str:
    while True:
        finished, status = os.waitpid(pid, os.WNOHANG)
        if finished:
            break
        if time.monotonic() >= deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "timeout"
        time.sleep(0.002)
    if os.WIFSIGNALED(status):
        return f"signal {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit {os.WEXITSTATUS(status)}"
