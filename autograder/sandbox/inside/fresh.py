"""Nothing inherited that was not chosen: what a sandbox process drops of what it was started with.

* key rings: the session key ring is the one thing of the kernel's key store a process inherits (its thread and
  process rings are not). A grader started by systemd or from a login (`pam_keyinit`) holds one, and every
  process it starts would share it. The server joins a new, anonymous session ring before its first job, each
  job's supervisor another, each child another (`new_session_keyring`); and the child's filter refuses every
  key-ring call (`syscalls.REFUSED`);
* per-user kernel state: where the kernel allows it, each child gets a user namespace of its own
  (`own_user_namespace`), root's children included, mapping only its own uid and gid. The user's key rings and
  the other state the kernel keeps per user in a namespace then live and die with the child, and a later job of
  the same uid finds none of it;
* file descriptors: each child starts with its channel, its output and /dev/null (`child.start_child`); the
  server closes whatever it was handed but its channel (`close_inherited`);
* environment and limits: the child's environment is replaced whole and its limits set (`confine`), the
  server's environment is the one the parent chose, and it dumps no core.
"""

from __future__ import annotations

import ctypes
import os
import resource

from . import seccomp

_libc = ctypes.CDLL(None, use_errno=True)
KEYCTL_JOIN_SESSION_KEYRING = 1
CLONE_NEWUSER = 0x10000000
ENOSYS = 38


def new_session_keyring() -> bool:
    """Join a new, anonymous session key ring (replacing the one inherited). False where the kernel keeps no
    key rings at all (then there is nothing to inherit); OSError where it refuses."""
    nr = seccomp.number("keyctl")
    if nr is None:
        return False
    if _libc.syscall(ctypes.c_long(nr), ctypes.c_long(KEYCTL_JOIN_SESSION_KEYRING), ctypes.c_void_p(None)) < 0:
        error = ctypes.get_errno()
        if error == ENOSYS:
            return False
        raise OSError(error, f"could not join a new session key ring: {os.strerror(error)}")
    return True


def session_keyring_serial() -> int | None:
    """The serial number of this process's session key ring (None without key rings)."""
    nr = seccomp.number("keyctl")
    KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING = 0, -3
    serial = (
        _libc.syscall(
            ctypes.c_long(nr), ctypes.c_long(KEYCTL_GET_KEYRING_ID), ctypes.c_long(KEY_SPEC_SESSION_KEYRING), ctypes.c_long(0)
        )
        if nr is not None
        else -1
    )
    return serial if serial >= 0 else None


def own_user_namespace() -> None:
    """Move into a new user namespace that maps only this process's own uid and gid (to themselves), then drop
    the capabilities it holds there (`confine.drop_capabilities`). Needs a dumpable, single-threaded process;
    OSError where the kernel refuses."""
    uid, gid = os.geteuid(), os.getegid()
    if _libc.unshare(CLONE_NEWUSER) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"unshare(CLONE_NEWUSER): {os.strerror(error)}")
    for name, line in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        descriptor = os.open(f"/proc/self/{name}", os.O_WRONLY)
        try:
            os.write(descriptor, line.encode())
        finally:
            os.close(descriptor)


def close_inherited(keep: tuple[int, ...]) -> None:
    """Close every descriptor above stderr but those in `keep`."""
    low = 3
    for fd in sorted(k for k in keep if k >= 3) + [1 << 16]:
        os.closerange(low, fd)
        low = fd + 1


def no_core() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
