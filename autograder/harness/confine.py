"""Confining a child before it runs any student code: limits, user, working directory, environment, imports.

Everything here runs in the freshly forked child, in this order: CUDA first when asked for (its context must
be made before the memory limit and the user switch), then `confine`.
"""
from __future__ import annotations

import importlib.machinery
import os
import resource
import signal
import sys
import tempfile

import torch


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


def confine(workdir: str, limits: dict, sandbox_uid: int | None, nproc_base: int, hide_root: str | None) -> None:
    """Limits, a new session, the sandbox user (as root), a private working directory, a clean environment
    and no grading modules on the import path."""
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
