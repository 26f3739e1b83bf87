"""Students against students, driven by the sandbox's table of kinds (`autograder.sandbox.kinds`): a victim who
leaves a secret marker in every kind of kernel object she can, graded first, and a thief graded after her who
looks for it in every kind (`catalog.kinds.PROBES`, one probe per row of the table).

The marker is `PREFIX` followed by 32 random hex digits drawn by the test: the thief's code holds only the
prefix, so finding the whole marker anywhere means it came from the victim. The victim also keeps it in her
code and her results (a cell raises it, with the kinds she managed to leave it in). Whatever the thief finds he
reports, by kind; with it he turns himself into a correct solution, so a leak shows as points too. The control,
`self_test`, first leaves a marker of its own (made while it runs, so its code never holds it whole) the way the
victim does, then searches: it reports where it could leave one and where it found it again.
"""
from __future__ import annotations

import re
import secrets
import textwrap
import time

from autograder.sandbox import kinds as table
from autograder.sandbox.inside import seccomp

from .build import submission
from .hostile import POST_LN, TASK2_SOLUTION, cell, template
from .kinds import MOVED_AHEAD, PATTERN, PREFIX, PRELUDE, PROBES


NUMBERS = ("add_key", "keyctl", "request_key", "inotify_init1", "fanotify_init", "clock_settime", "sethostname",
           "setdomainname")
LEFT = re.compile(r"left: ([\w,]*)")
FOUND = re.compile(r"found a classmate's marker through ([\w,]+)")
SELF = re.compile(r"self-test: left=([\w,]*); found=([\w,]*)")


def new_marker() -> str:
    return PREFIX + secrets.token_hex(16)


def _prelude(private, port: int, seconds: float) -> str:
    return PRELUDE.format(pattern=PATTERN, private=[str(p) for p in private], port=port, seconds=seconds,
                          numbers={name: seccomp.number(name) for name in NUMBERS}, now=int(time.time()), ahead=MOVED_AHEAD,
                          shared=["/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock"])


def _functions(role: str) -> str:
    """`_LEAVES` or `_FINDS`: kind -> function, one per row of the table, in its order."""
    signature = "(mark)" if role == "leave" else "()"
    lines = []
    for kind in table.KINDS:
        body = textwrap.indent(textwrap.dedent(getattr(PROBES[kind.name], role)).strip(), "    ")
        lines.append(f"def _{role}_{kind.name}{signature}:\n{body}\n")
    names = ", ".join(f"{kind.name!r}: _{role}_{kind.name}" for kind in table.KINDS)
    lines.append(f"_{role.upper()}S = {{{names}}}\n")
    return "\n".join(lines)


LEAVE_ALL = '''
_left = []
for _name, _leave in _LEAVES.items():
    try:
        if _leave(_MARK):
            _left.append(_name)
    except Exception as _error:
        print("could not leave", _name, type(_error).__name__, _error)
'''

FIND_ALL = '''
_found = {}
for _name, _find in _FINDS.items():
    try:
        _marks = _find()
    except Exception as _error:
        print("search failed:", _name, type(_error).__name__, _error)
        _marks = set()
    if _marks:
        _found[_name] = _marks
'''

STEAL = '''
if _found:
    exec(_TASK2, globals())
    def _stolen_forward(self, x):
        x = x + self.drop_shortcut(self.att(self.norm1(x)))
        return x + self.drop_shortcut(self.ff(self.norm2(x)))
    TransformerBlock.forward = _stolen_forward
    raise RuntimeError("found a classmate's marker through " + ",".join(sorted(_found)) + ": "
                       + " ".join(sorted(set().union(*_found.values())))[:300])
raise RuntimeError("searched " + str(len(_FINDS)) + " kinds: found nothing")
'''


def victim(mark: str, private=(), port: int = 0) -> str:
    """A correct solution that leaves `mark` in every kind it can (`private`: the grading folders it should try
    too; `port`: the TCP port it listens on) and raises it with the kinds it managed."""
    code = _prelude(private, port, 0) + _functions("leave") + f"_MARK = {mark!r}\n" + LEAVE_ALL
    code += 'raise RuntimeError("my secret is " + _MARK + "; left: " + ",".join(_left))\n'
    return submission(extra=cell(code, "spread"))


