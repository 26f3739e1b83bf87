"""Hostile families against the sandbox itself, one submission at a time (test_hostile.py runs them beside the
rest of the corpus, in every layer): cleanup that must not fail, answers too large in all, system calls of
another ABI, one call of every refused family (`catalog.refused_calls`) and the ordinary calls honest code
makes, values of every dtype, a stray solved notebook left outside the grading folders, and processes that try
to reach the grader. The families that need two students (a victim and a thief) are in
`catalog.classmates`, graded by test_containment.py through grade-class and nbgrader.
"""
from __future__ import annotations

import os
from pathlib import Path

from autograder.course import kit
from autograder.sandbox.inside import seccomp

from . import refused_calls
from .build import submission
from .hostile import CHANNEL, FULL, VALUES, WRONG, ZERO, Hostile, cell, template

# A solved notebook left where the world can read it, outside the kit, the course and the class (made by the
# test, removed after): out of reach in bubblewrap and namespaces, and wherever Landlock is there.
STRAY = Path("/var/tmp") / f"layernorm-stray-{os.getpid()}" / kit.KIT.notebook_name

DEEP_TREE = """
import os
_top = os.getcwd()
os.makedirs("locked/inner", exist_ok=True)
open("locked/inner/file", "w").close()
_fd = os.open(".", os.O_RDONLY)
for _ in range(2500):                        # deeper than any path or recursion limit
    os.mkdir("d", 0o700, dir_fd=_fd)
    _below = os.open("d", os.O_RDONLY, dir_fd=_fd)
    os.close(_fd)
    _fd = _below
open(f"/proc/self/fd/{_fd}/bottom", "w").close()
os.chmod("locked/inner", 0o000)              # folders nobody may enter or list
os.chmod("locked", 0o000)
"""

MANY_FILES = """
import os, time
os.makedirs("many", exist_ok=True)
_stop = time.process_time() + 1.5
_n = 0
while time.process_time() < _stop:
    for _ in range(500):
        open(f"many/{_n}", "w").close()
        _n += 1
print(f"{_n} files")
"""

HUGE_ANSWERS = """
import sys, torch
_probes = sys.modules["autograder.engine.questions.probes"]
_huge = torch.zeros(15 * 2**20 * 3 // 32, dtype=torch.float64)   # 15 MiB each once encoded, a valid tensor
for _name in list(_probes.PROBES):
    _probes.PROBES[_name] = lambda p: {"y": _huge}
"""

X32_SOCKET = f"""
import ctypes, socket
_libc = ctypes.CDLL(None, use_errno=True)
# socket(AF_INET, SOCK_STREAM) through the x32 ABI (the x32 bit on the x86-64 number)
_fd = _libc.syscall({seccomp.X32_BIT} | {seccomp.number("socket", "x86_64")}, socket.AF_INET, socket.SOCK_STREAM, 0)
raise RuntimeError(f"an x32 system call went through: {{_fd}}, errno {{ctypes.get_errno()}}")
"""

FIND_STRAY = f"""
import os
_found = []
for _top in ({str(STRAY.parent.parent)!r}, "/var/tmp", "/srv", "/opt", "/home", "/"):
    try:
        for _folder, _dirs, _files in os.walk(_top):
            for _name in _files:
                if _name.endswith(".ipynb"):
                    try:
                        if "drop_shortcut(self.ff" in open(os.path.join(_folder, _name)).read():
                            _found.append(os.path.join(_folder, _name))
                    except OSError:
                        pass
            if len(_found) or _folder.count("/") > 4:
                _dirs[:] = []
    except OSError:
        pass
    if _found:
        break
if _found:
    def _stolen_forward(self, x):
        x = x + self.drop_shortcut(self.att(self.norm1(x)))
        return x + self.drop_shortcut(self.ff(self.norm2(x)))
    TransformerBlock.forward = _stolen_forward
    raise RuntimeError(f"found a solved notebook at {{_found[0]}}")
"""

