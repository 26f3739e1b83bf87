"""Following one child while it runs: what it reports on its channel, what it prints, and what its phases cost.

Everything a child writes is untrusted. `Run` keeps only what the grader can use (which cell was loading,
which probe was in flight, bounded answers), and the messages here say what happened in the student's terms.
"""

from __future__ import annotations

import os
import select
import time

from .cleanup import usage
from .protocol import MAX_ANSWER_BYTES, FrameReader, ProtocolError

MAX_DEPTH = 12  # nesting of one observation (the answers need 6)
MAX_ITEMS = 200_000  # values in one observation
OVER_BUDGET = (
    f"your code sent the grader more than {MAX_ANSWER_BYTES >> 20} MB of answers in all (the grader's answers need far less)"
)


class Run:
    """The state of one child: its phase (loading, or one probe) with its CPU budget, and what it reported.

    `budget` is shared by every child of one job: CPU time used, the wall-clock deadline, and the bytes of
    answers received (a job's children together may report at most MAX_ANSWER_BYTES)."""

    def __init__(self, limits: dict, clock, budget: dict, output: bytearray, report_fd: int, probes):
        self.limits, self.clock, self.budget, self.output, self.report_fd = limits, clock, budget, output, report_fd
        self.probes = tuple(probes)  # the probe names a child may report (see server.py's questions)
        self.reader = FrameReader()
        self.loaded = None
        self.observations: dict = {}
        self.in_flight = None
        self.cells: list = []
        self.done = self.reported = self.garbage = False
        self.over_budget = False
        self.phase("load_s")

    def phase(self, limit: str) -> None:
        """Start a phase (loading the cells, or one probe) with its own CPU budget and wall-clock backstop."""
        seconds = self.limits[limit]
        self.phase_limit = seconds
        self.phase_cpu = self.clock() or 0.0
        self.phase_wall = time.monotonic() + seconds * self.limits["wall_factor"]

    def take(self, fd: int) -> bool:
        """Read what is ready on one of the child's pipes; False at end of file."""
        data = os.read(fd, 1 << 16)
        if not data:
            return False
        if fd != self.report_fd:
            self.output.extend(data[: max(0, self.limits["output_kb"] * 1024 - len(self.output))])
        elif not self.garbage:
            self.reported = True  # run_job's first frame comes before any student code runs
            self.budget["answer_bytes"] = self.budget.get("answer_bytes", 0) + len(data)
            if self.budget["answer_bytes"] > MAX_ANSWER_BYTES:
                self.garbage = self.over_budget = True
                return True
            frames, self.garbage = _frames(self.reader, data)
            for item in frames:
                self.follow(item)
        return True

    def drain(self, fds: list) -> None:
        """After the kill: read the pipes to their end (everything that could write to them is gone)."""
        until = time.monotonic() + 2.0
        while fds and time.monotonic() < until:
            ready, _, _ = select.select(fds, [], [], max(0.0, until - time.monotonic()))
            for fd in ready:
                if not self.take(fd):
                    fds.remove(fd)

    def follow(self, item) -> None:
        """Track the child's progress. Its frames are untrusted: anything malformed is ignored."""
        if not isinstance(item, dict):
            return
        event, probe, now = item.get("event"), item.get("probe"), time.monotonic()
        probe = probe if isinstance(probe, str) and probe in self.probes else None
        if event == "cell" and type(item.get("index")) is int:
            self.cells.append((item["index"], now))
        elif event == "loaded":
            self.loaded = {
                "cell_errors": _cell_errors(item.get("cell_errors")),
                "defined": [n for n in _list(item.get("defined")) if isinstance(n, str)][:20],
            }
            self.phase("probe_s")
        elif event == "start" and probe:
            self.in_flight = probe
            self.phase("probe_s")
        elif event == "result" and probe:
            observation = item.get("observation")
            self.observations[probe] = (
                observation
                if _bounded(observation)
                else {
                    "ok": False,
                    "error": {
                        "type": "ProtocolError",
                        "message": "your code sent the grader an answer nested too deeply or too large",
                    },
                }
            )
            self.in_flight = None
        elif event == "done":
            self.done = True


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


class DiskWatch:
    """The files a child holds in its working directory, where it has no sized file system of its own (permissions
    alone: the folder is on the host's disk, and each file is limited, not their sum). Looked at every 10 ms, less
    often when a look takes long (looking takes at most a fifth of the time); `over` once they pass `limit` bytes."""

    def __init__(self, folder: str, limit: int):
        self.folder, self.limit, self.next = folder, limit, 0.0

    def over(self) -> bool:
        now = time.monotonic()
        if now < self.next:
            return False
        used = usage(self.folder, self.limit)
        self.next = time.monotonic() + max(0.01, 4 * (time.monotonic() - now))
        return used > self.limit

    def wait(self, now: float) -> float:
        """How long the supervisor may wait before the next look."""
        return max(0.0, self.next - now)


def blamed_cell(cells: list, cause: str | None, stopped: float) -> int | None:
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
            errors.append(
                {key: str(error[key])[:500] for key in ("cell", "type", "message", "where") if error.get(key) is not None}
            )
    return errors


# The observation of a forward probe left unrun after an earlier call of the forward ran out of time (the supervisor's,
# and the parent's for a question it would ask later: `grading/asking.py`).
SKIPPED = {
    "ok": False,
    "error": {"type": "Skipped", "message": "not run: an earlier call of your forward did not finish within the time limit"},
}


def failure(cause: str, when: str, limit: float, limits: dict) -> dict:
    """The observation of a probe (or of the loading) that a child did not get through, in the student's terms."""
    if cause == "timeout":
        kind, message = "Timeout", f"your code did not finish within {limit:g} s of computing time {when} (an endless loop?)"
    elif cause == "waiting":
        kind, message = (
            "Timeout",
            (
                f"your code did not finish within {limit * limits['wall_factor']:g} s {when}, "
                "most of it spent waiting (an endless sleep, or a read that never returns?)"
            ),
        )
    elif cause == "protocol":
        kind, message = "Crashed", f"your code wrote garbage into the grader's channel {when}"
    elif cause == "over budget":
        kind, message = "ProtocolError", f"{OVER_BUDGET} {when}"
    elif cause == "disk":
        kind, message = "OverLimit", f"your code wrote more than {limits['tmp_mb']} MB of files {when} (the limit of its folder)"
    elif cause.startswith("exit"):
        kind, message = (
            "Crashed",
            (f"your code ended the grading process {when} ({cause}: sys.exit(), os._exit() or an exception that escaped)"),
        )
    elif cause == "signal SIGSEGV":
        kind, message = (
            "Crashed",
            (
                f"the grading process crashed {when} (signal SIGSEGV: a crash in native code, "
                "often a stack overflow from very deep recursion)"
            ),
        )
    elif cause == "signal SIGKILL":
        kind, message = "Crashed", f"the grading process was killed {when} (memory or process limit reached?)"
    elif cause == "signal SIGSYS":
        kind, message = "Crashed", f"the grading process was stopped {when} (signal SIGSYS: a system call the sandbox refuses)"
    else:
        kind, message = "Crashed", f"the grading process crashed {when} ({cause})"
    return {"ok": False, "error": {"type": kind, "message": message}}
