"""What the sandbox holds besides the corpus's outcomes, in every isolation layer this machine has: no network,
no file that outlives the grading, no classmate's file, no process left once `grade` returns, a results file
only the grader writes, intake that refuses links and pipes, limits that a busy machine does not turn into a
lost grade, and a refusal to grade where nothing could be isolated.

Students against students, kind by kind of the sandbox's table, through grade-class and nbgrader autograde:
test_classmates.py."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from autograder.course import kit
from autograder.engine.rubric import RUBRIC, TOTAL_POINTS
from autograder.frontends.classgrade import grade_class
from autograder.grading.options import GradingOptions
from autograder.grading.submission import grade_file
from autograder.sandbox.parent import client as sandbox
from autograder.sandbox.parent.client import UNSAFE, IsolationUnavailable, Limits, SandboxServer
from catalog.build import submission
from catalog.hostile import cell, template
from catalog.kinds import orphaned_sandbox_processes
from layers import LAYERS, layer_available

FORWARD_CHECKS = [name for name in RUBRIC if name != "compounding"]
SHORT = Limits(load_s=4, probe_s=4, job_s=30, wall_factor=4)


@pytest.fixture(scope="module", params=list(LAYERS))
def layer(request):
    why = layer_available(request.param)
    if why:
        pytest.skip(f"layer '{request.param}' not available: {why}")
    return request.param


@pytest.fixture(scope="module")
def server(layer):
    with SandboxServer(limits=SHORT, **LAYERS[layer]) as running:
        running.layer = layer
        yield running


def _grade(server, tmp_path, text, name="submission.py", seed=5):
    path = tmp_path / name
    path.write_text(text)
    return grade_file(path, server, seed=seed)


def _sandbox_processes() -> list[str]:
    """Every live process of any sandbox user (uids from SANDBOX_UID_BASE up)."""
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}").st_uid >= sandbox.SANDBOX_UID_BASE:
                alive.append(pid)
        except OSError:
            pass
    return alive


def test_no_network_not_even_to_the_grading_machine(server, tmp_path):
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.settimeout(0.2)
    knocks = []

    def accept():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not knocks:
            try:
                knocks.append(listener.accept())
            except OSError:
                pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    reach = cell(f"""
        import socket
        _reached = []
        for _family, _address in ((socket.AF_INET, ("127.0.0.1", {port})), (socket.AF_INET, ("1.1.1.1", 53))):
            try:
                _s = socket.socket(_family, socket.SOCK_STREAM)
                _s.settimeout(2)
                _s.connect(_address)
                _s.sendall(b"knock knock")
                _reached.append(_address)
            except OSError as _error:
                pass
        if _reached:
            raise RuntimeError(f"network reached: {{_reached}}")
        """)
    result = _grade(server, tmp_path, submission(extra=reach))
    knocks.append(None)
    thread.join()
    listener.close()
    assert knocks == [None], "a submission connected to the grading machine"
    assert result.score == TOTAL_POINTS and not any("network reached" in note for note in result.notes), result.notes


def test_no_file_outlives_the_grading(server, tmp_path):
    marker = f"hostile-leftover-{os.getpid()}-{server.layer}"
    places = [Path(folder) / f"{marker}-{i}" for i, folder in enumerate(("/tmp", "/dev/shm", "/var/tmp"))]
    leave = cell(f"""
        import os, time
        for _path in {[str(p) for p in places]!r}:
            try:
                with open(_path, "w") as _handle:
                    _handle.write("left behind")
            except OSError:
                pass
        if os.fork() == 0:          # and one that keeps writing after the child is gone
            os.setsid()
            for _ in range(200):
                for _path in {[str(p) for p in places]!r}:
                    try:
                        open(_path, "w").close()
                    except OSError:
                        pass
                time.sleep(0.05)
            os._exit(0)
        """)
    result = _grade(server, tmp_path, submission(extra=leave))
    assert result.score == TOTAL_POINTS
    time.sleep(0.5)
    assert [str(p) for p in places if p.exists()] == []
    assert server.sandbox_uid is None or not [
        pid for pid in _sandbox_processes() if os.stat(f"/proc/{pid}").st_uid == server.sandbox_uid
    ]


def test_a_classmate_s_files_and_results_stay_out_of_reach(layer, tmp_path):
    root, out = tmp_path / "class", tmp_path / "graded"
    root.mkdir()
    secret = f"alice-only-{os.getpid()}"
    (root / "alice.py").write_text(submission() + f"\n# {secret}\n")
    out.mkdir()
    (out / "alice").mkdir()
    (out / "alice" / "results.json").write_text(json.dumps({"score": 24, "note": secret}))
    steal = cell(f"""
        _stolen = []
        for _path in ({str(root / 'alice.py')!r}, {str(out / 'alice' / 'results.json')!r}):
            try:
                with open(_path) as _handle:
                    _stolen.append(_handle.read())
            except OSError:
                pass
        if _stolen:
            exec(_stolen[0].split("# %% hostile")[0], globals())
            raise RuntimeError("copied: " + " ".join(_stolen)[-200:])
        """)
    (root / "mallory.py").write_text(template(steal))
    options = GradingOptions(seed=3, limits=SHORT, isolation=LAYERS[layer])
    rows = grade_class(root, out, options=options, workers=1, progress=False, force=True)
    mallory = next(r for r in rows if r["student"] == "mallory")
    assert all(float(mallory[name]) == 0 for name in FORWARD_CHECKS), mallory
    assert secret not in (out / "mallory" / "results.json").read_text()
    assert secret not in (out / "mallory" / "feedback.html").read_text()


@pytest.mark.parametrize("kind", ["symlink", "fifo", "device", "oversized"])
def test_intake_refuses_what_is_not_a_plain_notebook(server, tmp_path, kind):
    target = tmp_path / kit.KIT.notebook_name
    if kind == "symlink":
        target.symlink_to(kit.SOLUTIONS_DIR / kit.KIT.notebook_name)
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "device":
        target.symlink_to("/dev/zero")
    else:
        with open(target, "wb") as handle:
            handle.truncate(30_000_000)
    started = time.monotonic()
    result = grade_file(target, server, seed=1)
    assert time.monotonic() - started < 10
    assert result.score == 0
    reason = {"symlink": "symbolic link", "fifo": "not a regular file", "device": "symbolic link", "oversized": "larger than"}[
        kind
    ]
    assert reason in result.notes[0], result.notes


def test_grade_class_survives_links_and_pipes(tmp_path):
    root = tmp_path / "class"
    (root / "pipe").mkdir(parents=True)
    os.mkfifo(root / "pipe" / kit.KIT.notebook_name)
    (root / "link").mkdir()
    (root / "link" / kit.KIT.notebook_name).symlink_to(kit.SOLUTIONS_DIR / kit.KIT.notebook_name)
    (root / "folder_link").symlink_to(kit.SOLUTIONS_DIR)
    rows = grade_class(root, tmp_path / "out", options=GradingOptions(seed=2, limits=SHORT), workers=1, progress=False)
    assert {r["student"]: float(r["score"]) for r in rows} == {"pipe": 0, "link": 0}
    assert (tmp_path / "out" / "grades.csv").is_file()


def test_a_busy_machine_does_not_cost_points(tmp_path):
    """Limits count CPU time: with the cores oversubscribed three times over, the solution keeps full marks
    under limits a wall-clock timer would have broken (the solution's checks need about a second of CPU)."""
    tight = Limits(load_s=2, probe_s=2, job_s=20, wall_factor=15)
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(3 * (os.cpu_count() or 1))]
    try:
        with SandboxServer(limits=tight) as busy:
            path = tmp_path / "solution.py"
            path.write_text(submission())
            result = grade_file(path, busy, seed=9)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    assert result.score == TOTAL_POINTS, {c.check: c.message for c in result.checks if not c.passed}


