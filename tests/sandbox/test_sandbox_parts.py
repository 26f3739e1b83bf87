"""The sandbox's parts on their own, without a server: cleanup of what a job leaves, the encoding of every dtype,
the bound on answers, the control channel, and permission changes that are always given back (the seccomp
allowlist: test_seccomp.py)."""

import json
import os
import socket
import stat
import subprocess
import sys
import textwrap
import threading

import pytest
import torch

from autograder.sandbox.inside import cleanup
from autograder.sandbox.inside.protocol import (
    Unencodable,
    control_pair,
    encode_tensor,
    encoded_answer,
    receive_message,
    send_message,
)
from autograder.sandbox.inside.protocol import MAX_ANSWER_BYTES
from autograder.sandbox.inside.watch import Run
from autograder.sandbox.parent import containment, hostperms

pytestmark = pytest.mark.quick  # in `make test-quick`: this wing's fast tier


def test_cleanup_removes_a_deep_tree_of_unreadable_folders_without_recursion(tmp_path):
    """Deeper than any recursion limit or path length (2,500 levels), folders made unreadable and
    unwritable, many files: removed whole, no problem reported. Made the way a job makes it (by descriptor)."""
    top = tmp_path / "job"
    top.mkdir()
    fd = os.open(top, os.O_RDONLY)
    for depth in range(2500):
        os.mkdir("d", dir_fd=fd)
        below = os.open("d", os.O_RDONLY, dir_fd=fd)
        if depth % 500 == 0:
            for n in range(2000):
                os.close(os.open(f"f{n}", os.O_CREAT | os.O_WRONLY, dir_fd=below))
        os.close(fd)
        fd = below
    os.close(fd)
    (top / "locked" / "inner").mkdir(parents=True)
    (top / "locked" / "inner" / "file").write_text("x")
    os.chmod(top / "locked" / "inner", 0)
    os.chmod(top / "locked", 0o500)
    assert cleanup.remove_tree(str(top)) == []
    assert not top.exists()


def test_cleanup_reports_what_it_could_not_remove_and_removes_the_rest(tmp_path, monkeypatch):
    (tmp_path / "job" / "a").mkdir(parents=True)
    (tmp_path / "job" / "a" / "stays").write_text("x")
    (tmp_path / "job" / "goes").write_text("x")
    real_unlink = os.unlink

    def refusing(path, *args, **kwargs):
        if path == "stays":
            raise PermissionError(1, "Operation not permitted")
        return real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", refusing)
    problems = cleanup.remove_tree(str(tmp_path / "job"))
    assert any("stays" in p for p in problems) and all(p.startswith("cleanup:") for p in problems)
    assert not (tmp_path / "job" / "goes").exists() and (tmp_path / "job" / "a" / "stays").exists()


@pytest.mark.parametrize(
    "dtype",
    [
        torch.bfloat16,
        torch.float16,
        torch.float64,
        torch.int8,
        torch.int32,
        torch.int64,
        torch.uint8,
        torch.bool,
        torch.float8_e4m3fn,
    ],
)
def test_every_real_dtype_is_encoded_exactly(dtype):
    values = torch.tensor([[0.0, 1.0, -2.0], [3.0, 0.5, 8.0]])
    tensor = (values > 0) if dtype is torch.bool else values.to(dtype)
    encoded = encode_tensor(tensor)
    assert encoded["dtype"] in ("float32", "float64") and encoded["shape"] == [2, 3]
    import base64
    import numpy as np

    back = np.frombuffer(base64.b64decode(encoded["data"]), dtype=encoded["dtype"]).reshape(2, 3)
    assert np.array_equal(back, tensor.to(torch.float64).numpy())


def test_values_the_grader_cannot_read_are_refused_with_a_message_naming_where():
    with pytest.raises(Unencodable, match="complex"):
        encode_tensor(torch.ones(2, dtype=torch.complex64))
    answer = encoded_answer({"ok": True, "calls": [{"output": torch.ones(2)}, {"output": torch.ones(2, device="meta")}]})
    assert answer["ok"] is False and answer["error"]["type"] == "ProbeFailure"
    assert "calls[1].output" in answer["error"]["message"] and "meta" in answer["error"]["message"]


def _reports(frames: int) -> tuple[int, threading.Thread]:
    """A pipe with `frames` result frames of 1 MiB each written into it (by a thread), as a child would."""
    frame = json.dumps({"event": "result", "probe": "eval", "observation": {"ok": True, "y": "x" * (1 << 20)}})
    reader_fd, writer_fd = os.pipe()

    def write():
        try:
            os.write(writer_fd, (len(frame).to_bytes(4, "big") + frame.encode()) * frames)
        except OSError:  # the reader stopped first, as the supervisor stops reading
            pass
        os.close(writer_fd)

    writer = threading.Thread(target=write)
    writer.start()
    return reader_fd, writer


