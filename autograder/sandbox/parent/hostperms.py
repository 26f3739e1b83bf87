"""Permission changes the permissions layer makes on the host, held as a lease and always given back.

Without namespaces, root may have to change permissions for as long as it grades: give the sandbox users a way
through to Python where an ancestor folder is closed (a Python under /root, say), and, where no Landlock keeps
them out, take the world's permissions off the grading folders. Each change is written to a journal before it
is made (`/run/layernorm-kit/permissions.json`, root's only). Every grading process holds the changes it
needs under a token of its own; when the last holder of a change ends, the original mode comes back, unless
someone changed the mode meanwhile. A holder that died without giving its lease back (killed, crashed) is
noticed by the next grader to start, which gives the mode back then. Other users of the same install keep
working as soon as no root grader is running.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import uuid
from pathlib import Path

JOURNAL_DIR = Path("/run/layernorm-kit")


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def _alive(token: str) -> bool:
    pid, started, _ = token.split(":", 2)
    return _start_time(int(pid)) == started


def _mode(path: str) -> int | None:
    try:
        return stat.S_IMODE(os.lstat(path).st_mode)
    except OSError:
        return None


@contextlib.contextmanager
def _journal():
    """The journal's entries ({path: {"original", "set", "holders"}}), locked, written back on exit."""
    JOURNAL_DIR.mkdir(mode=0o700, exist_ok=True)
    if JOURNAL_DIR.is_symlink() or JOURNAL_DIR.stat().st_uid != os.geteuid():
        raise PermissionError(f"{JOURNAL_DIR} is not the grader's own folder")
    path = JOURNAL_DIR / "permissions.json"
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "r+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        text = handle.read()
        try:
            entries = json.loads(text) if text.strip() else {}
        except ValueError:
            entries = {}
        yield entries
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(entries, indent=1))


def _give_back(entries: dict) -> list[str]:
    """Restore every entry no live process holds (when its mode is still the one the kit set)."""
    restored = []
    for path, entry in list(entries.items()):
        entry["holders"] = [token for token in entry["holders"] if _alive(token)]
        if entry["holders"]:
            continue
        if _mode(path) == entry["set"]:
            os.chmod(path, entry["original"])
            restored.append(path)
        del entries[path]
    return restored


def restore_abandoned() -> list[str]:
    """Give back what graders that died without doing so still held. Root only; the paths restored."""
    if os.geteuid() != 0 or not (JOURNAL_DIR / "permissions.json").exists():
        return []
    with _journal() as entries:
        return _give_back(entries)


class Lease:
    """Holds `changes` ({path: mode}) from now until `release`."""

    def __init__(self, changes: dict[str, int]):
        self.token = f"{os.getpid()}:{_start_time(os.getpid())}:{uuid.uuid4().hex}"
        self.paths: list[str] = []
        if not changes:
            return
        with _journal() as entries:
            _give_back(entries)
            for path, mode in changes.items():
                current = _mode(path)
                if current is None:
                    continue
                entry = entries.setdefault(path, {"original": current, "set": mode, "holders": []})
                if current != mode:
                    os.chmod(path, mode)
                entry["set"] = mode
                entry["holders"].append(self.token)
                self.paths.append(path)

    @property
    def changed(self) -> list[str]:
        return list(self.paths)

    def release(self) -> None:
        if not self.paths:
            return
        with _journal() as entries:
            for path in self.paths:
                entry = entries.get(path)
                if entry and self.token in entry["holders"]:
                    entry["holders"].remove(self.token)
            _give_back(entries)
        self.paths = []