def _failing_bwrap(tmp_path) -> str:
    folder = tmp_path / "nobwrap"
    folder.mkdir()
    (folder / "bwrap").write_text("#!/bin/sh\necho 'bwrap: no permission here' >&2\nexit 1\n")
    (folder / "bwrap").chmod(0o755)
    return f"{folder}{os.pathsep}{os.environ['PATH']}"


@pytest.mark.skipif(os.geteuid() != 0, reason="checks the sandbox user's processes, which needs root")
@pytest.mark.parametrize("namespaces", ["auto", "off"])
def test_grade_leaves_nothing_alive_and_only_the_grader_writes_the_results(tmp_path, namespaces):
    """`grade` returns only when the submission and all it started are gone; a leftover that tries to rewrite
    the results in a world-writable folder finds nothing left to do it with."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    results = shared / "results.json"
    rewrite = cell(f"""
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                for _ in range(600):
                    try:
                        with open({str(results)!r}, "w") as _handle:
                            _handle.write('{{"score": 100, "tests": []}}')
                    except OSError:
                        pass
                    time.sleep(0.05)
            os._exit(0)
        """)
    path = tmp_path / "sub.py"
    path.write_text(submission(extra=rewrite))
    env = {**os.environ, "PATH": _failing_bwrap(tmp_path), "AUTOGRADER_NAMESPACES": namespaces}
    before = set(_sandbox_processes())
    done = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(path), "--results", str(results), "--seed", "4"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    first = results.read_text()
    time.sleep(1.0)
    assert results.read_text() == first
    data = json.loads(first)
    assert data["score"] == TOTAL_POINTS and data["extra_data"]["seed"] == 4
    assert "bubblewrap" not in data["extra_data"]["isolation"]
    assert {p.split()[1] for p in orphaned_sandbox_processes()} - before == set()


def test_without_bubblewrap_or_root_the_grader_refuses_unless_told_unsafe(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(IsolationUnavailable, match="refusing to grade"):
        SandboxServer(bubblewrap="off")
    with SandboxServer(bubblewrap="off", unsafe=True, limits=SHORT) as unsafe:
        assert unsafe.isolation == UNSAFE
        result = _grade(unsafe, tmp_path, submission())
    assert result.isolation == UNSAFE and "without isolation" in result.notes[0]


def test_the_cli_refuses_with_a_message_not_a_traceback(tmp_path):
    script = "import os, sys; os.geteuid = lambda: 1000\nfrom autograder.frontends.cli import main\nsys.exit(main())"
    path = tmp_path / "sub.py"
    path.write_text(submission())
    done = subprocess.run(
        [sys.executable, "-c", script, "grade", str(path), "--results", str(tmp_path / "r.json")],
        env={**os.environ, "PATH": _failing_bwrap(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0 and "refusing to grade" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "r.json").exists()


def test_forked_children_share_one_memory_limit(server, tmp_path):
    """Three children of the submission, 1 GiB each: with a control group the job as a whole stays under the
    2 GiB limit (each child alone would be allowed); the grade is unaffected."""
    from catalog.hostile import FORKED_MEMORY
    from autograder.grading.evaluation import ALL_PROBES
    from autograder.engine.questions.plan import Plan
    from autograder.course.notebook import cells_from_python, student_code

    if "memory" not in server.layers.get("cgroups", []) and "v2" not in server.layers.get("cgroups", []):
        pytest.skip("no control group with a memory limit on this host: the limit is per process here")
    limited = Limits(load_s=8, probe_s=4, job_s=40, wall_factor=4, memory_mb=2048)
    with SandboxServer(limits=limited, **LAYERS[server.layer]) as own:
        code = student_code(cells_from_python(submission(extra=cell(FORKED_MEMORY))))
        raw = own.grade(code, Plan.draw(3).to_dict(), list(ALL_PROBES))
    if raw.get("memory_peak") is None:
        pytest.skip("this host's control groups keep no peak memory")
    assert raw["memory_peak"] <= 2048 * 2**20 * 1.05, raw["memory_peak"] / 2**20


def test_a_server_found_dead_is_started_again_and_the_job_graded(server, tmp_path):
    """The server (and any supervisor) killed between two jobs, as a job of another student could try where
    all run as one user: the next student's job is not lost, it runs on a fresh server."""
    os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait()
    result = _grade(server, tmp_path, submission())
    assert result.score == TOTAL_POINTS and not result.grader_errors, (result.score, result.grader_errors)
