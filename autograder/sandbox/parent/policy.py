"""What a grader may count on before it starts a sandbox server: the limits of one submission's run, and whether this
machine can isolate a submission at all (the layers are described in `autograder.sandbox.parent.client`).

A non-root grader without bubblewrap could keep none of the layers' promises: it refuses to grade, unless asked
with `unsafe=True`, and then every result says so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from . import bubblewrap

bubblewrap_works = bubblewrap.works


class IsolationUnavailable(Exception):
    """Neither bubblewrap nor root (the kit cannot keep a submission away from the grading files), or root with
    neither namespaces nor Landlock (it cannot keep /proc and the world-readable files of the machine away)."""


NO_BUBBLEWRAP = (
    "refusing to grade: bubblewrap does not work here and the grader is not root, so a submission could read the "
    "solution and other students' files. Install bubblewrap (Debian: apt-get install bubblewrap), or grade as root, "
    "or pass --unsafe to grade anyway (every result will say so)."
)
PERMISSIONS_ONLY = (
    "refusing to grade: neither bubblewrap, namespaces nor Landlock work here, so a submission could read every "
    "process's command line in /proc and every file the world may read, and write without a bound in the folders "
    "every user may write. Grade where one of them works (docs/security.md); where this machine holds the one "
    "submission and nothing else (a Gradescope container), pass --alone; or pass --unsafe to grade anyway (every "
    "result will say so)."
)


@dataclass(frozen=True)
class Limits:
    load_s: float = 20.0  # CPU seconds to execute the submission's cells
    probe_s: float = 10.0  # CPU seconds for any one check's run of the student's code
    job_s: float = 60.0  # CPU seconds for everything of one submission
    wall_factor: float = 5.0  # code that waits instead of computing gets this many times as long, in wall time
    memory_mb: int = 2048  # for everything the submission starts together (per process where no cgroup)
    processes: int = 64
    file_mb: int = 16
    tmp_mb: int = 64  # each private writable place (/tmp, /var/tmp, /dev/shm, /run/lock)
    output_kb: int = 64  # printed output kept (the rest is read and dropped)
    max_runs: int = 20  # fresh children after crashes

    @property
    def wall_s(self) -> float:
        """The longest one submission can take, whatever it does."""
        return self.job_s * self.wall_factor


def _choice(value: str | None, variable: str) -> str:
    """A layer choice: the caller's, else the environment's (AUTOGRADER_BUBBLEWRAP=off, ...: for tests)."""
    return value or os.environ.get(variable, "auto")


def isolation_available() -> bool:
    """Can submissions be isolated here (what the kit grades without `--unsafe`): bubblewrap works (for any user), or
    the grader is root and its children can have namespaces or Landlock (the layers chosen by the environment,
    AUTOGRADER_BUBBLEWRAP=off..., as a server would choose them)."""
    if _choice(None, "AUTOGRADER_BUBBLEWRAP") != "off" and bubblewrap_works():
        return True
    namespaces, landlock_choice = _choice(None, "AUTOGRADER_NAMESPACES"), _choice(None, "AUTOGRADER_LANDLOCK")
    return os.geteuid() == 0 and _children_layers_work(namespaces, landlock_choice)


def _children_layers_work(namespaces: str, landlock_choice: str) -> bool:
    """Can a root grader's children have Landlock, or roots of their own (namespaces), here? The permissions layer
    keeps /proc and the machine's world-readable files from a child only with one of them."""
    from autograder.sandbox.inside import landlock, rootfs

    return (landlock_choice != "off" and landlock.abi() > 0) or (namespaces != "off" and rootfs.namespaces_work())


def choose_layers(bubblewrap: str | None, namespaces: str | None, landlock: str | None, unsafe: bool, alone: bool):
    """The layers a server will use (bubblewrap or not, then the namespaces and Landlock choices, "auto"/"off"/"on"),
    or IsolationUnavailable where they cannot isolate a submission and the caller did not ask to grade anyway."""
    root = os.geteuid() == 0
    choice = _choice(bubblewrap, "AUTOGRADER_BUBBLEWRAP")
    use_bubblewrap = choice == "on" or (choice == "auto" and bubblewrap_works())
    if not (use_bubblewrap or root or unsafe):
        raise IsolationUnavailable(NO_BUBBLEWRAP)
    namespaces, landlock = _choice(namespaces, "AUTOGRADER_NAMESPACES"), _choice(landlock, "AUTOGRADER_LANDLOCK")
    if root and not (use_bubblewrap or unsafe or alone or _children_layers_work(namespaces, landlock)):
        raise IsolationUnavailable(PERMISSIONS_ONLY)
    return use_bubblewrap, namespaces, landlock
