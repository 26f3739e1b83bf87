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


def kill_everything_from(child: int, sandbox_uid: int | None) -> None:
    """SIGKILL the child's session, orphans handed to us (we are a subreaper) and the sandbox user's processes."""
    me = os.getpid()
    for _ in range(200):
        victims = [
            pid
            for pid, ppid, sid, uid in processes()
            if pid != me and (sid == child or ppid == me or (sandbox_uid is not None and uid == sandbox_uid))
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
