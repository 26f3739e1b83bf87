"""A child and the processes around it: the calls that name a process, made by a sandboxed child on every process it
can name, and what a later student of the same server inherits.

* `CALLS` and `MAKE`: each call that names a process, with arguments that ask or set what is already there (signal 0,
  a limit only read, its own priority and CPUs), as Python over ctypes; the seccomp tests' worker runs the same code.
* `calls_on_processes(drawn, outside)`: a correct solution whose extra cells make every call on every process it can
  name (itself, 0, its group, its threads, a child of its own, its supervisor, the server, the spare supervisor that
  takes the next student, init, the process ids `drawn` and those the test names from `outside`, as (role, id)
  pairs), then every process
  id up to 32768 with the two calls that set nothing, and report, in notes, which were refused (`read_calls`).
* `reports_its_lot()`: a correct solution that says what it was given: its descriptors' limit, its priority, its
  CPUs (`read_lot`). A student who changed the server's would change this for every later student.
"""
from __future__ import annotations

import re

from autograder.sandbox.inside import seccomp

from .build import submission
from .hostile import cell

CALLS = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open", "prlimit64", "getpriority",
         "setpriority", "ioprio_get", "sched_getaffinity", "sched_setaffinity", "sched_getparam", "sched_getscheduler",
         "sched_getattr", "sched_rr_get_interval", "get_robust_list", "getpgid", "getsid")

MAKE = r'''
import ctypes, struct
_libc = ctypes.CDLL(None, use_errno=True)
_NUMBERS = {numbers!r}

def _syscall(name, *args):
    ctypes.set_errno(0)
    result = _libc.syscall(ctypes.c_long(_NUMBERS[name]), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    error = ctypes.get_errno() if result < 0 else 0
    if name == "pidfd_open" and result >= 0:
        __import__("os").close(result)
    return [result, error]

def _make(name, target, nice, mask):
    """One call on process `target`: signal 0, limits only read, the priority and CPUs it is given (what it has)."""
    buffer = ctypes.create_string_buffer(128)
    info = ctypes.create_string_buffer(struct.pack("iii", 0, 0, -1) + bytes(116))   # si_code SI_QUEUE
    head, size, limit = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.create_string_buffer(16)
    return {{
        "kill": lambda: _syscall("kill", target, 0),
        "tkill": lambda: _syscall("tkill", target, 0),
        "tgkill": lambda: _syscall("tgkill", target, target, 0),
        "rt_sigqueueinfo": lambda: _syscall("rt_sigqueueinfo", target, 0, info),
        "rt_tgsigqueueinfo": lambda: _syscall("rt_tgsigqueueinfo", target, target, 0, info),
        "pidfd_open": lambda: _syscall("pidfd_open", target, 0),
        "prlimit64": lambda: _syscall("prlimit64", target, 7, None, limit),
        "getpriority": lambda: _syscall("getpriority", 0, target),
        "setpriority": lambda: _syscall("setpriority", 0, target, nice),
        "ioprio_get": lambda: _syscall("ioprio_get", 1, target),
        "sched_getaffinity": lambda: _syscall("sched_getaffinity", target, 128, buffer),
        "sched_setaffinity": lambda: _syscall("sched_setaffinity", target, 8, ctypes.byref(ctypes.c_uint64(mask))),
        "sched_getparam": lambda: _syscall("sched_getparam", target, buffer),
        "sched_getscheduler": lambda: _syscall("sched_getscheduler", target),
        "sched_getattr": lambda: _syscall("sched_getattr", target, buffer, 56, 0),
        "sched_rr_get_interval": lambda: _syscall("sched_rr_get_interval", target, buffer),
        "get_robust_list": lambda: _syscall("get_robust_list", target, ctypes.byref(head), ctypes.byref(size)),
        "getpgid": lambda: _syscall("getpgid", target),
        "getsid": lambda: _syscall("getsid", target),
    }}[name]()
'''


def make_source() -> str:
    return MAKE.format(numbers={name: seccomp.number(name) for name in CALLS})


