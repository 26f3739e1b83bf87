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

from autograder.sandbox.inside.jobs import ROOT, V1, _own_group, kill_group


class Delegated:
    """Groups named `name` below this process's own, owned by `login`; `join` (a Popen preexec_fn, run as root
    before the user's command starts) puts the new process in them; `remove` takes them away, innermost first."""

    def __init__(self, login: str, name: str):
        user = pwd.getpwnam(login)
        self.folders: list[Path] = []
        for base in [ROOT / c / _own_group(c).lstrip("/") for c in V1 if _own_group(c) is not None]:
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
        """What is left in them (nothing, once the grader has ended) is killed, and the groups removed."""
        for folder in self.folders:
            kill_group(folder)
