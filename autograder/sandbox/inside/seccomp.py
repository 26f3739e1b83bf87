"""The child's seccomp filter: an allowlist (`allowlist.ALLOWED`), everything else refused, in every layer.

The program, classic BPF, made once by the server and loaded by every child before any student code runs:

1. a call made through another ABI than the machine's own (i386 or x32 on x86-64, 32-bit ARM on arm64) kills
   the process;
2. the allowed calls go through; the checked ones (`syscalls.CHECKED`) only with their arguments allowed;
   those that name a process (`syscalls.TARGETED`) only when it is the caller itself (0, or the process id of
   the child that installs the program, `own`: each child builds its own, before any student code runs);
   the calls a layer grants (`syscalls.GRANTS`) only where the server grants them;
3. clone3 fails with ENOSYS (the C library then uses clone, whose flags the filter reads), and so does any
   number above the highest this machine's libseccomp knows (a call newer than it: programs fall back on
   ENOSYS, as they do on an older kernel);
4. everything else fails with EPERM.

System-call numbers come from libseccomp (`number`), resolved by name for the architecture, never typed here.
On a GPU (`device="cuda"`) ioctl is not checked: NVIDIA's driver and its unified memory use request codes of
their own, and Landlock (which allows device ioctls only on the listed device files) keeps them to the GPU.
"""

from __future__ import annotations

import ctypes
import functools
import platform
import struct
import sys

from . import allowlist, syscalls

_libc = ctypes.CDLL(None, use_errno=True)
LOAD, AND, JEQ, JGT, JGE, JSET, RET = 0x20, 0x54, 0x15, 0x25, 0x35, 0x45, 0x06
ALLOW, KILL_PROCESS, ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
EPERM, ENOSYS = 1, 38
X32_BIT = 0x40000000
NR, ARCH_OFFSET = 0, 4
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}  # AUDIT_ARCH_*, which are also libseccomp's tokens
GPU_ONLY = ("get_mempolicy",)  # CUDA's host allocations read the NUMA policy


@functools.lru_cache(maxsize=1)
def _libseccomp():
    try:
        lib = ctypes.CDLL("libseccomp.so.2")
    except OSError as error:
        raise OSError(
            "libseccomp (libseccomp.so.2) is needed for the sandbox's system-call filter: on Debian and "
            "Ubuntu, apt-get install libseccomp2"
        ) from error
    lib.seccomp_syscall_resolve_name_arch.argtypes = [ctypes.c_uint32, ctypes.c_char_p]
    lib.seccomp_syscall_resolve_name_arch.restype = ctypes.c_int
    lib.seccomp_syscall_resolve_num_arch.argtypes = [ctypes.c_uint32, ctypes.c_int]
    lib.seccomp_syscall_resolve_num_arch.restype = ctypes.c_void_p
    return lib


def machine() -> str:
    return platform.machine()


@functools.lru_cache(maxsize=None)
def number(name: str, arch: str | None = None) -> int | None:
    """The system call's number on `arch` (this machine's by default), from libseccomp; None where it has none."""
    arch = arch or machine()
    if arch not in ARCH:
        raise OSError(f"no seccomp filter for {arch}")
    found = _libseccomp().seccomp_syscall_resolve_name_arch(ARCH[arch], name.encode())
    return found if found >= 0 else None


@functools.lru_cache(maxsize=None)
def highest_known(arch: str) -> int:
    """The highest system-call number libseccomp has a name for on `arch`."""
    lib, highest = _libseccomp(), 0
    for candidate in range(1024):
        name = lib.seccomp_syscall_resolve_num_arch(ARCH[arch], candidate)
        if name:
            highest = candidate
            _libc.free(ctypes.c_void_p(name))
    return highest


