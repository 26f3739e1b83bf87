"""Confining a child before it runs any student code.

Everything here runs in the freshly forked child, in this order:

1. join the job's control groups (done by the caller: one memory and process limit, one CPU clock);
2. `enter`, while the child is still one thread (a user namespace, and a mount namespace made for one thread
   alone, need that; credentials and namespaces are each thread's own, and threads started later inherit them):
   where the server can make namespaces, a private root of its own (`rootfs.private_root`: only the system,
   Python and the sandbox's own code; own /tmp, /var/tmp, /dev/shm, /run/lock; own network, IPC and host name);
   a new session, umask 077, its working directory; the job's own sandbox user (as root), then, where the
   kernel allows it, a user namespace of its own (`fresh.own_user_namespace`), every capability dropped, and a
   new session key ring (`fresh`);
3. CUDA, when the job asks for it (`start_cuda`: its driver starts threads of its own, and maps tens of GB of
   address space, which the memory limit counts from);
4. `confine`: resource limits; Landlock where the kernel has it (`landlock.restrict`: reads only below the
   system, Python and the sandbox's own code, and of the host's /proc, where it has no root of its own, only its
   own entries; writes only below its own places); the seccomp allowlist
   (`seccomp`: only the calls grading needs, those that name a process only on itself; sockets and IPC only with
   namespaces; permission changes only with namespaces or Landlock); a clean environment and no grading modules
   on the import path.
"""

from __future__ import annotations

import ctypes
import glob
import importlib.machinery
import os
import resource
import signal
import sys
import tempfile

import torch

from . import fresh, landlock, seccomp
from .rootfs import PRIVATE_PLACES, private_root

_libc = ctypes.CDLL(None, use_errno=True)
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, PR_SET_DUMPABLE = 47, 4, 4
READABLE = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/sys")
# Without a root of its own a child's /proc is the host's, where every process's command line lies: Landlock then lets
# it read its own process's entries (/proc/self, as the child's own directory), and what /proc says of the machine.
PROC_OF_THE_MACHINE = ("/proc/self", "/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/loadavg", "/proc/uptime")
PROC_OF_THE_MACHINE += ("/proc/version", "/proc/filesystems", "/proc/sys")
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


def inside(path: str, folder: str) -> bool:
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


class NoGradingCode:
    """Import hook in the child: no module from the kit's folder but the packages the child runs (this one and
    the questions') and the virtual environment, under whatever name it is asked for (`autograder.grading`, or
    the same file by another path)."""

    def __init__(self, kit_root: str | None, packages: tuple):
        self.kit_root, self.packages = kit_root, tuple(packages)
        self.allowed = (*(os.path.dirname(os.path.abspath(sys.modules[p].__file__)) for p in self.packages), sys.prefix)

    def find_spec(self, name, path=None, target=None):
        if (name == "autograder" or name.startswith("autograder.")) and not any(
            name == p or name.startswith(p + ".") for p in self.packages
        ):
            raise ImportError("the grader's modules are not available to submissions")
        if self.kit_root:
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            origin = os.path.realpath(spec.origin) if spec is not None and spec.origin else ""
            if origin and inside(origin, self.kit_root) and not any(inside(origin, ok) for ok in self.allowed):
                raise ImportError("the grader's modules are not available to submissions")
        return None


def start_cuda(limits: dict) -> None:
    """CUDA's context (and cuBLAS) in the child, after `enter` and before `confine` and any student code.

    CUDA maps tens of GB of address space when it starts, which the RLIMIT_AS set next would refuse; started
    first, that mapping is part of the size the limit is added to. Its driver starts threads, after which no
    user namespace can be made: hence after `enter`. Neither a CUDA context nor autograd's engine, once it has
    started its threads for a GPU, survives fork: the server itself never touches CUDA, not even
    `torch.cuda.is_available()`, and never runs a backward pass (`questions.job.BACKWARD_PROBES`).
    """
    torch.cuda.init()
    a = torch.ones(8, 8, device="cuda")
    (a @ a).sum().item()
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, limits["memory_mb"] * 2**20 / total))


