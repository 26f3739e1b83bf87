"""One probe per kind of kernel object of the sandbox's table (`autograder.sandbox.kinds.KINDS`): how a victim
leaves her marker in that kind, how a classmate graded after her looks for one there, and what the trusted
test process checks on the host once the class is graded (what was left behind).

* `leave` is the body of `def _leave(mark)`, run in the victim's child: True when it left something there;
* `find` is the body of `def _find()`, run in the thief's child: the markers (PATTERN) it found there;
* `leftovers(context)` runs in the test: what of the victim's is still on the host (empty when nothing is).

The code runs over the helpers of `PRELUDE` (`_linger`, `_scan`, `_walk`...). A test fails for a kind of the
table without a probe, and for a probe without its kind.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from autograder.sandbox.parent import client as sandbox

PREFIX = "classmate-secret-"
PATTERN = PREFIX + "[0-9a-f]{32}"
SHARED = ["/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock"]
OTHER = ["/root", "/srv", "/opt", "/etc", "/home", "/usr/local"]    # places no job may write in
STRAY = Path("/srv") / f"layernorm-kit-stray-{os.getpid()}" / "notes.txt"    # an instructor's, world-readable
KEY = "forward-source"
MOVED_AHEAD = 30 * 24 * 3600  # the realtime clock moved further ahead than this: the victim's year (clock_settime)


@dataclass(frozen=True)
class Probe:
    leave: str
    find: str
    leftovers: Callable


PRELUDE = '''
import ctypes, ctypes.util, errno, os, re, signal, socket, struct, sys, time
_libc = ctypes.CDLL(None, use_errno=True)
_libc.shmat.restype = ctypes.c_void_p
_PATTERN = re.compile({pattern!r}.encode())
_PRIVATE, _PORT, _NUMBERS, _NOW, _AHEAD = {private!r}, {port!r}, {numbers!r}, {now!r}, {ahead!r}
_SHARED = {shared!r} + [os.getcwd(), os.path.expanduser("~")]
_HELD = []

def _scan(data):
    return {{m.group(0).decode() for m in _PATTERN.finditer(data)}}

def _call(name, *args):
    ctypes.set_errno(0)
    return _libc.syscall(ctypes.c_long(_NUMBERS[name]), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])

def _linger(work, seconds=120):
    """A process of its own session that keeps what `work` made; returns what work's first step wrote back."""
    reader, writer = os.pipe()
    if os.fork() == 0:
        try:
            os.setsid()
            os.write(writer, b"1" if work() else b"0")
            until = time.monotonic() + seconds
            while time.monotonic() < until:
                time.sleep(0.2)
        finally:
            os._exit(0)
    os.close(writer)
    answer = os.read(reader, 1) == b"1"
    os.close(reader)
    return answer

def _serve(family, address, payload):
    """A lingering process serving `payload` on a socket; True when it could listen."""
    def work():
        try:
            server = socket.socket(family, socket.SOCK_STREAM)
            server.bind(address)
            server.listen(5)
        except OSError:
            return False
        if os.fork() == 0:
            server.settimeout(0.5)
            until = time.monotonic() + 120
            while time.monotonic() < until:
                try:
                    connection, _ = server.accept()
                    payload(connection)
                    connection.close()
                except OSError:
                    pass
            os._exit(0)
        return True
    return _linger(work)

def _ask(family, address):
    for _ in range(10):
        try:
            client = socket.socket(family, socket.SOCK_STREAM)
            client.settimeout(1)
            client.connect(address)
            return client
        except OSError:
            time.sleep(0.05)
    return None

_walked = []
def _walk(seconds={seconds}):
    """(path, markers) of every file it can read, once: a walk of / and of the grading folders it was told of."""
    if _walked:
        return _walked[0]
    found, todo, seen, budget = [], ["/", *_SHARED, *_PRIVATE], set(), time.monotonic() + seconds
    while todo and time.monotonic() < budget:
        folder = todo.pop(0)
        if folder in seen:
            continue
        seen.add(folder)
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.path in ("/proc", "/sys", "/dev/pts"):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    todo.append(entry.path)
                elif entry.is_file(follow_symlinks=False) and entry.stat().st_size < 1 << 22:
                    with open(entry.path, "rb") as handle:
                        marks = _scan(handle.read(1 << 22))
                    if marks:
                        found.append((entry.path, marks))
            except (OSError, ValueError):
                pass
    _walked.append(found)
    return found

