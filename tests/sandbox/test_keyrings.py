"""Key rings, the way a red team went through them, in every layer, as root, through `grade-class`.

The grader is started with a session key ring of its own, as systemd gives one to every service and
`pam_keyinit` to every login (here: a launcher that joins a named session ring and runs `grade-class` under it).
The first student stores her forward's source in every key ring she can reach (the session ring she inherited,
her user's rings), readable by anyone; the classmate graded next, on the same server and (with
AUTOGRADER_JOB_UIDS=1) under the very same uid, as a later job reuses a sandbox uid, searches those rings by
name, reads what he finds and makes it his forward. He must find nothing: his forward scores nothing, the
source is not in his results, the grader's ring holds no key of any student, and no sandbox uid owns a key once
the class is graded.
"""

import json
import os
import sys
import time

import pytest

from autograder.course import kit
from autograder.engine.rubric import RUBRIC, TOTAL_POINTS
from autograder.sandbox.inside import seccomp
from catalog.build import submission
from catalog.hostile import cell, template
from layers import LAYERS, layer_available
from session_ring import run_under_ring, sandbox_key_owners

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the red team's attack is on root's sandbox users")

FORWARD_CHECKS = [name for name in RUBRIC if name != "compounding"]

STORE = """
import ctypes, os
_libc = ctypes.CDLL(None, use_errno=True)
_source = {source!r}
_stored = []
for _ring in (-3, -4, -5):                       # her session ring, her user's ring, her user's session ring
    _serial = _libc.syscall({add_key}, b"user", b"forward-source", _source.encode(), len(_source), _ring)
    if _serial >= 0:
        _libc.syscall({keyctl}, 5, _serial, 0x3F3F3F3F)        # KEYCTL_SETPERM: anyone may read it
        _stored.append(_ring)
raise RuntimeError(f"stored in {{_stored}}")
"""

STEAL = """
import ctypes, os
_libc = ctypes.CDLL(None, use_errno=True)
_serials = set()
for _ring in (-3, -4, -5):
    _serial = _libc.syscall({keyctl}, 10, _ring, b"user", b"forward-source", 0)     # KEYCTL_SEARCH
    if _serial >= 0:
        _serials.add(_serial)
_serial = _libc.syscall({request_key}, b"user", b"forward-source", None, 0)
if _serial >= 0:
    _serials.add(_serial)
try:
    _serials |= {{int(line.split()[0], 16) for line in open("/proc/keys")}}
except (OSError, ValueError):
    pass
for _serial in _serials:
    _buffer = ctypes.create_string_buffer(1 << 16)
    _size = _libc.syscall({keyctl}, 11, _serial, _buffer, 1 << 16)                 # KEYCTL_READ
    if _size > 0 and b"def forward" in _buffer.raw[:_size]:
        exec(_buffer.raw[:_size].decode(), globals())
        TransformerBlock.forward = forward
        raise RuntimeError("read a classmate's key: " + _buffer.raw[:_size].decode()[-60:])
raise RuntimeError("found no key")
"""

FORWARD = """
def forward(self, x):
    x = x + self.drop_shortcut(self.att(self.norm1(x)))
    return x + self.drop_shortcut(self.ff(self.norm2(x)))
"""


def _numbers() -> dict:
    return {name: seccomp.number(name) for name in ("add_key", "keyctl", "request_key")}


@pytest.mark.parametrize("layer", list(LAYERS))
def test_a_classmate_finds_no_key_of_hers_under_an_inherited_session_ring(layer, tmp_path):
    why = layer_available(layer)
    if why:
        pytest.skip(f"layer '{layer}' not available: {why}")
    numbers, mark, owners = _numbers(), f"key-secret-{os.getpid()}-{layer}", sandbox_key_owners()
    root, out = tmp_path / "class", tmp_path / "out"
    root.mkdir()
    source = FORWARD + f"# {mark}\n"
    store = STORE.format(source=source, **numbers)
    (root / "a_victim.py").write_text(submission(extra=cell(store)))
    (root / "b_thief.py").write_text(template(cell(STEAL.format(**numbers))))
    env = {
        **os.environ,
        "AUTOGRADER_JOB_UIDS": "1",
        "AUTOGRADER_BUBBLEWRAP": LAYERS[layer].get("bubblewrap", "auto"),
        "AUTOGRADER_NAMESPACES": LAYERS[layer].get("namespaces", "auto"),
    }
    launched = run_under_ring(
        [sys.executable, "-m", "autograder", "grade-class", root, "--out", out, "--workers", "1", "--seed", "5", "--force"],
        kit.ROOT,
        env,
    )
    assert launched["status"] == 0, launched["stderr"][-3000:]
    victim = json.loads((out / "a_victim" / "results.json").read_text())
    thief = json.loads((out / "b_thief" / "results.json").read_text())
    assert victim["score"] == TOTAL_POINTS
    assert mark not in json.dumps(thief), "the classmate read her key"
    forward = [test for test in thief["tests"] if test["extra_data"].get("check") in FORWARD_CHECKS]
    assert len(forward) == len(FORWARD_CHECKS) and all(test["score"] == 0 for test in forward), thief["tests"]
    assert "found no key" in json.dumps(thief)  # he did search
    assert launched["ring_keys"] == [], "a student's key is in the grader's own session ring"
    deadline = time.monotonic() + 5  # the kernel collects keys lazily
    while sandbox_key_owners() != owners and time.monotonic() < deadline:
        time.sleep(0.1)
    new = {uid: keys for uid, keys in sandbox_key_owners().items() if owners.get(uid) != keys}
    assert new == {}, "sandbox uids own keys they did not own before the class"
