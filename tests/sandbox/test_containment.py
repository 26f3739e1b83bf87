"""What the sandbox holds besides the corpus's outcomes, in every isolation layer this machine has (the hub's too:
bubblewrap run by an instructor who is not root, `layers.HUB`): no network, no file that outlives the grading,
no process left once `grade` returns, no process touched but the child's own (a property over
the processes it can name) and nothing of the server's a later student would inherit, a results file only the
grader writes, intake that refuses links and pipes, limits that a busy machine does not turn into a lost grade,
and a refusal to grade where nothing could be isolated.

Students against students (a classmate's files and results among them), kind by kind of the sandbox's table,
through grade-class and nbgrader autograde: test_classmates.py."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from autograder.course import kit
from autograder.engine.rubric import RUBRIC, TOTAL_POINTS
from autograder.frontends.classgrade import grade_class
from autograder.grading.options import GradingOptions
from autograder.grading.submission import grade_file
from autograder.sandbox.parent import client as sandbox
from autograder.sandbox.parent.client import UNSAFE, IsolationUnavailable, Limits, SandboxServer
from catalog.build import submission
from catalog.hostile import cell
from catalog.isolation import touch_every_process
from catalog.kinds import orphaned_sandbox_processes
from catalog.processes import calls_on_processes, headroom_mb, read_calls, read_lot, reports_its_lot
from layers import EVERY_LAYER, HUB, HubServer, grade, layer_available
from layers import sandbox_server

FORWARD_CHECKS = [name for name in RUBRIC if name != "compounding"]
SHORT = Limits(load_s=4, probe_s=4, job_s=30, wall_factor=4)


@pytest.fixture(scope="module", params=list(EVERY_LAYER))
def layer(request):
    why = layer_available(request.param)
    if why:
        pytest.skip(f"layer '{request.param}' not available: {why}")
    return request.param


@pytest.fixture(scope="module")
def server(layer):
    """The module's server in `layer`; in the hub's, its instructor holds control groups her administrator handed
    her (`delegation`), so that a job's memory is limited as a whole there too (the other modules' hub servers run
    without, as on a hub that delegates none)."""
    with sandbox_server(layer, limits=SHORT, delegated=True) as running:
        running.layer = layer
        yield running


def _grade(server, tmp_path, text, name="submission.py", seed=5):
    path = tmp_path / name
    path.write_text(text)
    return grade(server, path, seed=seed)


def _left_alive(server) -> list[str]:
    """Processes of the job's user still alive: the sandbox user's (root), or those of the hub's instructor that are
    not the grader, its server or the supervisor waiting for the next job."""
    if isinstance(server, HubServer):
        return server.leftovers()
    uid = server.sandbox_uid
    return [pid for pid in _sandbox_processes() if uid is not None and os.stat(f"/proc/{pid}").st_uid == uid]


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
    assert _left_alive(server) == []


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
    if isinstance(server, HubServer):  # made by the hub's grader, in a folder of its own
        result = server.grade_file(target, seed=1, make=kind)
    else:
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
    assert SHORT.memory_mb == 2048  # the module's server's limit
    code = student_code(cells_from_python(submission(extra=cell(FORKED_MEMORY))))
    raw = server.grade(code, Plan.draw(3).to_dict(), list(ALL_PROBES))
    if raw.get("memory_peak") is None:
        pytest.skip("this host's control groups keep no peak memory")
    assert raw["memory_peak"] <= 2048 * 2**20 * 1.05, raw["memory_peak"] / 2**20


def test_a_server_found_dead_is_started_again_and_the_job_graded(server, tmp_path):
    """The server (and any supervisor) killed between two jobs, as a job of another student could try where
    all run as one user: the next student's job is not lost, it runs on a fresh server, which stays."""
    os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait()
    result = _grade(server, tmp_path, submission())
    assert result.score == TOTAL_POINTS and not result.grader_errors, (result.score, result.grader_errors)
    time.sleep(1.0)  # the server started again outlives the job that started it (and the grading thread it ran in)
    assert server.process.poll() is None


# --- other processes: the child touches none but its own, and leaves nothing in the server a later student inherits