def test_answers_are_bounded_in_total_across_a_job_s_children():
    """Each child's reports count against one budget per job: a child under the bound on its own is stopped
    as over budget when the job's children together pass it."""
    budget, limits, half = {}, {"load_s": 1, "probe_s": 1, "wall_factor": 1, "output_kb": 1}, MAX_ANSWER_BYTES >> 21
    runs = []
    for frames in (half + 1, half + 1):  # two children of one job, each under the bound alone
        reader_fd, writer = _reports(frames)
        run = Run(limits, lambda: 0.0, budget, bytearray(), reader_fd, ("eval",))
        while run.take(reader_fd) and not run.garbage:
            pass
        os.close(reader_fd)
        writer.join()
        runs.append(run)
    assert not runs[0].garbage and runs[0].observations
    assert runs[1].over_budget and budget["answer_bytes"] > MAX_ANSWER_BYTES


def test_the_control_channel_carries_one_descriptor_beside_each_message():
    ours, theirs = control_pair()
    left, right = socket.socketpair()
    with ours, theirs, left, right:
        send_message(ours, {"job": 1}, right.fileno())
        message, fd = receive_message(theirs)
        assert message == {"job": 1} and fd is not None
        os.write(fd, b"through")
        assert left.recv(16) == b"through"
        os.close(fd)
        ours.close()
        assert receive_message(theirs) == (None, None)


@pytest.mark.skipif(os.geteuid() != 0, reason="permission leases are root's")
def test_a_permission_lease_is_given_back_even_when_its_holder_was_killed(tmp_path, monkeypatch):
    """With a journal of its own: every root grader that starts elsewhere on the machine (another test's, meanwhile)
    gives back what dead holders of the machine's journal held, which would be this test's lease."""
    journal = tmp_path / "journal"
    monkeypatch.setattr(hostperms, "JOURNAL_DIR", journal)
    folder = tmp_path / "closed"
    folder.mkdir(mode=0o700)
    folder.chmod(0o700)
    lease = hostperms.Lease({str(folder): 0o701})
    assert stat.S_IMODE(folder.stat().st_mode) == 0o701
    lease.release()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    holder = textwrap.dedent(f"""
        import os, sys
        from pathlib import Path
        from autograder.sandbox.parent import hostperms
        hostperms.JOURNAL_DIR = Path({str(journal)!r})
        hostperms.Lease({{{str(folder)!r}: 0o701}})
        os.kill(os.getpid(), 9)
        """)
    subprocess.run([sys.executable, "-c", holder], check=False)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o701  # the holder died holding it
    assert str(folder) in hostperms.restore_abandoned()  # the next grader to start gives it back
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_the_grading_folders_are_planned_closed_whatever_their_mode(tmp_path):
    results = tmp_path / "out"
    results.mkdir()
    results.chmod(0o777)
    plan = containment.lock_plan([str(results)], [])
    assert plan == {str(results): 0o770}
    assert containment.lock_plan([str(results)], [], lock=False) == {}


class _Replying:
    """A stand-in for a sandbox server that replies with given answers (no student code runs)."""

    from autograder.course import kit as _kit

    assignment, isolation = _kit.KIT, "stand-in"

    def __init__(self, observations: dict):
        self.observations = observations

    def grade(self, cells, plan, probes):
        return {"observations": self.observations, "loaded": None, "runs": ["finished"], "output": "", "cleanup": []}


@pytest.mark.parametrize("failing", ["encoder in the sandbox", "reader in the parent"])
def test_a_failure_of_the_grader_s_own_encoding_or_reading_is_a_grader_error(monkeypatch, failing):
    from autograder.engine.reading import answers
    from autograder.grading.submission import grade_cells
    from autograder.course.notebook import cells_from_python
    from catalog.build import submission

    observations = {}
    if failing == "encoder in the sandbox":
        observations["eval"] = encoded_answer({"ok": True, "y": _Unencodable()})
    else:
        observations["eval"] = {"ok": True}
        real = answers._read
        monkeypatch.setattr(
            answers,
            "_read",
            lambda probe, answer, expect: (
                (_ for _ in ()).throw(KeyError(probe)) if probe == "eval" else real(probe, answer, expect)
            ),
        )
    result = grade_cells(cells_from_python(submission()), "s.py", _Replying(observations), seed=3)
    assert result.score == 0 and result.grader_errors, result.grader_errors
    assert "eval" in result.grader_errors[0]
    not_graded = {c.check for c in result.checks if c.message.startswith("Not graded: the grader itself failed")}
    assert {"forward_order", "forward_shortcuts", "forward_prenorm", "forward_robustness"} <= not_graded, result.checks


class _Unencodable:
    """A value whose encoding fails in the encoder itself (not a dtype it refuses)."""

    def __repr__(self):
        raise RuntimeError("the encoder met something it did not expect")


