"""The sandbox server: imports torch once, then forks a fresh, limited child for every submission.

Started by the parent (`autograder.sandbox`) as `python -m autograder.harness.server`, possibly inside
bubblewrap. It speaks length-prefixed JSON frames on stdin/stdout:

  parent -> server   {"kit_code", "limits", "sandbox_uid", "hide_root"}   once, then one job per request
  server -> parent   {"ready", ...}                                       once, then one reply per job

The server never runs student code itself and holds nothing secret: the kit code it gets is what students
receive. Each child is killed by the server when it runs past its time, together with everything it started.
"""
from __future__ import annotations

import ctypes
import gc
import importlib
import os
import select
import shutil
import signal
import sys
import tempfile
import time

import torch

from .child import load_cells, run_job
from .confine import PRIVATE_TMP, confine, private_view, refuse_sockets, start_cuda
from .jobs import Job
from .processes import cpu_seconds, exit_watch, has_exited, kill_everything_from, remove_files_of, task_count
from .probes import FORWARD_PROBES, PROBES, Plan, Probing, run_probe
from .protocol import FrameReader, ProtocolError, frame, read_frame

# Imported once by the server so that children need not: what graded cells commonly import (not matplotlib:
# the notebook's figures are in experiment cells, which graders skip; a child that needs it imports it).
PRELOAD = ("math", "random", "itertools", "functools", "collections", "typing", "dataclasses", "copy", "time",
           "json", "re", "statistics", "fractions", "decimal", "operator", "string", "textwrap", "warnings",
           "numpy", "torch.nn.functional")
PR_SET_CHILD_SUBREAPER = 36
CUDA_FAILED = 71          # the child's exit status when CUDA could not start: the grader's fault, not the student's
CONFINE_FAILED = 72       # ... when the child could not be confined: the grader's fault too
MAX_DEPTH = 12            # nesting of one observation (the answers need 6)
MAX_ITEMS = 200_000       # values in one observation


def _warm_up(kit: dict) -> None:
    """Run every probe once on a public arrangement, so lazy loading happens here, once, not in every child."""

    class WarmUpBlock(kit["TransformerBlock"]):
        def forward(self, x):
            return self.drop_shortcut(self.ff(self.norm2(self.drop_shortcut(self.att(self.norm1(x))))))

    names = {"TransformerBlock": WarmUpBlock, "magnitude_by_formula": lambda f, n: [f] * n,
             "magnitude_by_autograd": lambda f, n: [f] * n, "classify_factor": lambda f: "stable"}
    probing = Probing(names, kit, Plan.draw(0), sources=[])
    for name in PROBES:
        run_probe(name, probing)