def gpu_devices() -> list[str]:
    return sorted(glob.glob("/dev/nvidia*"))


def readable_places(keep: list[str], own_proc_only: bool = False) -> list[str]:
    """What a child may read: the system, Python and its packages, the code the sandbox runs (the same in every layer);
    with `own_proc_only` (a child that sees the host's /proc) of /proc only its own entries and the machine's."""
    system = [place for place in READABLE if place != "/proc"] + (list(PROC_OF_THE_MACHINE) if own_proc_only else ["/proc"])
    return [*system, *keep, os.path.dirname(os.path.abspath(__file__))]


def drop_capabilities() -> None:
    """No capability left in any set (inside bubblewrap's user namespace the server keeps CAP_SYS_ADMIN to
    make each child's namespaces; the child itself must not keep it)."""
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: all empty
    number = seccomp.number("capset")
    if number is None or _libc.syscall(number, header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def enter(workdir: str | None, setup, uid: int | None) -> str:
    """Step 2 of the above, in a child that is still one thread; returns its working directory."""
    view = setup.view
    if view is not None:
        private_root(setup.keep, view["tmp_mb"], gpu_devices(), network=view.get("network", True))
        workdir = tempfile.mkdtemp(prefix="submission-", dir="/tmp")
    os.setsid()
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM):
        signal.signal(number, signal.SIG_DFL)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an over-long write fails instead of killing
    os.umask(0o077)
    if uid is not None:
        os.chown(workdir, uid, uid)
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # its own memory is its own to read (the supervisor's is not)
    if setup.user_namespace:
        fresh.own_user_namespace()
    drop_capabilities()
    fresh.new_session_keyring()
    return workdir


def confine(workdir: str, setup, uid: int | None, device: str = "cpu") -> str:
    """Step 4 of the above, after `enter` (and CUDA): confine this child for good; returns its working directory."""
    limits = setup.limits
    writable = [place for place in PRIVATE_PLACES if os.path.isdir(place)] if setup.view is not None else []
    with open("/proc/self/status") as status:
        vm_size_kb = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
    nproc = limits["processes"] if uid is not None else setup.nproc_base + limits["processes"]
    for kind, value in (
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_FSIZE, limits["file_mb"] * 2**20),
        (resource.RLIMIT_NOFILE, 256),
        (resource.RLIMIT_AS, vm_size_kb * 1024 + limits["memory_mb"] * 2**20),
        (resource.RLIMIT_CPU, int(limits["job_s"]) + 5),
        (resource.RLIMIT_NPROC, nproc),
    ):
        hard = resource.getrlimit(kind)[1]  # no longer root: a limit can be lowered, never raised
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(kind, (value, value))
    if setup.landlock:
        readable = readable_places(setup.keep, own_proc_only=setup.view is None)  # /proc/self: this child's own
        landlock.restrict(readable, [workdir, *writable], [*DEVICES, *gpu_devices()])
    if device not in setup.programs:
        raise OSError("seccomp does not work here")
    seccomp.install(seccomp.build(setup.grants, device, own=os.getpid(), checks_off=setup.checks_off))
    os.chdir(workdir)
    os.environ.clear()
    os.environ.update(HOME=workdir, TMPDIR=workdir, PATH="/usr/bin:/bin", LANG="C.UTF-8", MPLBACKEND="Agg", OMP_NUM_THREADS="1")
    tempfile.tempdir = workdir
    if setup.hide_root:  # the grader's folder leaves the path; Python's own environment stays, even inside it
        environments = [e for e in (sys.prefix, sys.base_prefix) if not inside(setup.hide_root, e)]
        sys.path[:] = [p for p in sys.path if p and (not inside(p, setup.hide_root) or any(inside(p, e) for e in environments))]
    sys.meta_path.insert(0, NoGradingCode(setup.hide_root, (__package__, setup.questions.__package__)))
    return workdir