SEARCH = r'''
import errno, os, threading, time
_held = threading.Event()
_threads = [threading.Thread(target=_held.wait, daemon=True) for _ in range(2)]
for _t in _threads:
    _t.start()
_kid = os.fork()
if _kid == 0:
    time.sleep(60)
    os._exit(0)

def _parent(pid):
    try:
        with open(f"/proc/{{pid}}/stat") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None

def _kids(pid):
    try:
        with open(f"/proc/{{pid}}/task/{{pid}}/children") as handle:
            return [int(p) for p in handle.read().split()]
    except (OSError, ValueError):
        return []

_me, _supervisor = os.getpid(), os.getppid()
_server = _parent(_supervisor)
_targets = [("itself", _me), ("zero", 0), ("its group", -_me), ("its child", _kid), ("its supervisor", _supervisor),
            ("init", 1)] + [("its thread", t.native_id) for t in _threads]
_targets += [("the server", _server)] if _server else []
_targets += [(_label, _pid) for _label, _pid in {outside!r} if _pid != _server]
_targets += [("the spare supervisor", p) for p in _kids(_server or 0) if p != _supervisor]
_targets += [("drawn", p) for p in {drawn!r}]
_nice, _mask = os.getpriority(os.PRIO_PROCESS, 0), sum(1 << c for c in os.sched_getaffinity(0) if c < 64)
_lines = []
for _label, _pid in _targets:
    _answers = [_make(_name, _pid, _nice, _mask) for _name in {calls!r}]
    _lines.append(f"{{_pid}}={{_label}}:" + "".join("P" if e == errno.EPERM else "." for _, e in _answers))
_reached = 0                                 # every process id it could name, with the calls that set nothing
for _pid in range(1, max(32768, _me + 1000)):
    if _pid != _me and (_make("kill", _pid, 0, 0)[1] != errno.EPERM or _make("prlimit64", _pid, 0, 0)[1] != errno.EPERM):
        _reached += 1
_lines.append(f"reached={{_reached}}:me={{_me}}")
_held.set()
_REPORT = " ".join(_lines)
'''
REPORT = 'if len(_REPORT) > {start}:\n    raise RuntimeError("calls on processes: " + _REPORT[{start}:{end}])\n'
CHUNK = 380
LINE = re.compile(r"(-?\d+)=([\w ]+):([P.]+)")


def calls_on_processes(drawn=(), outside=()) -> str:
    """A correct solution that makes every call of CALLS on every process it can name, and reports what was refused."""
    code = make_source() + SEARCH.format(outside=[tuple(pair) for pair in outside], drawn=list(drawn), calls=list(CALLS))
    cells = cell(code, "search")
    for part in range(8):
        cells += cell(REPORT.format(start=part * CHUNK, end=(part + 1) * CHUNK), f"report {part}")
    return submission(extra=cells)


def read_calls(notes) -> tuple[list[tuple[int, str, dict]], int, int]:
    """From the notes of `calls_on_processes`: [(process id, its role, {call: refused?})], how many other processes
    the sweep of every process id reached, and the child's own process id."""
    text = "".join(note.split("calls on processes: ", 1)[1] for note in notes if "calls on processes: " in note)
    found = [(int(pid), role, {name: flag == "P" for name, flag in zip(CALLS, flags)}) for pid, role, flags in LINE.findall(text)]
    sweep = re.search(r"reached=(\d+):me=(\d+)", text)
    if sweep is None:
        raise AssertionError(f"the child did not report: {notes}")
    return found, int(sweep.group(1)), int(sweep.group(2))


LOT = '''
import os, resource
_cpus = ",".join(map(str, sorted(os.sched_getaffinity(0))))
_nofile, _as = resource.getrlimit(resource.RLIMIT_NOFILE), resource.getrlimit(resource.RLIMIT_AS)
raise RuntimeError(f"my lot: descriptors {_nofile}, priority {os.getpriority(os.PRIO_PROCESS, 0)}, CPUs {_cpus}, "
                   f"memory headroom {(_as[1] - _size()) >> 20 if _as[1] > 0 else 'unlimited'} MB")
'''
SIZE = '''
def _size():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
_at_start = _size()
'''


def reports_its_lot() -> str:
    """A correct solution that reports its descriptors' limit, its priority and its CPUs: what the sandbox gave it,
    or what a student before it left in the server."""
    return submission(extra=cell(SIZE, "size") + cell(LOT.replace("_size()", "_at_start"), "lot"))


def read_lot(notes) -> str:
    lots = [note.split("my lot: ", 1)[1] for note in notes if "my lot: " in note]
    if len(lots) != 1:
        raise AssertionError(f"the child did not say what it was given: {notes}")
    return re.sub(r", memory headroom .*", "", lots[0])


def headroom_mb(notes) -> int | None:
    """The memory the child could still map when its first cell ran (None: no limit)."""
    text = next(note for note in notes if "my lot: " in note)
    found = re.search(r"memory headroom (-?\d+) MB", text)
    return int(found.group(1)) if found else None
