"""Students against students, in every layer (the hub's too: the whole grader run by an instructor who is not root,
with bubblewrap), driven by the sandbox's table of kinds (`autograder.sandbox.kinds`): for every kind of kernel
object, leave one behind, and find a classmate's (`catalog.kinds`, one probe per row).

* the control, per layer: a student who leaves a marker of her own in every kind she can, then looks for it: she
  manages to leave one exactly where the table says her layer lets her (OWN, REMOVED), never where it says
  REFUSED, and there she finds it again, which shows the search would find a classmate's;
* through `grade-class`, in every layer, started under a session key ring of its own (as systemd or a login starts
  it) and with every job of a server under the same uid (as a later job reuses one): the victim graded first
  leaves her marker in every kind she can (in every key ring she reaches too, readable by anyone, as a red team
  stored a forward's source), classmates graded after her look in every kind, and find nothing through any; and once the
  class is graded nothing of hers is left on the host, kind by kind. Cleanup breakers, huge answers, another
  ABI's calls, one call of every refused family and honest students share the class, and each gets its own fair
  result. Through `nbgrader autograde` the same, in one layer (`layers.one_layer`): the front end hands the
  sandbox the same in every layer, and what each layer closes is the grade-class class's to show;
* a cooperating pair graded at once, a sender and a blank template, passes no forward through the files both may
  read (locks on the standard library, the page cache of a shared file), in every layer; with the allowlist's
  checks on shared files switched off for the test, the same pair does (in one layer: the control that the
  channel works; in every layer the sender says its calls were refused).
"""

import json
import os
import shutil
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from nbgrader.api import Gradebook

from autograder.course import kit
from autograder.engine.rubric import RUBRIC, TOTAL_POINTS
from autograder.frontends.nbgrader.feedback import recorded_result
from autograder.sandbox import kinds
from autograder.sandbox.parent.client import Limits
from catalog import kinds as probes
from catalog.build import submission
from catalog.classmates import FOUND, LEFT, SELF, new_marker, reported, self_test, thief, victim
from catalog.classmates import pair_digest, pair_receiver, pair_sender, received
from catalog.hostile import POST_LN, cell, template
from catalog.isolation import FAMILIES
from layers import EVERY_LAYER, HUB, environment, grade, hub_user, layer_available, one_layer, sandbox_server
from nbgrader_course import Shell, do_kit_homework, make_course
from session_ring import run_under_ring, sandbox_key_owners

KINDS = [kind.name for kind in kinds.KINDS]
ONE = one_layer()
FORWARD_CHECKS = [name for name in RUBRIC if name != "compounding"]
FAMILY = {e.name: e for e in FAMILIES}
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


def _available(layer: str) -> str:
    why = layer_available(layer)
    if why:
        pytest.skip(f"layer '{layer}' not available: {why}")
    return layer


@pytest.fixture(scope="module", params=list(EVERY_LAYER))
def layer(request):
    return _available(request.param)


@pytest.fixture(scope="module", params=[ONE])
def nbgrader_layer(request):
    """The layer `nbgrader autograde`'s class runs in (one: see the module's docstring)."""
    return _available(request.param)


def _grading_folders(layer: str) -> tuple[Path, Path, Path]:
    """A class folder and a results folder that anyone may write (0777), under a folder anyone may enter: the
    grader must close them to the sandbox whatever their mode."""
    base = Path(tempfile.mkdtemp(prefix=f"layernorm-class-{layer}-"))
    base.chmod(0o755)
    root, out = base / "class", base / "out"
    for folder in (root, out):
        folder.mkdir()
        folder.chmod(0o777)
    return base, root, out


def _column(layers: dict, layer: str) -> str:
    return kinds.layer_of(layers, layer in ("bubblewrap", HUB), os.geteuid() == 0 and layer != HUB)


