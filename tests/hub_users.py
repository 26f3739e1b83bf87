"""Unprivileged Unix users, and the one way every test that runs as another user starts its commands: an instructor
and students who are not root, each given a Python they can run.

Creating users needs root; a test that needs them is skipped with the reason otherwise. A user never reads the
checkout itself: a root grader without namespaces or Landlock closes it to every other user for as long as it runs
(`containment.lock_plan`), and another test may be running one at the same moment. Each user gets copies, made of
hard links where the file system allows (no data copied), in a place outside the checkout that every user can
enter (`shared`): this very interpreter build (`interpreter_for`: a system Python of the same minor version may be an
older patch release the packages do not run on), the virtual environment on top
of it (`python_for`), with a copy of the checkout as the kit (`kit_root_for`) or without it (a student's
environment). Hard-linked files are never written: changed ones are replaced. `command_as` is how a command
starts as the user (setpriv, from a shell already running as them), `run_as` runs one, `cover` hiding folders
from it in a mount namespace of its own (an unreadable install, as that user sees one).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from autograder.course import kit

PREFIX = "u19-"
# .venv-users: where checkouts of earlier rounds kept the users' copies (still in .gitignore)
KEEP_OUT = {".git", ".venv", ".venv-users", "__pycache__", ".pytest_cache", ".hypothesis", "demo-out"}


# The users and the copies are the machine's, shared by every test process (pytest-xdist's workers, another run):
# each is made, checked and changed under one lock, held by one process at a time (re-entered by its holder).
_LOCK = Path(tempfile.gettempdir()) / "u19-hub-users.lock"
_held = 0
# the copy of the checkout is made once per run (every worker of one run shares it)
_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex


@contextlib.contextmanager
def _machine_lock():
    global _held
    if _held:
        _held += 1
        try:
            yield
        finally:
            _held -= 1
        return
    with open(_LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        _held = 1
        try:
            yield
        finally:
            _held = 0
            fcntl.flock(handle, fcntl.LOCK_UN)


def user(name: str) -> str:
    """The Unix user `u19-<name>`, created (with a home folder) if missing."""
    login = f"{PREFIX}{name}"
    if os.geteuid() != 0:
        pytest.skip("acting as other users needs root, to create them")
    with _machine_lock():
        if subprocess.run(["id", "-u", login], capture_output=True).returncode != 0:
            subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", login], check=True, capture_output=True)
    return login


def group(name: str, members: list[str]) -> str:
    """The Unix group `u19-<name>`, created if missing, whose members (besides those whose own group it is) are
    exactly `members`."""
    login = f"{PREFIX}{name}"
    if os.geteuid() != 0:
        pytest.skip("making groups needs root")
    with _machine_lock():
        if subprocess.run(["getent", "group", login], capture_output=True).returncode != 0:
            subprocess.run(["groupadd", login], check=True, capture_output=True)
        subprocess.run(["gpasswd", "-M", ",".join(members), login], check=True, capture_output=True)
    return login


def home(login: str) -> Path:
    return Path(pwd.getpwnam(login).pw_dir)


def command_as(login: str, argv: list) -> list[str]:
    """`argv` started as `login` (their groups, no capabilities left), from a shell already running as them: a
    path below a folder they cannot enter fails there as it does for every later exec of theirs."""
    return [
        "setpriv",
        f"--reuid={login}",
        f"--regid={login}",
        "--init-groups",
        "--",
        "/bin/sh",
        "-c",
        'exec "$@"',
        "sh",
        *map(str, argv),
    ]


def user_env(login: str, python: str | Path, env: dict | None = None) -> dict:
    return {
        "PATH": f"{Path(python).parent}:/usr/bin:/bin",
        "HOME": str(home(login)),
        "USER": login,
        "LOGNAME": login,
        "LANG": "C.UTF-8",
        **(env or {}),
    }


def runs(login: str, python: str | Path, imports: str = "torch, nbgrader, autograder") -> bool:
    """Can `login` start `python` and import `imports` with it?"""
    done = subprocess.run(
        command_as(login, [python, "-c", f"import {imports}" if imports else "pass"]),
        capture_output=True,
        cwd="/",
        env=user_env(login, python),
    )
    return done.returncode == 0


@functools.lru_cache(maxsize=1)
def shared() -> Path:
    """Where the copies go (one folder per environment): never inside the checkout, which a root grader may close
    for as long as it runs. Root's own folder, open to every user; made again if anyone else made it."""
    place = Path("/var/tmp") / f"layernorm-kit-users-{hashlib.sha256(sys.prefix.encode()).hexdigest()[:12]}"
    with _machine_lock():
        info = os.lstat(place) if os.path.lexists(place) else None
        if info is not None and not (stat.S_ISDIR(info.st_mode) and info.st_uid == 0):
            subprocess.run(["rm", "-rf", str(place)], check=True)
        place.mkdir(mode=0o755, exist_ok=True)
        place.chmod(0o755)
    return place


