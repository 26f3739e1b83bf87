"""The seccomp allowlist on its own: its numbers against the kernel's, its program read by an interpreter of its
own (every architecture it is made for), and the program loaded in a forked process, where every refused family
fails, and the same calls made without it get the kernel's own answers (so the refusal is the filter's).

The calls that name a process, file locks and page-cache probes are properties over generated arguments: for any
caller and any process named, a call goes through only where it names the caller itself (what names a process is
read from the system calls' manual pages, written out here, not from the kit's lists); the same, made for real in
a forked process among others (the grader above it, init, a sibling, a child of its own, its threads).
"""

import contextlib
import errno
import functools
import json
import os
import re
import threading
from pathlib import Path

import fcntl
import signal

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from autograder.sandbox.inside import allowlist, seccomp, syscalls
from catalog import processes, refused_calls
from tiers import quick_sample

pytestmark = pytest.mark.quick  # in `make test-quick`: this wing's fast tier

EPERM, ENOSYS = seccomp.ERRNO | errno.EPERM, seccomp.ERRNO | errno.ENOSYS
HEADERS = {"x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"), "aarch64": Path("/usr/include/asm-generic/unistd.h")}


def run_filter(program: bytes, arch: int, nr: int, args=(0,) * 6) -> int:
    """What the classic-BPF `program` returns for a system call: an interpreter of the instructions a seccomp
    program of the kit may use (absolute word loads, AND, the four conditional jumps, returns), written from the
    kernel's definitions, not from the kit's builder."""
    data = nr.to_bytes(4, "little") + arch.to_bytes(4, "little") + bytes(8)
    data += b"".join((a & (2**64 - 1)).to_bytes(8, "little") for a in (list(args) + [0] * 6)[:6])
    ops = _instructions(program)
    pc, accumulator = 0, 0
    for _ in range(len(ops) + 1):  # classic BPF only jumps forward
        code, jt, jf, k = ops[pc]
        if code == 0x20:  # BPF_LD | BPF_W | BPF_ABS
            accumulator = int.from_bytes(data[k : k + 4], "little")
            pc += 1
        elif code == 0x54:  # BPF_ALU | BPF_AND | BPF_K
            accumulator &= k
            pc += 1
        elif code in (0x15, 0x25, 0x35, 0x45):  # BPF_JMP | JEQ, JGT, JGE, JSET (| BPF_K)
            taken = {0x15: accumulator == k, 0x25: accumulator > k, 0x35: accumulator >= k, 0x45: bool(accumulator & k)}[code]
            pc += 1 + (jt if taken else jf)
        elif code == 0x06:  # BPF_RET | BPF_K
            return k
        else:
            raise AssertionError(f"unknown opcode {code:#x}")
    raise AssertionError("the program ran off its end")


@functools.lru_cache(maxsize=64)
def _instructions(program: bytes) -> list[tuple[int, int, int, int]]:
    """(code, jt, jf, k) of each instruction (struct sock_filter)."""
    return [
        (
            int.from_bytes(program[i : i + 2], "little"),
            program[i + 2],
            program[i + 3],
            int.from_bytes(program[i + 4 : i + 8], "little"),
        )
        for i in range(0, len(program), 8)
    ]


def kernel_numbers(machine: str) -> dict[str, int]:
    """name -> number as this machine's kernel headers define them (skips the test where they are missing)."""
    header = HEADERS[machine]
    if not header.is_file():
        pytest.skip(f"no kernel headers for {machine} here ({header})")
    text = header.read_text()
    plain = {m[1]: int(m[2]) for m in re.finditer(r"#define __NR_(\w+)\s+(\d+)\b", text)}
    paired = {m[1]: int(m[2]) for m in re.finditer(r"#define __NR3264_(\w+)\s+(\d+)\b", text)}
    plain.update({m[1]: paired[m[2]] for m in re.finditer(r"#define __NR_(\w+)\s+__NR3264_(\w+)", text) if m[2] in paired})
    return plain