def _tree(pid: int) -> list[int]:
    """`pid` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, todo = [pid], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _outside(server) -> list[tuple[str, int]]:
    """The server's processes as the child may name them, (role, process id): where it shares the host's process ids
    (no bubblewrap) the server and the supervisor it forked for the next job (which takes this one); inside
    bubblewrap the child finds them itself."""
    if server.use_bubblewrap:
        return []
    zygote = _zygote(server)
    return [("the server", zygote)] + [("a supervisor", pid) for pid in _tree(zygote) if pid != zygote]


def _zygote(server) -> int:
    """The sandbox server's own process (below bubblewrap's, where there is one): the zygote every job is forked from."""
    for pid in _tree(server.process.pid):
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
        if b"autograder.sandbox.inside.server" in command and not command.startswith(b"bwrap"):
            return pid
    raise AssertionError("no sandbox server process")


def _lot_of(pid: int) -> dict:
    """What a process forked from `pid` inherits: its limits, its priority (nice), its CPUs."""
    status = Path(f"/proc/{pid}/status").read_text()
    return {
        "limits": Path(f"/proc/{pid}/limits").read_text(),
        "nice": Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16],
        "cpus": next(line for line in status.splitlines() if line.startswith("Cpus_allowed_list")),
    }


def _the_server_s_lot(server) -> dict:
    """The zygote's lot, and that of the supervisor it forked for the next job (which it gives every child)."""
    zygote = _zygote(server)
    spare = [pid for pid in _tree(zygote) if pid != zygote]
    return {"zygote": _lot_of(zygote), "spare": [_lot_of(pid) for pid in spare]}


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    drawn=st.lists(
        st.integers(min_value=1, max_value=64) | st.integers(min_value=-(1 << 31), max_value=(1 << 31) - 1),
        min_size=1,
        max_size=6,
        unique=True,
    )
)
def test_a_child_touches_no_process_but_its_own(server, drawn):
    """Every call that names a process, made by a child on every process it can name (the server, its supervisor,
    the spare supervisor that takes the next student, init, a child and the threads of its own, itself, 0, its
    group, process ids drawn here) goes through only where it names the child itself: 0 or its own id (for kill its
    own group too); and sweeping every process id with the calls that set nothing reaches no one."""
    folder = Path(tempfile.mkdtemp(prefix="calls-on-processes-"))
    try:
        result = _grade(server, folder, calls_on_processes(drawn, _outside(server)))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    found, reached, me = read_calls(result.notes)
    assert result.score == TOTAL_POINTS and not result.grader_errors, (result.score, result.grader_errors)
    assert reached == 0, f"{reached} other processes answered a call"
    roles = {role for _, role, _ in found}
    assert {"itself", "zero", "its group", "its child", "its thread", "its supervisor", "init"} <= roles, roles
    if server.layer == HUB:  # it sees the server's processes, of its own uid (the sweep reaches them everywhere)
        assert {"the server", "the spare supervisor"} <= roles, roles
    if server.layer in ("namespaces", "permissions"):  # named from outside: the host's process ids
        assert {"the server", "a supervisor"} <= roles, roles
    for pid, role, refused in found:
        for call, was_refused in refused.items():
            itself = pid in ({0, me, -me} if call == "kill" else {0, me})
            assert was_refused != itself, (call, pid, role, "refused" if was_refused else "went through")


def _lot(server, folder: Path) -> tuple[str, float]:
    result = _grade(server, folder, reports_its_lot(), name="lot.py")
    return read_lot(result.notes), result.score


def test_a_child_changes_nothing_a_later_student_inherits(server, tmp_path):
    """A child that lowers the memory limit, the priority and the CPUs of every process it can name (on a hub the
    zygote and the spare supervisor have its uid) changes nothing: the server's processes keep their lot, and the
    next student is given what the sandbox gives, and graded as before."""
    before, lot_before = _the_server_s_lot(server), _lot(server, tmp_path)
    attack = _grade(server, tmp_path, touch_every_process([pid for _, pid in _outside(server)]), name="attack.py")
    assert attack.score == TOTAL_POINTS and not attack.grader_errors
    assert "other processes: changed 0, read the limits of 0" in " ".join(attack.notes), attack.notes
    assert _the_server_s_lot(server)["zygote"] == before["zygote"]
    assert all(spare == before["zygote"] for spare in _the_server_s_lot(server)["spare"])
    assert _lot(server, tmp_path) == lot_before
    assert lot_before[1] == TOTAL_POINTS