SIGNAL_THE_GRADER = """
import os, signal
for _pid in range(1, 1 << 16):               # every process it can name: the server, the supervisor, the grader
    if _pid != os.getpid():
        try:
            os.kill(_pid, signal.SIGKILL)
        except OSError:
            pass
"""

# On a hub the child has the uid of the zygote server and the spare supervisor that fork every later student: it
# tries to lower the memory limit, the priority and the CPUs of every process it can name (every process id up to
# 32768, those /proc lists, and those the test names from outside) but itself and the supervisor running its own
# job, and says how many it changed. A later student of the same server would inherit the limit: a forward that
# needs memory fails there, and the feedback blames her block.
TOUCH_EVERY_PROCESS = """
import ctypes, os, resource
_libc = ctypes.CDLL(None, use_errno=True)
class _Limit(ctypes.Structure):
    _fields_ = [("cur", ctypes.c_uint64), ("max", ctypes.c_uint64)]
def _size(pid):                                   # its address space now, or 3 GiB where /proc does not say
    try:
        with open(f"/proc/{{pid}}/status") as _status:
            return next(int(_l.split()[1]) * 1024 for _l in _status if _l.startswith("VmSize:"))
    except (OSError, StopIteration, ValueError):
        return 3 << 30
_names = set(range(1, 32768)) | set({pids!r})
try:
    _names |= {{int(_p) for _p in os.listdir("/proc") if _p.isdigit()}}
except OSError:
    pass
_names -= {{os.getpid(), os.getppid()}}
_changed, _seen = set(), set()
for _pid in sorted(_names):
    _old = _Limit()
    if _libc.prlimit(_pid, resource.RLIMIT_AS, None, ctypes.byref(_old)) == 0:
        _seen.add(_pid)
        _low = _size(_pid) + (8 << 20)
        if _libc.prlimit(_pid, resource.RLIMIT_AS, ctypes.byref(_Limit(_low, _low)), None) == 0:
            _changed.add(_pid)
    if _libc.setpriority(0, _pid, 19) == 0:
        _changed.add(_pid)
    try:
        os.sched_setaffinity(_pid, {{0}})
        _changed.add(_pid)
    except OSError:
        pass
raise RuntimeError(f"other processes: changed {{len(_changed)}}, read the limits of {{len(_seen)}}")
"""


def touch_every_process(pids=()) -> str:
    """A correct solution that tries to change every process it can name but itself and its supervisor (`pids`:
    more to name)."""
    return submission(extra=cell(TOUCH_EVERY_PROCESS.format(pids=sorted(pids))))


# What honest code may do beside its forward, and the allowlist must let through: threads (torch's own too),
# a fork and a pipe, a socket pair, a program started (posix_spawn: clone3 refused with ENOSYS, then clone),
# temporary files, copies, pickles, sleeping, waiting, random bytes, numpy and matplotlib.
ORDINARY = """
import hashlib, os, pickle, select, shutil, signal, socket, subprocess, tempfile, threading, time
import matplotlib, numpy, torch
_sums = []
_thread = threading.Thread(target=lambda: _sums.append(sum(range(1000))))
_thread.start()
_thread.join()
torch.set_num_threads(2)
_m = torch.randn(128, 128)
float((_m @ _m).sum())
torch.set_num_threads(1)
_r, _w = os.pipe()
if os.fork() == 0:
    os.write(_w, b"ok")
    os._exit(0)
os.wait()
_a, _b = socket.socketpair()
_a.sendall(b"x")
with tempfile.TemporaryDirectory() as _folder:
    _path = os.path.join(_folder, "kept.pkl")
    with open(_path, "wb") as _handle:
        pickle.dump({"a": numpy.arange(3)}, _handle)
    shutil.copy(_path, _path + ".copy")
    _copied = pickle.load(open(_path + ".copy", "rb"))
subprocess.run(["/bin/true"], check=True, timeout=20)
signal.setitimer(signal.ITIMER_REAL, 0)
time.sleep(0.01)
select.select([_r], [], [], 1.0)
hashlib.sha256(os.urandom(16)).hexdigest()
assert _sums == [499500] and os.read(_r, 2) == b"ok" and _b.recv(1) == b"x" and list(_copied["a"]) == [0, 1, 2]
raise RuntimeError("ordinary calls: all went through")
"""