def _below(path, places):
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in places)

def _pids():
    """The process ids /proc lists, or, where it lists none (Landlock), every id up to a few thousand past its own."""
    try:
        return [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        try:
            top = int(open("/proc/sys/kernel/pid_max").read())
        except (OSError, ValueError):
            top = 32768
        return [str(p) for p in range(1, min(top, os.getpid() + 5000))]
'''


def _files_in(places, name_prefix="victim-") -> list[str]:
    found = []
    for top in places:
        for folder, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if not _the_suite_s_own(folder, d)]
            found += [os.path.join(folder, name) for name in files if name.startswith(name_prefix)]
    return found


def _the_suite_s_own(folder: str, name: str) -> bool:
    """A tree the walks for a victim's files skip: pytest's temporary folders, the folders of the shell that runs
    the suite, and the hub's environments (`hub_users.shared`, each a hundred thousand files: root's, and no one
    else may write in it, which a job could not fake)."""
    if name.startswith(("pytest-of-", "bash_jobs")):
        return True
    if not name.startswith("layernorm-kit-users-"):
        return False
    try:
        info = os.lstat(os.path.join(folder, name))
    except OSError:
        return False
    return info.st_uid == 0 and not info.st_mode & 0o022


def _in_shared(context, name_prefix: str = "victim-") -> list[str]:
    """The files named `name_prefix`... in the shared folders, from one walk per class (two probes look there)."""
    if getattr(context, "files_in_shared", None) is None:
        context.files_in_shared = _files_in(SHARED)
    return [path for path in context.files_in_shared if os.path.basename(path).startswith(name_prefix)]


def _holding(paths, mark) -> list[str]:
    held = []
    for path in paths:
        try:
            if mark.encode() in Path(path).read_bytes()[: 1 << 22]:
                held.append(path)
        except OSError:
            pass
    return held


def orphaned_sandbox_processes() -> list[str]:
    """Processes of sandbox users that no sandbox server holds any more (a live child of another grading run on
    this machine has a server or another child of its job as its parent)."""
    from session_ring import is_sandbox_server

    orphans = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}").st_uid < sandbox.SANDBOX_UID_BASE:
                continue
            parent = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
            held = os.stat(f"/proc/{parent}").st_uid >= sandbox.SANDBOX_UID_BASE or is_sandbox_server(parent)
        except OSError:
            continue
        if not held:
            orphans.append(f"process {pid}")
    return orphans


def _processes(context) -> list[str]:
    found = orphaned_sandbox_processes()
    if getattr(context, "login", None):  # the grader ran as this user (the hub's layer): none of its processes is left
        from layers import user_processes

        deadline = time.monotonic() + 2.0  # one its grader's teardown killed may still be ending as the command returns
        while user_processes(context.login) and time.monotonic() < deadline:
            time.sleep(0.1)
        found += [f"process of {context.login} left: {line}" for line in user_processes(context.login)]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if context.mark.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(f"process {pid} holds the marker")
        except OSError:
            pass
    return found


def _sysv(context) -> list[str]:
    found = []
    for kind in ("shm", "msg", "sem"):
        lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        column = lines[0].split().index("cuid")
        found += [f"System V {kind}: {line}" for line in lines[1:]
                  if int(line.split()[column]) >= sandbox.SANDBOX_UID_BASE]
    return found


def _posix(context) -> list[str]:
    found = [p for p in ("/dev/shm/victim-shm",) if os.path.exists(p)]
    rt = ctypes.CDLL(ctypes.util.find_library("rt") or "librt.so.1", use_errno=True)
    queue = rt.mq_open(b"/victim-queue", os.O_RDONLY | os.O_NONBLOCK, 0, None)
    if queue >= 0:
        found.append("POSIX queue /victim-queue")
        rt.mq_unlink(b"/victim-queue")
    return found


def _unix_names(prefix: str) -> list[str]:
    try:
        lines = Path("/proc/net/unix").read_text().splitlines()[1:]
    except OSError:
        return []
    return [line.split()[-1] for line in lines if line.split()[-1].startswith(prefix)]


def _keys(context) -> list[str]:
    """Keys sandbox uids own now that they did not before the class (the kernel collects an ended process's
    keys lazily: a few seconds are given), and any key in the grader's own session ring."""
    from session_ring import sandbox_key_owners

    deadline = time.monotonic() + 5
    while sandbox_key_owners() != context.key_owners and time.monotonic() < deadline:
        time.sleep(0.1)
    found = [f"keys of sandbox uid {uid}: {line}" for uid, line in sandbox_key_owners().items()
             if context.key_owners.get(uid) != line]
    return found + [f"key in the grader's session ring: {k}" for k in (context.ring_contents() or [])]


def _cgroups(context) -> list[str]:
    return [folder for folder, _, _ in os.walk("/sys/fs/cgroup") if context.mark in folder]


def _clock(context) -> list[str]:
    found = _holding(_in_shared(context, "victim-timer-"), context.mark)
    moved = time.time() - time.monotonic() - context.clock_offset
    if moved > MOVED_AHEAD:  # a virtual machine's own steps of its clock are seconds (32 s seen in CI)
        found.append(f"the realtime clock moved ahead by {moved / 86400:.0f} days")
    return found


def _listening(port: int) -> list[str]:
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        found += [f"listening on port {port}" for line in lines
                  if int(line.split()[1].rsplit(":", 1)[1], 16) == port and line.split()[3] == "0A"]
    return found


def _host_names(context) -> list[str]:
    names = [os.uname().nodename, Path("/proc/sys/kernel/domainname").read_text()]
    return [name for name in names if context.mark[:40] in name]


def _kernel_log(context) -> list[str]:
    try:
        descriptor = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return []
    found, data = [], b""
    try:
        while len(data) < 1 << 24:
            try:
                data += os.read(descriptor, 8192)
            except BrokenPipeError:          # records were overwritten while reading: go on from the next
                continue
            except OSError:                  # EAGAIN: the end of the log
                break
    finally:
        os.close(descriptor)
    return found + (["the marker in the kernel's log"] if context.mark.encode() in data else [])


def _tagged_limits(context) -> list[str]:
    """Processes whose stack, data and resident-set limits carry a marker (what other_processes' probe leaves)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            lines = Path(f"/proc/{pid}/limits").read_text().splitlines()
        except OSError:
            continue
        soft = [line[26:].split()[0] for line in lines if line.startswith(("Max stack size", "Max data size"))]
        if any(value.isdigit() and int(value) >> 50 == 1 for value in soft):
            found.append(f"process {pid} holds limits a child set")
    return found


def _victim_locks(context) -> list[str]:
    """Locks still held in the range shared_files' probe uses (/proc/locks: 'start end' at the end of a line)."""
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return []
    return [line for line in lines if line.split()[-2:][0].isdigit() and int(line.split()[-2]) >> 40 == 1]


# the page cache's pages a marker is written in: of the largest file of torch's own programs (which nothing runs)
BIG_FILE = """
import torch
_folder = os.path.join(os.path.dirname(torch.__file__), "bin")
_big = max((os.path.getsize(os.path.join(_folder, n)), os.path.join(_folder, n)) for n in os.listdir(_folder))[1]
"""
MARK_BYTES = len(PREFIX) + 32
FLOCK = "hhqqi"  # struct flock: type, whence, start, length, pid

PROBES = {
    "memory": Probe(
        leave='_HELD.extend([mark * 3, mark.encode() * 2, bytearray(mark.encode())])\nreturn True',
        find='''
found = set()
ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)                 # dumpable: my own /proc/self/mem is mine to read
with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", buffering=0) as mem:
    for line in maps:
        fields = line.split()
        low, high = (int(v, 16) for v in fields[0].split("-"))
        name = fields[5] if len(fields) > 5 else ""
        # a read-only mapping of a file holds that file's bytes, searched with the files
        if "r" not in fields[1] or (name.startswith("/") and "w" not in fields[1]) or name == "[vvar]":
            continue
        for start in range(low, high, 1 << 24):
            try:
                mem.seek(start)
                found |= _scan(mem.read(min(1 << 24, high - start) + 64))
            except (OSError, ValueError, OverflowError):
                pass