def test_without_its_check_a_child_on_a_hub_changes_what_every_later_student_gets(tmp_path):
    """The other way, where it matters (the hub's layer: the child has the zygote's uid), with the argument checks
    on other processes switched off for this test: the same child lowers the memory limit of the zygote and of the
    spare supervisor, and the next student is forked with it: she can map almost nothing more. (Their priority and
    CPUs the kernel keeps even so: they hold a capability the child has not.) The test above would see it."""
    why = layer_available(HUB)
    if why:
        pytest.skip(why)
    with HubServer(limits=SHORT, checks_off=("other processes",)) as hub:
        before = _the_server_s_lot(hub)
        room_before = headroom_mb(_grade(hub, tmp_path, reports_its_lot(), name="lot.py").notes)
        attack = _grade(hub, tmp_path, touch_every_process(), name="attack.py")
        after = _the_server_s_lot(hub)
        room_after = headroom_mb(_grade(hub, tmp_path, reports_its_lot(), name="lot.py").notes)
    changed = int(" ".join(attack.notes).split("other processes: changed ")[1].split(",")[0])
    assert changed >= 2, attack.notes  # the zygote and the spare supervisor at least
    assert after["zygote"]["limits"] != before["zygote"]["limits"]
    assert room_before > 1024 and room_after < 64, (room_before, room_after)


# --- the permissions layer: /proc, the size of its folder, and where neither namespaces nor Landlock work --------
ROOT_ONLY = {"AUTOGRADER_BUBBLEWRAP": "off", "AUTOGRADER_NAMESPACES": "off", "AUTOGRADER_LANDLOCK": "off"}
READ_EVERY_COMMAND_LINE = """
import os
_found = []
try:
    _pids = [p for p in os.listdir("/proc") if p.isdigit()]
except OSError:
    _pids = []
for _pid in set(_pids) | {{str(p) for p in {pids!r}}}:
    try:
        with open(f"/proc/{{_pid}}/cmdline", "rb") as _handle:
            if {secret!r}.encode() in _handle.read():
                _found.append(_pid)
    except OSError:
        pass
raise RuntimeError(f"token readers: {{len(_found)}}" + (" found it" if _found else ""))
"""


@pytest.fixture
def jupyter_with_a_token():
    """A process of the machine with a secret in its command line, as a Jupyter server has its token."""
    secret = f"ServerApp.token={os.urandom(8).hex()}"
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", f"--{secret}"])
    yield process.pid, secret
    process.kill()
    process.wait()


def test_no_other_process_s_command_line_reaches_a_child(server, tmp_path, jupyter_with_a_token):
    """A Jupyter server's token in its command line: the child reads every /proc entry it can, and the process's own
    by its id (given it here), and finds nothing, in every layer (in the permissions layer, Landlock refuses every
    process's /proc entries but the child's own)."""
    pid, secret = jupyter_with_a_token
    result = _grade(server, tmp_path, submission(extra=cell(READ_EVERY_COMMAND_LINE.format(pids=[pid], secret=secret))))
    assert result.score == TOTAL_POINTS
    assert "token readers: 0" in " ".join(result.notes), result.notes