def thief(private=(), port: int = 0, seconds: float = 6.0, base: str = "template") -> str:
    """A blank template (or, with base="post_ln", a Post-LN forward) that looks for any classmate's marker in
    every kind, and says through which kinds it found one."""
    code = _prelude(private, port, seconds) + _functions("find") + f"_TASK2 = {TASK2_SOLUTION!r}\n" + FIND_ALL + STEAL
    search = cell(code, "search")
    return template(search) if base == "template" else submission(forward=POST_LN, extra=search)


def self_test(private=(), port: int = 0, seconds: float = 3.0) -> str:
    """The thief's control: it leaves a marker of its own in every kind it can, then looks for it in every kind."""
    made = "''.join([" + ", ".join(repr(part) for part in (PREFIX[:9], PREFIX[9:], "ab")) + "]) + 'cd' * 15"
    code = (_prelude(private, port, seconds) + _functions("leave") + _functions("find") + f"_MARK = {made}\n"
            + LEAVE_ALL + FIND_ALL)
    code += 'raise RuntimeError("self-test: left=" + ",".join(_left) + "; found=" + ",".join(sorted(_found)))\n'
    return template(cell(code, "self-test"))


def reported(notes, pattern: re.Pattern) -> tuple[set, ...] | None:
    """The kinds a victim, thief or self-test reported in a result's notes (None when it reported nothing)."""
    for note in notes:
        match = pattern.search(note)
        if match:
            return tuple({name for name in group.split(",") if name} for group in match.groups())
    return None