def _copy(source: Path, target: Path) -> None:
    """`source` copied to `target` as hard links, or as a real copy where they lie on different file systems."""
    if subprocess.run(["cp", "-al", str(source), str(target)], capture_output=True).returncode != 0:
        subprocess.run(["rm", "-rf", str(target)], check=True)
        subprocess.run(["cp", "-a", str(source), str(target)], check=True)


def interpreter_for(login: str) -> Path:
    """This interpreter build, with its standard library and no packages, where `login` can run it: its copy in
    `shared`, and the original only where the copy will not run. Whether `login` can run the original may hold for
    a moment only: a root grader without namespaces in another test opens a way through to Python's folders (one
    under /root, say) for as long as it grades (`containment.lock_plan`), and an environment made on the original
    then would stop working for `login` when that grading ends."""
    with _machine_lock():
        return _interpreter_for(login)


def _interpreter_for(login: str) -> Path:
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    place = shared() / ".python"
    made_from = f"{os.path.realpath(base)} {os.stat(os.path.realpath(base)).st_mtime_ns}"
    stamp = place / ".made-from"
    if not (stamp.is_file() and stamp.read_text() == made_from):
        shutil.rmtree(place, ignore_errors=True)
        place.parent.mkdir(parents=True, exist_ok=True)
        place.parent.chmod(0o755)
        _copy_interpreter(place)
        stamp.write_text(made_from)
    copy = place / "bin" / base.name
    for python in (copy, base):
        if runs(login, python, imports=""):
            return python
    pytest.skip(f"{login} cannot run {base}, nor a copy of it in {place}")


def kit_root_for(login: str) -> Path:
    """Where `python_for(login)` imports the kit from: a copy of the checkout, never the checkout itself."""
    return _kit_copy()


@functools.lru_cache(maxsize=1)
def _kit_copy() -> Path:
    """The checkout as it is now (made again once per test run: the work tree may have moved on): its folders
    hard-linked, its top-level files copied (the permissions layer closes those of the checkout, where the virtual
    environment lies inside it, and a hard link shares its mode)."""
    place = shared() / "kit"
    stamp = shared() / ".kit-made-for"
    with _machine_lock():
        if not (stamp.is_file() and stamp.read_text() == _RUN):
            stamp.unlink(missing_ok=True)
            shutil.rmtree(place, ignore_errors=True)
            place.mkdir(parents=True)
            for entry in kit.ROOT.iterdir():
                if entry.name not in KEEP_OUT and not entry.name.endswith(".egg-info"):
                    if entry.is_dir() and not entry.is_symlink():
                        _copy(entry, place / entry.name)
                    else:
                        subprocess.run(["cp", "-a", str(entry), str(place / entry.name)], check=True)
            stamp.write_text(_RUN)
    return place


def python_for(login: str, with_kit: bool = True) -> Path:
    """A Python with the kit's packages (and a copy of the kit, unless `with_kit` is false: a student's environment)
    that `login` can run, outside the checkout. Skips the test, saying why, where there is none."""
    with _machine_lock():
        return _python_for(login, with_kit)


def _python_for(login: str, with_kit: bool) -> Path:
    interpreter = interpreter_for(login)
    place = shared() / ("env" if with_kit else "env-without-kit")
    stamp = place / ".made-from"
    packages = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    # the environment as made, and as its packages stand: a package installed or removed since changes that folder
    made_from = (
        f"{sys.prefix} {os.stat(Path(sys.prefix) / 'pyvenv.cfg').st_mtime_ns} {os.stat(packages).st_mtime_ns} {interpreter}"
    )
    if not (stamp.is_file() and stamp.read_text() == made_from):
        shutil.rmtree(place, ignore_errors=True)
        _copy(Path(sys.prefix), place)
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        for name in ("pyvenv.cfg", "bin/python", "bin/python3", f"bin/{version}"):
            (place / name).unlink(missing_ok=True)  # never written in place: they are hard links
        (place / "pyvenv.cfg").write_text(
            f"home = {interpreter.parent}\ninclude-system-site-packages = false\n"
            f"version = {'.'.join(map(str, sys.version_info[:3]))}\n"
        )
        for name in ("python", "python3", version):
            (place / "bin" / name).symlink_to(interpreter)
        _point_scripts_at(place / "bin" / "python")
        site = place / "lib" / version / "site-packages"
        for found in [*site.glob("__editable__*layernorm*"), *site.glob("layernorm_kit_autograder*")]:
            shutil.rmtree(found) if found.is_dir() else found.unlink()
        stamp.write_text(made_from)
    site = place / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    pth = site / "layernorm-kit.pth"
    if with_kit and not (pth.is_file() and pth.read_text() == f"{kit_root_for(login)}\n"):
        pth.write_text(f"{kit_root_for(login)}\n")
    elif not with_kit:
        pth.unlink(missing_ok=True)
    python = place / "bin" / "python"
    if not runs(login, python, "torch, nbgrader, autograder" if with_kit else "nbgrader"):
        pytest.skip(f"{login} cannot run {sys.executable}, nor a copy of its environment in {place}")
    return python


