"""A course of the kit's is its instructors' alone: nobody else may read or write its source (the solutions), its
gradebook (the file and the folder sqlite writes its journal in), `submitted/`, `autograded/` or `feedback/`.

Every door that grades, draws feedback or exports, on a course holding one of the kit's assignments, asks
`guard` first (`nbgrader autograde` and formgrader's Autograde button through `preflight.KitPreflight`,
`grade-class --course` and `class-report --course` through the recorder, `generate_feedback`, formgrader's
Generate Feedback and `release_feedback` through `feedback`, `nbgrader export` through its exporter). Where
another user can (`autograder.frontends.access`: any user but the course folder's owner, root and the members of
`c.KitCourse.instructors_group`), it refuses in one line that names the path and the command that closes it, and
changes nothing. `c.KitCourse.when_open_to_others = "allow"`, in the course's or the hub's nbgrader_config.py,
goes on instead, and every door then says so in the log (and grade-class and the class report at their top).
Courses with none of the kit's assignments are stock nbgrader's: nothing is checked.

Collected submissions are then made private as the kit first reads them (`close_submissions`): nbgrader's collect
carries the exchange's mode over (0777 folders).
"""

from __future__ import annotations

import glob
import grp
import os
import pwd
import shlex
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from traitlets import Enum, Unicode
from traitlets.config import Config, Configurable

from autograder.frontends.openings import Opening, Top, openings
from .plugins import is_kit_notebook
from .plugins import KitRefusal, course_directory, refuse

PRIVATE_STEPS = ("submitted_directory", "autograded_directory", "feedback_directory")
ALLOW = 'c.KitCourse.when_open_to_others = "allow"'


class KitCourse(Configurable):
    """Who a course of the kit's belongs to (set in a course's or the hub's nbgrader_config.py)."""

    instructors_group = Unicode(
        "",
        help=(
            "A Unix group of the course's instructors, for a course several of them share: its members may read "
            "and write the course, and its group permissions do not count as open. Empty: the course folder's "
            "owner alone."
        ),
    ).tag(config=True)
    when_open_to_others = Enum(
        ["refuse", "allow"],
        default_value="refuse",
        help=(
            "Where other users can read or write the course's source, gradebook or submissions: 'refuse' (the "
            "default) grades, draws feedback and exports nothing; 'allow' goes on, and every command says so."
        ),
    ).tag(config=True)


@dataclass(frozen=True)
class Exposure:
    line: str  # what is open, to whom, and the command that closes it
    allowed: bool  # the course chose to go on regardless

    def warning(self) -> str:
        return f"the course is open to other users ({ALLOW}): {self.line}"


def private_paths(coursedir) -> list[Top]:
    """What must be the instructors' alone: the gradebook's folder (itself: sqlite writes its journal there) and
    file, the source folder (an instructor's links there lead to their own files: followed), and the folders of
    submissions, autograded notebooks and feedback (a link there is not the course's: left alone)."""
    root = os.path.abspath(coursedir.root)
    paths = [Top(_step_folder(coursedir, coursedir.source_directory), follow=True)]
    if coursedir.db_url.startswith("sqlite:///"):
        database = os.path.join(root, coursedir.db_url.removeprefix("sqlite:///"))
        paths = [Top(os.path.dirname(database), below=False), *paths, Top(database)]
    paths += [Top(_step_folder(coursedir, getattr(coursedir, step))) for step in PRIVATE_STEPS]
    return [Top(os.path.join(root, top.path), top.below, top.follow) for top in paths]


def _step_folder(coursedir, step: str) -> str:
    """The folder of one of nbgrader's steps (`submitted`), whatever the course's directory_structure."""
    mark = "\x00"
    parts = Path(coursedir.format_path(step, mark, mark)).parts
    return str(Path(*parts[: next(i for i, part in enumerate(parts) if mark in part)]))


def holds_kit_assignment(coursedir) -> bool:
    """Does any source notebook of the course belong to one of the kit's assignments?"""
    for path in sorted(Path(coursedir.format_path(coursedir.source_directory, ".", ".")).glob("*/*.ipynb")):
        try:
            info = path.stat()
        except OSError:
            continue
        if is_kit_notebook(str(path), (info.st_mtime_ns, info.st_size)):
            return True
    return False


def instructors(config: Config) -> tuple[str, int | None]:
    name = KitCourse(config=config).instructors_group
    if not name:
        return "", None
    try:
        return name, grp.getgrnam(name).gr_gid
    except KeyError:
        raise LookupError(f'c.KitCourse.instructors_group = "{name}" names no group on this machine') from None


def exposure(coursedir, config: Config) -> Exposure | None:
    """What of the course other users can read or write, in one line with the fix (see the module); None where
    nobody else can, or the course holds none of the kit's assignments."""
    if not holds_kit_assignment(coursedir):
        return None
    allowed = KitCourse(config=config).when_open_to_others == "allow"
    try:
        group, trusted = instructors(config)
        root = os.path.realpath(coursedir.root)
        owner = os.stat(root).st_uid
        found = openings(private_paths(coursedir), owner=owner, trusted=trusted, within=root)
    except (OSError, LookupError) as error:
        return Exposure(f"could not tell whether other users can read the course: {error}", allowed)
    if not found:
        return None
    first, more = found[0], len({o.path for o in found}) - 1
    also = f", and {more} more of the course's private paths" if more else ""
    what = f"other users can {first.verb} {first.path} ({first.how.text}){also}"
    return Exposure(f"{what}: run `{fix(first, owner, group)}`", allowed)