def every_name() -> set[str]:
    names = {n for group in allowlist.ALLOWED.values() for n in group} | set(syscalls.CHECKED) | set(syscalls.ENOSYS)
    names |= {n for group in syscalls.GRANTS.values() for n in group} | set(syscalls.TARGETED)
    return names | {n for group in syscalls.REFUSED.values() for n in group} | set(seccomp.GPU_ONLY)


@pytest.mark.parametrize("machine", sorted(seccomp.ARCH))
def test_libseccomp_s_numbers_are_the_kernel_s(machine):
    kernel = kernel_numbers(machine)
    compared = {name for name in every_name() if name in kernel and seccomp.number(name, machine) is not None}
    wrong = {
        name: (seccomp.number(name, machine), kernel[name]) for name in compared if seccomp.number(name, machine) != kernel[name]
    }
    assert not wrong, wrong
    assert {"read", "openat", "clone", "ioctl", "socket", "add_key", "keyctl", "bpf"} <= compared


def test_the_numbers_call_what_they_name():
    """Made, not read: the numbers libseccomp gives this machine call the kernel's own getpid, gettid, getuid..."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    made = {name: libc.syscall(seccomp.number(name)) for name in ("getpid", "getppid", "getuid", "getgid", "gettid")}
    assert made == {
        "getpid": os.getpid(),
        "getppid": os.getppid(),
        "getuid": os.getuid(),
        "getgid": os.getgid(),
        "gettid": threading.get_native_id(),
    }


def test_every_name_of_the_lists_is_a_system_call_of_some_machine():
    unknown = [name for name in every_name() if all(seccomp.number(name, m) is None for m in seccomp.ARCH)]
    assert not unknown, unknown
    allowed = {n for group in allowlist.ALLOWED.values() for n in group}
    granted = {n for group in syscalls.GRANTS.values() for n in group}
    refused = {n for group in syscalls.REFUSED.values() for n in group}
    assert not (allowed | granted | set(syscalls.CHECKED)) & (refused - {"socket", "personality"})


@pytest.mark.parametrize("machine", sorted(seccomp.ARCH))
def test_the_program_allows_only_the_list_and_checks_the_abi(machine):
    arch, program = seccomp.ARCH[machine], seccomp.build(tuple(syscalls.GRANTS), "cpu", machine)
    nr = lambda name: seccomp.number(name, machine)  # noqa: E731
    assert run_filter(program, 0x40000003, nr("read")) == seccomp.KILL_PROCESS  # i386's ABI
    assert run_filter(program, 0x40000028, nr("read")) == seccomp.KILL_PROCESS  # 32-bit ARM's
    if machine == "x86_64":
        assert run_filter(program, arch, seccomp.X32_BIT | nr("socket")) == seccomp.KILL_PROCESS
        assert run_filter(program, arch, seccomp.X32_BIT | nr("read")) == seccomp.KILL_PROCESS
    for name in seccomp.allowed_names(tuple(syscalls.GRANTS)):
        if nr(name) is not None:
            assert run_filter(program, arch, nr(name)) == seccomp.ALLOW, name
    for family, names in syscalls.REFUSED.items():
        for name in names:
            if nr(name) is not None and name not in syscalls.CHECKED:
                assert run_filter(program, arch, nr(name)) == EPERM, (family, name)
    assert run_filter(program, arch, nr("clone3")) == ENOSYS  # the C library falls back to clone
    assert run_filter(program, arch, seccomp.highest_known(machine) + 1) == ENOSYS  # newer than libseccomp
    unlisted = [n for n in range(seccomp.highest_known(machine)) if run_filter(program, arch, n) == EPERM]
    assert len(unlisted) > 100  # most of the kernel's calls are refused


@pytest.mark.parametrize("machine", sorted(seccomp.ARCH))
def test_calls_only_partly_safe_are_allowed_only_with_safe_arguments(machine):
    arch, program = seccomp.ARCH[machine], seccomp.build(tuple(syscalls.GRANTS), "cpu", machine)
    nr = lambda name: seccomp.number(name, machine)  # noqa: E731
    thread_flags = 0x3D0F00  # what pthread_create passes to clone
    assert run_filter(program, arch, nr("clone"), (thread_flags,)) == seccomp.ALLOW
    assert run_filter(program, arch, nr("clone"), (17,)) == seccomp.ALLOW  # fork(): SIGCHLD
    for flag in syscalls.NAMESPACE_FLAGS.values():
        assert run_filter(program, arch, nr("clone"), (flag | 17,)) == EPERM, hex(flag)
    assert run_filter(program, arch, nr("clone"), (0x10000000 | (1 << 40),)) == EPERM
    for request in syscalls.IOCTLS.values():
        assert run_filter(program, arch, nr("ioctl"), (1, request)) == seccomp.ALLOW
    for request in (0x5412, 0x541C, 0x4B3A, 0xC0104600):  # TIOCSTI, TIOCLINUX, KDSETMODE, an NVIDIA request
        assert run_filter(program, arch, nr("ioctl"), (1, request)) == EPERM, hex(request)
    gpu = seccomp.build(tuple(syscalls.GRANTS), "cuda", machine)
    assert run_filter(gpu, arch, nr("ioctl"), (5, 0xC0104600)) == seccomp.ALLOW
    assert run_filter(program, arch, nr("prctl"), (syscalls.PRCTLS["PR_SET_NAME"],)) == seccomp.ALLOW
    for option in (22, 36, 35, 0x59616D61, 47):  # PR_SET_SECCOMP, _CHILD_SUBREAPER, _MM, _PTRACER, _CAP_AMBIENT
        assert run_filter(program, arch, nr("prctl"), (option,)) == EPERM, option
    for family, kind in ((1, 1), (1, 2 | 0o2000000), (2, 1), (2, 2), (10, 1 | 0o4000), (1, 5)):
        assert run_filter(program, arch, nr("socket"), (family, kind)) == seccomp.ALLOW, (family, kind)
    for family, kind in ((17, 3), (2, 3), (10, 3), (16, 3), (16, 2), (2, 10), (38, 5), (40, 1)):
        assert run_filter(program, arch, nr("socket"), (family, kind)) == EPERM, (family, kind)
    assert run_filter(program, arch, nr("socketpair"), (1, 1)) == seccomp.ALLOW
    assert run_filter(program, arch, nr("socketpair"), (2, 1)) == EPERM
    assert run_filter(program, arch, nr("personality"), (0xFFFFFFFF,)) == seccomp.ALLOW
    assert run_filter(program, arch, nr("personality"), (0x0040000,)) == EPERM


@pytest.mark.parametrize("machine", sorted(seccomp.ARCH))
def test_each_layer_is_granted_only_what_it_closes(machine):
    arch, nr = seccomp.ARCH[machine], lambda name: seccomp.number(name, machine)
    alone = seccomp.build((), "cpu", machine)  # permissions without Landlock
    for grant, names in syscalls.GRANTS.items():
        for name in names:
            if nr(name) is not None:
                assert run_filter(alone, arch, nr(name), (1, 1)) == EPERM, (grant, name)
                with_it = seccomp.build((grant,), "cpu", machine)
                assert run_filter(with_it, arch, nr(name), (1, 1)) == seccomp.ALLOW, (grant, name)
    assert run_filter(alone, arch, nr("socketpair"), (1, 1)) == seccomp.ALLOW  # an anonymous pair everywhere


def _in_a_fork(filtered: bool) -> dict:
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(reader)
        try:
            if filtered:  # as a child makes its own: with its process id in it
                seccomp.install(seccomp.build(tuple(syscalls.GRANTS), own=os.getpid()))
            os.write(writer, json.dumps(refused_calls.run_probes()).encode())
        finally:
            os._exit(0)
    os.close(writer)
    data = b""
    while chunk := os.read(reader, 1 << 16):
        data += chunk
    os.close(reader)
    os.waitpid(pid, 0)
    return json.loads(data)


@pytest.mark.skipif(os.geteuid() != 0, reason="the calls' own answers without the filter need root's privileges")
def test_every_refused_family_is_refused_by_the_filter_itself():
    """As root, which may make every one of these calls: with the filter each fails with EPERM; without it, none
    does (the kernel answers for its arguments, or succeeds), so the refusal is the filter's, not a privilege's."""
    assert refused_calls.ARGUMENTS.keys() == {n for names in syscalls.REFUSED.values() for n in names}
    filtered, plain = _in_a_fork(True), _in_a_fork(False)
    assert filtered and filtered.keys() == plain.keys()
    assert {label: errno.errorcode[e] for label, (r, e) in filtered.items() if not (r == -1 and e == errno.EPERM)} == {}
    assert {label: errno.errorcode[e] for label, (r, e) in plain.items() if r == -1 and e == errno.EPERM} == {}


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="making an unprivileged instructor, and the layer without Landlock, need root")
@pytest.mark.parametrize("who", ["root without namespaces or Landlock", "an unprivileged instructor (bubblewrap)"])
def test_every_refused_family_fails_in_the_layers_the_class_tests_do_not_play(who, tmp_path):
    """The hostile corpus makes every refused call in the three test layers; here through `grade` in the other
    two a grader may run in: root where neither namespaces nor Landlock work, and a user who is not root."""
    import shutil
    import subprocess
    import sys
    import tempfile

    from autograder.engine.rubric import TOTAL_POINTS
    from autograder.sandbox.parent.policy import bubblewrap_works
    from catalog.build import submission
    from catalog.hostile import cell
    import hub_users

    source = submission(extra=cell(refused_calls.probe_source()))
    command = [sys.executable, "-m", "autograder", "grade", "probe.py", "--results", "probe.json", "--seed", "3"]
    if who.startswith("root"):
        folder = tmp_path
        (folder / "probe.py").write_text(source)
        env = {**os.environ, "AUTOGRADER_BUBBLEWRAP": "off", "AUTOGRADER_NAMESPACES": "off", "AUTOGRADER_LANDLOCK": "off"}
        done = subprocess.run([*command, "--unsafe"], cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    else:
        if not bubblewrap_works():
            pytest.skip("bubblewrap does not work here")
        login = hub_users.user("inst")
        folder = Path(tempfile.mkdtemp(dir=hub_users.home(login)))
        (folder / "probe.py").write_text(source)
        shutil.chown(folder, login, login)
        shutil.chown(folder / "probe.py", login, login)
        done = hub_users.run_as(login, [str(hub_users.python_for(login)), *command[1:]], cwd=folder)
    try:
        assert done.returncode == 0, done.stderr[-3000:]
        results = json.loads((folder / "probe.json").read_text())
    finally:
        if not who.startswith("root"):
            shutil.rmtree(folder, ignore_errors=True)
    assert results["score"] == TOTAL_POINTS, results["extra_data"]
    assert refused_calls.summary_phrase() in " ".join(results["extra_data"]["notes"]), results["extra_data"]["notes"]
    assert "seccomp allowlist" in results["extra_data"]["isolation"]


# --- calls that name a process -----------------------------------------------------------------------------------
# call -> the argument that names a process, from each call's manual page (section 2); None where a descriptor or a
# structure names it, which a filter cannot read: those must be refused whatever their arguments.
NAMES_A_PROCESS = {
    "kill": 0,
    "tkill": 0,
    "tgkill": 0,
    "rt_sigqueueinfo": 0,
    "rt_tgsigqueueinfo": 0,
    "pidfd_open": 0,
    "pidfd_send_signal": None,
    "pidfd_getfd": None,
    "process_madvise": None,
    "process_mrelease": None,
    "prlimit64": 0,
    "getpriority": 1,
    "setpriority": 1,
    "ioprio_get": 1,
    "ioprio_set": 1,
    "sched_setaffinity": 0,
    "sched_getaffinity": 0,
    "sched_setscheduler": 0,
    "sched_getscheduler": 0,
    "sched_setparam": 0,
    "sched_getparam": 0,
    "sched_setattr": 0,
    "sched_getattr": 0,
    "sched_rr_get_interval": 0,
    "get_robust_list": 0,
    "getpgid": 0,
    "getsid": 0,
    "process_vm_readv": 0,
    "process_vm_writev": 0,
    "kcmp": 0,
    "ptrace": 1,
    "migrate_pages": 0,
    "move_pages": 0,
    "perf_event_open": 1,
}
# what the argument before names a process by (the manual pages' PRIO_* and IOPRIO_WHO_*): a process or its group
PROCESS_OR_GROUP = {"getpriority": {os.PRIO_PROCESS, os.PRIO_PGRP}, "setpriority": {os.PRIO_PROCESS, os.PRIO_PGRP}}
PROCESS_OR_GROUP |= {"ioprio_get": {1, 2}, "ioprio_set": {1, 2}}  # IOPRIO_WHO_PROCESS, IOPRIO_WHO_PGRP (no USER)


def _int32(value: int) -> int:
    """What the kernel reads of a pid_t argument: its low 32 bits, signed."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _names_only_itself(name: str, own: int, target: int, which: int) -> bool:
    """Does this call name the caller alone? 0 is the caller (its group for kill); kill may name its own group."""
    if name in PROCESS_OR_GROUP and _int32(which) not in PROCESS_OR_GROUP[name]:  # an int too
        return False
    return _int32(target) in ({0, own, -own} if name == "kill" else {0, own})