return found''', leftovers=lambda context: []),
    "grading_files": Probe(
        leave='''
left = False
for folder in _PRIVATE:
    try:
        with open(os.path.join(folder, f"victim-{os.getpid()}.txt"), "w") as handle:
            handle.write(mark)
        left = True
    except OSError:
        pass
return left''',
        find='return {m for path, marks in _walk() if _below(path, _PRIVATE) for m in marks}',
        leftovers=lambda context: _files_in(context.private)),
    "other_files": Probe(
        leave='''
left = False
for folder in {other!r}:
    try:
        with open(os.path.join(folder, f"victim-{os.getpid()}.txt"), "w") as handle:
            handle.write(mark)
        left = True
    except OSError:
        pass
return left'''.replace("{other!r}", repr(OTHER)),
        find='return {m for path, marks in _walk() if not _below(path, _PRIVATE + _SHARED) for m in marks}',
        leftovers=lambda context: _files_in([p for p in OTHER if p not in ("/etc", "/usr/local")])),
    "writable_places": Probe(
        leave='''
places, left = list(_SHARED), False
for top in list(places):
    try:
        places += [e.path for e in os.scandir(top) if e.is_dir(follow_symlinks=False) and os.stat(e.path).st_mode & 0o002]
    except OSError:
        pass
