"""Confining a child before it runs any student code.

Everything here runs in the freshly forked child, in this order: CUDA first when asked for (its context must
be made before the memory limit and the user switch), then `confine`:

1. join the job's control groups (one memory and process limit, one CPU clock for all it starts);
2. namespaces, when the server runs as root outside bubblewrap: a private mount view (grading files covered,
   a small private /tmp, /dev/shm and /var/tmp, only its own processes in /proc), no network, no shared IPC;
3. where no network namespace could be made: a seccomp filter that refuses every socket but a Unix one;
4. a new session, resource limits, the sandbox user, a private working directory, a clean environment and
   no grading modules on the import path.
"""
from __future__ import annotations

import ctypes
import importlib.machinery
import os
import platform
import resource
import signal
import struct
import sys
import tempfile

import torch

_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS = 0x00020000, 0x40000000, 0x08000000, 0x04000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
PRIVATE_TMP = ("/tmp", "/var/tmp", "/dev/shm")


def inside(path: str, folder: str) -> bool:
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


class NoGradingCode:
    """Import hook in the child: no module from the kit's folder but this harness and the virtual environment,
    under whatever name it is asked for (`autograder.grading`, or the same file by another path)."""

    def __init__(self, kit_root: str | None):
        self.kit_root = kit_root
        self.allowed = (os.path.dirname(os.path.abspath(__file__)), sys.prefix)

    def find_spec(self, name, path=None, target=None):
        if (name == "autograder" or name.startswith("autograder.")) and not name.startswith("autograder.harness"):
            raise ImportError("the grader's modules are not available to submissions")
        if self.kit_root:
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            origin = os.path.realpath(spec.origin) if spec is not None and spec.origin else ""
            if origin and inside(origin, self.kit_root) and not any(inside(origin, ok) for ok in self.allowed):
                raise ImportError("the grader's modules are not available to submissions")
        return None


def start_cuda(limits: dict) -> None:
    """CUDA's context (and cuBLAS) in the child, before its limits, its user switch and any student code.

    CUDA maps tens of GB of address space when it starts, which the RLIMIT_AS set next would refuse; started
    first, that mapping is part of the size the limit is added to (and the GPU's device files are opened
    while still allowed). A CUDA context does not survive fork, so the server itself never touches CUDA,
    not even `torch.cuda.is_available()`.
    """
    torch.cuda.init()
    a = torch.ones(8, 8, device="cuda")
    (a @ a).sum().item()
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, limits["memory_mb"] * 2**20 / total))


def _mount(source, target: str, fstype, flags: int, data: str | None = None) -> None:
    if _libc.mount(source.encode() if source else None, target.encode(), fstype.encode() if fstype else None,
                   flags, data.encode() if data else None) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"mount {target}: {os.strerror(error)}")


def unshare(flags: int) -> None:
    if _libc.unshare(flags) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"unshare: {os.strerror(error)}")


def private_view(hide: list[str], keep: list[str], tmp_mb: int) -> None:
    """A mount namespace where `hide`'s folders are empty, `keep`'s folders (Python, its packages) are there
    read-only, ancestors of `keep` the sandbox user could not traverse are opened, /tmp, /var/tmp and /dev/shm
    are small private tmpfs, and /proc shows only the sandbox user's own processes. Also no network, no shared
    IPC. Needs root (CAP_SYS_ADMIN); raises OSError where the kernel or a container refuses."""
    unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    keep = sorted({os.path.realpath(k) for k in keep if os.path.isdir(k)}, key=len)
    closed = {a for k in keep for a in _ancestors(k) if not os.stat(a).st_mode & 0o001}
    tmp = {folder: f"mode=1777,size={tmp_mb}m" for folder in PRIVATE_TMP if os.path.isdir(folder)}
    covers = {**{os.path.realpath(h): "mode=0755,size=1m" for h in hide if os.path.isdir(h)},
              **{folder: "mode=0755,size=1m" for folder in closed}, **tmp}
    handles = {k: os.open(k, os.O_PATH) for k in keep}
    covered: list[str] = []
    for folder in sorted(covers, key=len):            # outer folders first; what to keep is put back after
        if any(inside(folder, c) for c in covered) and not any(inside(k, folder) for k in keep) \
                and folder not in tmp:
            continue                                    # already out of sight under an outer cover
        os.makedirs(folder, exist_ok=True)
        _mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, covers[folder])
        covered.append(folder)
    for path, handle in handles.items():                # Python and its packages, even below a cover
        if any(inside(path, c) for c in covered):
            os.makedirs(path, exist_ok=True)
            _mount(f"/proc/self/fd/{handle}", path, None, MS_BIND | MS_REC)
            _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_REC)
        os.close(handle)
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV, "hidepid=2")