PIDS = st.integers(min_value=2, max_value=(1 << 22) - 1)  # a process id (pid_max is at most 2**22)


@st.composite
def _naming(draw, name):
    """(own, arguments): a caller and the call `name` naming any process: near it, itself, its group, anything."""
    own = draw(PIDS)
    near = st.sampled_from([0, own, -own, own + 1, own - 1, 1, -1, own | 1 << 32, (1 << 32) - own, own << 32])
    itself = st.sampled_from([0, own, -own])
    target = draw(itself | near | st.integers(min_value=-(1 << 63), max_value=(1 << 64) - 1) | PIDS)
    which = draw(st.sampled_from([0, 1, 2, 3]) | st.integers(min_value=0, max_value=(1 << 64) - 1))
    args = [draw(st.integers(min_value=0, max_value=(1 << 64) - 1)) for _ in range(6)]
    index = NAMES_A_PROCESS[name]
    if index is not None:
        args[index] = target
        if name in PROCESS_OR_GROUP:
            args[0] = which
    return own, args


@pytest.mark.parametrize("machine", sorted(seccomp.ARCH))
@pytest.mark.parametrize("name", quick_sample(sorted(NAMES_A_PROCESS), every=6))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_call_that_names_a_process_goes_through_only_for_the_caller_itself(machine, name, data):
    own, args = data.draw(_naming(name))
    nr = seccomp.number(name, machine)
    if nr is None:
        return
    verdict = run_filter(_program(machine, own), seccomp.ARCH[machine], nr, args)
    index = NAMES_A_PROCESS[name]
    if verdict == seccomp.ALLOW:
        assert index is not None, f"{name} names its process by a descriptor or a structure, yet went through"
        assert _names_only_itself(name, own, args[index], args[0]), (name, own, args)
    else:
        assert verdict == EPERM, (name, hex(verdict))