def _op(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _argument(index: int) -> int:
    """Offset of argument `index`'s low 32 bits in struct seccomp_data (little-endian machines only)."""
    return 16 + 8 * index


def _one_of(values) -> list[bytes]:
    """Fall through when the accumulator is one of `values`, else fail with EPERM."""
    values = list(values)
    return [_op(JEQ, len(values) - i, 0, v) for i, v in enumerate(values)] + [_op(RET, 0, 0, ERRNO | EPERM)]


def own_targets(own: int | None, group: bool = False) -> list[int]:
    """The values (as the filter reads them: 32 bits) by which a call may name the caller: 0, its own process id,
    and with `group` its own process group (-own)."""
    values = [0] + ([own] if own else []) + ([-own & 0xFFFFFFFF] if own and group else [])
    return sorted(set(values))


def _targeted(name: str, own: int | None) -> list[bytes]:
    """The checks of a call that names a process (`syscalls.TARGETED`): only the caller itself."""
    checks = []
    if name in syscalls.WHICH:  # what the target names: a process or a process group, never a user
        checks += [_op(LOAD, 0, 0, _argument(0)), *_one_of(syscalls.WHICH[name])]
    targets = own_targets(own, group=name in syscalls.GROUP_TOO)
    return checks + [_op(LOAD, 0, 0, _argument(syscalls.TARGETED[name])), *_one_of(targets), _op(RET, 0, 0, ALLOW)]


def _checks(name: str, grants, device: str, own: int | None = None, checks_off=()) -> list[bytes] | None:
    """The argument checks of a CHECKED call, ending in a verdict; None where the call is refused outright
    (socket without the "sockets" grant) or allowed outright (ioctl on a GPU)."""
    types = [_op(LOAD, 0, 0, _argument(1)), _op(AND, 0, 0, 0xF), *_one_of(syscalls.SOCKET_TYPES.values())]
    if name == "fcntl":
        commands = list(syscalls.FCNTLS.values())
        commands += list(syscalls.LOCKS.values()) if "shared files" in checks_off else []
        if "other processes" in checks_off:
            commands.append(syscalls.F_SETOWN)
            setown = []
        else:  # F_SETOWN: signals for the descriptor go to the caller or its group only
            owners = _one_of(own_targets(own, group=True))
            setown = [_op(LOAD, 0, 0, _argument(2)), *owners, _op(RET, 0, 0, ALLOW)]
            setown = [_op(JEQ, 0, len(setown), syscalls.F_SETOWN), *setown]
        return [_op(LOAD, 0, 0, _argument(1)), *setown, *_one_of(commands), _op(RET, 0, 0, ALLOW)]
    if name in syscalls.NOWAIT_CHECKED:
        if "shared files" in checks_off:
            return [_op(RET, 0, 0, ALLOW)]
        flags = _argument(syscalls.NOWAIT_CHECKED[name])
        nowait = _op(JSET, 0, 1, syscalls.RWF_NOWAIT)
        return [_op(LOAD, 0, 0, flags), nowait, _op(RET, 0, 0, ERRNO | EPERM), _op(RET, 0, 0, ALLOW)]
    if name == "clone":
        mask = 0
        for flag in syscalls.NAMESPACE_FLAGS.values():
            mask |= flag
        return [_op(LOAD, 0, 0, _argument(0)), _op(JSET, 0, 1, mask), _op(RET, 0, 0, ERRNO | EPERM), _op(RET, 0, 0, ALLOW)]
    if name == "ioctl":
        return (
            None
            if device == "cuda"
            else [_op(LOAD, 0, 0, _argument(1)), *_one_of(syscalls.IOCTLS.values()), _op(RET, 0, 0, ALLOW)]
        )
    if name == "prctl":
        return [_op(LOAD, 0, 0, _argument(0)), *_one_of(syscalls.PRCTLS.values()), _op(RET, 0, 0, ALLOW)]
    if name == "socket":
        if "sockets" not in grants:
            return None
        return [_op(LOAD, 0, 0, _argument(0)), *_one_of(syscalls.FAMILIES.values()), *types, _op(RET, 0, 0, ALLOW)]
    if name == "socketpair":
        return [_op(LOAD, 0, 0, _argument(0)), *_one_of([syscalls.FAMILIES["AF_UNIX"]]), *types, _op(RET, 0, 0, ALLOW)]
    if name == "personality":
        return [_op(LOAD, 0, 0, _argument(0)), *_one_of([syscalls.PERSONALITY_QUERY]), _op(RET, 0, 0, ALLOW)]
    raise ValueError(f"no argument checks for {name}")


def allowed_names(grants=(), device: str = "cpu", checks_off=()) -> list[str]:
    """The calls allowed without argument checks, in the order the program tests them."""
    names = [name for group in allowlist.ALLOWED.values() for name in group]
    names += [name for grant in sorted(grants) if grant != "sockets" for name in syscalls.GRANTS[grant]]
    if "other processes" in checks_off:
        names += list(syscalls.TARGETED)
    if "shared files" in checks_off:
        names += list(syscalls.REFUSED["shared files"])
    return names + (list(GPU_ONLY) + ["ioctl"] if device == "cuda" else [])


def build(grants=(), device: str = "cpu", arch: str | None = None, own: int | None = None, checks_off=()) -> bytes:
    """The filter program for `arch` (this machine's by default), granting the parts `grants` (see
    `syscalls.GRANTS`) and made for `device` ("cpu" or "cuda"). `own`: the process id of the process that
    installs it, as it sees it (without it, a call may name a process by 0 alone). `checks_off`: argument
    checks left out (`syscalls.SWITCHES`), for the tests only."""
    arch = arch or machine()
    if arch not in ARCH:
        raise OSError(f"no seccomp filter for {arch}")
    if sys.byteorder != "little":
        raise OSError("the seccomp filter reads arguments as little-endian")
    unknown = set(grants) - set(syscalls.GRANTS)
    if unknown:
        raise ValueError(f"unknown grants {sorted(unknown)}")
    if set(checks_off) - set(syscalls.SWITCHES):
        raise ValueError(f"unknown checks {sorted(set(checks_off) - set(syscalls.SWITCHES))}")
    if own is not None and not 0 < own < 1 << 31:
        raise ValueError(f"not a process id: {own}")
    program = [
        _op(LOAD, 0, 0, ARCH_OFFSET),
        _op(JEQ, 1, 0, ARCH[arch]),
        _op(RET, 0, 0, KILL_PROCESS),  # the ABI
        _op(LOAD, 0, 0, NR),
    ]  # the number
    if arch == "x86_64":  # x32 calls carry the same audit arch: refused by bit
        program += [_op(JGE, 0, 1, X32_BIT), _op(RET, 0, 0, KILL_PROCESS)]
    seen = set()
    for name in allowed_names(grants, device, checks_off):
        nr = number(name, arch)
        if nr is not None and nr not in seen:
            seen.add(nr)
            program += [_op(JEQ, 0, 1, nr), _op(RET, 0, 0, ALLOW)]
    for name in [*syscalls.CHECKED, *syscalls.TARGETED]:
        nr = number(name, arch)
        checks = _targeted(name, own) if name in syscalls.TARGETED else _checks(name, grants, device, own, checks_off)
        if nr is None or nr in seen or checks is None:
            continue
        seen.add(nr)
        program += [_op(JEQ, 0, len(checks), nr), *checks]
    for name in syscalls.ENOSYS:
        nr = number(name, arch)
        if nr is not None and nr not in seen:
            program += [_op(JEQ, 0, 1, nr), _op(RET, 0, 0, ERRNO | ENOSYS)]
    program += [_op(JGT, 0, 1, highest_known(arch)), _op(RET, 0, 0, ERRNO | ENOSYS), _op(RET, 0, 0, ERRNO | EPERM)]
    if len(program) > 4096:
        raise OSError("the seccomp program is longer than the kernel takes")
    return b"".join(program)


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def install(program: bytes) -> None:
    """Load `program` (from `build`) for this process and all it starts. Raises OSError where seccomp is refused."""
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _Fprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_char_p))
    if (
        _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
        or _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0
    ):
        raise OSError(ctypes.get_errno(), "seccomp refused")
