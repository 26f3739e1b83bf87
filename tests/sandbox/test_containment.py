"""What the sandbox holds besides the corpus's outcomes, in every isolation layer this machine has: no network,
no file that outlives the grading, no classmate's file, no process left once `grade` returns, a results file
only the grader writes, intake that refuses links and pipes, limits that a busy machine does not turn into a
lost grade, and a refusal to grade where nothing could be isolated.

Students against students (`catalog.classmates`): a victim graded first leaves a marker in her memory, files,
IPC and results; classmates graded after her on the same server search their whole address space
(/proc/self/maps and /proc/self/mem) and everything they can open, and must find nothing, through grade-class
and through nbgrader autograde; a control shows the search finds its own marker in each channel."""
import ctypes
import ctypes.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from nbgrader.api import Gradebook

from autograder.course import kit
from autograder.engine.rubric import RUBRIC, TOTAL_POINTS
from autograder.frontends.classgrade import grade_class
from autograder.grading.submission import grade_file
from autograder.sandbox.parent import client as sandbox
from autograder.sandbox.parent.client import UNSAFE, IsolationUnavailable, Limits, SandboxServer
from catalog.build import submission
from catalog.classmates import new_marker, self_test, thief, victim
from catalog.hostile import POST_LN, cell, template
from catalog.isolation import FAMILIES
from nbgrader_course import Shell, do_kit_homework, make_course
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
    assert server.sandbox_uid is None or not [pid for pid in _sandbox_processes()
                                              if os.stat(f"/proc/{pid}").st_uid == server.sandbox_uid]


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
    rows = grade_class(root, out, workers=1, seed=3, progress=False, force=True, limits=SHORT, isolation=LAYERS[layer])
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
    reason = {"symlink": "symbolic link", "fifo": "not a regular file", "device": "symbolic link",
              "oversized": "larger than"}[kind]
    assert reason in result.notes[0], result.notes


def test_grade_class_survives_links_and_pipes(tmp_path):
    root = tmp_path / "class"
    (root / "pipe").mkdir(parents=True)
    os.mkfifo(root / "pipe" / kit.KIT.notebook_name)
    (root / "link").mkdir()
    (root / "link" / kit.KIT.notebook_name).symlink_to(kit.SOLUTIONS_DIR / kit.KIT.notebook_name)
    (root / "folder_link").symlink_to(kit.SOLUTIONS_DIR)
    rows = grade_class(root, tmp_path / "out", workers=1, seed=2, progress=False, limits=SHORT)
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
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(path), "--results", str(results),
                           "--seed", "4"], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    first = results.read_text()
    time.sleep(1.0)
    assert results.read_text() == first
    data = json.loads(first)
    assert data["score"] == TOTAL_POINTS and data["extra_data"]["seed"] == 4
    assert "bubblewrap" not in data["extra_data"]["isolation"]
    assert set(_orphaned_sandbox_processes()) - before == set()