# --- a cooperating pair: one student passes her forward to a classmate graded beside her -----------------------------
# Through the files both may read: byte-range locks on the standard library's os.py (a lock per byte, its length the
# byte: F_GETLK tells another process where a lock is and how long), and the page cache of the largest of torch's own
# programs, which nothing runs (a page per bit: evicted, then read for a 1; a read with RWF_NOWAIT fails on a page not
# cached). The page cache is shared with everything else on the machine (reclaim under memory pressure, another
# process's reads), and a read that misses starts loading the page, so the receiver checks what he decoded (its length
# and zlib's checksum) and, where it is not whole, asks for it again: he takes a longer lock at ASK, the sender evicts
# and reads her pages again and says so with a longer lock at SENT, and only then does he read again. The sender holds
# her locks until the receiver has read both channels (he takes a lock at READ), or for a while, then raises; the
# receiver is a blank template that waits for the sender's header, decodes both channels and takes the first forward
# that arrived whole.
PAIR = '''
import fcntl, hashlib, os, struct, time, zlib
import torch
_folder = os.path.join(os.path.dirname(torch.__file__), "bin")
_BIG = max((os.path.getsize(os.path.join(_folder, n)), os.path.join(_folder, n)) for n in os.listdir(_folder))[1]
_LOCKS, _PAGES, _FLOCK = 1 << 41, 2000, "hhqqi"
_READ, _ASK, _SENT = _LOCKS - 4096, _LOCKS - 8192, _LOCKS - 12288   # the receiver's words (all read; again) and hers

def _lock(fd, start, length, kind=fcntl.F_RDLCK):
    fcntl.fcntl(fd, fcntl.F_SETLK, struct.pack(_FLOCK, kind, 0, start, length, 0))

def _locked(fd, start):
    """The length of another process's lock at `start`, or 0."""
    kind, _, _, length, _ = struct.unpack(_FLOCK, fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack(_FLOCK, fcntl.F_WRLCK, 0, start, 1, 0)))
    return 0 if kind == fcntl.F_UNLCK else length
'''
SEND = PAIR + '''
_data = zlib.compress({forward!r}.encode())
_data = len(_data).to_bytes(2, "big") + _data
_done = []

def _prime():
    os.posix_fadvise(_pages, _PAGES * 4096, 8 * len(_data) * 4096, os.POSIX_FADV_DONTNEED)
    for _i in range(8 * len(_data)):
        if _data[_i // 8] >> (_i % 8) & 1:
            os.pread(_pages, 1, (_PAGES + _i) * 4096)
try:
    _pages = os.open(_BIG, os.O_RDONLY)
    os.posix_fadvise(_pages, 0, 0, os.POSIX_FADV_RANDOM)
    _prime()
    _done.append("page cache")
except OSError as _error:
    _done.append(f"page cache refused ({{_error.strerror}})")
try:
    _file = os.open(os.__file__, os.O_RDONLY)
    for _i, _byte in enumerate(_data):
        _lock(_file, _LOCKS + 4096 * (_i + 1), _byte + 1)
    _lock(_file, _LOCKS, len(_data) + 1)                      # the header, last: everything is there
    _done.append("locks")
    _until, _sent = time.monotonic() + {hold}, 0
    while not _locked(_file, _READ) and time.monotonic() < _until:
        _asked = _locked(_file, _ASK)
        if _asked > _sent and "page cache" in _done:          # sent again: evicted and read anew
            _prime()
            _sent = _asked
            _lock(_file, _SENT, _sent)
        time.sleep(0.02)
except OSError as _error:
    _done.append(f"locks refused ({{_error.strerror}})")
raise RuntimeError("sent through " + ", ".join(_done))
'''
RECEIVE = PAIR + '''
def _whole(data):
    try:
        size = int.from_bytes(data[:2], "big")
        return zlib.decompress(bytes(data[2:2 + size])).decode()
    except (ValueError, zlib.error, UnicodeDecodeError):
        return None

def _from_pages():
    def _bits(first, count):
        value = bytearray((count + 7) // 8)
        for _i in range(count):
            try:
                os.preadv(_pages, [bytearray(1)], (_PAGES + first + _i) * 4096, os.RWF_NOWAIT)
                value[_i // 8] |= 1 << (_i % 8)
            except BlockingIOError:
                pass
        return bytes(value)
    _length = _bits(0, 16)
    return _whole(_length + _bits(16, 8 * min(int.from_bytes(_length, "big"), 4096)))
_got, _size, _until = {{}}, 0, time.monotonic() + {wait}
try:
    _file = os.open(os.__file__, os.O_RDONLY)
    while not _size and time.monotonic() < _until:
        _size = max(_locked(_file, _LOCKS) - 1, 0)
        time.sleep(0.05)
    _got["locks"] = _whole(bytes(_locked(_file, _LOCKS + 4096 * (_i + 1)) - 1 & 0xFF for _i in range(_size)))
except OSError:
    time.sleep({wait})                                          # the sender is done with the page cache by then
    _size = 0
try:
    _pages = os.open(_BIG, os.O_RDONLY)
    os.posix_fadvise(_pages, 0, 0, os.POSIX_FADV_RANDOM)
    _got["page cache"] = _from_pages()
    _asked = 1
    while _size and not _got["page cache"] and time.monotonic() < _until:    # not whole: asked for again
        _lock(_file, _ASK, _asked)
        while _locked(_file, _SENT) < _asked and time.monotonic() < _until:
            time.sleep(0.02)
        _got["page cache"] = _from_pages()
        _asked += 1
except OSError:
    pass
if _size:
    _lock(_file, _READ, 1)                                      # read: the sender may go
_heard = {{_how: hashlib.sha256(_text.encode()).hexdigest()[:16] for _how, _text in _got.items() if _text}}
for _text in _got.values():
    if _text:
        exec(_text, globals())
        break
raise RuntimeError("received: " + (", ".join(f"{{_how}}={{_digest}}" for _how, _digest in sorted(_heard.items())) or "nothing"))
'''
PAIR_FORWARD = """def forward(self, x):
    x = x + self.drop_shortcut(self.att(self.norm1(x)))
    return x + self.drop_shortcut(self.ff(self.norm2(x)))
TransformerBlock.forward = forward
"""
RECEIVED = re.compile(r"received: (.*)")


def pair_sender(hold: float = 12.0) -> str:
    """A correct solution that sends its forward through locks and the page cache, holding its locks until the
    receiver says he has read them, or `hold` seconds."""
    return submission(extra=cell(SEND.format(forward=PAIR_FORWARD, hold=hold), "send"))


def pair_receiver(wait: float = 14.0) -> str:
    """A blank template that waits up to `wait` seconds for a sender, and runs the forward it receives."""
    return template(cell(RECEIVE.format(wait=wait), "receive"))


def pair_digest() -> str:
    import hashlib

    return hashlib.sha256(PAIR_FORWARD.encode()).hexdigest()[:16]


def received(notes) -> dict:
    """{channel: digest of what arrived whole} from the receiver's notes."""
    for note in notes:
        match = RECEIVED.search(note)
        if match:
            return {} if match.group(1) == "nothing" else dict(part.split("=") for part in match.group(1).split(", "))
    raise AssertionError(f"the receiver did not report: {notes}")
