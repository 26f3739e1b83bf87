"""Running a grading command as systemd or a login starts one: under a session key ring of its own, which every
process it starts inherits (here a named one, joined by a launcher). Afterwards the launcher reports the keys
that ring holds: a student's key there would be one every later process of the grader could reach."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from autograder.sandbox.inside import seccomp
from autograder.sandbox.parent import client as sandbox

RING = "layernorm-grader-session"
LAUNCH = r"""
import ctypes, json, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
keyctl = int(sys.argv[1])
if libc.syscall(keyctl, 1, sys.argv[2].encode()) < 0:          # KEYCTL_JOIN_SESSION_KEYRING, by name
    raise OSError(ctypes.get_errno(), "could not join a session key ring")
done = subprocess.run(sys.argv[3:], capture_output=True, text=True)
buffer = ctypes.create_string_buffer(4096)
size = libc.syscall(keyctl, 11, ctypes.c_long(-3), buffer, 4096)   # KEYCTL_READ of the session ring: its keys
keys = [int.from_bytes(buffer.raw[i:i + 4], "little") for i in range(0, max(0, min(size, 4096)), 4)]
print(json.dumps({"status": done.returncode, "stdout": done.stdout[-20000:], "stderr": done.stderr[-20000:],
                  "ring_keys": keys}))
"""


def run_under_ring(argv: list[str], cwd: Path, env: dict, timeout: float = 900, user: str | None = None) -> dict:
    """Run `argv` under a named session key ring: {"status", "stdout", "stderr", "ring_keys"}. `user`: as that user
    (`hub_users`; then argv's first word is a Python they can run, which also runs the launcher)."""
    launcher = [sys.executable if user is None else str(argv[0]), "-c", LAUNCH, str(seccomp.number("keyctl")), RING]
    command = [*launcher, *map(str, argv)]
    if user is not None:
        import hub_users

        command, env = hub_users.command_as(user, command), hub_users.user_env(user, argv[0], env)
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise AssertionError(f"the launcher failed: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def sandbox_key_owners() -> dict[int, str]:
    """uid -> its line of /proc/key-users, for every sandbox uid that owns keys, but those of a sandbox server still
    running: a test reads this after its own grading has ended, so a live server is another grading run's on this
    machine (the suite's other worker), whose jobs' keys come and go with them."""
    owners = {}
    for line in Path("/proc/key-users").read_text().splitlines():
        uid, rest = line.split(":", 1)
        if int(uid) >= sandbox.SANDBOX_UID_BASE and int(rest.split()[1].split("/")[0]) and not _live_server(int(uid)):
            owners[int(uid)] = rest.strip()
    return owners


def is_sandbox_server(pid: int | str) -> bool:
    """Is process `pid` a sandbox server (raises OSError where there is no such process)?"""
    return re.search(rb"autograder\.[\w.]*server", Path(f"/proc/{pid}/cmdline").read_bytes()) is not None


def _live_server(uid: int) -> bool:
    """Is the server whose jobs run as `uid` (its uids follow from its process id) running?"""
    try:
        return is_sandbox_server((uid - sandbox.SANDBOX_UID_BASE) // sandbox.JOB_UIDS)
    except OSError:
        return False
