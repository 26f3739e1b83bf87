"""Landlock: the child restricts itself, unprivileged, to the files it needs, in every layer the kernel allows.

After `restrict`, the child can read (and map as code) only below the folders it is given (the system,
Python and its packages, the code the sandbox runs), use only the listed devices, and write only below its own places
(its working directory; its private /tmp where it has one). Everything else on the machine is refused
whatever its permission bits say: a world-readable stray copy of the solution, a world-writable class or
results folder, /tmp's shared subfolders, /run/lock. From ABI 4 on, TCP binds and connects are refused; from
ABI 6 on, it cannot reach abstract Unix sockets or signal processes made outside its own domain.

Linux 5.13 and newer with Landlock enabled; `abi()` is 0 where it is missing (or refused by a container's
seccomp profile), and the other layers then do without it (`autograder.sandbox.parent.client` names what holds).
"""

from __future__ import annotations

import ctypes
import os
import struct

from . import seccomp

_libc = ctypes.CDLL(None, use_errno=True)
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG = 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8
MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # what a rule on a file may grant
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1


def _number(name: str) -> int:
    number = seccomp.number(f"landlock_{name}")
    if number is None:
        raise OSError(f"this machine's libseccomp does not know landlock_{name}")
    return number


def abi() -> int:
    """The kernel's Landlock ABI version, or 0 when it has none (or libseccomp does not know its calls)."""
    try:
        version = _libc.syscall(_number("create_ruleset"), None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    except OSError:
        return 0
    return max(0, version)


def handled_fs(version: int) -> int:
    rights = (1 << 13) - 1  # ABI 1: EXECUTE .. MAKE_SYM
    rights |= REFER if version >= 2 else 0
    rights |= TRUNCATE if version >= 3 else 0
    rights |= IOCTL_DEV if version >= 5 else 0
    return rights


def _syscall(number: int, *args) -> int:
    result = _libc.syscall(number, *args)
    if result < 0:
        error = ctypes.get_errno()
        raise OSError(error, f"landlock: {os.strerror(error)}")
    return result


def restrict(read: list[str], write: list[str], devices: list[str] = ()) -> int:
    """Restrict this process (and all it starts) for good. Returns the ABI used; raises OSError when refused."""
    version = abi()
    if version < 1:
        raise OSError("Landlock is not available")
    handled = handled_fs(version)
    attr = struct.pack(
        "QQQ",
        handled,
        NET_BIND_TCP | NET_CONNECT_TCP if version >= 4 else 0,
        SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= 6 else 0,
    )
    size = 8 if version < 4 else 16 if version < 6 else 24
    buffer = ctypes.create_string_buffer(attr[:size], size)
    ruleset = _syscall(_number("create_ruleset"), buffer, ctypes.c_size_t(size), ctypes.c_uint32(0))
    try:
        rules = [(path, EXECUTE | READ_FILE | READ_DIR) for path in read]
        rules += [(path, handled) for path in write]
        rules += [(path, READ_FILE | WRITE_FILE | IOCTL_DEV | TRUNCATE) for path in devices]
        for path, rights in rules:
            try:
                handle = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # not on this machine: nothing to allow
            try:
                if not os.path.isdir(f"/proc/self/fd/{handle}"):
                    rights &= FILE_RIGHTS
                beneath = ctypes.create_string_buffer(struct.pack("=Qi", rights & handled, handle), 12)
                _syscall(_number("add_rule"), ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH), beneath, ctypes.c_uint32(0))
            finally:
                os.close(handle)
        if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "no_new_privs")
        _syscall(_number("restrict_self"), ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
    return version
