"""Control groups: everything one job of a submission starts lives in one job group, with one memory limit, one
process limit, one CPU clock and one way to kill it all.

The parent makes a group per sandbox server in every hierarchy it can write (`server_groups`), and the
server makes a job group inside it for every child (`Job`). cgroup v2 is used where it offers the
controllers; on hosts that still mount cgroup v1 (memory, pids, cpuacct) those are used. Where neither can
be written, there are no jobs: the server then falls back to per-process limits and to killing by the
sandbox user, and the isolation string says so.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
V1 = ("memory", "pids", "cpuacct")


def _own_group(controller: str | None) -> str | None:
    """This process's group in a v1 hierarchy (controller) or in the v2 hierarchy (None)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        number, controllers, path = line.split(":", 2)
        if controller is None and number == "0":
            return path
        if controller is not None and controller in controllers.split(","):
            return path
    return None


def _v2_root() -> Path | None:
    for candidate in (ROOT, ROOT / "unified"):
        if (candidate / "cgroup.procs").exists() and (candidate / "cgroup.subtree_control").exists():
            return candidate
    return None


def _writable(folder: Path) -> bool:
    return folder.is_dir() and os.access(folder, os.W_OK)


def server_groups(tag: str) -> dict[str, str]:
    """Make this server's groups: kind -> folder. Kinds: "memory", "pids", "cpuacct" (v1), "v2" (v2; it holds
    memory and pids limits when those controllers are available there)."""
    groups = {}
    v2 = _v2_root()
    own = _own_group(None)
    if v2 is not None and own is not None:
        parent = v2 / own.lstrip("/")
        folder = parent / tag
        if _writable(parent):
            try:
                folder.mkdir(exist_ok=True)
                groups["v2"] = str(folder)
            except OSError:
                pass
    for controller in V1:
        own = _own_group(controller)
        parent = ROOT / controller / (own or "").lstrip("/")
        if own is None or not _writable(parent):
            continue
        try:
            (parent / tag).mkdir(exist_ok=True)
            groups[controller] = str(parent / tag)
        except OSError:
            pass
    return groups


def join_groups(folders: list[str]) -> None:
    """In the server's process, before it runs: into the groups its children's job groups will live in (those of
    `server_groups`)."""
    for folder in folders:
        try:
            with open(os.path.join(folder, "cgroup.procs"), "w") as procs:
                procs.write(str(os.getpid()))
        except OSError:
            pass


def _write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
        return True
    except OSError:
        return False


def _pids(folder: Path) -> list[int]:
    pids = []
    for procs in [folder / "cgroup.procs", *folder.glob("*/cgroup.procs")]:
        try:
            pids += [int(p) for p in procs.read_text().split()]
        except (OSError, ValueError):
            pass
    return pids


def kill_group(folder: str | Path, remove: bool = True) -> None:
    """SIGKILL everything in a group and its subgroups until it is empty; then remove the folders."""
    folder = Path(folder)
    if not folder.is_dir():
        return
    for sub in [folder, *folder.glob("*")]:
        if (sub / "cgroup.kill").exists():
            _write(sub / "cgroup.kill", "1")
    for _ in range(400):
        pids = [p for p in _pids(folder) if p != os.getpid()]
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.005)
    if remove:
        for sub in sorted(folder.glob("*"), reverse=True):
            if sub.is_dir():
                try:
                    sub.rmdir()
                except OSError:
                    pass
        try:
            folder.rmdir()
        except OSError:
            pass


class Job:
    """One child's groups. Made by the server before the fork; the child joins; the server kills and removes."""

    def __init__(self, groups: dict[str, str], name: str, memory_bytes: int, processes: int):
        self.folders: dict[str, Path] = {}
        self.limits: set[str] = set()
        for kind, base in groups.items():
            folder = Path(base) / name
            try:
                folder.mkdir(exist_ok=True)
            except OSError:
                continue
            self.folders[kind] = folder
            if kind == "v2":
                controllers = Path(base) / "cgroup.controllers"
                available = controllers.read_text().split() if controllers.exists() else []
                for controller in ("memory", "pids"):
                    if controller in available:
                        _write(Path(base) / "cgroup.subtree_control", f"+{controller}")
                if _write(folder / "memory.max", str(memory_bytes)):
                    _write(folder / "memory.swap.max", "0")
                    self.limits.add("memory")
                if _write(folder / "pids.max", str(processes)):
                    self.limits.add("pids")
            elif kind == "memory":
                _write(folder / "memory.memsw.limit_in_bytes", "-1")
                if _write(folder / "memory.limit_in_bytes", str(memory_bytes)):
                    _write(folder / "memory.memsw.limit_in_bytes", str(memory_bytes))
                    self.limits.add("memory")
            elif kind == "pids":
                if _write(folder / "pids.max", str(processes)):
                    self.limits.add("pids")

    def join(self) -> None:
        """Called by the child itself, before it drops its privileges and runs any student code."""
        for folder in self.folders.values():
            _write(folder / "cgroup.procs", str(os.getpid()))

    def cpu_seconds(self) -> float | None:
        """CPU time of everything the job ran (alive or not), or None when no group keeps count."""
        if "v2" in self.folders:
            try:
                for line in (self.folders["v2"] / "cpu.stat").read_text().splitlines():
                    if line.startswith("usage_usec"):
                        return int(line.split()[1]) / 1e6
            except (OSError, ValueError, IndexError):
                pass
        if "cpuacct" in self.folders:
            try:
                return int((self.folders["cpuacct"] / "cpuacct.usage").read_text()) / 1e9
            except (OSError, ValueError):
                pass
        return None

    def memory_peak(self) -> int | None:
        for kind, name in (("v2", "memory.peak"), ("memory", "memory.max_usage_in_bytes")):
            try:
                return int((self.folders[kind] / name).read_text())
            except (KeyError, OSError, ValueError):
                pass
        return None

    def end(self) -> None:
        for folder in self.folders.values():
            kill_group(folder)