@pytest.mark.parametrize("machine", sorted(seccomp.ARCH))
def test_a_call_on_itself_goes_through_where_the_call_is_allowed_at_all(machine):
    """The other way: 0 and its own process id name the caller, and a call allowed on itself is allowed by both
    (for kill: its own group too)."""
    own = 4321
    program = _program(machine, own)
    allowed = []
    for name, index in NAMES_A_PROCESS.items():
        nr = seccomp.number(name, machine)
        if nr is None or index is None:
            continue
        which = [min(PROCESS_OR_GROUP[name])] if name in PROCESS_OR_GROUP else []
        verdicts = {t: run_filter(program, seccomp.ARCH[machine], nr, (*which, t) if which else (t,)) for t in (0, own)}
        if seccomp.ALLOW in verdicts.values():
            assert set(verdicts.values()) == {seccomp.ALLOW}, (name, verdicts)
            allowed.append(name)
    assert run_filter(program, seccomp.ARCH[machine], seccomp.number("kill", machine), (-own,)) == seccomp.ALLOW
    # what Python, the C library and torch do to themselves: signals, limits, priorities, CPUs
    assert {"kill", "tgkill", "prlimit64", "getpriority", "setpriority", "sched_getaffinity"} <= set(allowed)


def _program(machine: str, own: int, checks_off=()) -> bytes:
    return _programs(machine, own, tuple(checks_off))


