"""What a submission must not see, and making sure it cannot, with or without bubblewrap.

The sandbox child must be unable to read the kit (its reference solution, its tests), the assignment's
source notebook, the solutions, and other students' submissions and results. The ways there, the strongest
available first (see `autograder.sandbox.parent.client`):

* bubblewrap, or namespaces (root): each child gets a root of its own that holds only the system, Python and
  the sandbox's own code (`inside.rootfs`), so nothing else on the machine exists for it;
* Landlock, in every layer where the kernel has it: the child can read only below the system, Python and the
  sandbox's own code (`inside.landlock`), whatever the files' permission bits;
* permissions alone (root where the kernel refuses namespaces and Landlock, as in some containers): the child
  runs as a user of its own, and `lock_plan` takes away every permission "others" have on these folders,
  keeping only a path to Python and its packages, for as long as the grader runs (`hostperms.Lease`).

`private_folders` names the folders; `keep_folders` names what the child needs (Python, its packages).
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from autograder.course import kit


def inside(path, folder) -> bool:
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def course_of(assignment: kit.Assignment) -> Path:
    """The course folder around an assignment's source (`<course>/source/<assignment>/<notebook>`)."""
    source = assignment.source
    return source.parents[2] if len(source.parents) > 2 and source.parents[1].name == "source" else source.parent


SHARED = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock", "/home", "/root", "/srv", "/opt", "/mnt")


INSIDE = "autograder.sandbox.inside"  # the package the sandbox's own processes run: server, supervisors, children


def child_code() -> list[Path]:
    """What the sandbox's processes read of the kit: the package they run, the questions' package
    (`kit.QUESTIONS`) and the `__init__.py` of every package above them. Nothing else of the kit."""
    packages = (INSIDE, kit.QUESTIONS.rpartition(".")[0])
    paths = {kit.ROOT.joinpath(*package.split(".")) for package in packages}
    for package in packages:
        names = package.split(".")
        paths |= {kit.ROOT.joinpath(*names[:depth], "__init__.py") for depth in range(1, len(names))}
    return sorted(paths)


def private_folders(assignment: kit.Assignment, extra=()) -> list[str]:
    """Folders a submission must not read: the kit's checkout, the course of the assignment being graded, and
    whatever the caller adds (the class's submissions, the results folder), whatever their mode (a
    world-writable class or results folder included). Never / , a top-level folder or a place every user
    shares (/tmp, /run/lock...): those are never locked."""
    folders = {os.path.realpath(p) for p in (kit.ROOT, course_of(assignment), *extra) if p and os.path.isdir(p)}
    shared = {os.path.realpath(p) for p in SHARED}
    return sorted(f for f in folders - set(keep_folders()) if f.count(os.sep) >= 2 and f not in shared)


def own_folder(path) -> Path:
    """`path` as a real folder the grader made or owns, never a link someone else put there: results are written
    into it without following links. A link or a file in its place is removed first."""
    path = Path(path)
    try:
        info = os.lstat(path)
        if not stat.S_ISDIR(info.st_mode):
            path.unlink()
    except FileNotFoundError:
        pass
    path.mkdir(parents=True, exist_ok=True)
    return path


def keep_folders() -> list[str]:
    """What the child needs to read: Python and its packages (the virtual environment, the base install)."""
    return sorted(
        {
            os.path.realpath(p)
            for p in (sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)))
            if os.path.isdir(p)
        }
    )


def lock_plan(private: list[str], keep: list[str], lock: bool = True) -> dict[str, int]:
    """The modes `private` (when `lock`) and the ancestors of `keep` need: the world's permissions off
    `private` (keeping only a way through to `keep`), and a way through (o+x) to `keep` where an ancestor had
    none. Only paths whose mode would change. Applied and given back by `hostperms.Lease`."""
    plan: dict[str, int] = {}
    for folder in private if lock else []:
        _plan_lock(folder, [k for k in keep if inside(k, folder)], plan)
    for path in keep:
        for ancestor in reversed(Path(path).parents[:-1]):
            if any(inside(ancestor, p) for p in private) and lock:
                continue
            mode = plan.get(str(ancestor), stat.S_IMODE(os.stat(ancestor).st_mode))
            if not mode & stat.S_IXOTH:
                plan[str(ancestor)] = mode | stat.S_IXOTH
    return plan


def _plan_lock(folder: str, keep: list[str], plan: dict) -> None:
    if any(os.path.realpath(folder) == k for k in keep):
        return
    mode = stat.S_IMODE(os.stat(folder).st_mode)
    wanted = mode & ~0o007 if not keep else (mode & ~0o007) | stat.S_IXOTH  # with keep: a way through, no listing
    if wanted != mode:
        plan[folder] = wanted
    for entry in os.scandir(folder) if keep else []:
        if entry.is_dir(follow_symlinks=False):
            _plan_lock(entry.path, [k for k in keep if inside(k, entry.path)], plan)
        elif entry.is_file(follow_symlinks=False):  # reachable by name through the way kept open: closed too
            file_mode = stat.S_IMODE(entry.stat(follow_symlinks=False).st_mode)
            if file_mode & 0o007:
                plan[entry.path] = file_mode & ~0o007