def test_without_bubblewrap_or_root_the_grader_refuses_unless_told_unsafe(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(IsolationUnavailable, match="refusing to grade"):
        SandboxServer(bubblewrap="off")
    with SandboxServer(bubblewrap="off", unsafe=True, limits=SHORT) as unsafe:
        assert unsafe.isolation == UNSAFE
        result = _grade(unsafe, tmp_path, submission())
    assert result.isolation == UNSAFE and "without isolation" in result.notes[0]


def test_the_cli_refuses_with_a_message_not_a_traceback(tmp_path):
    script = ("import os, sys; os.geteuid = lambda: 1000\n"
              "from autograder.frontends.cli import main\nsys.exit(main())")
    path = tmp_path / "sub.py"
    path.write_text(submission())
    done = subprocess.run([sys.executable, "-c", script, "grade", str(path), "--results", str(tmp_path / "r.json")],
                          env={**os.environ, "PATH": _failing_bwrap(tmp_path)}, capture_output=True, text=True,
                          timeout=300)
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


# --- students against students: memory, IPC, shared folders, results -------------------------------------

CLASS_LIMITS = Limits(load_s=12, probe_s=4, job_s=40, wall_factor=4)
REDIRECT = """
import os, shutil
_out, _root = {out!r}, {root!r}
_mine = os.path.join(_out, "d_redirects_results")
try:                                           # my results written into (and read back from) the victim's folder
    shutil.rmtree(_mine, ignore_errors=True)
    os.symlink(os.path.join(_out, "a_victim"), _mine)
except OSError:
    pass
try:                                           # and her notebook run as mine
    exec(open(os.path.join(_root, "a_victim.py")).read().split("# %% spread")[0], globals())
except OSError:
    pass
"""


def _world_writable_class(layer: str) -> tuple[Path, Path, Path]:
    """A class folder and a results folder that anyone may write (0777), under a folder anyone may enter: the
    grader must close them to the sandbox whatever their mode."""
    base = Path(tempfile.mkdtemp(prefix=f"layernorm-class-{layer}-"))
    base.chmod(0o755)
    root, out = base / "class", base / "out"
    for folder in (root, out):
        folder.mkdir()
        folder.chmod(0o777)
    return base, root, out


def _orphaned_sandbox_processes() -> list[str]:
    """Processes of sandbox users that no sandbox server holds any more: leftovers. (A live child of some other
    grading run on this machine, of this version of the kit or another, has a server or another child of its job
    as its parent.)"""
    def parent_of(pid):
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[1]

    orphans = []
    for pid in _sandbox_processes():
        try:
            parent = parent_of(pid)
            held = os.stat(f"/proc/{parent}").st_uid >= sandbox.SANDBOX_UID_BASE or \
                re.search(rb"autograder\.[\w.]*server", Path(f"/proc/{parent}/cmdline").read_bytes()) is not None
        except OSError:
            continue
        if not held:
            orphans.append(pid)
    return orphans


def _leftovers(mark: str) -> list[str]:
    """Anything of a job that outlived it: processes and IPC objects of sandbox users, the victim's files in the
    places everyone can write, her POSIX queue and shared memory."""
    found = [f"process {pid}" for pid in _orphaned_sandbox_processes()]
    for kind in ("shm", "msg", "sem"):
        lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        column = lines[0].split().index("cuid")
        found += [f"System V {kind}: {line}" for line in lines[1:]
                  if int(line.split()[column]) >= sandbox.SANDBOX_UID_BASE]
    for top in ("/tmp", "/var/tmp", "/dev/shm", "/run/lock"):
        for folder, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if not d.startswith(("pytest-of-", "bash_jobs"))]
            found += [os.path.join(folder, name) for name in files if name.startswith("victim-")]
    rt = ctypes.CDLL(ctypes.util.find_library("rt") or "librt.so.1", use_errno=True)
    queue = rt.mq_open(b"/victim-queue", os.O_RDONLY | os.O_NONBLOCK, 0, None)
    if queue >= 0:
        found.append("POSIX queue /victim-queue")
        rt.mq_unlink(b"/victim-queue")
    return found


def test_the_thief_s_search_finds_what_its_layer_lets_it_reach(server, tmp_path):
    """The control for the tests below: a thief that first spreads a marker of its own finds it in its memory
    and its files in every layer, and in System V IPC, POSIX shared memory and an abstract socket wherever its
    layer lets it make them (a private root of its own): the search would find a classmate's there."""
    result = _grade(server, tmp_path, self_test(seconds=3), seed=4)
    note = next((n for n in result.notes if "found a classmate's marker" in n), "")
    found = set(note.rsplit(" in ", 1)[-1].split(", ")) if note else set()
    expected = {"memory", "files"} | ({"shm", "msg", "posix-shm", "socket"} if server.layers["namespaces"] else set())
    assert expected <= found, (expected, result.notes)


@pytest.fixture(scope="module")
def classmates(layer):
    """One class per layer through grade-class, one worker (one server for everyone): the victim first, then
    classmates who try every way to her marker (memory, IPC, shared folders, her notebook and results), who
    break the cleanup, send answers too large or use another system-call ABI, then honest ones."""
    base, root, out = _world_writable_class(layer)
    mark = new_marker()
    places = [root, out]
    students = {"a_victim": victim(mark, places), "b_thief": thief(places),
                "c_thief_post_ln": thief(places, base="post_ln"),
                "d_redirects_results": template(cell(REDIRECT.format(out=str(out), root=str(root)))),
                "e_deep_tree": next(e.source for e in FAMILIES if e.name.startswith("deep_tree")),
                "f_huge_answers": next(e.source for e in FAMILIES if e.name.startswith("eleven_answers")),
                "g_x32": next(e.source for e in FAMILIES if e.name == "x32_system_call"),
                "y_post_ln": submission(forward=POST_LN), "z_correct": submission()}
    for name, text in students.items():
        (root / f"{name}.py").write_text(text)
    rows = grade_class(root, out, workers=1, seed=6, progress=False, force=True, limits=CLASS_LIMITS,
                       isolation=LAYERS[layer])
    left = _leftovers(mark)
    yield SimpleNamespace(root=root, out=out, mark=mark, rows={r["student"]: r for r in rows}, left=left)
    shutil.rmtree(base, ignore_errors=True)


def test_no_classmate_s_marker_reaches_another_student(classmates):
    for student, row in classmates.rows.items():
        if student == "a_victim":
            continue
        for page in ("results.json", "feedback.html"):
            assert classmates.mark not in (classmates.out / student / page).read_text(), (student, page)
        assert classmates.mark not in json.dumps(row), student
    assert float(classmates.rows["b_thief"]["score"]) == 0
    assert float(classmates.rows["c_thief_post_ln"]["score"]) <= float(classmates.rows["y_post_ln"]["score"])
    assert classmates.mark in (classmates.out / "a_victim" / "results.json").read_text()   # she did leave it