@functools.lru_cache(maxsize=64)
def _programs(machine: str, own: int, checks_off: tuple) -> bytes:
    return seccomp.build(tuple(syscalls.GRANTS), "cpu", machine, own=own, checks_off=checks_off)


# --- shared files: locks and the page cache ------------------------------------------------------------------------
LOCKS = {getattr(fcntl, name) for name in dir(fcntl) if name.endswith(("LK", "LKW", "LK64", "LKW64"))}
LOCKS |= {fcntl.F_SETLEASE, fcntl.F_GETLEASE, fcntl.F_NOTIFY}  # leases, and F_NOTIFY (dnotify: a watch)
# the descriptor commands Python's own modules use (os.set_inheritable, os.set_blocking, os.dup, pipes, memfd seals)
DESCRIPTORS = {fcntl.F_DUPFD, fcntl.F_DUPFD_CLOEXEC, fcntl.F_GETFD, fcntl.F_SETFD, fcntl.F_GETFL, fcntl.F_SETFL}
DESCRIPTORS |= {fcntl.F_GETPIPE_SZ, fcntl.F_SETPIPE_SZ, fcntl.F_ADD_SEALS, fcntl.F_GET_SEALS}
PAGE_CACHE = ("flock", "mincore", "fadvise64", "readahead", "cachestat")