def fix(opening: Opening, owner: int, group: str) -> str:
    """The command that closes `opening.gate` to the user it was open to."""
    gate, how = shlex.quote(opening.gate), opening.gate_how
    if how.via == "owner":
        return f"chown {_login(owner)} {gate}"
    if opening.verb == "replace":
        return f"chmod +t {gate}" if how.via == "mode" else f"setfacl -b {gate} && chmod +t {gate}"
    folder = os.path.isdir(opening.gate)
    if group:
        change = f"chmod {'2770' if folder else '660'} {gate}"
        if os.stat(opening.gate).st_gid != grp.getgrnam(group).gr_gid:
            change = f"chgrp {group} {gate} && {change}"
    else:
        change = f"chmod {'700' if folder else '600'} {gate}"
    if how.via == "acl":
        return f"setfacl -b {gate} && {change}"
    if how.via == "opaque":
        return f"{change}, and take other users out of its access list"
    return change


def _login(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def guard(coursedir, config: Config, log, what: str) -> str | None:
    """The doors' check, in nbgrader: stops the command in one line (`plugins.refuse`) where the course is open to
    other users; where the course allows it, logs the warning and returns it; None where the course is private."""
    found = exposure(coursedir, config)
    if found is None:
        return None
    if not found.allowed:
        raise refuse(log, what, refusal_line(found))
    log.warning("%s", found.warning())
    return found.warning()


def guard_or_exit(configurable, what: str) -> str | None:
    """`guard` for a door whose command stops with its exit status (`nbgrader export`: its app catches nothing)."""
    try:
        return guard(course_directory(configurable), configurable.config, configurable.log, what)
    except KitRefusal:
        sys.exit(1)


def refusal_line(found: Exposure) -> str:
    return found.line + f", or set {ALLOW} in the course's nbgrader_config.py to go on anyway"


# --- collected submissions, made private --------------------------------------------------------------------

MAX_DEPTH, MAX_ENTRIES = 32, 10_000  # below a folder closed to others, nothing is theirs to reach anyway


def close_submissions(coursedir, assignment: str, config: Config, student: str = "*") -> list[str]:
    """Take every other user's permissions off each collected submission of `assignment` (the folder and what is
    in it, and the folders `submitted/` and `submitted/<student>/` themselves), where the instructors' group keeps
    its own; links are never followed, and whatever a student put there is changed or left, never a failure.
    Returns what could not be changed."""
    try:
        _, trusted = instructors(config)
    except LookupError:  # said already by the check before: the strictest then
        trusted = None
    top = _step_folder(coursedir, coursedir.submitted_directory)
    pattern = coursedir.format_path(coursedir.submitted_directory, student, glob.escape(assignment))
    root = os.path.join(coursedir.root, "")
    if pattern.startswith(root):  # the course's own path is no pattern, whatever it holds
        pattern = glob.escape(root) + pattern[len(root) :]
    problems = []
    for folder in sorted(glob.glob(pattern)):
        for parent in (top, os.path.dirname(folder)):
            problems += _close(parent, trusted, depth=0)
        problems += _close(folder, trusted, depth=MAX_DEPTH)
    return problems


def _close(path: str, trusted: int | None, depth: int) -> list[str]:
    """go-rwx (o-rwx where the entry's group is the instructors') on `path` and, `depth` folders down, below it."""
    try:
        handle = os.open(path, os.O_PATH | os.O_NOFOLLOW)
    except OSError as error:
        return [f"{path}: {error.strerror}"]
    problems, budget, stack = [], [MAX_ENTRIES], [(handle, path, depth)]
    while stack:
        handle, where, left = stack.pop()
        try:
            problems += _close_one(handle, where, trusted)
            if left and budget[0] > 0 and stat.S_ISDIR(os.fstat(handle).st_mode):
                stack += _children(handle, where, left - 1, budget)
        finally:
            os.close(handle)
    return problems


def _close_one(handle: int, where: str, trusted: int | None) -> list[str]:
    info = os.fstat(handle)
    if stat.S_ISLNK(info.st_mode):
        return []
    closed = stat.S_IMODE(info.st_mode) & ~(0o007 if info.st_gid == trusted else 0o077)
    if closed == stat.S_IMODE(info.st_mode):
        return []
    try:
        os.chmod(f"/proc/self/fd/{handle}", closed)  # the very file opened, never what a name points to now
    except OSError as error:
        return [f"{where}: {error.strerror}"]
    return []


def _children(handle: int, where: str, left: int, budget: list) -> list:
    try:
        listing = os.open(f"/proc/self/fd/{handle}", os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return []  # a folder its owner cannot read: closed already, nothing below is reached
    found = []
    try:
        for name in os.listdir(listing):
            if budget[0] <= 0:
                break
            budget[0] -= 1
            try:
                found.append((os.open(name, os.O_PATH | os.O_NOFOLLOW, dir_fd=listing), os.path.join(where, name), left))
            except OSError:
                continue
    finally:
        os.close(listing)
    return found