class Server:
    def __init__(self, init: dict):
        self.limits = init["limits"]
        self.sandbox_uid = init.get("sandbox_uid")
        self.hide_root = init.get("hide_root")
        self.groups = init.get("groups") or {}
        self.jobs = 0
        self.kit, errors = load_cells([(f"kit {label}", code) for label, code in init["kit_code"]])
        if errors:
            raise RuntimeError(f"the kit's own code failed to load: {errors[0]}")
        for name in PRELOAD:
            try:
                importlib.import_module(name)
            except ImportError:
                pass
        torch.set_num_threads(1)
        _warm_up(self.kit)
        gc.collect()
        gc.freeze()      # what the server holds stays put: a child's garbage collector never touches (and so
        #                  never copies) those pages, which makes each fork's copy-on-write far cheaper
        libc = ctypes.CDLL(None, use_errno=True)
        self.subreaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
        self.nproc_base = task_count(os.getuid()) if self.sandbox_uid is None else 0
        self.view = init.get("view") if init.get("view") and _works(lambda: private_view(**init["view"])) else None
        self.sockets = self.view is not None or init.get("network") or not _works(refuse_sockets)

    @property
    def layers(self) -> dict:
        """What this server could actually set up, for the parent to name (and to refuse to grade without)."""
        return {"namespaces": self.view is not None, "no_sockets": not self.sockets,
                "cgroups": sorted(self.groups), "subreaper": self.subreaper}

    def _child(self, job: dict, probes: list, workdir: str, report_w: int, out_w: int, group: Job | None) -> None:
        try:
            os.dup2(report_w, 200)
            os.dup2(out_w, 201)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(201, 1)
            os.dup2(201, 2)
            os.dup2(200, 3)
            os.closerange(4, 1 << 16)
            if (job.get("plan") or {}).get("device") == "cuda":
                try:
                    start_cuda(self.limits)
                except BaseException:
                    os._exit(CUDA_FAILED)
            try:
                if group is not None:
                    group.join()
                confine(workdir, self.limits, self.sandbox_uid, self.nproc_base, self.hide_root, self.view,
                        self.sockets)
            except BaseException:
                os._exit(CONFINE_FAILED)
            run_job(self.kit, {**job, "probes": probes}, 3)
            sys.stdout.flush()
            os._exit(0)
        except BaseException:
            os._exit(70)

    # --- in the server -------------------------------------------------------------------------------
    def _run_child(self, job: dict, probes: list, budget: dict, output: bytearray) -> dict:
        """One child: runs until it is done, crashes, or spends its phase's CPU time (or, for code that only
        waits, `wall_factor` times as much wall-clock time). `budget` carries the job's CPU time used and its
        wall-clock deadline across children."""
        report_r, report_w = os.pipe()
        out_r, out_w = os.pipe()
        workdir = tempfile.mkdtemp(prefix="submission-")
        self.jobs += 1
        group = Job(self.groups, f"job-{self.jobs}", self.limits["memory_mb"] * 2**20,
                    self.limits["processes"]) if self.groups else None
        pid = os.fork()
        if pid == 0:
            self._child(job, probes, workdir, report_w, out_w, group)
        os.close(report_w)
        os.close(out_w)
        ended = exit_watch(pid)   # the run ends when the child does, even if something it started holds its pipes
        reader = FrameReader()
        clock = (lambda: group.cpu_seconds()) if group is not None and group.cpu_seconds() is not None else \
            (lambda: cpu_seconds(pid))
        state = {"loaded": None, "observations": {}, "in_flight": None, "cells": [], "done": False,
                 "reported": False, "garbage": False, "phase": None, "clock": clock}
        self._phase(state, "load_s")
        cause, open_fds = None, [report_r, out_r]
        while cause is None:
            cpu, now = clock() or 0.0, time.monotonic()
            if cpu - state["phase_cpu"] > state["phase_limit"] or budget["cpu"] + cpu > self.limits["job_s"]:
                cause = "timeout"
                break
            if now >= min(state["phase_wall"], budget["deadline"]):
                cause = "waiting"
                break
            watched = open_fds + ([ended] if ended is not None else [])
            wait = min(0.1, state["phase_wall"] - now, budget["deadline"] - now)
            ready, _, _ = select.select(watched, [], [], max(0.0, wait if ended is not None else min(wait, 0.05)))
            for fd in ready:
                if fd != ended and not self._take(fd, report_r, reader, state, output):
                    open_fds.remove(fd)
            if state["garbage"]:
                cause = "protocol"
            elif (ended in ready) if ended is not None else has_exited(pid):
                break
        stopped = time.monotonic()
        budget["cpu"] += clock() or 0.0
        status = self._wait(pid, 0)
        if group is not None:
            budget["memory_peak"] = max(budget.get("memory_peak") or 0, group.memory_peak() or 0)
            group.end()
        kill_everything_from(pid, self.sandbox_uid)
        if self.view is None and self.sandbox_uid is not None:
            remove_files_of(self.sandbox_uid, PRIVATE_TMP)     # nothing it wrote outlives it
        if cause is not None:       # killed: what it reports no longer counts, what it printed still shows
            open_fds = [fd for fd in open_fds if fd != report_r]
        self._drain(open_fds, report_r, reader, state, output)   # what it wrote before it ended
        if cause is None and state["garbage"]:
            cause = "protocol"
        state.pop("clock")
        state["cell"] = _blamed_cell(state.pop("cells"), cause, stopped)
        for fd in (report_r, out_r) + ((ended,) if ended is not None else ()):
            os.close(fd)
        shutil.rmtree(workdir, ignore_errors=True)
        return {**state, "cause": cause or ("finished" if state["done"] else status), "status": status}

    def _phase(self, state: dict, limit: str) -> None:
        """Start a phase (loading the cells, or one probe) with its own CPU budget and wall-clock backstop."""
        seconds = self.limits[limit]
        state["phase"], state["phase_limit"] = limit, seconds
        state["phase_cpu"] = state["clock"]() or 0.0
        state["phase_wall"] = time.monotonic() + seconds * self.limits["wall_factor"]

    def _take(self, fd: int, report_r: int, reader: FrameReader, state: dict, output: bytearray) -> bool:
        """Read what is ready on one of the child's pipes; False at end of file."""
        data = os.read(fd, 1 << 16)
        if not data:
            return False
        if fd != report_r:
            output.extend(data[: max(0, self.limits["output_kb"] * 1024 - len(output))])
        elif not state["garbage"]:
            state["reported"] = True      # run_job's first frame comes before any student code runs
            frames, state["garbage"] = _frames(reader, data)
            for item in frames:
                self._follow(item, state)
        return True

    def _drain(self, open_fds: list, report_r: int, reader: FrameReader, state: dict, output: bytearray) -> None:
        """After the kill: read the pipes to their end (everything that could write to them is gone)."""
        until = time.monotonic() + 2.0
        while open_fds and time.monotonic() < until:
            ready, _, _ = select.select(open_fds, [], [], max(0.0, until - time.monotonic()))
            for fd in ready:
                if not self._take(fd, report_r, reader, state, output):
                    open_fds.remove(fd)

    def _follow(self, item, state: dict) -> None:
        """Track the child's progress. Its frames are untrusted: anything malformed is ignored."""
        if not isinstance(item, dict):
            return
        event, probe, now = item.get("event"), item.get("probe"), time.monotonic()
        probe = probe if isinstance(probe, str) and probe in PROBES else None
        if event == "cell" and type(item.get("index")) is int:
            state["cells"].append((item["index"], now))
        elif event == "loaded":
            state["loaded"] = {"cell_errors": _cell_errors(item.get("cell_errors")),
                               "defined": [n for n in _list(item.get("defined")) if isinstance(n, str)][:20]}
            self._phase(state, "probe_s")
        elif event == "start" and probe:
            state["in_flight"] = probe
            self._phase(state, "probe_s")
        elif event == "result" and probe:
            observation = item.get("observation")
            state["observations"][probe] = observation if _bounded(observation) else {"ok": False, "error": {
                "type": "ProtocolError", "message": "your code sent the grader an answer nested too deeply or too large"}}
            state["in_flight"] = None
        elif event == "done":
            state["done"] = True

    @staticmethod
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

    def grade(self, job: dict) -> dict:
        """Run all of the job's probes, in as many children as crashes and time-outs make necessary.

        A crash or time-out while a cell loads is that cell's error, like an exception: the next child loads
        the cells without it. One during a probe fails that probe; the next child goes on with the others.
        """
        started = time.monotonic()
        budget = {"cpu": 0.0, "deadline": started + self.limits["job_s"] * self.limits["wall_factor"]}
        pending, observations, runs, output, loaded = list(job["probes"]), {}, [], bytearray(), None
        skipped = []
        while pending:
            run = self._run_child({**job, "skipped": skipped}, pending, budget, output)
            runs.append(run["cause"])
            for code, what in ((CUDA_FAILED, "CUDA could not be started in the sandbox (is the GPU visible to it?)"),
                               (CONFINE_FAILED, "the sandbox could not confine the child (limits, user or namespaces)")):
                if run["status"] == f"exit {code}" and not run["reported"]:   # not a student's os._exit(71)
                    return {"observations": {}, "loaded": None, "runs": runs, "output": "", "seconds": 0.0,
                            "grader_error": what}
            loaded = loaded or run["loaded"]
            observations.update(run["observations"])
            if run["done"]:
                break
            out_of_time = (time.monotonic() >= budget["deadline"] or budget["cpu"] >= self.limits["job_s"]
                           or len(runs) >= self.limits["max_runs"])
            left = [p for p in pending if p not in run["observations"]]
            if run["loaded"] is None:
                cell = run["cell"]
                if out_of_time or cell is None or not 0 <= cell < len(job["cells"]) or cell in dict(skipped):
                    failure = _failure(run["cause"], "while loading your code", self.limits["load_s"], self.limits)
                    observations.update({p: failure for p in left})
                    break
                error = _failure(run["cause"], "in this cell", self.limits["load_s"], self.limits)["error"]
                skipped.append([cell, {**error, "message": error["message"] + "; the grader skipped this cell"}])
                continue
            victim = run["in_flight"] or (left[0] if left else None)
            if victim is None:
                break
            observations[victim] = _failure(run["cause"], f"during the '{victim}' check", self.limits["probe_s"],
                                            self.limits)
            left.remove(victim)
            if run["cause"] in ("timeout", "waiting") and victim in FORWARD_PROBES:
                skipped_probe = {"ok": False, "error": {"type": "Skipped", "message":
                                 "not run: an earlier call of your forward did not finish within the time limit"}}
                observations.update({p: skipped_probe for p in left if p in FORWARD_PROBES})
                left = [p for p in left if p not in FORWARD_PROBES]
            if out_of_time and left:
                failure = _failure("timeout", "before these checks could run", self.limits["job_s"], self.limits)
                observations.update({p: failure for p in left})
                break
            pending = left
        return {"observations": observations, "loaded": loaded, "runs": runs, "cpu_s": budget["cpu"],
                "memory_peak": budget.get("memory_peak"), "output": output.decode("utf-8", "replace"),
                "seconds": time.monotonic() - started}


