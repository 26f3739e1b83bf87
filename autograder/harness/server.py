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
import importlib
import importlib.machinery
import os
import resource
import select
import shutil
import signal
import sys
import tempfile
import time

import torch

from .child import load_cells, run_job
from .probes import FORWARD_PROBES, PROBES, Plan, Probing, run_probe
from .protocol import FrameReader, ProtocolError, frame, read_frame

PRELOAD = ("math", "random", "itertools", "functools", "collections", "typing", "dataclasses", "copy", "time",
           "json", "re", "statistics", "fractions", "decimal", "operator", "string", "textwrap", "warnings",
           "numpy", "torch.nn.functional", "matplotlib", "matplotlib.pyplot")
PR_SET_CHILD_SUBREAPER = 36
CUDA_FAILED = 71          # the child's exit status when CUDA could not start: the grader's fault, not the student's


class _NoGradingCode:
    """Import hook in the child: no module from the kit's folder but this harness and the virtual environment,
    under whatever name it is asked for (`autograder.grading`, or the same file by another path)."""

    def __init__(self, kit_root: str | None):
        self.kit_root = kit_root
        self.allowed = (os.path.dirname(os.path.abspath(__file__)), sys.prefix)

    def find_spec(self, name, path=None, target=None):
        if (name == "autograder" or name.startswith("autograder.")) and not name.startswith("autograder.harness"):
            raise ImportError("the grader's modules are not available to submissions")
        if self.kit_root:
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            origin = os.path.realpath(spec.origin) if spec is not None and spec.origin else ""
            if _inside(origin, self.kit_root) and not any(_inside(origin, ok) for ok in self.allowed):
                raise ImportError("the grader's modules are not available to submissions")
        return None


def _inside(path: str, folder: str) -> bool:
    folder = os.path.realpath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _warm_up(kit: dict) -> None:
    """Run every probe once on a public arrangement, so lazy loading (the meta device...) happens here."""

    class WarmUpBlock(kit["TransformerBlock"]):
        def forward(self, x):
            return self.drop_shortcut(self.ff(self.norm2(self.drop_shortcut(self.att(self.norm1(x))))))

    names = {"TransformerBlock": WarmUpBlock, "magnitude_by_formula": lambda f, n: [f] * n,
             "magnitude_by_autograd": lambda f, n: [f] * n, "classify_factor": lambda f: "stable"}
    probing = Probing(names, kit, Plan(seed=0))
    for name in PROBES:
        run_probe(name, probing)


def _start_cuda(limits: dict) -> None:
    """CUDA's context (and cuBLAS) in the child, before its limits, its user switch and any student code.

    CUDA maps tens of GB of address space when it starts, which the RLIMIT_AS set next would refuse; started
    first, that mapping is part of the size the limit is added to (and the GPU's device files are opened
    while still allowed). A CUDA context does not survive fork, so the server itself never touches CUDA,
    not even `torch.cuda.is_available()`.
    """
    torch.cuda.init()
    a = torch.ones(8, 8, device="cuda")
    (a @ a).sum().item()
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, limits["memory_mb"] * 2**20 / total))