for folder in places:
    try:
        path = os.path.join(folder, f"victim-{os.getpid()}.txt")
        with open(path, "w") as handle:
            handle.write(mark)
        left = True
        os.chmod(path, 0o666)
    except OSError:
        pass
return left''',
        find='return {m for path, marks in _walk() if _below(path, _SHARED) and not _below(path, _PRIVATE) for m in marks}',
        leftovers=_in_shared),
    "processes": Probe(
        leave='''
def work():
    if os.fork() == 0:
        os.execve(sys.executable, [sys.executable, "-c", "import time; time.sleep(120)", mark], {"MARK": mark})
    return True
return _linger(work)''',
        find='''
found = set()
for pid in _pids():
    for name in ("cmdline", "environ", "comm"):
        try:
            with open(f"/proc/{pid}/{name}", "rb") as handle:
                found |= _scan(handle.read(1 << 16))
        except OSError:
            pass
return found''', leftovers=_processes),
    "sysv_ipc": Probe(
        leave='''
left = False
segment = _libc.shmget(0x5EED, 4096, 0o1000 | 0o666)
if segment >= 0:
    at = _libc.shmat(segment, None, 0)
    if at not in (None, ctypes.c_void_p(-1).value):
        ctypes.memmove(at, mark.encode(), len(mark))
        left = True
queue = _libc.msgget(0x5EED, 0o1000 | 0o666)
if queue >= 0:
    message = ctypes.create_string_buffer(ctypes.c_long(1).value.to_bytes(8, "little") + mark.encode())
    left = _libc.msgsnd(queue, message, len(mark), 0o4000) == 0 or left
return left''',
        find='''
found = set()
for kind in ("shm", "msg"):
    try:
        rows = open(f"/proc/sysvipc/{kind}").read().splitlines()[1:]
    except OSError:
        rows = []
    for ident in [int(r.split()[1]) for r in rows] + [_libc.shmget(0x5EED, 0, 0) if kind == "shm" else _libc.msgget(0x5EED, 0)]:
        if ident < 0:
            continue
        if kind == "shm":
            at = _libc.shmat(ident, None, 0o10000)
            if at not in (None, ctypes.c_void_p(-1).value):
                found |= _scan(ctypes.string_at(at, 4096))
        else:
            buffer = ctypes.create_string_buffer(8 + 4096)
            size = _libc.msgrcv(ident, buffer, 4096, 0, 0o4000)
            if size > 0:
                found |= _scan(buffer.raw[8: 8 + size])
return found''', leftovers=_sysv),
    "posix_ipc": Probe(
        leave='''
