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