def _processes():
    """(pid, ppid, sid, uid) of every process we can see."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            yield int(entry), int(fields[1]), int(fields[3]), os.stat(f"/proc/{entry}").st_uid
        except (OSError, IndexError, ValueError):
            continue


def _kill_everything_from(child: int, sandbox_uid: int | None) -> None:
    """SIGKILL the child's session, orphans handed to us (we are a subreaper) and the sandbox user's processes."""
    me = os.getpid()
    for _ in range(200):
        victims = [pid for pid, ppid, sid, uid in _processes()
                   if pid != me and (sid == child or ppid == me or (sandbox_uid is not None and uid == sandbox_uid))]
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        while True:
            try:
                reaped, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if reaped == 0:
                break
        if not victims:
            return
        time.sleep(0.005)


class Server:
    def __init__(self, init: dict):
        self.limits = init["limits"]
        self.sandbox_uid = init.get("sandbox_uid")
        self.hide_root = init.get("hide_root")
        self.kit, errors = load_cells([(f"kit {label}", code) for label, code in init["kit_code"]])
        if errors:
            raise RuntimeError(f"the kit's own code failed to load: {errors[0]}")
        for name in PRELOAD:
            try:
                importlib.import_module(name)
            except ImportError:
                pass
        torch.set_num_threads(1)
        started = time.monotonic()
        _warm_up(self.kit)
        self.warmup_s = time.monotonic() - started
        libc = ctypes.CDLL(None, use_errno=True)
        self.subreaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
        self.nproc_base = self._own_task_count() if self.sandbox_uid is None else 0

    @staticmethod
    def _own_task_count() -> int:
        uid, total = os.getuid(), 0
        for pid, _, _, owner in _processes():
            if owner == uid:
                try:
                    total += len(os.listdir(f"/proc/{pid}/task"))
                except OSError:
                    pass
        return total

    # --- inside the child --------------------------------------------------------------------------
    def _enter_sandbox(self, workdir: str) -> None:
        limits = self.limits
        os.setsid()
        for number in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM):
            signal.signal(number, signal.SIG_DFL)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)       # an over-long write fails instead of killing
        with open("/proc/self/status") as status:
            vm_size_kb = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
        memory = vm_size_kb * 1024 + limits["memory_mb"] * 2**20
        for kind, value in ((resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, limits["file_mb"] * 2**20),
                            (resource.RLIMIT_NOFILE, 256), (resource.RLIMIT_AS, memory),
                            (resource.RLIMIT_CPU, int(limits["job_s"]) + 5)):
            resource.setrlimit(kind, (value, value))
        if self.sandbox_uid is not None:
            os.chown(workdir, self.sandbox_uid, self.sandbox_uid)
            os.setgroups([])
            os.setgid(self.sandbox_uid)
            os.setuid(self.sandbox_uid)
            nproc = limits["processes"]
        else:
            nproc = self.nproc_base + limits["processes"]
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        os.chdir(workdir)
        os.environ.clear()
        os.environ.update(HOME=workdir, TMPDIR=workdir, PATH="/usr/bin:/bin", LANG="C.UTF-8",
                          MPLBACKEND="Agg", OMP_NUM_THREADS="1")
        tempfile.tempdir = workdir
        if self.hide_root:      # the grader's folder leaves the path; Python's own environment stays, even inside it
            environments = [e for e in (sys.prefix, sys.base_prefix) if not _inside(self.hide_root, e)]
            sys.path[:] = [p for p in sys.path if p and (not _inside(p, self.hide_root)
                                                         or any(_inside(p, e) for e in environments))]
        sys.meta_path.insert(0, _NoGradingCode(self.hide_root))

    def _child(self, job: dict, probes: list, workdir: str, report_w: int, out_w: int) -> None:
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
                    _start_cuda(self.limits)
                except BaseException:
                    os._exit(CUDA_FAILED)
            self._enter_sandbox(workdir)
            run_job(self.kit, {**job, "probes": probes}, 3)
            sys.stdout.flush()
            os._exit(0)
        except BaseException:
            os._exit(70)

    # --- in the server -------------------------------------------------------------------------------
    def _run_child(self, job: dict, probes: list, deadline: float, output: bytearray) -> dict:
        report_r, report_w = os.pipe()
        out_r, out_w = os.pipe()
        workdir = tempfile.mkdtemp(prefix="submission-")
        pid = os.fork()
        if pid == 0:
            self._child(job, probes, workdir, report_w, out_w)
        os.close(report_w)
        os.close(out_w)
        ended = _exit_watch(pid)   # the run ends when the child does, even if something it started holds its pipes
        reader = FrameReader()
        state = {"loaded": None, "observations": {}, "in_flight": None, "cells": [], "done": False,
                 "reported": False, "garbage": False, "phase_end": time.monotonic() + self.limits["load_s"]}
        cause, open_fds = None, [report_r, out_r]
        while cause is None:
            remaining = min(state["phase_end"], deadline) - time.monotonic()
            if remaining <= 0:
                cause = "timeout"
                break
            watched = open_fds + ([ended] if ended is not None else [])
            ready, _, _ = select.select(watched, [], [], remaining if ended is not None else min(remaining, 0.05))
            for fd in ready:
                if fd != ended and not self._take(fd, report_r, reader, state, output):
                    open_fds.remove(fd)
            if state["garbage"]:
                cause = "protocol"
            elif (ended in ready) if ended is not None else _has_exited(pid):
                break
        stopped = time.monotonic()
        status = self._wait(pid, 0)
        _kill_everything_from(pid, self.sandbox_uid)
        if cause is not None:       # killed: what it reports no longer counts, what it printed still shows
            open_fds = [fd for fd in open_fds if fd != report_r]
        self._drain(open_fds, report_r, reader, state, output)   # what it wrote before it ended
        if cause is None and state["garbage"]:
            cause = "protocol"
        state["cell"] = _blamed_cell(state.pop("cells"), cause, stopped)
        for fd in (report_r, out_r) + ((ended,) if ended is not None else ()):
            os.close(fd)
        shutil.rmtree(workdir, ignore_errors=True)
        return {**state, "cause": cause or ("finished" if state["done"] else status), "status": status}

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
            state["phase_end"] = now + self.limits["probe_s"]
        elif event == "start" and probe:
            state["in_flight"] = probe
            state["phase_end"] = now + self.limits["probe_s"]
        elif event == "result" and probe:
            state["observations"][probe] = item.get("observation")
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
        deadline = started + self.limits["job_s"]
        pending, observations, runs, output, loaded = list(job["probes"]), {}, [], bytearray(), None
        skipped = []
        while pending:
            run = self._run_child({**job, "skipped": skipped}, pending, deadline, output)
            runs.append(run["cause"])
            if run["status"] == f"exit {CUDA_FAILED}" and not run["reported"]:   # not a student's os._exit(71)
                return {"observations": {}, "loaded": None, "runs": runs, "output": "", "seconds": 0.0,
                        "grader_error": "CUDA could not be started in the sandbox (is the GPU visible to it?)"}
            loaded = loaded or run["loaded"]
            observations.update(run["observations"])
            if run["done"]:
                break
            out_of_time = time.monotonic() >= deadline or len(runs) >= self.limits["max_runs"]
            left = [p for p in pending if p not in run["observations"]]
            if run["loaded"] is None:
                cell = run["cell"]
                if out_of_time or cell is None or not 0 <= cell < len(job["cells"]) or cell in dict(skipped):
                    failure = _failure(run["cause"], "while loading your code", self.limits["load_s"])
                    observations.update({p: failure for p in left})
                    break
                error = _failure(run["cause"], "in this cell", self.limits["load_s"])["error"]
                skipped.append([cell, {**error, "message": error["message"] + "; the grader skipped this cell"}])
                continue
            victim = run["in_flight"] or (left[0] if left else None)
            if victim is None:
                break
            observations[victim] = _failure(run["cause"], f"during the '{victim}' check", self.limits["probe_s"])
            left.remove(victim)
            if run["cause"] == "timeout" and victim in FORWARD_PROBES:
                skipped_probe = {"ok": False, "error": {"type": "Skipped", "message":
                                 "not run: an earlier call of your forward did not finish within the time limit"}}
                observations.update({p: skipped_probe for p in left if p in FORWARD_PROBES})
                left = [p for p in left if p not in FORWARD_PROBES]
            if out_of_time and left:
                failure = _failure("timeout", "before these checks could run", self.limits["job_s"])
                observations.update({p: failure for p in left})
                break
            pending = left
        return {"observations": observations, "loaded": loaded, "runs": runs,
                "output": output.decode("utf-8", "replace"), "seconds": time.monotonic() - started}


def _frames(reader: FrameReader, data: bytes) -> tuple[list, bool]:
    """The frames `data` completes, and whether garbage came. Fed so that each step completes one frame at
    most: the frames before the garbage (which cell was loading, say) still count."""
    frames, view = [], memoryview(data)
    while view:
        have = len(reader.buffer)
        wanted = 4 - have if have < 4 else 4 + int.from_bytes(reader.buffer[:4], "big") - have
        try:
            frames += reader.feed(view[:wanted])
        except ProtocolError:
            return frames, True
        view = view[wanted:]
    return frames, False


def _blamed_cell(cells: list, cause: str | None, stopped: float) -> int | None:
    """The cell a failure while loading is charged to: the one that was running, or for a time-out the one
    that took longest (a slow cell just before, not the quick one that happened to be running, is to blame)."""
    if not cells:
        return None
    if cause != "timeout":
        return cells[-1][0]
    ends = [started for _, started in cells[1:]] + [stopped]
    return max(zip(cells, ends), key=lambda pair: pair[1] - pair[0][1])[0][0]


def _exit_watch(pid: int):
    """A pidfd that becomes readable when `pid` ends (None where the kernel has none: then we poll)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _has_exited(pid: int) -> bool:
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _inside(path: str, folder: str) -> bool:
    path, folder = os.path.abspath(path), os.path.abspath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


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


def _failure(cause: str, when: str, limit: float) -> dict:
    if cause == "timeout":
        kind, message = "Timeout", f"your code did not finish within {limit:g} s {when} (an endless loop?)"
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
    channel_out.write(frame({"ready": True, "warmup_s": server.warmup_s, "subreaper": server.subreaper,
                             "pid": os.getpid()}))
    channel_out.flush()
    while True:
        job = read_frame(channel_in)
        if job is None:
            return
        channel_out.write(frame(server.grade(job)))
        channel_out.flush()


if __name__ == "__main__":
    main()