left = False
try:
    rt = ctypes.CDLL(ctypes.util.find_library("rt") or "librt.so.1", use_errno=True)
    queue = rt.mq_open(b"/victim-queue", os.O_CREAT | os.O_RDWR, 0o666, None)
    left = queue >= 0 and rt.mq_send(queue, mark.encode(), len(mark), 0) == 0
except OSError:
    pass
try:
    from multiprocessing import shared_memory
    _HELD.append(shared_memory.SharedMemory(name="victim-shm", create=True, size=4096))
    _HELD[-1].buf[: len(mark)] = mark.encode()
    left = True
except Exception:
    pass
return left''',
        find='''
found = set()
try:
    rt = ctypes.CDLL(ctypes.util.find_library("rt") or "librt.so.1", use_errno=True)
    queue = rt.mq_open(b"/victim-queue", os.O_RDONLY | os.O_NONBLOCK, 0, None)
    if queue >= 0:
        buffer = ctypes.create_string_buffer(1 << 16)
        size = rt.mq_receive(queue, buffer, 1 << 16, None)
        if size > 0:
            found |= _scan(buffer.raw[:size])
except OSError:
    pass
try:
    found |= _scan(open("/dev/shm/victim-shm", "rb").read())
except OSError:
    pass
return found''', leftovers=_posix),
    "abstract_sockets": Probe(
        leave='return _serve(socket.AF_UNIX, "\\0victim-socket", lambda c: c.sendall(mark.encode()))',
        find='''
found = set()
try:
    names = [l.split()[-1] for l in open("/proc/net/unix").read().splitlines()[1:] if l.split()[-1].startswith("@")]
except OSError:
    names = []
for name in {"@victim-socket", *names}:
    client = _ask(socket.AF_UNIX, "\\0" + name[1:])
    if client is not None:
        try:
            found |= _scan(client.recv(4096))
        except OSError:
            pass
return found''', leftovers=lambda context: _unix_names("@victim-socket")),
    "key_rings": Probe(
        leave=f'''
left = False
payload = (mark + " def forward(self, x): ...").encode()
for ring in (-3, -4, -5, -2):                 # session, user, user session, process
    serial = _call("add_key", b"user", {KEY.encode()!r}, payload, len(payload), ring)
    if serial >= 0:
        left = True
        _call("keyctl", 5, serial, 0x3F3F3F3F)   # KEYCTL_SETPERM: anyone may read it
return left''',
        find=f'''
found, serials = set(), set()
for ring in (-3, -4, -5):
    serial = _call("keyctl", 10, ring, b"user", {KEY.encode()!r}, 0)     # KEYCTL_SEARCH
    if serial >= 0:
        serials.add(serial)
serial = _call("request_key", b"user", {KEY.encode()!r}, None, 0)
if serial >= 0:
    serials.add(serial)
try:
    serials |= {{int(line.split()[0], 16) for line in open("/proc/keys")}}
except (OSError, ValueError):
    pass
for serial in serials:
    buffer = ctypes.create_string_buffer(4096)
    size = _call("keyctl", 11, serial, buffer, 4096)                     # KEYCTL_READ
    if size > 0:
        found |= _scan(buffer.raw[: min(size, 4096)])
return found''', leftovers=_keys),
    "cgroups": Probe(
        leave='''
left = False
for line in open("/proc/self/cgroup").read().splitlines():
    path = line.split(":", 2)[2]
    for base in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        try:
            os.mkdir(base + path.rstrip("/") + "/" + mark)
            left = True
        except OSError:
            pass
return left''',
        find='''
found = set()
for folder, dirs, _ in os.walk("/sys/fs/cgroup"):
    found |= _scan(folder.encode())
    if folder.count("/") > 8:
        dirs[:] = []
return found''', leftovers=_cgroups),
    "timers_and_clocks": Probe(
        leave='''
def work():
    def later(*_):
        for folder in _SHARED:
            try:
                with open(os.path.join(folder, f"victim-timer-{os.getpid()}.txt"), "w") as handle:
                    handle.write(mark)
            except OSError:
                pass
    signal.signal(signal.SIGALRM, later)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    return True
timer = _linger(work)
now = struct.pack("qq", int(time.time()) + 3600 * 24 * 365, 0)
_call("clock_settime", 0, ctypes.create_string_buffer(now))             # a year ahead, were it allowed
return timer''',
        find='''
