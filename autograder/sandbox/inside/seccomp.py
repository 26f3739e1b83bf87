"""The child's seccomp filter: system calls refused before any student code runs.

Every layer: a system call made through another ABI (x86's i386 or x32, arm's 32-bit) kills the process,
and io_uring (whose operations a filter cannot see) is refused. Where there is no network or IPC namespace
(permissions alone), also every socket() and every System V IPC or POSIX message queue; where, besides, no
Landlock confines its writes, also every change of permission bits, ACLs and the umask, so that whatever the
child creates in a place others can write stays its own (mode 0700/0600).
"""
from __future__ import annotations

import ctypes
import platform
import struct

_libc = ctypes.CDLL(None, use_errno=True)
LOAD, JEQ, JGE, RET = 0x20, 0x15, 0x35, 0x06
ALLOW, KILL_PROCESS, ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
EPERM = 1
X32_BIT = 0x40000000
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2

ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
NUMBERS = {
    "x86_64": {"io_uring": (425, 426, 427), "sockets": (41,),
               "ipc": (29, 30, 31, 64, 65, 66, 67, 68, 69, 70, 71, 220, 240, 241, 242, 243, 244, 245),
               "permissions": (90, 91, 268, 452, 95, 188, 189, 190, 463)},
    "aarch64": {"io_uring": (425, 426, 427), "sockets": (198,),
                "ipc": (186, 187, 188, 189, 190, 191, 192, 193, 194, 195, 196, 197, 180, 181, 182, 183, 184, 185),
                "permissions": (52, 53, 452, 166, 5, 6, 7, 463)},
}
PARTS = ("io_uring", "sockets", "ipc", "permissions")


def _op(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def build(parts=("io_uring",), machine: str | None = None) -> bytes:
    """The filter program refusing the system calls of `parts` (see PARTS), for this machine's ABI."""
    machine = machine or platform.machine()
    if machine not in ARCH:
        raise OSError(f"no seccomp filter for {machine}")
    program = [_op(LOAD, 0, 0, 4), _op(JEQ, 1, 0, ARCH[machine]), _op(RET, 0, 0, KILL_PROCESS),   # the ABI
               _op(LOAD, 0, 0, 0)]                                                                # the number
    if machine == "x86_64":                                 # x32 calls carry the same audit arch: refuse by bit
        program += [_op(JGE, 0, 1, X32_BIT), _op(RET, 0, 0, KILL_PROCESS)]
    for part in parts:
        for number in NUMBERS[machine][part]:
            program += [_op(JEQ, 0, 1, number), _op(RET, 0, 0, ERRNO | EPERM)]
    program.append(_op(RET, 0, 0, ALLOW))
    return b"".join(program)


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def install(parts=("io_uring",)) -> None:
    """Load the filter for this process and all it starts. Raises OSError where seccomp is not available."""
    program = build(parts)
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _Fprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_char_p))
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
            _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp refused")
