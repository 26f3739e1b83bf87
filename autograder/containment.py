"""What a submission must not see, and making sure it cannot, with or without bubblewrap.

The sandbox child must be unable to read the kit (its reference solution, its tests), the assignment's
source notebook, the solutions, and other students' submissions and results. Three ways get there, the
strongest available first (see `autograder.sandbox`):

* bubblewrap: the server runs in a new root that holds only the system, Python and the harness;
* namespaces (root, no bubblewrap): each child gets a private mount view where these folders are empty;
* permissions (root where the kernel refuses namespaces, as in many containers): the child runs as a user of
  its own, and `lock_down` takes away every permission "others" have on these folders, keeping only a path
  to Python and its packages.

`private_folders` names the folders; `keep_folders` names what the child needs (Python, its packages).
"""
from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from . import kit


def inside(path, folder) -> bool:
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def course_of(assignment: kit.Assignment) -> Path:
    """The course folder around an assignment's source (`<course>/source/<assignment>/<notebook>`)."""
    source = assignment.source
    return source.parents[2] if len(source.parents) > 2 and source.parents[1].name == "source" else source.parent


def private_folders(assignment: kit.Assignment, extra=()) -> list[str]:
    """Folders a submission must not read: the kit's checkout, the course of the assignment being graded, and
    whatever the caller adds (the class's submissions, the results folder). Never a system folder or a shared
    one (/, /tmp, a home root): those are covered by the private /tmp of the namespaces, and never locked."""
    folders = {os.path.realpath(p) for p in (kit.ROOT, course_of(assignment), *extra) if p and os.path.isdir(p)}
    return sorted(f for f in folders - set(keep_folders()) if not _shared(f))


def _shared(folder: str) -> bool:
    mode = os.stat(folder).st_mode
    return folder.count(os.sep) < 2 or bool(mode & (stat.S_ISVTX | stat.S_IWOTH))


def keep_folders() -> list[str]:
    """What the child needs to read: Python and its packages (the virtual environment, the base install)."""
    return sorted({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)))
                   if os.path.isdir(p)})


def _others_can(path: str, bits: int) -> bool:
    try:
        return bool(os.stat(path).st_mode & bits)
    except OSError:
        return False


def exposed(private: list[str], keep: list[str]) -> list[str]:
    """Entries of `private` that the world (a user who is neither owner nor group) can read or list, outside
    the paths kept open for `keep`. Empty when `lock_down` has done its work."""
    found = []
    for folder in private:
        found += _exposed(folder, [k for k in keep if inside(k, folder)])
    return found


def _exposed(folder: str, keep: list[str]) -> list[str]:
    if any(os.path.realpath(folder) == k for k in keep):
        return []
    if not keep:
        return [folder] if _others_can(folder, stat.S_IROTH | stat.S_IXOTH) else []
    found = [folder] if _others_can(folder, stat.S_IROTH) else []
    for entry in os.scandir(folder):
        if entry.is_symlink():
            continue
        found += _exposed(entry.path, [k for k in keep if inside(k, entry.path)])
    return found


def lock_down(private: list[str], keep: list[str]) -> list[str]:
    """Take away the world's permissions on `private` (keeping only a way through to `keep`) and give the world
    a way through to `keep` where an ancestor had none. Returns the paths whose permissions changed."""
    changed = []
    for folder in private:
        changed += _lock(folder, [k for k in keep if inside(k, folder)])
    for path in keep:
        for ancestor in reversed(Path(path).parents[:-1]):
            if not _others_can(str(ancestor), stat.S_IXOTH) and not any(inside(ancestor, p) for p in private):
                _chmod(str(ancestor), os.stat(ancestor).st_mode | stat.S_IXOTH, changed)
    return changed


def _lock(folder: str, keep: list[str]) -> list[str]:
    changed: list[str] = []
    if any(os.path.realpath(folder) == k for k in keep):
        return changed
    mode = os.stat(folder).st_mode
    if not keep:
        _chmod(folder, mode & ~0o007, changed)
        return changed
    _chmod(folder, (mode & ~0o007) | stat.S_IXOTH, changed)      # a way through, no listing
    for entry in os.scandir(folder):
        if entry.is_symlink():
            continue
        changed += _lock(entry.path, [k for k in keep if inside(k, entry.path)])
    return changed


def _chmod(path: str, mode: int, changed: list) -> None:
    if stat.S_IMODE(os.stat(path).st_mode) != stat.S_IMODE(mode):
        os.chmod(path, stat.S_IMODE(mode))
        changed.append(path)