@pytest.mark.parametrize("machine", sorted(seccomp.ARCH))
@settings(max_examples=300, deadline=None)
@given(
    command=st.sampled_from(sorted(LOCKS | DESCRIPTORS | {fcntl.F_SETOWN, fcntl.F_GETOWN}))
    | st.integers(min_value=0, max_value=(1 << 64) - 1),
    argument=st.integers(min_value=-(1 << 31), max_value=(1 << 64) - 1),
    own=PIDS,
)
def test_fcntl_holds_no_lock_and_hands_signals_to_no_one_else(machine, command, argument, own):
    verdict = run_filter(_program(machine, own), seccomp.ARCH[machine], seccomp.number("fcntl", machine), (3, command, argument))
    low = command & 0xFFFFFFFF  # the kernel reads an unsigned int
    if low in LOCKS:
        assert verdict == EPERM, low
    elif low in DESCRIPTORS:
        assert verdict == seccomp.ALLOW, low
    elif low == fcntl.F_SETOWN:  # SIGIO for this descriptor: to the caller or its group only
        assert (verdict == seccomp.ALLOW) == (_int32(argument) in {0, own, -own}), (argument, own)
    else:
        assert verdict in (seccomp.ALLOW, EPERM)


@pytest.mark.parametrize("machine", sorted(seccomp.ARCH))
@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from(["preadv2", "pwritev2"]),
    flags=st.integers(min_value=0, max_value=(1 << 64) - 1) | st.sampled_from([0, os.RWF_NOWAIT, os.RWF_HIPRI]),
)
def test_no_read_or_write_asks_whether_it_would_wait(machine, name, flags):
    """preadv2 with RWF_NOWAIT fails rather than wait for a page not in the page cache: a probe of what another
    student read. Every other flag goes through (the kernel reads the flags as an int)."""
    verdict = run_filter(_program(machine, 99), seccomp.ARCH[machine], seccomp.number(name, machine), (3, 0, 1, 0, 0, flags))
    assert verdict == (EPERM if flags & os.RWF_NOWAIT else seccomp.ALLOW), hex(flags)


