"""The people of a test's hub: Unix users with the home folder a new account gets, a password of this run, in the
course's groups (docs/deployment.md: `adduser NAME`, then `adduser NAME GROUP`), and the hub itself started as the
set-up's last block says, on this machine's loopback."""

from __future__ import annotations

import fcntl
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import psutil

import hub_setup
import hub_users
from browser import free_port, wait_until


@contextmanager
def accounts():
    """The hub's accounts are one run's at a time (another checkout's run would reset their homes and passwords):
    held for as long as a hub of theirs runs."""
    with open(Path(tempfile.gettempdir()) / "u19-hub-accounts.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def new_account(name: str, group: str) -> tuple[str, str]:
    """`u19-<name>` with a home folder as a new account has it (/etc/skel's files, the folder's own mode left as
    useradd made it), a fresh password, in `group`. The user is the test's alone (no other test names it): what an
    earlier run left in the home folder is removed. Gives (login, password)."""
    login = hub_users.user(name)
    for process in psutil.process_iter(["uids"]):  # an earlier run's server of this user, left behind
        if process.info["uids"] and process.info["uids"].real == pwd.getpwnam(login).pw_uid:
            process.kill()
    home = hub_users.home(login)
    for entry in home.iterdir():
        shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
    for entry in Path("/etc/skel").iterdir():
        subprocess.run(["cp", "-a", str(entry), str(home / entry.name)], check=True)
    hub_users.give(home, login)
    password = secrets.token_urlsafe(12)
    subprocess.run(["chpasswd"], input=f"{login}:{password}\n", text=True, check=True, capture_output=True)
    hub_setup.join(login, group)
    return login, password


def hub_config_for_this_test(setup) -> None:
    """What stands, in the test, for what a hub has by itself: the hub's own ports free on this machine (another
    run's hub may use the defaults), and /etc/jupyter, which every user's server reads, found at the test's place."""
    with open(setup.jupyterhub / "jupyterhub_config.py", "a") as config:
        config.write(
            "\n# the test's own places\n"
            f'c.JupyterHub.hub_bind_url = "http://127.0.0.1:{free_port()}"\n'
            f'c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{free_port()}"\n'
            f'c.Spawner.environment["JUPYTER_CONFIG_PATH"] = "{setup.hub_config}"\n'
        )


@contextmanager
def running_hub(setup, log: Path, users=()):
    """The set-up's last block (starting the hub), run as written in the background as root; yields the process
    once the hub answers. On leaving it, the hub is stopped as a service manager stops it (SIGTERM: it stops the
    proxy and every user's server), and whatever of `users` still runs is ended."""
    (block,) = [block for who, block in hub_setup.setup_steps() if block.startswith(hub_setup.START)]
    with open(log, "w") as output:
        process = subprocess.Popen(
            ["bash", "-c", f"set -euo pipefail\n{setup.variables}\n{block}"],
            cwd=setup.hub_state.parent,
            env=setup.as_root,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def up():
        if process.poll() is not None:
            raise AssertionError(f"the hub stopped:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{setup.hub_url}/hub/api", timeout=2) as reply:
                return reply.status == 200
        except OSError:
            return False

    try:
        wait_until(up, 120, "the hub")
        yield process
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        uids = {pwd.getpwnam(login).pw_uid for login in users}
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            left = [p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real in uids]
            if not left:
                break
            time.sleep(0.5)
        for process in left:
            process.kill()