def _frames(reader: FrameReader, data: bytes) -> tuple[list, bool]:
    """The frames `data` completes, and whether garbage came. Fed so that each step completes one frame at
    most: the frames before the garbage (which cell was loading, say) still count."""
    frames, view = [], memoryview(data)
    while view:
        have = len(reader.buffer)
        wanted = 4 - have if have < 4 else 4 + int.from_bytes(reader.buffer[:4], "big") - have
        try:
            frames += reader.feed(view[:wanted])
        except (ProtocolError, ValueError, RecursionError, MemoryError):
            return frames, True
        view = view[wanted:]
    return frames, False


def _bounded(value) -> bool:
    """Is this (untrusted) observation at most MAX_DEPTH deep and MAX_ITEMS large? Walked without recursion."""
    stack, items = [(value, 0)], 0
    while stack:
        current, depth = stack.pop()
        items += 1
        if depth > MAX_DEPTH or items > MAX_ITEMS:
            return False
        if isinstance(current, dict):
            stack += [(v, depth + 1) for v in current.values()]
        elif isinstance(current, list):
            stack += [(v, depth + 1) for v in current]
    return True


def _works(attempt) -> bool:
    """Can a forked child do `attempt` (set up a namespace, a seccomp filter)? Tried once, at start."""
    pid = os.fork()
    if pid == 0:
        try:
            attempt()
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def _blamed_cell(cells: list, cause: str | None, stopped: float) -> int | None:
    """The cell a failure while loading is charged to: the one that was running, or for a time-out the one
    that took longest (a slow cell just before, not the quick one that happened to be running, is to blame)."""
    if not cells:
        return None
    if cause not in ("timeout", "waiting"):
        return cells[-1][0]
    ends = [started for _, started in cells[1:]] + [stopped]
    return max(zip(cells, ends), key=lambda pair: pair[1] - pair[0][1])[0][0]