@pytest.mark.parametrize("machine", sorted(seccomp.ARCH))
@settings(max_examples=100, deadline=None)
@given(args=st.lists(st.integers(min_value=0, max_value=(1 << 64) - 1), min_size=6, max_size=6))
def test_whole_file_locks_and_page_cache_calls_are_refused_whatever_their_arguments(machine, args):
    for name in PAGE_CACHE:
        nr = seccomp.number(name, machine)
        if nr is not None:
            assert run_filter(_program(machine, 99), seccomp.ARCH[machine], nr, args) == EPERM, name


@pytest.mark.parametrize("machine", sorted(seccomp.ARCH))
def test_the_tests_switches_open_exactly_what_they_name(machine):
    """The switch a test uses to show a channel works without its refusal: with it, the same calls go through."""
    arch, nr = seccomp.ARCH[machine], lambda name: seccomp.number(name, machine)  # noqa: E731
    shut, opened = _program(machine, 99), _program(machine, 99, tuple(syscalls.SWITCHES))
    for program, verdict in ((shut, EPERM), (opened, seccomp.ALLOW)):
        assert run_filter(program, arch, nr("fcntl"), (3, fcntl.F_SETLK, 0)) == verdict
        assert run_filter(program, arch, nr("fcntl"), (3, fcntl.F_SETOWN, 1)) == verdict
        assert run_filter(program, arch, nr("preadv2"), (3, 0, 1, 0, 0, os.RWF_NOWAIT)) == verdict
        assert run_filter(program, arch, nr("prlimit64"), (1, 7)) == verdict
        assert run_filter(program, arch, nr("kill"), (1, 0)) == verdict
        for name in PAGE_CACHE:
            if nr(name) is not None:
                assert run_filter(program, arch, nr(name), (3,)) == verdict, name
    for program in (shut, opened):  # what neither switch touches
        assert run_filter(program, arch, nr("ptrace"), (0, 1)) == EPERM
        assert run_filter(program, arch, nr("process_vm_readv"), (1,)) == EPERM


# --- the same, made for real: a filtered process among others -------------------------------------------------
WORKER = (
    r"""
import json, os, signal, sys, threading
from autograder.sandbox.inside import seccomp, syscalls
os.setsid()                                    # as a sandboxed child does before any student code
held = threading.Event()
thread = threading.Thread(target=held.wait, daemon=True)
thread.start()
child = os.fork()
if child == 0:
    signal.pause()
    os._exit(0)
if sys.argv[1] == "filtered":
    seccomp.install(seccomp.build(tuple(syscalls.GRANTS), own=os.getpid()))
out = os.fdopen(int(sys.argv[2]), "w")
out.write(json.dumps({"itself": os.getpid(), "its thread": thread.native_id, "its child": child}) + "\n")
out.flush()
"""
    + processes.make_source()
    + r"""
for line in sys.stdin:
    answers = [_make(*request) for request in json.loads(line)]
    out.write(json.dumps(answers) + "\n")
    out.flush()
"""
)
# what a call may do to a process that is not the caller when nobody checks: only ask, or set what is there
HARMLESS = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open", "prlimit64", "getpriority")
HARMLESS += ("ioprio_get", "sched_getaffinity", "sched_getparam", "sched_getscheduler", "sched_getattr")
HARMLESS += ("sched_rr_get_interval", "get_robust_list", "getpgid", "getsid")


class Worker:
    """A process made like a sandboxed child (a session of its own, a thread, a child), with the filter or not,
    making the calls it is asked to; and the processes around it, by role."""

    def __init__(self, filtered: bool, sibling: int):
        import subprocess
        import sys

        reader, writer = os.pipe()
        self.process = subprocess.Popen(
            [sys.executable, "-c", WORKER, "filtered" if filtered else "plain", str(writer)],
            stdin=subprocess.PIPE,
            pass_fds=(writer,),
            text=True,
        )
        os.close(writer)
        self.answers = os.fdopen(reader)
        self.roles = json.loads(self.answers.readline())
        self.roles |= {"zero": 0, "its group": -self.roles["itself"], "the grader": os.getpid()}
        self.roles |= {"the grader's parent": os.getppid(), "init": 1, "a sibling": sibling}

    def ask(self, requests: list) -> list:
        self.process.stdin.write(json.dumps(requests) + "\n")
        self.process.stdin.flush()
        return json.loads(self.answers.readline())

    def close(self):
        self.process.kill()
        self.process.wait()
        self.answers.close()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.roles["itself"], signal.SIGKILL)  # its child, in its session


