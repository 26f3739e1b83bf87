"""The bubblewrap command the sandbox server runs in: a new root holding only the system, Python, the virtual
environment and the code the sandbox runs, with no network and its own process, IPC and host-name namespaces.

Inside it, each child then makes namespaces and a root of its own (`inside.rootfs`). Root's bubblewrap keeps
root's capabilities for that; any other user's runs in a user namespace of its own with CAP_SYS_ADMIN added
there (it gives no power outside the sandbox, and every child drops it before any student code runs).
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

from . import containment

PROBE = ["--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "--die-with-parent"]
USER_CAPS = ["--unshare-user", "--cap-add", "CAP_SYS_ADMIN"]


@functools.lru_cache(maxsize=None)
def works() -> bool:
    binary = shutil.which("bwrap")
    if not binary:
        return False
    try:
        probe = subprocess.run([binary, *PROBE, "true"], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


@functools.lru_cache(maxsize=None)
def user_caps() -> list[str]:
    """The options that give a non-root server CAP_SYS_ADMIN in its own user namespace, where bubblewrap
    allows it (not a setuid bubblewrap without user namespaces); else none."""
    if os.geteuid() == 0:
        return []
    try:
        probe = subprocess.run(["bwrap", *PROBE, *USER_CAPS, "true"], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return USER_CAPS if probe.returncode == 0 else []


def command(tmp_mb: int, groups: dict) -> list[str]:
    """A new root holding only the system, Python, the virtual environment and the sandbox's own code package."""
    command = [
        "bwrap",
        "--die-with-parent",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-pid",
        *user_caps(),
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--size",
        str(tmp_mb * 2**20),
        "--tmpfs",
        "/tmp",
        "--ro-bind",
        "/usr",
        "/usr",
        "--ro-bind",
        "/etc",
        "/etc",
    ]
    for name in ("bin", "sbin", "lib", "lib32", "lib64"):
        path = Path("/") / name
        if path.is_symlink():
            command += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            command += ["--ro-bind", str(path), str(path)]
    devices = sorted(glob.glob("/dev/nvidia*"))  # nvidiactl, nvidia0..., nvidia-uvm(-tools), nvidia-caps/
    for device in devices:
        command += ["--dev-bind", device, device]
    if devices:  # CUDA reads the PCI topology under /sys; some images keep the driver in /usr/local/nvidia
        command += ["--ro-bind-try", "/sys", "/sys", "--ro-bind-try", "/usr/local/nvidia", "/usr/local/nvidia"]
    for folder in groups.values():  # the server makes its children's job groups in these
        command += ["--bind", folder, folder]
    keep = {
        Path(sys.prefix).resolve(),
        Path(sys.base_prefix).resolve(),
        Path(sys.executable).resolve().parent,
        *containment.child_code(),
    }
    made = set()
    for path in sorted(keep):
        if not any(parent in keep for parent in path.parents) and not str(path).startswith(("/usr/", "/etc/")):
            # bubblewrap would make the missing folders above a mount private to root (0700), and the
            # sandbox user could then not reach Python's own modules: make them plain, readable folders
            for parent in reversed(path.parents[:-1]):
                if parent not in made:
                    command += ["--perms", "0755", "--dir", str(parent)]
                    made.add(parent)
            command += ["--ro-bind", str(path), str(path)]
    return command