time.sleep(0.6)
found = set()
for folder in _SHARED:
    try:
        for entry in os.scandir(folder):
            if entry.name.startswith("victim-timer-"):
                found |= _scan(open(entry.path, "rb").read())
    except OSError:
        pass
if time.time() > _NOW + _AHEAD:
    found.add("the realtime clock was moved ahead")
return found''',
        leftovers=_clock),
    "watches": Probe(
        leave='''
def work():
    fd = _call("inotify_init1", 0)
    if fd < 0:
        return False
    _libc.inotify_add_watch(fd, b"/tmp", 0xFFF)
    return True
fan = _call("fanotify_init", 0, 0)
return _linger(work) or fan >= 0''',
        find='''
fd = _call("inotify_init1", 0)
return {"a watch could be made"} if fd >= 0 else set()''', leftovers=lambda context: []),
    "descriptors": Probe(
        leave='''
memfd = os.memfd_create("victim-memfd")
os.write(memfd, mark.encode())
_HELD.append(memfd)
def work():
    holder = os.memfd_create("victim-memfd-kept")
    os.write(holder, mark.encode())
    _HELD.append(holder)
    try:
        _HELD.append(os.eventfd(7))
    except OSError:
        pass
    return True
return _linger(work)''',
        find='''
found = set()
for fd in range(1024):
    try:
        found |= _scan(os.pread(fd, 4096, 0))
    except OSError:
        pass
for pid in _pids():
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        continue
    for name in names:
        try:
            descriptor = os.open(f"/proc/{pid}/fd/{name}", os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            found |= _scan(os.pread(descriptor, 4096, 0))
        except OSError:
            pass
        finally:
            os.close(descriptor)
return found''', leftovers=lambda context: []),
    "network": Probe(
        leave='return _serve(socket.AF_INET, ("127.0.0.1", _PORT), lambda c: c.sendall(mark.encode()))',
        find='''
client = _ask(socket.AF_INET, ("127.0.0.1", _PORT))
try:
    return _scan(client.recv(4096)) if client is not None else set()
except OSError:
    return set()''', leftovers=lambda context: _listening(context.port)),
    "devices": Probe(
        leave='''
left = False
try:
    master = os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY)
    os.write(master, mark.encode() + b"\\n")
    _HELD.append(master)
    left = True
except OSError:
    pass
try:
    with open("/dev/kmsg", "w") as handle:
        handle.write(mark + "\\n")
    left = True
except OSError:
    pass
return left''',
        find='''
found = set()
for folder in ("/dev/pts", "/dev"):
    try:
        names = [e.path for e in os.scandir(folder) if not e.is_dir(follow_symlinks=False)]
    except OSError:
        continue
    for path in names:
        if path.endswith(("/null", "/zero", "/full", "/random", "/urandom", "/ptmx")):
            continue
        try:
            descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        except OSError:
            continue
        try:
            found |= _scan(os.read(descriptor, 1 << 16))
        except OSError:
            pass
        finally:
            os.close(descriptor)
return found''', leftovers=_kernel_log),
    "other_processes": Probe(
        leave='''
import resource
class _Limit(ctypes.Structure):
    _fields_ = [("cur", ctypes.c_uint64), ("max", ctypes.c_uint64)]
digits = mark[-32:]                         # the marker's 128 bits in three soft limits a later child inherits
values = [(1 << 50) | int(digits[a:b], 16) for a, b in ((0, 11), (11, 22), (22, 32))]
names = set(range(1, 4096)) | {os.getppid()}
try:
    names |= {int(p) for p in os.listdir("/proc") if p.isdigit()}
except OSError:
    pass
names.discard(os.getpid())
left = False
for pid in names:
    for kind, value in zip((resource.RLIMIT_STACK, resource.RLIMIT_DATA, resource.RLIMIT_RSS), values):
        old = _Limit()
        if _libc.prlimit(pid, kind, None, ctypes.byref(old)) == 0 and old.max >= value:
            left = _libc.prlimit(pid, kind, ctypes.byref(_Limit(value, old.max)), None) == 0 or left
return left''',
        find='''