def test_results_go_to_their_own_student_whatever_the_folders_modes(classmates):
    out = classmates.out
    assert float(classmates.rows["d_redirects_results"]["score"]) == 0
    for student in classmates.rows:
        assert not (out / student).is_symlink()
        assert json.loads((out / student / "results.json").read_text())["extra_data"]["student"] == student
    assert float(classmates.rows["a_victim"]["score"]) == TOTAL_POINTS


def test_cleanup_breakers_huge_answers_and_foreign_system_calls_cost_only_their_author(classmates):
    rows = classmates.rows
    assert {s: float(rows[s]["score"]) for s in ("e_deep_tree", "g_x32", "z_correct")} == dict.fromkeys(
        ("e_deep_tree", "g_x32", "z_correct"), TOTAL_POINTS)
    assert float(rows["f_huge_answers"]["score"]) == 0
    assert all(not row["grader_errors"] for row in rows.values()), {s: r["grader_errors"] for s, r in rows.items()}


def test_nothing_of_any_job_outlives_the_grading(classmates):
    assert classmates.left == []


@pytest.fixture(scope="module")
def autograded(layer, tmp_path_factory):
    """The same victim and thief, a cleanup breaker, answers too large, an x32 system call and an honest student
    through `nbgrader autograde` in the layer: one server for the whole command, the victim's notebook first."""
    base, _, _ = _world_writable_class(layer)
    course = make_course(base / "course", ordinary=False)
    course.chmod(0o777)
    shell = Shell({"AUTOGRADER_SEED": "7", "AUTOGRADER_BUBBLEWRAP": LAYERS[layer].get("bubblewrap", "auto"),
                   "AUTOGRADER_NAMESPACES": LAYERS[layer].get("namespaces", "auto")})
    shell("nbgrader", "generate_assignment", kit.KIT.name, cwd=course)
    released = nbformat.read(course / "release" / kit.KIT.name / kit.KIT.notebook_name, as_version=4)
    mark = new_marker()
    family = {e.name: e.source.split("# %% hostile")[1] for e in FAMILIES if "# %% hostile" in e.source}
    code = {"a_victim": victim(mark, [course]).split("# %% spread")[1],
            "b_thief": thief([course]).split("# %% search")[1],
            "c_deep_tree": family["deep_tree_unreadable_folders_left_behind"],
            "d_huge_answers": family["eleven_answers_of_fifteen_megabytes"],
            "e_x32": family["x32_system_call"], "z_correct": ""}
    for student, extra in code.items():
        notebook = nbformat.from_dict(released)        # a copy: the thief's and the huge answers' are the release
        if student not in ("b_thief", "d_huge_answers"):
            notebook = do_kit_homework(notebook, "ada_correct")
        if extra:
            notebook.cells.append(nbformat.v4.new_code_cell(extra))
        path = course / "submitted" / student / kit.KIT.name / kit.KIT.notebook_name
        path.parent.mkdir(parents=True)
        nbformat.write(notebook, path)
    run = shell("nbgrader", "autograde", kit.KIT.name, cwd=course)
    left = _leftovers(mark)
    yield SimpleNamespace(course=course, mark=mark, log=run.stdout + run.stderr, left=left)
    shutil.rmtree(base, ignore_errors=True)


def test_no_classmate_s_marker_reaches_another_student_through_nbgrader(autograded):
    graded = [line.split("graded ")[1].split(":")[0] for line in autograded.log.splitlines() if "] graded " in line]
    assert graded[:2] == ["a_victim", "b_thief"], autograded.log[-3000:]
    thief_notebook = autograded.course / "autograded" / "b_thief" / kit.KIT.name / kit.KIT.notebook_name
    assert autograded.mark not in thief_notebook.read_text()
    with Gradebook(f"sqlite:///{autograded.course / 'gradebook.db'}") as gradebook:
        score = lambda student: gradebook.find_submission_notebook(kit.KIT.notebook_id, kit.KIT.name, student).score  # noqa: E731
        assert {student: score(student) for student in ("a_victim", "b_thief", "c_deep_tree", "d_huge_answers",
                                                        "e_x32", "z_correct")} == {
            "a_victim": TOTAL_POINTS, "b_thief": 0, "c_deep_tree": TOTAL_POINTS, "d_huge_answers": 0,
            "e_x32": TOTAL_POINTS, "z_correct": TOTAL_POINTS}
    assert autograded.left == []


def test_a_server_found_dead_is_started_again_and_the_job_graded(server, tmp_path):
    """The server (and any supervisor) killed between two jobs, as a job of another student could try where
    all run as one user: the next student's job is not lost, it runs on a fresh server."""
    os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait()
    result = _grade(server, tmp_path, submission())
    assert result.score == TOTAL_POINTS and not result.grader_errors, (result.score, result.grader_errors)