@pytest.mark.skipif(os.geteuid() != 0, reason="the permissions layer is root's")
def test_where_neither_namespaces_nor_landlock_work_root_refuses_in_one_line_unless_told_unsafe(tmp_path, jupyter_with_a_token):
    """There a child would read the token (shown with --unsafe: the search works) and every world-readable file:
    `grade` refuses, in one line and before anything ran; with --unsafe it grades, and the result says so."""
    pid, secret = jupyter_with_a_token
    (tmp_path / "probe.py").write_text(submission(extra=cell(READ_EVERY_COMMAND_LINE.format(pids=[pid], secret=secret))))
    command = [sys.executable, "-m", "autograder", "grade", "probe.py", "--results", "probe.json", "--seed", "3"]
    env = {**os.environ, **ROOT_ONLY}
    refused = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert refused.returncode != 0 and "refusing to grade" in refused.stderr and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "namespaces nor Landlock" in refused.stderr and not (tmp_path / "probe.json").exists()
    graded = subprocess.run([*command, "--unsafe"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert graded.returncode == 0, graded.stderr[-3000:]
    results = json.loads((tmp_path / "probe.json").read_text())
    assert results["extra_data"]["isolation"].startswith("UNSAFE: permissions only")
    notes = " ".join(results["extra_data"]["notes"])
    assert "Graded without isolation" in notes and "found it" in notes


@pytest.mark.skipif(os.geteuid() != 0, reason="the permissions layer is root's")
def test_a_machine_that_holds_one_submission_alone_grades_with_permissions_and_says_so(tmp_path):
    """Gradescope's case (its run_autograder passes --alone): the container holds this one submission, so the
    permissions layer grades there without --unsafe; the result names the layer, not UNSAFE, and its page carries
    no warning of a run without isolation."""
    (tmp_path / "solved.py").write_text(submission())
    command = [sys.executable, "-m", "autograder", "grade", "solved.py", "--results", "solved.json", "--seed", "3"]
    env = {**os.environ, **ROOT_ONLY}
    graded = subprocess.run([*command, "--alone"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert graded.returncode == 0, graded.stderr[-3000:]
    results = json.loads((tmp_path / "solved.json").read_text())
    isolation = results["extra_data"]["isolation"]
    assert isolation.startswith("permissions only, on a machine that holds this one submission"), isolation
    assert results["score"] == TOTAL_POINTS
    assert "Graded without isolation" not in " ".join(results["extra_data"]["notes"])


FILL_THE_DISK = """
import os
_written = 0
try:
    for _i in range(30):                        # 480 MB, each file under the 16 MB limit
        with open(os.path.join({folder}, f"fill-{{_i}}"), "wb") as _handle:
            for _ in range(16):
                _handle.write(b"x" * (1 << 20))
                _written += 1
except OSError as _error:
    raise RuntimeError(f"wrote {{_written}} MB, then {{_error.strerror}}")
raise RuntimeError(f"wrote {{_written}} MB")
"""


def test_a_child_s_files_are_bounded_in_every_layer(server, tmp_path):
    """480 MB in 30 files, each under the file limit, into its folder and into /tmp: in its own sized tmpfs the
    writes fail at `tmp_mb` (and where it may not write at all, at once); in the permissions layer (its folder on
    the host's disk) the run is stopped once its files pass `tmp_mb`, and, watched from outside, they never held
    three times that (what it writes between two looks, 10 ms apart, and until it is stopped). The rest of the
    notebook is graded."""
    sizes, stop = [], threading.Event()

    def watch():
        while not stop.is_set():
            if server.scratch and os.path.isdir(server.scratch):
                from autograder.sandbox.inside.cleanup import usage

                sizes.append(usage(server.scratch, 1 << 40))
            time.sleep(0.005)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        results = [
            _grade(server, tmp_path, submission(extra=cell(FILL_THE_DISK.format(folder=where))))
            for where in ("os.getcwd()", "'/tmp'")
        ]
    finally:
        stop.set()
        watcher.join()
    limit = SHORT.tmp_mb
    for result in results:
        assert result.score == TOTAL_POINTS and not result.grader_errors, (result.score, result.grader_errors)
        text = " ".join(result.notes)
        written = [int(part.split(" MB")[0]) for part in text.split("wrote ")[1:] if part.split(" MB")[0].isdigit()]
        stopped = f"more than {limit} MB of files" in text
        assert stopped or (written and written[0] <= limit), text  # no space left, or no leave to write there
    if server.scratch:  # its folder lies on the host's disk: watched
        assert any(f"more than {limit} MB of files" in " ".join(r.notes) for r in results)
        assert sizes and max(sizes) <= 3 * (limit << 20), max(sizes) >> 20  # 72 to 96 MB seen here
