"""The seccomp allowlist on its own: its numbers against the kernel's, its program read by an interpreter of its
own (every architecture it is made for), and the program loaded in a forked process, where every refused family
fails, and the same calls made without it get the kernel's own answers (so the refusal is the filter's)."""

import errno
import json
import os
import re
import threading
from pathlib import Path

import pytest

from autograder.sandbox.inside import allowlist, seccomp, syscalls
from catalog import refused_calls

pytestmark = pytest.mark.quick  # in `make test-quick`: this wing's fast tier

EPERM, ENOSYS = seccomp.ERRNO | errno.EPERM, seccomp.ERRNO | errno.ENOSYS
HEADERS = {"x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"), "aarch64": Path("/usr/include/asm-generic/unistd.h")}


def run_filter(program: bytes, arch: int, nr: int, args=(0,) * 6) -> int:
    """What the classic-BPF `program` returns for a system call: an interpreter of the instructions a seccomp
    program of the kit may use (absolute word loads, AND, the four conditional jumps, returns), written from the
    kernel's definitions, not from the kit's builder."""
    data = nr.to_bytes(4, "little") + arch.to_bytes(4, "little") + bytes(8)
    data += b"".join((a & (2**64 - 1)).to_bytes(8, "little") for a in (list(args) + [0] * 6)[:6])
    ops = [
        (
            int.from_bytes(program[i : i + 2], "little"),
            program[i + 2],
            program[i + 3],
            int.from_bytes(program[i + 4 : i + 8], "little"),
        )
        for i in range(0, len(program), 8)
    ]
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
    names |= {n for group in syscalls.GRANTS.values() for n in group}
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
            if filtered:
                seccomp.install(seccomp.build(tuple(syscalls.GRANTS)))
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
    from autograder.sandbox.parent.client import bubblewrap_works
    from catalog.build import submission
    from catalog.hostile import cell
    import hub_users

    source = submission(extra=cell(refused_calls.probe_source()))
    command = [sys.executable, "-m", "autograder", "grade", "probe.py", "--results", "probe.json", "--seed", "3"]
    if who.startswith("root"):
        folder = tmp_path
        (folder / "probe.py").write_text(source)
        env = {**os.environ, "AUTOGRADER_BUBBLEWRAP": "off", "AUTOGRADER_NAMESPACES": "off", "AUTOGRADER_LANDLOCK": "off"}
        done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=600)
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
