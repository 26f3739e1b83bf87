"""Running a command as an unprivileged user of the tests' own (named u18-...), as another instructor on the
same install would.

This machine's Python may live below a folder other users may not enter (a pyenv under /root). The command
then runs in a mount namespace of its own where that folder is replaced by an empty one that holds only the
way to Python: the host's permissions are left untouched, and nothing else changes for the command. `cover`
replaces folders by empty ones nobody may read, as an unreadable install looks to that user.
"""
from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys

SCRIPT = r"""
import ctypes, json, os, stat, sys
libc = ctypes.CDLL(None, use_errno=True)
def mount(source, target, kind, flags, data=None):
    if libc.mount(source and source.encode(), target.encode(), kind and kind.encode(), flags, data and data.encode()):
        raise OSError(ctypes.get_errno(), "mount " + target)
spec = json.loads(sys.argv[1])
if libc.unshare(0x00020000):
    raise OSError(ctypes.get_errno(), "unshare")
mount(None, "/", None, 16384 | (1 << 18))
parts = os.path.realpath(spec["python"]).split("/")[1:]
for i in range(1, len(parts)):
    ancestor, below = "/" + "/".join(parts[:i]), "/" + "/".join(parts[:i + 1])
    if not os.stat(ancestor).st_mode & stat.S_IXOTH:
        handle = os.open(below, os.O_PATH)
        mount("tmpfs", ancestor, "tmpfs", 0, "mode=0755")
        os.makedirs(below, exist_ok=True)
        mount(f"/proc/self/fd/{handle}", below, None, 4096 | 16384)
        break
for path in spec["cover"]:
    mount("tmpfs", path, "tmpfs", 0, "mode=0000")
os.setgroups([])
os.setgid(spec["gid"])
os.setuid(spec["uid"])
os.chdir(spec["cwd"])
os.execve(spec["argv"][0], spec["argv"], spec["env"])
"""


def ensure_user(name: str) -> pwd.struct_passwd:
    """An unprivileged user of the tests (made once; the name must start with u18-)."""
    assert name.startswith("u18-")
    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", name], check=True, capture_output=True)
        return pwd.getpwnam(name)


def run_as(user: pwd.struct_passwd, argv: list[str], cwd, env: dict | None = None, cover=(),
           timeout: float = 600) -> subprocess.CompletedProcess:
    environment = {"PATH": f"{os.path.dirname(sys.executable)}:/usr/bin:/bin", "HOME": user.pw_dir,
                   "USER": user.pw_name, "LANG": "C.UTF-8", **(env or {})}
    spec = {"python": sys.base_prefix, "uid": user.pw_uid, "gid": user.pw_gid, "cwd": str(cwd),
            "argv": [str(a) for a in argv], "env": environment, "cover": [str(c) for c in cover]}
    return subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(spec)], capture_output=True, text=True,
                          timeout=timeout)