def _expected_column(layer: str) -> str:
    """The table's column of a test layer on this machine (Landlock where the kernel has it)."""
    from autograder.sandbox.inside import landlock

    return _column({"namespaces": layer != "permissions", "landlock": landlock.abi()}, layer)


@contextmanager
def _two_servers(layer: str, **options):
    """Two servers in `layer`, started at the same moment, as two workers of a class start theirs."""
    servers = [None, None]

    def start(i):
        servers[i] = sandbox_server(layer, **options)

    starting = [threading.Thread(target=start, args=(i,)) for i in range(2)]
    for thread in starting:
        thread.start()
    for thread in starting:
        thread.join()
    try:
        assert all(servers), "a server did not start"
        yield servers
    finally:
        for server in servers:
            if server is not None:
                server.close()


SERVERS_LIMITS = Limits(load_s=12, probe_s=4, job_s=40, wall_factor=4)  # a phase may wait 48 s: the self-test's walks fit


@pytest.fixture(scope="module")
def servers(layer):
    """Two servers in the layer with the class folder closed to them (private): the self-test is graded on the first,
    the cooperating pair on both at once."""
    base, root, _ = _grading_folders(layer)
    try:
        with _two_servers(layer, limits=SERVERS_LIMITS, private=[root]) as pair:
            yield SimpleNamespace(root=root, pair=pair)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def own(layer, servers):
    """The control: one student leaves her own marker in every kind she can, then looks for it."""
    port, server = 20000 + os.getpid() % 20000, servers.pair[0]
    (servers.root / "self_test.py").write_text(self_test(private=[servers.root], port=port))
    result = grade(server, servers.root / "self_test.py", seed=4)
    found = reported(result.notes, SELF)
    assert found is not None, result.notes
    return SimpleNamespace(left=found[0], found=found[1], column=_column(server.layers, layer), notes=result.notes)


@pytest.mark.parametrize("kind", KINDS)
def test_a_student_leaves_a_marker_only_where_her_layer_lets_her_and_finds_it_there(own, kind):
    closed = kinds.BY_NAME[kind].closed[own.column]
    if closed.how == kinds.REFUSED:
        assert kind not in own.left, f"{kind}: '{closed.text}', yet she left one ({own.column})"
    elif closed.how in (kinds.OWN, kinds.REMOVED):
        assert kind in own.left, f"{kind}: she could not leave one ({own.column}): {own.notes}"
        if closed.seen:
            assert kind in own.found, f"{kind}: the search did not find her own ({own.column}): {own.notes}"
        else:  # the layer hides even her own from her search: then a classmate's all the more
            assert kind not in own.found, f"{kind}: '{closed.text}', yet she found her own ({own.column})"


