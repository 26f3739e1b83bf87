"""Unprivileged Unix users for the tests that play a hub: an instructor and students who are not root.

Creating users needs root; a test that needs them is skipped with the reason otherwise. The users must run this
environment's Python: where its interpreter lies somewhere they cannot reach (a pyenv build under /root, say), a
copy of the virtual environment made of hard links (no data copied) is put beside it and pointed at a system
Python of the same version, as a hub image would have. Hard-linked files are never written: changed ones are
replaced.
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
    done = subprocess.run(["setpriv", f"--reuid={login}", f"--regid={login}", "--init-groups", "--", str(python),
                           "-c", "import torch, nbgrader, autograder"], capture_output=True, cwd="/")
    return done.returncode == 0


def python_for(login: str) -> Path:
    """A Python with the kit's packages that `login` can run (skips the test, saying why, where there is none)."""
    if os.geteuid() != 0:
        pytest.skip("playing a hub needs root, to create its unprivileged users")
    if runs(login, sys.executable):
        return Path(sys.executable)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    system = next((Path(d) / version for d in ("/usr/bin", "/usr/local/bin") if (Path(d) / version).is_file()), None)
    if system is None:
        pytest.skip(f"{login} cannot run {sys.executable}, and there is no system {version} to point a copy at")
    stamp = SHARED_ENV / ".made-from"
    made_from = f"{sys.prefix} {os.stat(Path(sys.prefix) / 'pyvenv.cfg').st_mtime_ns} {system}"
    if not (stamp.is_file() and stamp.read_text() == made_from):
        shutil.rmtree(SHARED_ENV, ignore_errors=True)
        subprocess.run(["cp", "-al", sys.prefix, str(SHARED_ENV)], check=True)
        for name in ("pyvenv.cfg", "bin/python", "bin/python3", f"bin/{version}"):
            (SHARED_ENV / name).unlink(missing_ok=True)          # never written in place: they are hard links
        (SHARED_ENV / "pyvenv.cfg").write_text(f"home = {system.parent}\ninclude-system-site-packages = false\n"
                                               f"version = {'.'.join(map(str, sys.version_info[:3]))}\n")
        for name in ("python", "python3", version):
            (SHARED_ENV / "bin" / name).symlink_to(system)
        _point_scripts_at(SHARED_ENV / "bin" / "python")
        stamp.write_text(made_from)
    python = SHARED_ENV / "bin" / "python"
    if not runs(login, python):
        pytest.skip(f"{login} cannot run this environment's Python, nor a copy of it on {system}")
    return python


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