def _ancestors(path: str) -> list[str]:
    parts, out = path.rstrip("/").split("/")[1:], []
    for i in range(1, len(parts)):
        out.append("/" + "/".join(parts[:i]))
    return out


# --- no network without a network namespace: seccomp ------------------------------------------------------

_ARCH = {"x86_64": (0xC000003E, 41, 425), "aarch64": (0xC00000B7, 198, 425)}   # audit arch, socket, io_uring_setup


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def refuse_sockets() -> None:
    """A seccomp filter: socket() only for AF_UNIX, no io_uring, no foreign system-call ABI. Raises OSError
    where seccomp is not available (then the isolation string says the network was left open)."""
    if platform.machine() not in _ARCH:
        raise OSError(f"no seccomp filter for {platform.machine()}")
    arch, nr_socket, nr_uring = _ARCH[platform.machine()]
    load, equal, ret = 0x20, 0x15, 0x06
    allow, deny = 0x7FFF0000, 0x00050000 | 1         # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
    op = lambda code, jt, jf, k: struct.pack("HBBI", code, jt, jf, k)   # noqa: E731
    program = b"".join([op(load, 0, 0, 4), op(equal, 1, 0, arch), op(ret, 0, 0, deny),        # the ABI
                        op(load, 0, 0, 0), op(equal, 0, 2, nr_socket),                         # socket(...)
                        op(load, 0, 0, 16), op(equal, 2, 1, 1),                                # AF_UNIX only
                        op(equal, 0, 1, nr_uring), op(ret, 0, 0, deny), op(ret, 0, 0, allow)])
    buffer = ctypes.create_string_buffer(program)
    filter_program = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_char_p))
    if _libc.prctl(38, 1, 0, 0, 0) != 0 or _libc.prctl(22, 2, ctypes.byref(filter_program), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp refused")


def confine(workdir: str, limits: dict, sandbox_uid: int | None, nproc_base: int, hide_root: str | None,
            view: dict | None = None, sockets: bool = True) -> str:
    """Limits, a new session, the sandbox user (as root), a private working directory, a clean environment and
    no grading modules on the import path. With `view`, first the private mount namespace (`private_view`);
    the working directory is then made inside its private /tmp. Returns the working directory."""
    if view is not None:
        private_view(view["hide"], view["keep"], view["tmp_mb"])
        workdir = tempfile.mkdtemp(prefix="submission-", dir="/tmp")
    elif not sockets:
        refuse_sockets()
    os.setsid()
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM):
        signal.signal(number, signal.SIG_DFL)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)       # an over-long write fails instead of killing
    with open("/proc/self/status") as status:
        vm_size_kb = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
    memory = vm_size_kb * 1024 + limits["memory_mb"] * 2**20
    for kind, value in ((resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, limits["file_mb"] * 2**20),
                        (resource.RLIMIT_NOFILE, 256), (resource.RLIMIT_AS, memory),
                        (resource.RLIMIT_CPU, int(limits["job_s"]) + 5)):
        resource.setrlimit(kind, (value, value))
    if sandbox_uid is not None:
        os.chown(workdir, sandbox_uid, sandbox_uid)
        os.setgroups([])
        os.setgid(sandbox_uid)
        os.setuid(sandbox_uid)
        nproc = limits["processes"]
    else:
        nproc = nproc_base + limits["processes"]
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    os.chdir(workdir)
    os.environ.clear()
    os.environ.update(HOME=workdir, TMPDIR=workdir, PATH="/usr/bin:/bin", LANG="C.UTF-8",
                      MPLBACKEND="Agg", OMP_NUM_THREADS="1")
    tempfile.tempdir = workdir
    if hide_root:      # the grader's folder leaves the path; Python's own environment stays, even inside it
        environments = [e for e in (sys.prefix, sys.base_prefix) if not inside(hide_root, e)]
        sys.path[:] = [p for p in sys.path if p and (not inside(p, hide_root)
                                                     or any(inside(p, e) for e in environments))]
    sys.meta_path.insert(0, NoGradingCode(hide_root))
    return workdir
