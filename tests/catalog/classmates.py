"""Students against students: a victim who leaves a secret marker everywhere she can, graded first, and a
thief graded after her who searches everywhere he can for it.

The marker is `PREFIX` followed by 32 random hex digits drawn by the test: the thief's code holds only the
prefix, so finding the whole marker anywhere means it came from the victim. The victim keeps it in her
code, in memory (strings, bytes, a background process), in every place she can write (/tmp, /var/tmp,
/dev/shm, /run/lock, world-writable subfolders, her working directory, the class and results folders when
they are world-writable), in System V shared memory and message queues, in a POSIX message queue and
shared memory object, behind an abstract Unix socket, and in her results (a cell raises it).

The thief searches his whole address space (/proc/self/maps and /proc/self/mem), every file he can open
(a walk of /, /proc of every process he can see, the class and results folders), System V IPC by every id
listed, the POSIX queue and shared memory by name, and the abstract socket. Whatever he finds he reports;
with it he turns himself into a correct solution, so a leak shows as points too.
"""
from __future__ import annotations

import secrets

from .build import submission
from .hostile import cell, template

PREFIX = "classmate-secret-"
PATTERN = PREFIX + "[0-9a-f]{32}"


def new_marker() -> str:
    return PREFIX + secrets.token_hex(16)


SPREAD = '''
import ctypes, ctypes.util, os, socket, time
_MARK = {mark}
_HELD = [_MARK * 3, _MARK.encode() * 2, bytearray(_MARK.encode())]
_places = ["/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock", os.getcwd(), os.path.expanduser("~"), *{extra!r}]
for _top in list(_places):
    try:
        _places += [e.path for e in os.scandir(_top) if e.is_dir(follow_symlinks=False)
                    and os.stat(e.path).st_mode & 0o002]
    except OSError:
        pass
for _folder in _places:
    try:
        with open(os.path.join(_folder, f"victim-{{os.getpid()}}.txt"), "w") as _handle:
            _handle.write(_MARK)
        os.chmod(os.path.join(_folder, f"victim-{{os.getpid()}}.txt"), 0o666)
    except OSError:
        pass
_libc = ctypes.CDLL(None, use_errno=True)
_libc.shmat.restype = ctypes.c_void_p
_id = _libc.shmget(0x5EED, 4096, 0o1000 | 0o666)
if _id >= 0:
    _at = _libc.shmat(_id, None, 0)
    if _at not in (None, ctypes.c_void_p(-1).value):
        ctypes.memmove(_at, _MARK.encode(), len(_MARK))
_queue = _libc.msgget(0x5EED, 0o1000 | 0o666)
if _queue >= 0:
    _message = ctypes.create_string_buffer(ctypes.c_long(1).value.to_bytes(8, "little") + _MARK.encode())
    _libc.msgsnd(_queue, _message, len(_MARK), 0o4000)
try:
    _rt = ctypes.CDLL(ctypes.util.find_library("rt") or "librt.so.1", use_errno=True)
    _mq = _rt.mq_open(b"/victim-queue", os.O_CREAT | os.O_RDWR, 0o666, None)
    if _mq >= 0:
        _rt.mq_send(_mq, _MARK.encode(), len(_MARK), 0)
except OSError:
    pass
try:
    from multiprocessing import shared_memory
    _shared = shared_memory.SharedMemory(name="victim-shm", create=True, size=4096)
    _shared.buf[: len(_MARK)] = _MARK.encode()
except Exception:
    pass
if os.fork() == 0:            # a process that keeps the marker, and serves it on an abstract socket
    os.setsid()
    try:
        _server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        _server.bind("\\0victim-socket")
        _server.listen(5)
        _server.settimeout(0.5)
    except OSError:
        _server = None
    _until = time.monotonic() + 120
    while time.monotonic() < _until:
        if _server is None:
            time.sleep(0.5)
            continue
        try:
            _connection, _ = _server.accept()
            _connection.sendall(_MARK.encode())
            _connection.close()
        except OSError:
            pass
    os._exit(0)
raise RuntimeError("my secret is " + _MARK)
'''

