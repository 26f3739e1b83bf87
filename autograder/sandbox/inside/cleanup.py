"""Removing what a job left behind, whatever it left: no recursion, no limit of depth, count or path length,
folders made unreadable opened again, every problem reported (a cleanup problem is the grader's, never the
student's) and the rest still removed.

Where a child has a private root (`rootfs`), its writable places are tmpfs mounts of its own that vanish whole
with it, and none of this is needed for them. Where it has none (permissions alone), its working directory is
removed here, and the job's user's files, System V IPC objects and message queues are looked for and removed
from every place others can write. Key rings need no cleanup: no child can make a key (the seccomp allowlist
refuses every key-ring call), and each child has a session ring and, where the kernel allows, a user namespace
of its own (`fresh`).
"""

from __future__ import annotations

import ctypes
import functools
import os
import stat
import time

_libc = ctypes.CDLL(None, use_errno=True)
IPC_RMID = 0
KNOWN_SHARED = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock", "/dev/mqueue")
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _problem(path: str, error: OSError) -> str:
    return f"cleanup: could not remove {path} ({error.strerror or error})"


def _open_dir(fd: int, name: str, mode: int) -> int:
    if mode & 0o700 != 0o700:  # made unreadable or unwritable by the job: make it the remover's again
        os.chmod(name, 0o700, dir_fd=fd)
    return os.open(name, _DIR, dir_fd=fd)


def _empty_out(fd: int, stuck: dict) -> tuple[str, int] | None:
    """Unlink every non-folder in the open folder `fd`; the first subfolder found (name, mode), or None when
    only entries that could not be removed (`stuck`) remain."""
    while True:
        removed_any = False
        with os.scandir(fd) as entries:
            for entry in entries:
                if entry.name in stuck:
                    continue
                try:
                    if entry.is_dir(follow_symlinks=False):
                        return entry.name, entry.stat(follow_symlinks=False).st_mode
                    os.unlink(entry.name, dir_fd=fd)
                    removed_any = True
                except FileNotFoundError:
                    continue
                except OSError as error:
                    stuck[entry.name] = error
        if not removed_any:
            return None


def remove_tree(path: str) -> list[str]:
    """Remove `path` (a folder and everything below it, a file, a link). Folders are entered by descriptor,
    one level at a time, and left through '..': depth costs neither stack nor path length nor descriptors.
    Returns the problems met (empty when everything is gone)."""
    path = os.path.abspath(path)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return []
    except OSError as error:
        return [_problem(path, error)]
    problems: list[str] = []
    try:
        top = os.open(os.path.dirname(path), _DIR)
    except OSError as error:
        return [_problem(path, error)]
    try:
        name = os.path.basename(path)
        if not stat.S_ISDIR(mode):
            os.unlink(name, dir_fd=top)
            return []
        names, stuck_at = [name], [{}]
        fd = _open_dir(top, name, mode)
        while names:
            found = _empty_out(fd, stuck_at[-1])
            if found is not None:
                try:
                    below = _open_dir(fd, *found)
                except OSError as error:
                    stuck_at[-1][found[0]] = error
                    continue
                os.close(fd)
                fd, names, stuck_at = below, names + [found[0]], stuck_at + [{}]
                continue
            for entry, error in list(stuck_at.pop().items())[:3]:
                problems.append(_problem(os.path.join(path, *names[1:], entry), error))
            up = os.open("..", _DIR, dir_fd=fd) if len(names) > 1 else os.dup(top)
            os.close(fd)
            fd, done = up, names.pop()
            try:
                os.rmdir(done, dir_fd=fd)
            except OSError as error:
                if stuck_at:
                    stuck_at[-1][done] = error
                else:
                    problems.append(_problem(path, error))
        os.close(fd)
    except OSError as error:
        problems.append(_problem(path, error))
    finally:
        os.close(top)
    return problems[:10]


def usage(path: str, enough: int) -> int:
    """The bytes the files below `path` take on disk (their blocks), counted without recursion and without following
    links; the count stops once it passes `enough`."""
    total, todo = 0, [path]
    for entry, info in _entries(todo):
        total += info.st_blocks * 512
        if total > enough:
            break
        if stat.S_ISDIR(info.st_mode):
            todo.append(entry.path)
    return total


