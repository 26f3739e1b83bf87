"""Unprivileged Unix users for the tests that play a hub: an instructor and students who are not root.

Creating users needs root; a test that needs them is skipped with the reason otherwise. The users must run this
environment's Python: where its interpreter lies somewhere they cannot reach (a pyenv build under /root, say), a
copy of the virtual environment made of hard links (no data copied) is put beside it, with a copy of that same
interpreter build (a system Python of the same minor version may be an older patch release the packages do not
run on). Hard-linked files are never written: changed ones are replaced.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PREFIX = "u19-"
SHARED_ENV = Path(sys.prefix).parent / ".venv-users"     # beside the kit's .venv, on the same file system


def user(name: str) -> str:
    """The Unix user `u19-<name>`, created (with a home folder) if missing."""
    login = f"{PREFIX}{name}"
    if subprocess.run(["id", "-u", login], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", login], check=True, capture_output=True)
    return login


def runs(login: str, python: str | Path) -> bool:
    """Can `login` start `python` (and import the kit with it)? Started from a shell that already runs as
    `login`, as nbgrader starts `alembic`: setpriv's own exec of a path below a folder the user cannot enter
    can succeed where every later exec by the user fails."""
    done = subprocess.run(["setpriv", f"--reuid={login}", f"--regid={login}", "--init-groups", "--", "/bin/sh", "-c",
                           'exec "$0" -c "import torch, nbgrader, autograder"', str(python)],
                          capture_output=True, cwd="/")
    return done.returncode == 0


def python_for(login: str) -> Path:
    """A Python with the kit's packages that `login` can run (skips the test, saying why, where there is none)."""
    if os.geteuid() != 0:
        pytest.skip("playing a hub needs root, to create its unprivileged users")
    if runs(login, sys.executable):
        return Path(sys.executable)
    stamp = SHARED_ENV / ".made-from"
    made_from = f"{sys.prefix} {os.stat(Path(sys.prefix) / 'pyvenv.cfg').st_mtime_ns} {sys.base_prefix}"
    if not (stamp.is_file() and stamp.read_text() == made_from):
        shutil.rmtree(SHARED_ENV, ignore_errors=True)
        subprocess.run(["cp", "-al", sys.prefix, str(SHARED_ENV)], check=True)
        interpreter = _copy_interpreter(SHARED_ENV / ".python")
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        for name in ("pyvenv.cfg", "bin/python", "bin/python3", f"bin/{version}"):
            (SHARED_ENV / name).unlink(missing_ok=True)          # never written in place: they are hard links
        (SHARED_ENV / "pyvenv.cfg").write_text(f"home = {interpreter.parent}\ninclude-system-site-packages = false\n"
                                               f"version = {'.'.join(map(str, sys.version_info[:3]))}\n")
        for name in ("python", "python3", version):
            (SHARED_ENV / "bin" / name).symlink_to(interpreter)
        _point_scripts_at(SHARED_ENV / "bin" / "python")
        stamp.write_text(made_from)
    python = SHARED_ENV / "bin" / "python"
    if not runs(login, python):
        pytest.skip(f"{login} cannot run {sys.executable}, nor a copy of its interpreter in {SHARED_ENV}")
    return python


def _copy_interpreter(place: Path) -> Path:
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
        if subprocess.run(["cp", "-al", str(source), str(target)], capture_output=True).returncode != 0:
            subprocess.run(["cp", "-a", str(source), str(target)], check=True)     # another file system
    shutil.rmtree(place / "lib" / version / "site-packages", ignore_errors=True)
    executable = Path(os.path.realpath(base / "bin" / version))
    binary = executable.read_bytes()
    runpath = str(base / sys.platlibdir).encode()
    if runpath + b"\0" in binary and len(runpath) >= len(b"$ORIGIN/../lib"):
        binary = binary.replace(runpath + b"\0", b"$ORIGIN/../lib".ljust(len(runpath) + 1, b"\0"))
    copy = place / "bin" / version
    copy.write_bytes(binary)                                     # a new file: the original is never touched
    copy.chmod(0o755)
    return copy


def _point_scripts_at(python: Path) -> None:
    """The environment's commands (nbgrader runs `alembic`, say) start the copy's Python, not the original's."""
    shebang = f"#!{sys.prefix}/bin/python".encode()
    for script in (python.parent).iterdir():
        if script.is_symlink() or not script.is_file():
            continue
        text = script.read_bytes()
        if text.startswith(shebang):
            mode = script.stat().st_mode
            script.unlink()                                  # a hard link to the original: replace, never write
            script.write_bytes(f"#!{python}".encode() + text.split(b"\n", 1)[0][len(shebang):] + b"\n"
                               + text.split(b"\n", 1)[1])
            script.chmod(mode)


def give(path: Path, login: str) -> Path:
    """`path` and everything in it now belong to `login`."""
    subprocess.run(["chown", "-R", f"{login}:{login}", str(path)], check=True)
    return path