SEARCH = '''
import ctypes, ctypes.util, os, re, socket, sys, time
_PATTERN = re.compile({pattern!r}.encode())
_found, _budget = {{}}, time.monotonic() + {seconds}

def _scan(data, where):
    for _match in _PATTERN.finditer(data):
        _found.setdefault(_match.group(0).decode(), set()).add(where)

def _memory():
    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)                 # dumpable: my own /proc/self/mem is mine to read
    with open("/proc/self/maps") as _maps, open("/proc/self/mem", "rb", buffering=0) as _mem:
        for _line in _maps:
            _fields = _line.split()
            _low, _high = (int(v, 16) for v in _fields[0].split("-"))
            _file = _fields[5] if len(_fields) > 5 else ""
            # a read-only mapping of a file holds that file's bytes, searched with the files below
            if "r" not in _fields[1] or (_file.startswith("/") and "w" not in _fields[1]) or _file == "[vvar]":
                continue
            for _start in range(_low, _high, 1 << 24):
                try:
                    _mem.seek(_start)
                    _scan(_mem.read(min(1 << 24, _high - _start) + 64), "memory")
                except (OSError, ValueError, OverflowError):
                    pass

def _files():
    _todo, _seen = ["/", "/home", "/root", "/work", "/srv", "/opt", "/run", "/var", "/tmp", "/var/tmp", "/dev/shm",
                    "/run/lock", os.getcwd(), os.path.expanduser("~"), *{extra!r}], set()
    while _todo and time.monotonic() < _budget:
        _folder = _todo.pop(0)
        if _folder in _seen:
            continue
        _seen.add(_folder)
        try:
            _entries = list(os.scandir(_folder))
        except OSError:
            continue
        for _entry in _entries:
            if _entry.path in ("/sys", "/dev/pts") or _entry.path.startswith("/proc/self"):
                continue
            try:
                if _entry.is_dir(follow_symlinks=False):
                    if not (_entry.path.startswith("/proc/") and _entry.name in ("task", "net", "sys")):
                        _todo.append(_entry.path)
                elif _entry.is_file(follow_symlinks=False) and (_entry.path.startswith("/proc/")
                                                               or _entry.stat().st_size < 1 << 22):
                    if not _entry.path.startswith("/proc/") or _entry.name in ("environ", "cmdline", "mem"):
                        with open(_entry.path, "rb") as _handle:
                            _scan(_handle.read(1 << 22), "files")
            except (OSError, ValueError):
                pass

def _ipc():
    _libc = ctypes.CDLL(None, use_errno=True)
    _libc.shmat.restype = ctypes.c_void_p
    for _kind in ("shm", "msg"):
        try:
            _rows = open(f"/proc/sysvipc/{{_kind}}").read().splitlines()[1:]
        except OSError:
            _rows = []
        for _id in [int(r.split()[1]) for r in _rows] + [_libc.shmget(0x5EED, 0, 0) if _kind == "shm"
                                                          else _libc.msgget(0x5EED, 0)]:
            if _id < 0:
                continue
            if _kind == "shm":
                _at = _libc.shmat(_id, None, 0o10000)
                if _at not in (None, ctypes.c_void_p(-1).value):
                    _scan(ctypes.string_at(_at, 4096), "shm")
            else:
                _buffer = ctypes.create_string_buffer(8 + 4096)
                _size = _libc.msgrcv(_id, _buffer, 4096, 0, 0o4000)
                if _size > 0:
                    _scan(_buffer.raw[8: 8 + _size], "msg")
    try:
        _rt = ctypes.CDLL(ctypes.util.find_library("rt") or "librt.so.1", use_errno=True)
        _mq = _rt.mq_open(b"/victim-queue", os.O_RDONLY | os.O_NONBLOCK, 0, None)
        if _mq >= 0:
            _buffer = ctypes.create_string_buffer(1 << 16)
            _size = _rt.mq_receive(_mq, _buffer, 1 << 16, None)
            if _size > 0:
                _scan(_buffer.raw[:_size], "mq")
    except OSError:
        pass
    for _path in ("/dev/shm/victim-shm",):
        try:
            _scan(open(_path, "rb").read(), "posix-shm")
        except OSError:
            pass
    for _ in range(20):                 # the server it asks may have been started a moment ago
        try:
            _client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            _client.settimeout(1)
            _client.connect("\\0victim-socket")
            _scan(_client.recv(4096), "socket")
            break
        except OSError:
            time.sleep(0.05)

for _search in (_ipc, _memory, _files):
    try:
        _search()
    except Exception as _error:
        print("search failed:", type(_error).__name__, _error)
if _found:
    exec({task2!r}, globals())
    def _stolen_forward(self, x):
        x = x + self.drop_shortcut(self.att(self.norm1(x)))
        return x + self.drop_shortcut(self.ff(self.norm2(x)))
    TransformerBlock.forward = _stolen_forward
    raise RuntimeError("found a classmate's marker: " + "; ".join(f"{{_mark}} in {{', '.join(sorted(_where))}}"
                                                             for _mark, _where in sorted(_found.items())))
'''


def victim(mark: str, extra_places=()) -> str:
    """A correct solution that spreads `mark` everywhere it can (`extra_places`: folders it should try too)."""
    return submission(extra=cell(SPREAD.format(mark=repr(mark), extra=list(map(str, extra_places))), "spread"))


def self_test(seconds: float = 6.0) -> str:
    """The thief's control: it first spreads a marker of its own (made while it runs, so its code never holds
    it whole) the way the victim does, then searches. It must find it in every channel its layer leaves it,
    which shows the search would find a classmate's there."""
    made = "''.join([" + ", ".join(repr(part) for part in (PREFIX[:9], PREFIX[9:], "ab")) + "]) + 'cd' * 15"
    plant = cell(SPREAD.replace("raise RuntimeError", "print").format(mark=made, extra=[]), "plant")
    return thief(seconds=seconds).replace("\n# %% search", plant + "\n# %% search", 1)


def thief(extra_places=(), seconds: float = 6.0, base: str = "template") -> str:
    """A blank template (or, with base="post_ln", a Post-LN forward) that searches for any classmate's marker."""
    from .hostile import POST_LN, TASK2_SOLUTION

    search = cell(SEARCH.format(pattern=PATTERN, seconds=seconds, extra=list(map(str, extra_places)),
                                task2=TASK2_SOLUTION), "search")
    return template(search) if base == "template" else submission(forward=POST_LN, extra=search)