def _context(mark: str, private, port: int, owners: dict, ring_keys, login: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(
        mark=mark,
        private=[str(p) for p in private],
        port=port,
        key_owners=owners,
        ring_contents=lambda: ring_keys,
        clock_offset=time.time() - time.monotonic(),
        login=login,
    )


CLASS_LOGIN = "hubclass"  # the hub's instructor of the class tests (no other test runs as them)


def _launch(layer: str, command: list, cwd, env: dict) -> tuple[dict, str | None]:
    """A grading command (`python <command>`) launched under a session key ring of its own, as root or, in the hub's
    layer, as the instructor who is not root (who then owns the folders it writes in); and that instructor."""
    if layer != HUB:
        return run_under_ring([sys.executable, *command], cwd, {**os.environ, **env}), None
    login, python = hub_user(CLASS_LOGIN)
    return run_under_ring([python, *command], cwd, env, user=login), login


def _leftovers(context) -> dict:
    return {kind: probes.PROBES[kind].leftovers(context) for kind in KINDS}


@pytest.fixture(scope="module")
def classmates(layer):
    """One class per layer through `grade-class` under a session ring of its own, one worker (one server for
    everyone), every job under one uid: the victim first, then classmates who look for her marker in every kind,
    who break the cleanup, send answers too large, use another ABI or make every refused call, then honest ones.
    A second thief, with a Post-LN forward, joins in one layer: what he may score is no layer's doing."""
    base, root, out = _grading_folders(layer)
    mark, port, owners = new_marker(), 20000 + (os.getpid() + 7) % 20000, sandbox_key_owners()
    places = [root, out]
    students = {
        "a_victim": victim(mark, places, port),
        "b_thief": thief(places, port),
        "d_redirects_results": template(cell(REDIRECT.format(out=str(out), root=str(root)))),
        "e_deep_tree": FAMILY["deep_tree_unreadable_folders_left_behind"].source,
        "f_huge_answers": FAMILY["eleven_answers_of_fifteen_megabytes"].source,
        "g_x32": FAMILY["x32_system_call"].source,
        "h_refused_calls": FAMILY["one_call_of_every_refused_family"].source,
        "y_post_ln": submission(forward=POST_LN),
        "z_correct": submission(),
    }
    if layer == ONE:
        students["c_thief_post_ln"] = thief(places, port, base="post_ln")
    for name, text in students.items():
        (root / f"{name}.py").write_text(text)
    command = ["-m", "autograder", "grade-class", root, "--out", out, "--workers", "1", "--seed", "6", "--force"]
    launched, login = _launch(layer, command, base, {"AUTOGRADER_JOB_UIDS": "1", **environment(layer)})
    assert launched["status"] == 0, launched["stderr"][-3000:]
    left = _leftovers(_context(mark, places, port, owners, launched["ring_keys"], login))
    results = {name: json.loads((out / name / "results.json").read_text()) for name in students}
    yield SimpleNamespace(
        root=root, out=out, mark=mark, results=results, left=left, log=launched["stderr"], column=_expected_column(layer)
    )
    shutil.rmtree(base, ignore_errors=True)


def _notes(results: dict) -> list[str]:
    return list(results["extra_data"].get("notes") or [])


@pytest.mark.parametrize("kind", KINDS)
def test_no_classmate_finds_her_marker_through(classmates, kind):
    found = reported(_notes(classmates.results["b_thief"]), FOUND)
    assert kind not in (found[0] if found else set()), (kind, found)
    assert "found nothing" in json.dumps(classmates.results["b_thief"]) or found, "the thief did not search"
    left = reported(_notes(classmates.results["a_victim"]), LEFT)
    assert left is not None, "the victim did not report where she left her marker"
    if kinds.BY_NAME[kind].closed[classmates.column].how == kinds.REFUSED:
        assert kind not in left[0], f"the table says {kind} is refused here, yet she left one"


@pytest.mark.parametrize("kind", KINDS)
def test_nothing_of_hers_is_left_behind_in(classmates, kind):
    assert classmates.left[kind] == []


def test_no_classmate_s_marker_reaches_another_student(classmates):
    for student, results in classmates.results.items():
        if student == "a_victim":
            continue
        for page in ("results.json", "feedback.html"):
            assert classmates.mark not in (classmates.out / student / page).read_text(), (student, page)
    assert classmates.results["b_thief"]["score"] == 0
    if "c_thief_post_ln" in classmates.results:
        assert classmates.results["c_thief_post_ln"]["score"] <= classmates.results["y_post_ln"]["score"]
    assert classmates.mark in json.dumps(classmates.results["a_victim"])  # she did leave it


def test_results_go_to_their_own_student_whatever_the_folders_modes(classmates):
    out = classmates.out
    assert classmates.results["d_redirects_results"]["score"] == 0
    for student, results in classmates.results.items():
        assert not (out / student).is_symlink()
        assert results["extra_data"]["student"] == student
    assert classmates.results["a_victim"]["score"] == TOTAL_POINTS


def test_cleanup_breakers_huge_answers_and_refused_calls_cost_only_their_author(classmates):
    results = classmates.results
    full = ("e_deep_tree", "g_x32", "h_refused_calls", "z_correct")
    assert {s: results[s]["score"] for s in full} == dict.fromkeys(full, TOTAL_POINTS)
    assert results["f_huge_answers"]["score"] == 0
    assert FAMILY["one_call_of_every_refused_family"].phrase in json.dumps(results["h_refused_calls"])
    assert all(not r["extra_data"].get("grader_errors") for r in results.values()), {
        s: r["extra_data"].get("grader_errors") for s, r in results.items()
    }


@pytest.fixture(scope="module")
def autograded(nbgrader_layer):
    """The same victim and thief, a cleanup breaker, answers too large, an x32 call, every refused call and an
    honest student through `nbgrader autograde` in the layer, under a session ring of its own, every job under
    one uid: one server for the whole command, the victim's notebook first."""
    layer = nbgrader_layer
    base, _, _ = _grading_folders(layer)
    course = make_course(base / "course", ordinary=False)
    course.chmod(0o777)  # open to everyone: the sandbox must keep the thief out of it all the same...
    with open(course / "nbgrader_config.py", "a") as config:  # ...which the course chooses, or the kit refuses it
        config.write('\nc.KitCourse.when_open_to_others = "allow"\n')
    env = {"AUTOGRADER_SEED": "7", "AUTOGRADER_JOB_UIDS": "1", **environment(layer)}
    shell = Shell(env)
    shell("nbgrader", "generate_assignment", kit.KIT.name, cwd=course)
    released = nbformat.read(course / "release" / kit.KIT.name / kit.KIT.notebook_name, as_version=4)
    mark, port, owners = new_marker(), 20000 + (os.getpid() + 13) % 20000, sandbox_key_owners()
    family = {name: e.source.split("# %% hostile")[1] for name, e in FAMILY.items() if "# %% hostile" in e.source}
    code = {
        "a_victim": victim(mark, [course], port).split("# %% spread")[1],
        "b_thief": thief([course], port).split("# %% search")[1],
        "c_deep_tree": family["deep_tree_unreadable_folders_left_behind"],
        "d_huge_answers": family["eleven_answers_of_fifteen_megabytes"],
        "e_x32": family["x32_system_call"],
        "f_refused_calls": family["one_call_of_every_refused_family"],
        "z_correct": "",
    }
    for student, extra in code.items():
        notebook = nbformat.from_dict(released)  # a copy: the thief's and the huge answers' are the release
        if student not in ("b_thief", "d_huge_answers"):
            notebook = do_kit_homework(notebook, "ada_correct")
        if extra:
            notebook.cells.append(nbformat.v4.new_code_cell(extra))
        path = course / "submitted" / student / kit.KIT.name / kit.KIT.notebook_name
        path.parent.mkdir(parents=True)
        nbformat.write(notebook, path)
    if layer == HUB:  # the instructor's own course
        import hub_users

        hub_users.give(course, hub_user(CLASS_LOGIN)[0])
    launched, login = _launch(layer, ["-m", "nbgrader", "autograde", kit.KIT.name], course, shell.env if layer != HUB else env)
    left = _leftovers(_context(mark, [course], port, owners, launched["ring_keys"], login))
    notebooks = {
        student: nbformat.read(course / "autograded" / student / kit.KIT.name / kit.KIT.notebook_name, as_version=4)
        for student in code
    }
    yield SimpleNamespace(
        course=course,
        mark=mark,
        log=launched["stdout"] + launched["stderr"],
        left=left,
        notebooks=notebooks,
        status=launched["status"],
    )
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("kind", KINDS)
def test_no_classmate_finds_her_marker_through_nbgrader_through(autograded, kind):
    result = recorded_result(autograded.notebooks["b_thief"], "b_thief")
    found = reported(result.notes, FOUND)
    assert kind not in (found[0] if found else set()), (kind, found)
    assert autograded.left[kind] == []


def test_no_classmate_s_marker_reaches_another_student_through_nbgrader(autograded):
    assert autograded.status == 0, autograded.log[-3000:]
    graded = [line.split("graded ")[1].split(":")[0] for line in autograded.log.splitlines() if "] graded " in line]
    assert graded[:2] == ["a_victim", "b_thief"], autograded.log[-3000:]
    assert autograded.mark not in nbformat.writes(autograded.notebooks["b_thief"])
    assert "found nothing" in " ".join(recorded_result(autograded.notebooks["b_thief"], "b_thief").notes)
    with Gradebook(f"sqlite:///{autograded.course / 'gradebook.db'}") as gradebook:
        score = lambda student: gradebook.find_submission_notebook(kit.KIT.notebook_id, kit.KIT.name, student).score  # noqa: E731
        assert {student: score(student) for student in autograded.notebooks} == {
            "a_victim": TOTAL_POINTS,
            "b_thief": 0,
            "c_deep_tree": TOTAL_POINTS,
            "d_huge_answers": 0,
            "e_x32": TOTAL_POINTS,
            "f_refused_calls": TOTAL_POINTS,
            "z_correct": TOTAL_POINTS,
        }


PAIR_LIMITS = Limits(load_s=6, probe_s=4, job_s=40, wall_factor=4)  # a phase may wait 24 s: the pair's 12 and 14 fit
RECEIVER_WAIT_ON = 2.0  # where the sender's calls are refused (asserted) there is nothing to wait for


def _pair(servers, folder: Path, **receiver) -> tuple:
    """A sender (a correct solution) and a receiver (a blank template) graded at the same moment, on two servers, as
    two workers of a class grade them: their results."""
    (folder / "sender.py").write_text(pair_sender())
    (folder / "receiver.py").write_text(pair_receiver(**receiver))
    results = {}

    def run(name, server):
        results[name] = grade(server, folder / f"{name}.py", seed=8)

    graded = [threading.Thread(target=run, args=pair) for pair in zip(("sender", "receiver"), servers)]
    for thread in graded:
        thread.start()
    for thread in graded:
        thread.join()
    sender, receiver = results["sender"], results["receiver"]
    assert sender.score == TOTAL_POINTS and not sender.grader_errors and not receiver.grader_errors
    return sender, receiver


def _forward_points(result) -> int:
    return sum(c.points for c in result.checks if c.check in FORWARD_CHECKS)


def test_a_cooperating_pair_passes_no_forward_through_shared_files(servers, tmp_path):
    """The sender puts her forward's source in byte-range locks on os.py and in the page cache of a shared file; the
    receiver waits for it, decodes both and runs what arrived. With the allowlist the sender's calls are refused, in
    every layer, so nothing arrives through either (the receiver need not wait long for what cannot come), and the
    receiver earns no forward point."""
    sender, receiver = _pair(servers.pair, tmp_path, wait=RECEIVER_WAIT_ON)
    assert "locks refused" in " ".join(sender.notes) and "page cache refused" in " ".join(sender.notes)
    assert received(receiver.notes) == {}, received(receiver.notes)
    assert _forward_points(receiver) == 0, {c.check: c.points for c in receiver.checks}


def test_without_the_checks_on_shared_files_the_same_pair_passes_its_forward(tmp_path):
    """The control, in one layer: with the allowlist's checks on shared files switched off for this test, the same
    pair passes the forward through both, and the blank template earns every forward point: the refusal is what
    closes them."""
    with _two_servers(_available(ONE), limits=PAIR_LIMITS, checks_off=("shared files",)) as servers:
        sender, receiver = _pair(servers, tmp_path)
    arrived = received(receiver.notes)
    assert arrived == {"locks": pair_digest(), "page cache": pair_digest()}, (arrived, sender.notes)
    assert _forward_points(receiver) == sum(c.max_points for c in receiver.checks if c.check in FORWARD_CHECKS)