HALF = "x = x + self.drop_shortcut(self.att(self.norm1(x)))\n    y = x + self.drop_shortcut(self.ff(self.norm2(x)))\n"
DTYPE_FORWARDS = {      # a Pre-LN forward whose values end up in another dtype
    "bfloat16_autocast": "with torch.autocast('cpu', dtype=torch.bfloat16):\n        " + HALF.replace("\n    ", "\n        ")
                         + "    return y\n",
    "float16_output": HALF + "    return y.half()\n",
    "integer_output": HALF + "    return y.long()\n",
    "bool_output": HALF + "    return y > 0\n",
    "complex_output": HALF + "    return y.to(torch.complex64)\n",
}


# The kinds of the table that the refused families' calls would reach (key rings, signals and memory of other
# processes, locks, clocks, sockets, watches, mounts and host names, descriptors handed on): the allowlist each layer
# installs grants its own calls (System V IPC is a child's own in a namespace, refused without one).
REFUSED_KINDS = ("key_rings", "other_processes", "shared_files", "timers_and_clocks", "network", "watches", "proc_and_sys",
                 "descriptors", "memory", "sysv_ipc")


def entries() -> list[Hostile]:
    dtypes = [Hostile(f"dtype_{name}", submission(forward="def forward(self, x):\n    " + body), WRONG,
                      "complex numbers" if name.startswith("complex") else "", once=VALUES)
              for name, body in DTYPE_FORWARDS.items()]
    return dtypes + [
        Hostile("deep_tree_unreadable_folders_left_behind", submission(extra=cell(DEEP_TREE)), FULL, "All parts passed",
                touches=("writable_places",)),
        Hostile("as_many_files_as_its_time_allows", submission(extra=cell(MANY_FILES)), FULL, "All parts passed",
                touches=("writable_places",)),
        Hostile("eleven_answers_of_fifteen_megabytes", template(cell(HUGE_ANSWERS)), ZERO, "MB of answers in all",
                max_seconds=60, once=CHANNEL),
        Hostile("x32_system_call", submission(extra=cell(X32_SOCKET)), FULL, "SIGSYS", touches=("network",)),
        Hostile("one_call_of_every_refused_family", submission(extra=cell(refused_calls.probe_source())), FULL,
                refused_calls.summary_phrase(), touches=REFUSED_KINDS),
        Hostile("ordinary_python_and_torch_calls", submission(extra=cell(ORDINARY)), FULL,
                "ordinary calls: all went through", touches=("processes", "writable_places", "descriptors", "network")),
        Hostile("blank_template_looks_for_a_stray_solved_notebook", template(cell(FIND_STRAY)), ZERO, "Task 1",
                touches=("other_files",)),
        Hostile("lowers_the_limits_of_every_process_it_can_name", touch_every_process(), FULL,
                "other processes: changed 0, read the limits of 0", touches=("other_processes",)),
        Hostile("signals_every_process_it_can_name", submission(forward="""
            def forward(self, x):
                import os, signal
                calls = globals()["_calls"] = globals().get("_calls", 0) + 1  # of every block, the deep stack's too
                for pid in range(1, 1 << 15) if calls & (calls - 1) == 0 else ():  # calls 1, 2, 4, 8, ...: early and late
                    if pid != os.getpid():
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except OSError:
                            pass
                x = x + self.drop_shortcut(self.att(self.norm1(x)))
                return x + self.drop_shortcut(self.ff(self.norm2(x)))
            """, extra=cell(SIGNAL_THE_GRADER)), FULL, "All parts passed", touches=("other_processes",)),
    ]


FAMILIES = entries()
