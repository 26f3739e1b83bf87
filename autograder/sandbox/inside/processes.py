"""Watching and ending processes: how the server makes sure nothing a submission started outlives it."""

from __future__ import annotations

import os
import signal
import time


def processes():
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


def task_count(uid: int) -> int:
    """Threads and processes of `uid` (what RLIMIT_NPROC counts)."""
    total = 0
    for pid, _, _, owner in processes():
        if owner == uid:
            try:
                total += len(os.listdir(f"/proc/{pid}/task"))
            except OSError:
                pass
    return total


def kill_user(uid: int, uids: range | None = None) -> list[int]:
    """SIGKILL every process of `uid` (or of any uid in `uids`) until none is left; the pids that were found."""
    found = []
    for _ in range(200):
        alive = [pid for pid, _, _, owner in processes() if owner == uid or (uids is not None and owner in uids)]
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if not alive:
            break
        found += alive
        time.sleep(0.005)
    return sorted(set(found))


def descendants(of: int, table: list) -> set[int]:
    """The processes below `of` in `table` (rows of `processes()`)."""
    children: dict[int, list[int]] = {}
    for pid, ppid, _, _ in table:
        children.setdefault(ppid, []).append(pid)
    found, todo = set(), [of]
    while todo:
        for pid in children.get(todo.pop(), []):
            if pid not in found:
                found.add(pid)
                todo.append(pid)
    return found


def stop_everything_below(me: int) -> None:
    """SIGSTOP every process below `me` until a look finds none it has not stopped: a stopped process forks no more.

    Everything a job starts stays below its supervisor: the child is its child, and an orphan goes to the nearest
    subreaper above it, the supervisor. Where no uid of its own marks the job's processes (bubblewrap run by an
    instructor who is not root), this is how a fork bomb whose processes each start a session of their own is
    caught: killing them one by one while the others fork again may never end."""
    stopped: set[int] = set()
    for _ in range(1000):
        below = descendants(me, list(processes())) - stopped
        if not below:
            return
        for pid in below:
            try:
                os.kill(pid, signal.SIGSTOP)
            except OSError:
                pass
        stopped |= below


def kill_everything_from(child: int, sandbox_uid: int | None) -> None:
    """SIGKILL everything below us (stopped first: see `stop_everything_below`), the child's session, orphans handed
    to us (we are a subreaper) and the sandbox user's processes."""
    me = os.getpid()
    stop_everything_below(me)
    for _ in range(200):
        table = list(processes())
        below = descendants(me, table)
        victims = [
            pid
            for pid, ppid, sid, uid in table
            if pid != me and (pid in below or sid == child or ppid == me or (sandbox_uid is not None and uid == sandbox_uid))
        ]
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


def cpu_seconds_below(me: int) -> float:
    """CPU time of every process below `me` (alive, with what each has waited for): a job's, where no control group
    counts it (one of a fork bomb's processes is starved by the others, and alone would seem to wait)."""
    return sum(cpu_seconds(pid) or 0.0 for pid in descendants(me, list(processes())))


def exit_watch(pid: int):
    """A pidfd that becomes readable when `pid` ends (None where the kernel has none: then we poll)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def has_exited(pid: int) -> bool:
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """CPU time of `pid` and of the children it has waited for (user and system), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return sum(int(f) for f in fields[11:15]) / _TICKS
    except (OSError, IndexError, ValueError):
        return None