def _entries(todo: list):
    """Each entry of the folders on the stack `todo` with its own status (links not followed), popping folders as it
    goes; the caller pushes the folders it wants walked. What cannot be read is passed over."""
    while todo:
        try:
            entries = list(os.scandir(todo.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            yield entry, info


# --- the job's user's leftovers in places others can write (permissions alone) ----------------------------


def remove_files_of(uid: int, places) -> list[str]:
    """Remove every entry owned by `uid` in `places` and in the world-writable folders below them (the only
    folders a job's user of its own can write in). Returns the problems met."""
    problems, todo, seen = [], [p for p in places if os.path.isdir(p)], set()
    for entry, info in _entries(todo):
        if info.st_uid == uid:
            problems += remove_tree(entry.path)
        elif stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_IWOTH and (info.st_dev, info.st_ino) not in seen:
            seen.add((info.st_dev, info.st_ino))
            todo.append(entry.path)
    return problems


def _ipc_ids(kind: str, uid: int) -> list[int]:
    """Ids of System V IPC objects of `kind` (shm, msg, sem) that `uid` owns or made."""
    try:
        lines = open(f"/proc/sysvipc/{kind}").read().splitlines()
    except OSError:
        return []
    header = lines[0].split() if lines else []
    if not {"uid", "cuid"} <= set(header):
        return []
    column = {name: i for i, name in enumerate(header)}
    identity = "shmid" if kind == "shm" else "msqid" if kind == "msg" else "semid"
    found = []
    for line in lines[1:]:
        fields = line.split()
        if len(fields) == len(header) and uid in (int(fields[column["uid"]]), int(fields[column["cuid"]])):
            found.append(int(fields[column[identity]]))
    return found


def remove_ipc_of(uid: int) -> list[str]:
    """Remove the System V IPC objects and POSIX message queues `uid` owns; the problems met."""
    problems = []
    for kind, remove in (
        ("shm", lambda i: _libc.shmctl(i, IPC_RMID, None)),
        ("msg", lambda i: _libc.msgctl(i, IPC_RMID, None)),
        ("sem", lambda i: _libc.semctl(i, 0, IPC_RMID)),
    ):
        for ident in _ipc_ids(kind, uid):
            if remove(ident) != 0 and ctypes.get_errno() not in (22, 43):  # EINVAL, EIDRM: already gone
                problems.append(f"cleanup: could not remove System V {kind} {ident} of the job")
    if os.path.ismount("/dev/mqueue"):
        problems += remove_files_of(uid, ["/dev/mqueue"])
    return problems


def after_job(uid: int, namespaced: bool, landlock: bool, processes: bool = True) -> list[str]:
    """In the parent, once a job has ended: kill whatever of its user is left (with `processes`), and
    (without namespaces) remove its user's files from the places others can write and its IPC objects. The
    problems met; a process that outlived the job is one (its supervisor should have ended it)."""
    from .processes import kill_user

    problems = ["cleanup: processes of the job outlived it (killed)"] if processes and kill_user(uid) else []
    if not namespaced:
        places = KNOWN_SHARED if landlock else shared_places()
        problems += remove_files_of(uid, places) + remove_ipc_of(uid)
    return problems


@functools.lru_cache(maxsize=1)
def shared_places(budget_s: float = 10.0) -> tuple[str, ...]:
    """The places a job's user of its own could write on this host: the usual world-writable folders, and
    every other world-writable folder found in a walk of the local file systems (at most `budget_s`)."""
    found = {os.path.realpath(p) for p in KNOWN_SHARED if os.path.isdir(p)}
    deadline, todo = time.monotonic() + budget_s, ["/"]
    while todo and time.monotonic() < deadline:
        folder = todo.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.path in ("/proc", "/sys") or not entry.is_dir(follow_symlinks=False):
                continue
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if mode & stat.S_IWOTH:
                found.add(entry.path)  # its own world-writable subfolders are walked by remove_files_of
            else:
                todo.append(entry.path)
    return tuple(sorted(found))
