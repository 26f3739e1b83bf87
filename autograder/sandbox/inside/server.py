"""The pristine sandbox server (a zygote): imports torch once, warms up on the assignment's public code, and
then forks one supervisor per job. It never reads a job.

Started by the parent (`autograder.sandbox.parent.client`) as `python -m autograder.sandbox.inside.server`, possibly inside
bubblewrap, with a SOCK_SEQPACKET Unix socket on fd 0 (`inside.protocol`):

  parent -> server  {"questions", "kit_code", "limits", "hide_root", "groups", "keep", "view", ...}   once
  server -> parent  {"ready": true, "layers": {...}}                                              once
  parent -> server  {"job": n, "uid": u} with the job's own channel (a socket) beside it          per job
  server -> parent  {"spawned": n}

The server hands each job's channel to a supervisor (`inside.supervisor`) it forked ahead of time, closing
its own copy without reading from it. The supervisor reads the student's cells from that channel, forks the
confined children that run them, replies on it, and exits. So no student's code, answers or results ever
enter this process: a child can search all the memory it inherited and find nothing of a classmate's.
The kit code it holds is what students receive.

Before its first job it drops what it inherited and does not need (`fresh`): the session key ring it was
started with (it joins a new, anonymous one), every descriptor but its channel, core dumps. It makes the
children's seccomp programs once (`seccomp.build`, one per device) from what it found this machine lets
children do (`try_layers`); each child makes its own again with its process id in it (the calls that name a
process may name only the child itself), which takes half a millisecond.

The server knows nothing of the questions: `init["questions"]` names the module a child runs its job with
(`ready`, `run_job`, `PROBES`, `FORWARD_PROBES`; the grader's is `autograder.engine.questions.job`).
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import os
import select
import socket

import torch

from . import fresh, landlock, seccomp, syscalls
from .confine import gpu_devices, readable_places
from .processes import task_count
from .protocol import ProtocolError, receive_message, send_message
from .rootfs import private_root
from .supervisor import Setup, Supervisor

# Imported once by the server so that children need not: what graded cells commonly import (not matplotlib:
# the notebook's figures are in experiment cells, which graders skip; a child that needs it imports it).
PRELOAD = (
    "math",
    "random",
    "itertools",
    "functools",
    "collections",
    "typing",
    "dataclasses",
    "copy",
    "time",
    "json",
    "re",
    "statistics",
    "fractions",
    "decimal",
    "operator",
    "string",
    "textwrap",
    "warnings",
    "numpy",
    "torch.nn.functional",
)
PR_SET_CHILD_SUBREAPER, PR_SET_DUMPABLE = 36, 4
NOBODY = 65534


def _attempt(attempt) -> int:
    """Fork a child that tries `attempt` (set up namespaces, Landlock, a seccomp filter); its pid."""
    pid = os.fork()
    if pid == 0:
        try:
            attempt()
            os._exit(0)
        except BaseException:
            os._exit(1)
    return pid


def _worked(pid: int) -> bool:
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def try_layers(init: dict) -> dict:
    """Start trying, in forked children, what this machine lets children do; they run while the server warms
    up (`layers_that_work` collects them). The seccomp filter is tried with every grant: a kernel that takes
    it takes any of its variants. A user namespace is tried as a child would make one: as a user without
    privileges (root's children switch to theirs first)."""
    keep, view = init["keep"], init.get("view")
    tries = {"seccomp": _attempt(lambda: seccomp.install(seccomp.build(tuple(syscalls.GRANTS))))}
    if view is not None:
        tries["view"] = _attempt(lambda: private_root(keep, view["tmp_mb"], gpu_devices(), view["network"]))
    if init.get("landlock", True) and landlock.abi():
        tries["landlock"] = _attempt(lambda: landlock.restrict(readable_places(keep), [], []))
    if init.get("user_namespace", True):
        tries["user_namespace"] = _attempt(_unprivileged_user_namespace)
    return tries


def _unprivileged_user_namespace() -> None:
    if os.geteuid() == 0:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    fresh.own_user_namespace()


def layers_that_work(init: dict, tries: dict) -> tuple[dict | None, int, tuple | None, bool]:
    """(private root or None, Landlock ABI or 0, the seccomp grants or None where seccomp does not work, user
    namespaces) from the tries of `try_layers`. Sockets and IPC are granted only with namespaces of the child's
    own, permission changes only with namespaces or Landlock."""
    worked = {name: _worked(pid) for name, pid in tries.items()}
    view = init.get("view") if worked.get("view") else None
    abi = landlock.abi() if worked.get("landlock") else 0
    grants = ("sockets", "ipc", "permissions") if view else ("permissions",) if abi else ()
    return view, abi, grants if worked["seccomp"] else None, bool(worked.get("user_namespace"))


class Server:
    """The zygote: everything children share, made once; then only forks."""

    def __init__(self, init: dict):
        tries = try_layers(init)
        questions = importlib.import_module(init["questions"])
        for name in PRELOAD:
            try:
                importlib.import_module(name)
            except ImportError:
                pass
        torch.set_num_threads(1)
        warm = init.get("warm_up", True)  # lazy loading happens here, once, not in every child (a server of
        kit = questions.ready(init["kit_code"], warm_up=warm)  # one job skips it: its child pays it once instead)
        libc = ctypes.CDLL(None, use_errno=True)
        self.subreaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        view, abi, grants, user_namespace = layers_that_work(init, tries)
        checks_off = tuple(init.get("checks_off") or ())  # the parent's, for its tests: never a job's
        programs = {}
        for device in ("cpu", "cuda") if grants is not None else ():
            programs[device] = seccomp.build(grants, device, checks_off=checks_off)
        nproc_base = 0 if init.get("sandbox_users") else task_count(os.getuid())
        self.setup = Setup(
            questions,
            kit,
            init["limits"],
            init.get("hide_root"),
            init.get("groups") or {},
            tuple(init["keep"]),
            view,
            init.get("scratch"),
            abi,
            grants,
            programs,
            user_namespace,
            nproc_base,
            tuple(init.get("checks_off") or ()),
        )
        if warm:
            gc.collect()  # what the warm-up left behind (80 ms with torch loaded: not worth it for one job)
        gc.freeze()  # what the server holds stays put: a child's garbage collector never touches (and so
        #                  never copies) those pages, which makes each fork's copy-on-write far cheaper

    @property
    def layers(self) -> dict:
        """What this server could actually set up, for the parent to name (and to refuse to grade without)."""
        setup = self.setup
        return {
            "namespaces": setup.view is not None,
            "landlock": setup.landlock,
            "seccomp": "allowlist" if setup.programs else None,
            "granted": list(setup.grants) if setup.grants is not None else [],
            "no_sockets": setup.view is not None or (bool(setup.programs) and "sockets" not in setup.grants),
            "user_namespace": setup.user_namespace,
            "session_keyring": SESSION_KEYRING["fresh"],
            "cgroups": sorted(setup.groups),
            "subreaper": self.subreaper,
        }

    def serve(self, control: socket.socket) -> None:
        """Hand every job the parent announces to a supervisor, until the parent closes the channel. The next
        supervisor is forked ahead of time, while the current job runs: still pristine, it waits for a job. A
        supervisor that ends is collected at once (its process descriptor wakes the server), not at the next tick."""
        spare, spare_pid = self._fork_spare(control, {})
        working: dict[int, int] = {}  # process descriptor -> process id, of the supervisors given a job
        while True:
            ready, _, _ = select.select([control, *working], [], [], 1.0)
            for ended in set(ready) & set(working):
                os.close(ended)
                del working[ended]
            _reap()
            if control not in ready:
                continue
            try:
                message, channel = receive_message(control)
            except (ProtocolError, ValueError, OSError):
                return
            if message is None:
                return
            message = message if isinstance(message, dict) else {}
            number, uid = message.get("job"), message.get("uid")
            if channel is None or type(number) is not int or not (uid is None or type(uid) is int):
                if channel is not None:
                    os.close(channel)
                send_message(control, {"refused": True})
                continue
            try:
                send_message(spare, {"job": number, "uid": uid}, channel)
            except OSError:  # the spare is gone: one made now takes the job
                spare.close()
                spare, spare_pid = self._fork_spare(control, working)
                send_message(spare, {"job": number, "uid": uid}, channel)
            os.close(channel)
            spare.close()
            send_message(control, {"spawned": number})
            descriptor = _process_descriptor(spare_pid)
            if descriptor is not None:
                working[descriptor] = spare_pid
            spare, spare_pid = self._fork_spare(control, working)

    def _fork_spare(self, control: socket.socket, working: dict) -> tuple[socket.socket, int]:
        """A supervisor forked now, waiting for its job on a socket of its own: the server's end of it, and its
        process id. It keeps none of the server's descriptors (`working`: those of the supervisors at work)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                control.close()
                ours.close()
                for descriptor in working:
                    os.close(descriptor)
                message, channel = receive_message(theirs)
                theirs.close()
                if message is not None and channel is not None:
                    Supervisor(self.setup, message["uid"], message["job"]).serve(channel)
                status = 0
            finally:
                os._exit(status)
        theirs.close()
        return ours, pid


def _process_descriptor(pid: int) -> int | None:
    """A descriptor that becomes readable when process `pid` ends (pidfd), or None where the kernel has none: that
    supervisor is then collected within the server's tick."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _reap() -> None:
    """Collect supervisors that have ended (and orphans handed to us as subreaper)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


SESSION_KEYRING = {"fresh": False}


def main() -> None:
    control = socket.socket(fileno=os.dup(0))
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)  # anything printed by libraries goes nowhere near a channel
    fresh.close_inherited((control.fileno(),))
    fresh.no_core()
    try:  # the key ring the grader was started with stays behind
        SESSION_KEYRING["fresh"] = fresh.new_session_keyring()
    except OSError:
        pass
    init, _ = receive_message(control)
    server = Server(init)
    send_message(control, {"ready": True, "layers": server.layers})
    server.serve(control)


if __name__ == "__main__":
    main()