@pytest.mark.skipif(os.geteuid() != 0, reason="a private root needs root (or bubblewrap's user namespace)")
def test_a_private_root_shows_what_is_kept_even_below_tmp_and_nothing_else(tmp_path):
    """Python kept below /tmp (a checkout there) stays visible over the child's own /tmp; the folder around it,
    and everything else of the host's /tmp, does not exist for the child."""
    from autograder.sandbox.inside import rootfs

    kept, beside = tmp_path / "checkout" / ".venv", tmp_path / "checkout" / "solutions"
    kept.mkdir(parents=True)
    beside.mkdir()
    (kept / "module.py").write_text("x = 1\n")
    (beside / "secret").write_text("x")
    pid = os.fork()
    if pid == 0:
        try:
            rootfs.private_root([str(kept)], 4)
            os._exit(0 if (kept / "module.py").read_text() == "x = 1\n" and not beside.exists() else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0


# --- the order of a child's confinement: what needs one thread comes before CUDA's threads ------------------


def _in_a_child(steps) -> str:
    """Run `steps` in a forked child; what it said: "ok", or its error as "Type: message"."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            steps()
            said = "ok"
        except BaseException as error:
            said = f"{type(error).__name__}: {error}"
        os.write(write, said.encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read, "rb") as stream:
        return stream.read().decode()


def _driver_thread() -> None:
    """A thread of the process's own, as CUDA's driver starts when a child asks for the GPU."""
    threading.Thread(target=threading.Event().wait, args=(30,), daemon=True).start()


def _setup(**changes):
    from types import SimpleNamespace

    from autograder.sandbox.inside import seccomp
    from autograder.sandbox.inside.supervisor import Setup

    grants = ("permissions",)
    fields = dict(
        questions=SimpleNamespace(__package__="autograder.engine.questions"),
        kit={},
        limits={"file_mb": 16, "memory_mb": 2048, "job_s": 30, "processes": 64},
        hide_root=None,
        groups={},
        keep=(),
        view=None,
        scratch=None,
        landlock=0,
        grants=grants,
        programs={"cpu": seccomp.build(grants, "cpu")},
        user_namespace=True,
        nproc_base=0,
    )
    return Setup(**{**fields, **changes})


def test_a_child_confined_in_the_grader_s_order_may_have_threads_between_entering_and_its_limits(tmp_path):
    """The child's own user namespace needs a process of one thread, and CUDA's driver starts threads: so a child
    makes its namespaces and credentials first (`enter`), then CUDA, then the rest (`confine`). Both ways: a
    thread started before `enter` makes its user namespace fail, as CUDA's made every GPU job fail before."""
    from autograder.sandbox.inside import fresh
    from autograder.sandbox.inside.confine import confine, enter

    alone = _in_a_child(fresh.own_user_namespace)
    if alone != "ok":
        pytest.skip(f"this kernel makes no user namespace for a child at all: {alone}")
    setup = _setup()

    def in_order():
        workdir = enter(str(tmp_path), setup, None)
        _driver_thread()
        confine(workdir, setup, None, "cpu")
        assert os.getcwd() == str(tmp_path) and os.environ["HOME"] == str(tmp_path)

    def thread_first():
        _driver_thread()
        enter(str(tmp_path), setup, None)

    assert _in_a_child(in_order) == "ok"
    assert _in_a_child(thread_first) == "OSError: [Errno 22] unshare(CLONE_NEWUSER): Invalid argument"


def test_a_child_s_limits_are_lowered_to_what_it_was_given_never_raised(tmp_path):
    """`confine` runs after the user switch, where no limit can be raised: a hard limit below the grader's own
    stays as it was (and the child is confined all the same)."""
    import resource

    from autograder.sandbox.inside.confine import confine, enter

    setup = _setup(user_namespace=False)

    def lowered():
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))  # below the 256 the grader sets
        confine(enter(str(tmp_path), setup, None), setup, None, "cpu")
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (64, 64)
        assert resource.getrlimit(resource.RLIMIT_AS)[1] != resource.RLIM_INFINITY

    assert _in_a_child(lowered) == "ok"


def test_a_child_whose_set_up_failed_says_why_in_the_grader_error():
    """What a child writes before any student code when its set-up fails (CUDA, confinement): its reason first,
    then what it printed before (torch's warnings), on one bounded line; nothing where it wrote no reason."""
    from autograder.sandbox.inside.supervisor import WHY, WHY_LIMIT, said_why

    printed = b"UserWarning: CUDA initialization: no driver\n  warnings.warn(\n"
    reason = f"{WHY}RuntimeError: CUDA error: initialization error\n".encode()
    assert said_why(printed + reason) == (
        "RuntimeError: CUDA error: initialization error (printed before: UserWarning: CUDA initialization: no driver "
        "warnings.warn()"
    )
    assert said_why(reason) == "RuntimeError: CUDA error: initialization error"
    assert said_why(printed) is None and said_why(b"") is None
    assert len(said_why(printed * 50 + reason)) == WHY_LIMIT
