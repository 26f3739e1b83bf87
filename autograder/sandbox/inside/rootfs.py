"""A private root for each child: only what is listed exists, and everything writable is its own.

Where the server can make namespaces (as root outside bubblewrap, or inside bubblewrap with CAP_SYS_ADMIN in
its user namespace), every child gets new mount, network, IPC and host-name namespaces and moves into a new
root built on an empty tmpfs:

* the system folders (/usr, /etc, /bin, /sbin, /lib*, /sys) and Python with its packages and the code the sandbox runs,
  read-only, at their own paths;
* /dev with only null, zero, full, random, urandom (and the GPU's device files where there are any);
* its own /proc (showing only its own user's processes), and its own sized tmpfs on /tmp, /var/tmp,
  /dev/shm and /run/lock (with /var/lock pointing there).

So the kit, the course, the class, the results and any other file of the host (a stray copy of a solution)
do not exist for it, no world-writable place of the host is reachable, its System V IPC, POSIX message
queues and abstract Unix sockets are its own, and everything it wrote vanishes with its namespaces when it
ends, however deep or large the tree.
"""

from __future__ import annotations

import ctypes
import os

from . import seccomp

_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS = 0x00020000, 0x40000000, 0x08000000, 0x04000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 8, 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21  # the same bits as statvfs's ST_* flags
MNT_DETACH = 2
SYSTEM = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/sys")
DEVICES = ("null", "zero", "full", "random", "urandom")
PRIVATE_PLACES = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
STAGE = "/tmp"  # where the new root is assembled (in the child's own mount namespace)


def _mount(source, target: str, fstype, flags: int, data: str | None = None) -> None:
    if (
        _libc.mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            flags,
            data.encode() if data else None,
        )
        != 0
    ):
        error = ctypes.get_errno()
        raise OSError(error, f"mount {target}: {os.strerror(error)}")


def unshare(flags: int) -> None:
    if _libc.unshare(flags) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"unshare: {os.strerror(error)}")


def _read_only(target: str) -> None:
    """Remount `target` read-only and nosuid, keeping the flags it had (a user namespace may not drop them)."""
    kept = os.statvfs(target).f_flag & (MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME | MS_RELATIME)
    _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | kept)


def _bind(source: str, target: str, read_only: bool = True) -> None:
    if os.path.isdir(source):
        os.makedirs(target, mode=0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        open(target, "a").close()
    _mount(source, target, None, MS_BIND | MS_REC)
    if read_only:
        _read_only(target)


def _tmpfs(target: str, size_mb: float, mode: str = "1777") -> None:
    os.makedirs(target, mode=0o755, exist_ok=True)
    _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"mode={mode},size={int(size_mb * 1024)}k")


def private_root(keep: list[str], tmp_mb: int, devices: list[str] = (), network: bool = True) -> None:
    """Move this process into its own namespaces and a new root holding only SYSTEM, `keep` and `devices`.
    `network`: a network namespace of its own too (not needed inside bubblewrap, whose server has an empty one
    and runs one job at a time). Needs CAP_SYS_ADMIN (in the current user namespace); raises OSError where it
    is refused."""
    unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | (CLONE_NEWNET if network else 0))
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    keep = sorted({os.path.realpath(k) for k in keep if os.path.exists(k)}, key=len)
    handles = {path: os.open(path, os.O_PATH) for path in [*SYSTEM, *keep, *devices] if os.path.lexists(path)}
    links = {path: os.readlink(path) for path in SYSTEM if os.path.islink(path)}
    _tmpfs(STAGE, 2, "0755")
    new = STAGE
    try:
        for path, target in links.items():
            os.symlink(target, new + path)
        for path in SYSTEM:
            if path in handles and path not in links:
                _bind(f"/proc/self/fd/{handles[path]}", new + path)
        for path in ("/dev", "/proc", "/run", "/var"):
            os.makedirs(new + path, mode=0o755, exist_ok=True)
        for place in PRIVATE_PLACES:  # before Python is put back: a checkout under /tmp keeps its venv
            _tmpfs(new + place, tmp_mb)
        for path in keep:
            if not any(path == s or path.startswith(s + "/") for s in SYSTEM if s not in links):
                _bind(f"/proc/self/fd/{handles[path]}", new + path)
        for name in DEVICES:
            if f"/dev/{name}" in handles or os.path.exists(f"/dev/{name}"):
                _bind(f"/dev/{name}", f"{new}/dev/{name}", read_only=False)
        for device in devices:
            _bind(f"/proc/self/fd/{handles[device]}", new + device, read_only=False)
        for name, target in (
            ("fd", "/proc/self/fd"),
            ("stdin", "/proc/self/fd/0"),
            ("stdout", "/proc/self/fd/1"),
            ("stderr", "/proc/self/fd/2"),
        ):
            os.symlink(target, f"{new}/dev/{name}")
        os.symlink("/run/lock", new + "/var/lock")
        os.makedirs(new + "/.old", mode=0o700)
        try:  # its own /proc, showing its own user's processes only ...
            _mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2")
        except OSError:  # ... or, where a user namespace may not mount one (inside bubblewrap), the server's
            _mount("/proc", new + "/proc", None, MS_BIND | MS_REC)
    finally:
        for handle in handles.values():
            os.close(handle)
    _pivot(new, new + "/.old")
    os.chdir("/")
    if _libc.umount2(b"/.old", MNT_DETACH) != 0:
        raise OSError(ctypes.get_errno(), "umount of the old root")
    os.rmdir("/.old")
    _read_only("/")


def namespaces_work() -> bool:
    """Can this process make what a private root needs (mount, IPC, host-name and network namespaces, a tmpfs in
    them)? A forked copy of it tries; nothing changes here."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET)
            _mount(None, "/", None, MS_REC | MS_PRIVATE)
            _mount("tmpfs", STAGE, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k")
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def _pivot(new: str, old: str) -> None:
    number = seccomp.number("pivot_root")
    if number is None:
        raise OSError("no pivot_root here")
    if _libc.syscall(number, new.encode(), old.encode()) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"pivot_root: {os.strerror(error)}")