@pytest.fixture(scope="module")
def workers():
    """A filtered worker and a plain one (the control), and a sibling of theirs that only sleeps."""
    import subprocess
    import sys

    sibling = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    made = {filtered: Worker(filtered, sibling.pid) for filtered in (True, False)}
    yield made
    for worker in made.values():
        worker.close()
    sibling.kill()
    sibling.wait()


ROLES = ("itself", "zero", "its group", "its thread", "its child", "the grader", "the grader's parent", "init", "a sibling")


def _request(worker, name: str, target: int) -> list:
    """[name, target, the nice value it has, the CPUs it may use]: setting what is already there."""
    nice, mask = 0, 1
    if target > 0:
        with contextlib.suppress(OSError):
            nice = os.getpriority(os.PRIO_PROCESS, target)
            mask = sum(1 << cpu for cpu in os.sched_getaffinity(target) if cpu < 64)
    return [name, target, nice, mask]


@pytest.mark.skipif(os.geteuid() != 0, reason="the calls' own answers on other processes need root's privileges")
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    calls=st.lists(
        st.tuples(st.sampled_from(processes.CALLS), st.sampled_from(ROLES) | st.integers(-(1 << 31), (1 << 31) - 1)),
        min_size=1,
        max_size=30,
    )
)
def test_made_for_real_a_call_reaches_no_process_but_the_caller(workers, calls):
    """Any of these calls, on any process a sandboxed child could name: refused (EPERM) unless it names the caller
    itself (0, its own id; for kill its group); the plain worker, root, gets the kernel's own answer for the named
    processes, never EPERM, so the refusal is the filter's. Numbers that name no one in particular are asked only
    of the filtered worker, and only with calls that set nothing."""
    filtered, plain = workers[True], workers[False]
    requests = [
        _request(filtered, name, filtered.roles[target] if isinstance(target, str) else target)
        for name, target in calls
        if isinstance(target, str) or name in HARMLESS
    ]
    if not requests:
        return
    itself = {0, filtered.roles["itself"]}
    for (name, target, _, _), (result, error) in zip(requests, filtered.ask(requests)):
        allowed = target in itself | ({-filtered.roles["itself"]} if name == "kill" else set())
        assert (error == errno.EPERM) != allowed, (name, target, result, error, filtered.roles)
    # get_robust_list asks the kernel for ptrace's leave to read, which init withholds even from root: not counted
    named = [_request(plain, n, plain.roles[t]) for n, t in calls if isinstance(t, str) and n != "get_robust_list"]
    if named:
        refused = [(r[:2], answer) for r, answer in zip(named, plain.ask(named)) if answer[1] == errno.EPERM]
        assert refused == [], refused


def test_the_tests_switch_is_set_by_the_parent_alone():
    """The switch that leaves argument checks out (`checks_off`) reaches a child only from the `SandboxServer` a test
    makes: no front end, grading or engine code names it, and the server takes it from the parent's first message,
    never from a job (whose every byte may be a student's)."""
    from autograder.course import kit

    users = sorted(
        str(path.relative_to(kit.ROOT)) for path in (kit.ROOT / "autograder").rglob("*.py") if "checks_off" in path.read_text()
    )
    assert users == [
        "autograder/sandbox/inside/confine.py",
        "autograder/sandbox/inside/seccomp.py",
        "autograder/sandbox/inside/server.py",
        "autograder/sandbox/inside/supervisor.py",
        "autograder/sandbox/inside/syscalls.py",
        "autograder/sandbox/parent/client.py",
    ]
    server = (kit.ROOT / "autograder/sandbox/inside/server.py").read_text()
    assert [line.strip() for line in server.splitlines() if '"checks_off"' in line] == [
        'checks_off = tuple(init.get("checks_off") or ())  # the parent\'s, for its tests: never a job\'s',
        'tuple(init.get("checks_off") or ()),',
    ]