def _copy_interpreter(place: Path) -> None:
    """This very interpreter (same build, same standard library) where the users can reach it: its executable,
    its shared library and its standard library without site-packages, hard-linked where the file system allows.
    A build that finds its shared library by an absolute run path (pyenv's) is pointed at `$ORIGIN/../lib`."""
    base = Path(sys.base_prefix)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    (place / "bin").mkdir(parents=True)
    (place / "lib").mkdir()
    stdlib = base / sys.platlibdir / version
    links = [path for path in (base / sys.platlibdir).glob("libpython*") if path.is_file() or path.is_symlink()]
    for source, target in [(stdlib, place / "lib" / version), *((path, place / "lib" / path.name) for path in links)]:
        _copy(source, target)
    shutil.rmtree(place / "lib" / version / "site-packages", ignore_errors=True)
    (place / "lib" / version / "site-packages").mkdir()
    executable = Path(os.path.realpath(base / "bin" / version))
    binary = executable.read_bytes()
    runpath = str(base / sys.platlibdir).encode()
    if runpath + b"\0" in binary and len(runpath) >= len(b"$ORIGIN/../lib"):
        binary = binary.replace(runpath + b"\0", b"$ORIGIN/../lib".ljust(len(runpath) + 1, b"\0"))
    copy = place / "bin" / version
    copy.write_bytes(binary)  # a new file: the original is never touched
    copy.chmod(0o755)
    for name in ("python3", "python"):
        (place / "bin" / name).symlink_to(version)


def _point_scripts_at(python: Path) -> None:
    """The environment's commands (nbgrader runs `alembic`, say) start the copy's Python, not the original's."""
    shebang = f"#!{sys.prefix}/bin/python".encode()
    for script in (python.parent).iterdir():
        if script.is_symlink() or not script.is_file():
            continue
        text = script.read_bytes()
        if text.startswith(shebang):
            mode = script.stat().st_mode
            script.unlink()  # a hard link to the original: replace, never write
            script.write_bytes(f"#!{python}".encode() + text.split(b"\n", 1)[0][len(shebang) :] + b"\n" + text.split(b"\n", 1)[1])
            script.chmod(mode)


def give(path: Path, login: str) -> Path:
    """`path` and everything in it now belong to `login`."""
    subprocess.run(["chown", "-R", f"{login}:{login}", str(path)], check=True)
    return path


COVER = r"""
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
spec = json.loads(sys.argv[1])
if libc.unshare(0x00020000):
    raise OSError(ctypes.get_errno(), "unshare")
if libc.mount(None, b"/", None, 16384 | (1 << 18), None):
    raise OSError(ctypes.get_errno(), "mount /")
for path in spec["cover"]:
    if libc.mount(b"tmpfs", path.encode(), b"tmpfs", 0, b"mode=0000"):
        raise OSError(ctypes.get_errno(), "mount " + path)
os.execvp("setpriv", spec["argv"])
"""


def run_as(login: str, argv: list, cwd, env: dict | None = None, cover=(), timeout: float = 600):
    """Run `argv` (its first word a Python from `python_for`, say) as `login`. `cover`: folders that look, to this
    command alone, like empty ones nobody may read (the host's permissions are left untouched)."""
    command = command_as(login, argv)
    if cover:
        spec = {"argv": command, "cover": [str(c) for c in cover]}
        command = [sys.executable, "-c", COVER, json.dumps(spec)]
    return subprocess.run(command, cwd=cwd, env=user_env(login, argv[0], env), capture_output=True, text=True, timeout=timeout)
