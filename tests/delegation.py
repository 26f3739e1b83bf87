"""A control group handed to a user who is not root, as a hub's administrator hands one to the instructors' services
(systemd's `Delegate=yes`): root makes a group in every hierarchy it can write, gives it to the user, and starts the
user's grader inside it. The kit then makes its servers' and jobs' groups below it, as it does for root, so the
hub's layer limits a job's memory as a whole there too. Where root can make no group, there is nothing to hand
over (`Delegated.folders` is empty) and the kit limits memory per process, as it says.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
V1 = ("memory", "pids", "cpuacct")


def _own(controller: str | None) -> str | None:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        number, controllers, path = line.split(":", 2)
        if (controller is None and number == "0") or (controller is not None and controller in controllers.split(",")):
            return path
    return None


class Delegated:
    """Groups named `name` below this process's own, owned by `login`; `join` (a Popen preexec_fn, run as root
    before the user's command starts) puts the new process in them; `remove` takes them away, innermost first."""

    def __init__(self, login: str, name: str):
        user = pwd.getpwnam(login)
        self.folders: list[Path] = []
        places = [(ROOT / c / (_own(c) or "").lstrip("/"), c) for c in V1 if _own(c) is not None]
        for base, _ in places:
            folder = base / name
            try:
                folder.mkdir(exist_ok=True)
            except OSError:
                continue
            for entry in (folder, folder / "cgroup.procs", folder / "tasks"):
                if entry.exists():
                    os.chown(entry, user.pw_uid, user.pw_gid)
            self.folders.append(folder)

    def join(self) -> None:
        for folder in self.folders:
            with open(folder / "cgroup.procs", "w") as procs:
                procs.write(str(os.getpid()))

    def remove(self) -> None:
        for folder in self.folders:
            for inner in sorted((p for p in folder.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                try:
                    inner.rmdir()
                except OSError:
                    pass
            try:
                folder.rmdir()
            except OSError:
                pass