def _list(value) -> list:
    return value if isinstance(value, list) else []


def _cell_errors(value) -> list[dict]:
    """The child's cell errors, as dicts of short strings (the parent reads them as such)."""
    errors = []
    for error in _list(value)[:20]:
        if isinstance(error, dict):
            errors.append({key: str(error[key])[:500] for key in ("cell", "type", "message", "where")
                           if error.get(key) is not None})
    return errors


def _failure(cause: str, when: str, limit: float, limits: dict) -> dict:
    if cause == "timeout":
        kind, message = "Timeout", f"your code did not finish within {limit:g} s of computing time {when} (an endless loop?)"
    elif cause == "waiting":
        kind, message = "Timeout", (f"your code did not finish within {limit * limits['wall_factor']:g} s {when}, "
                                    "most of it spent waiting (an endless sleep, or a read that never returns?)")
    elif cause == "protocol":
        kind, message = "Crashed", f"your code wrote garbage into the grader's channel {when}"
    elif cause.startswith("exit"):
        kind, message = "Crashed", (f"your code ended the grading process {when} ({cause}: sys.exit(), os._exit() "
                                    "or an exception that escaped)")
    elif cause == "signal SIGSEGV":
        kind, message = "Crashed", (f"the grading process crashed {when} (signal SIGSEGV: a crash in native code, "
                                    "often a stack overflow from very deep recursion)")
    elif cause == "signal SIGKILL":
        kind, message = "Crashed", f"the grading process was killed {when} (memory or process limit reached?)"
    else:
        kind, message = "Crashed", f"the grading process crashed {when} ({cause})"
    return {"ok": False, "error": {"type": kind, "message": message}}


def main() -> None:
    channel_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)                     # anything printed by libraries goes to stderr, never into the channel
    channel_in = os.fdopen(os.dup(0), "rb")
    init = read_frame(channel_in)
    server = Server(init)
    channel_out.write(frame({"ready": True, "layers": server.layers}))
    channel_out.flush()
    while True:
        job = read_frame(channel_in)
        if job is None:
            return
        channel_out.write(frame(server.grade(job)))
        channel_out.flush()


if __name__ == "__main__":
    main()