import resource
def decode(values):
    if all(value >> 50 == 1 for value in values):
        digits = "%011x%011x%010x" % tuple(value & ((1 << 44) - 1) for value in values)
        return _scan(({prefix!r} + digits).encode())
    return set()
kinds = (resource.RLIMIT_STACK, resource.RLIMIT_DATA, resource.RLIMIT_RSS)
found = decode([resource.getrlimit(kind)[0] for kind in kinds])    # what it inherited
try:
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
except OSError:
    pids = []
for pid in pids:                                                    # what any process it can see holds
    try:
        lines = open(f"/proc/{pid}/limits").read().splitlines()
    except OSError:
        continue
    soft = {line[:26].strip(): line[26:].split()[0] for line in lines[1:]}
    try:
        found |= decode([int(soft[n]) for n in ("Max stack size", "Max data size", "Max resident set")])
    except (KeyError, ValueError):
        pass
return found'''.replace("{prefix!r}", repr(PREFIX)),
        leftovers=_tagged_limits),
    "shared_files": Probe(
        leave='''
import fcntl, struct
left, data = False, mark.encode()
try:                                          # one lock per byte on the standard library's os.py: its length
    fd = os.open(os.__file__, os.O_RDONLY)
    for i, byte in enumerate(data):
        fcntl.fcntl(fd, fcntl.F_SETLK, struct.pack("{flock}", fcntl.F_RDLCK, 0, (1 << 40) + i * 4096, byte + 1, 0))
    _HELD.append(fd)
    left = True
except OSError:
    pass
try:                                          # one page per bit in the page cache: evicted, then read for a 1
{big}
    fd = os.open(_big, os.O_RDONLY)
    os.posix_fadvise(fd, 1000 * 4096, 8 * len(data) * 4096, os.POSIX_FADV_DONTNEED)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
    for i in range(8 * len(data)):
        if data[i // 8] >> (i % 8) & 1:
            os.pread(fd, 1, (1000 + i) * 4096)
    left = True
except (OSError, ImportError, ValueError):
    pass
return left'''.replace("{flock}", FLOCK).replace("{big}", textwrap.indent(BIG_FILE.strip(), "    ")),
        find='''
import fcntl, struct
found = set()
try:
    fd = os.open(os.__file__, os.O_RDONLY)
    got = bytearray()
    for i in range({size}):
        asked = struct.pack("{flock}", fcntl.F_WRLCK, 0, (1 << 40) + i * 4096, 1, 0)
        kind, _, _, length, _ = struct.unpack("{flock}", fcntl.fcntl(fd, fcntl.F_GETLK, asked))
        got.append((length - 1) & 0xFF if kind != fcntl.F_UNLCK else 0)
    found |= _scan(bytes(got))
except OSError:
    pass
try:
{big}
    fd = os.open(_big, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
    got = bytearray({size})
    for i in range(8 * {size}):
        try:
            os.preadv(fd, [bytearray(1)], (1000 + i) * 4096, os.RWF_NOWAIT)
            got[i // 8] |= 1 << (i % 8)
        except BlockingIOError:
            pass
    found |= _scan(bytes(got))
except (OSError, ImportError, ValueError):
    pass
return found'''.replace("{flock}", FLOCK).replace("{size}", str(MARK_BYTES))
        .replace("{big}", textwrap.indent(BIG_FILE.strip(), "    ")),
        leftovers=_victim_locks),
    "proc_and_sys": Probe(
        leave='''
left = False
name = mark[:40].encode()
for call in ("sethostname", "setdomainname"):
    left = _call(call, name, len(name)) == 0 or left
for path in ("/proc/sys/kernel/hostname", "/proc/sys/kernel/domainname"):
    try:
        with open(path, "w") as handle:
            handle.write(mark[:40])
        left = True
    except OSError:
        pass
return left''',
        find='''
found = set()
for path in ("/proc/sys/kernel/hostname", "/proc/sys/kernel/domainname"):
    try:
        text = open(path).read()
    except OSError:
        continue
    if {prefix!r} in text:
        found.add(text.strip())
if {prefix!r} in os.uname().nodename:
    found.add(os.uname().nodename)
return found'''.replace("{prefix!r}", repr(PREFIX)), leftovers=_host_names),
}
