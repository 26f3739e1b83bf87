"""The hostile corpus (catalog/hostile.py, and the families against the sandbox itself in catalog/isolation.py)
through the real sandbox, in every isolation layer this machine has.

For every hostile submission: a well-formed result, the fair score, the message that explains it, no grader
error, the grading server still the same process, and no process of the sandbox user left behind. Around the whole
corpus: a correct and a wrong submission graded before and after it give identical results, and nothing
outside the sandbox (the repository, the temporary folder, a canary) was touched.

An entry whose fair outcome depends on what a layer closes (it touches a kind of kernel object of the sandbox's
table, `autograder.sandbox.kinds`: files, processes and signals, memory and process limits, sockets...) runs in every
layer (see `layers.EVERY_LAYER`): with bubblewrap; without it, with the namespaces root can make; with neither, on
permissions and seccomp alone (a container that refuses namespaces); and with bubblewrap run by an instructor who is
not root, as on a hub, where the child has the uid of the server that grades the next student (the cases that signal
or kill every process they can name run there too). Its outcome must hold in each; a layer this machine cannot give
is reported as a skip that names it. An entry that only tests how the parent reads what the child sends or does
(its channel, its output, its exit, its values, what it patches in its own process: `Hostile.once` says why) runs
in one layer (`layers.one_layer`: bubblewrap where the machine has it); which is which is data of the catalog
(`Hostile.touches`), and a test holds it to what each entry's code does.

The corpus runs on its own server with short limits (catalog.hostile.LIMITS), so the cases that can only
fail by running out of time fail in seconds.
"""

import json
import os
import re
import shutil
import subprocess
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

from autograder.course import kit
from autograder.engine.rubric import RUBRIC, TOTAL_POINTS
from autograder.frontends.gradescope.results import results_json
from autograder.sandbox import kinds
from autograder.sandbox.parent.client import Limits
from catalog.build import submission
from catalog.hostile import (
    AS_POST_LN,
    CANARY,
    FORGED_IN_GRADER_FOLDERS,
    FORGED_IN_TMP,
    FULL,
    HOSTILE,
    LIMITS,
    MARK,
    POST_LN,
    TASK1_ONLY,
    TASK2_ONLY,
    WRONG,
    ZERO,
    template,
)
from catalog.isolation import FAMILIES, STRAY
from layers import EVERY_LAYER, HubServer, grade, layer_available, one_layer, sandbox_server

CORPUS = HOSTILE + FAMILIES
ONE = one_layer()


def runs_in(entry, layer: str) -> bool:
    """Whether `entry` runs in `layer`: in every layer if it touches a kind of the table, else in `ONE` only."""
    return entry.every_layer or layer == ONE


TASK2 = "compounding"
FORWARD_CHECKS = [name for name in RUBRIC if name != TASK2]


@pytest.fixture(scope="module", params=list(EVERY_LAYER))
def hostile_server(request):
    """The corpus's server in one layer, for this module only: kept longer, the hub's would be a process of the hub's
    instructor that another module's check for her leftover processes finds."""
    why = layer_available(request.param)
    if why:
        pytest.skip(f"layer '{request.param}' not available: {why}")
    with sandbox_server(request.param, limits=Limits(**LIMITS)) as server:
        if request.param == "namespaces":
            assert server.layers["namespaces"], "root could not make namespaces here"
        server.layer = request.param
        yield server


def _tmp_entries() -> set[str]:
    return set(os.listdir(CANARY.parent))


def _git_status() -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=kit.ROOT, capture_output=True, text=True, check=True
    ).stdout


def _holds_forgery(path: Path) -> bool:
    try:
        return path.is_file() and path.stat().st_size < 1 << 20 and MARK in path.read_text(errors="replace")
    except OSError:
        return False


def _from_a_submission(path: Path, uids: set) -> bool:
    """Could a submission of the corpus have made this file? (its user owns it, or it is a forgery)"""
    try:
        owner = path.lstat().st_uid
    except OSError:
        return False
    return owner in uids or path.name == "results.json" or MARK in path.name or _holds_forgery(path)


def _sandbox_processes(server) -> list[str]:
    """Processes of the job's user still alive, as 'pid command': the sandbox user's (root), or the hub instructor's
    that are not the grader, its server or the supervisor waiting for the next job."""
    if isinstance(server, HubServer):
        return server.leftovers()
    uid = server.sandbox_uid
    if uid is None:
        return []
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}").st_uid == uid:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    command = handle.read().replace(b"\0", b" ").decode(errors="replace")
                alive.append(f"{pid} {command[:80]}")
        except OSError:
            pass
    return alive


def _comparable(result) -> str:
    data = result.to_dict()
    data.pop("execution_time")
    return json.dumps(data, sort_keys=True, default=repr)


HONEST = {"correct": submission(), "post_ln": submission(forward=POST_LN)}


@dataclass
class Before:
    git_status: str
    tmp: set
    results: dict  # HONEST's results


@pytest.fixture(scope="module")
def before(hostile_server, seed, tmp_path_factory):
    """The state before any hostile submission ran, a canary to attack, and two honest submissions' results."""
    CANARY.mkdir(exist_ok=True)
    (CANARY / "keep.txt").write_text("the corpus must not be able to delete this\n")
    STRAY.parent.mkdir(exist_ok=True)  # a solved notebook left where the world can read it
    shutil.copy(kit.SOLUTIONS_DIR / kit.KIT.notebook_name, STRAY)
    folder = tmp_path_factory.mktemp("honest")
    results = {}
    for name, source in HONEST.items():
        (folder / f"{name}.py").write_text(source)
        results[name] = grade(hostile_server, folder / f"{name}.py", seed=seed)
    yield Before(_git_status(), _tmp_entries(), results)
    shutil.rmtree(CANARY, ignore_errors=True)
    shutil.rmtree(STRAY.parent, ignore_errors=True)


@dataclass
class Graded:
    result: object = None
    error: BaseException | None = None
    seconds: float = 0.0
    server_restarted: bool = False
    left_behind: tuple = ()


class Corpus:
    """Grades each entry once, on the hostile server, and remembers what happened around it."""

    def __init__(self, server, seed, folder, honest):
        self.server, self.seed, self.folder, self.graded, self.honest = server, seed, folder, {}, honest
        self.uids = {server.sandbox_uid} - {None}  # the sandbox users the corpus ran as

    def grade(self, entry) -> Graded:
        if entry.name not in self.graded:
            path = self.folder / f"{entry.name}.py"
            path.write_text(entry.source)
            server_pid, started, graded = self.server.process.pid, time.monotonic(), Graded()
            try:
                graded.result = grade(self.server, path, seed=self.seed)
            except Exception as error:  # a grader bug (see known_bug): recorded, and the corpus goes on
                graded.error = error
            graded.seconds = time.monotonic() - started
            graded.server_restarted = self.server.process is None or self.server.process.pid != server_pid
            graded.left_behind = tuple(_sandbox_processes(self.server))
            self.uids |= {self.server.sandbox_uid} - {None}
            self.graded[entry.name] = graded
        return self.graded[entry.name]

    def grade_all(self) -> None:
        for entry in CORPUS:
            if runs_in(entry, self.server.layer):
                self.grade(entry)


@pytest.fixture(scope="module")
def corpus(before, hostile_server, seed, tmp_path_factory):
    return Corpus(hostile_server, seed, tmp_path_factory.mktemp("hostile"), before.results)


def _text(result) -> str:
    parts = [c.message for c in result.checks] + [s.message for c in result.checks for s in c.subtests]
    return "\n".join(parts + list(result.notes) + [result.first_divergence or ""])


def assert_well_formed(result) -> None:
    assert [c.check for c in result.checks] == list(RUBRIC)
    for check in result.checks:
        spec = RUBRIC[check.check]
        assert [s.name for s in check.subtests] == list(spec.parts)
        for sub in check.subtests:
            assert sub.max_points == spec.parts[sub.name]
            assert sub.points == (sub.max_points if sub.passed else 0)
            assert sub.passed or sub.message.strip(), f"{check.check} / {sub.name} failed without a message"
        assert check.passed or check.message.strip(), f"{check.check} failed without a message"
    assert 0 <= result.score <= TOTAL_POINTS and result.max_score == TOTAL_POINTS
    json.dumps(results_json(result), default=float)  # what gets written as results.json


def assert_outcome(result, outcome: str, honest: dict) -> None:
    points = {c.check: c.points for c in result.checks}
    full = {c.check: c.max_points for c in result.checks}
    lost = {c.check: c.message for c in result.checks if not c.passed}
    if outcome == FULL:
        assert result.score == TOTAL_POINTS, lost
    elif outcome == ZERO:
        assert result.score == 0, points
    elif outcome == TASK2_ONLY:
        assert points[TASK2] == full[TASK2], lost
        assert all(points[name] == 0 for name in FORWARD_CHECKS), points
    elif outcome == TASK1_ONLY:
        assert points[TASK2] == 0, points
        assert all(points[name] == full[name] for name in FORWARD_CHECKS), lost
    elif outcome == WRONG:
        assert points["forward_order"] == 0, points
        assert points[TASK2] == full[TASK2], lost
        assert result.score < TOTAL_POINTS
    elif outcome == AS_POST_LN:
        assert result.score <= honest["post_ln"].score, (result.score, honest["post_ln"].score, lost)
    else:
        raise AssertionError(f"unknown outcome {outcome!r}")


def _param(entry):
    marks = [pytest.mark.xfail(reason=entry.known_bug, strict=True)] if entry.known_bug else []
    return pytest.param(entry, id=entry.name, marks=marks)


EVERY_LAYER_ENTRIES = [entry for entry in CORPUS if entry.every_layer]
ONE_LAYER_ENTRIES = [entry for entry in CORPUS if not entry.every_layer]


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # numpy, on inf outputs
@pytest.mark.parametrize("entry", [_param(e) for e in EVERY_LAYER_ENTRIES])
def test_hostile_submission_gets_its_fair_result(corpus, hostile_server, before, entry):
    """An entry that touches a kind of the table, in every layer."""
    check_fair_result(corpus, entry)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("hostile_server", [ONE], indirect=True, scope="module")
@pytest.mark.parametrize("entry", [_param(e) for e in ONE_LAYER_ENTRIES])
def test_hostile_submission_gets_its_fair_result_in_one_layer(corpus, hostile_server, before, entry):
    """An entry whose outcome no layer changes (`Hostile.once` says why), in one layer."""
    check_fair_result(corpus, entry)


def check_fair_result(corpus, entry) -> None:
    graded = corpus.grade(entry)
    assert not graded.server_restarted, "the grading server had to be restarted"
    assert not graded.left_behind, f"processes of the sandbox user left behind: {graded.left_behind}"
    if graded.error is not None:
        raise graded.error
    result = graded.result
    assert_well_formed(result)
    assert not result.grader_errors, result.grader_errors  # nothing a submission does is the grader's failure
    assert entry.phrase.lower() in _text(result).lower(), _text(result)
    if entry.max_seconds is not None:
        assert graded.seconds < entry.max_seconds, f"grading took {graded.seconds:.1f} s"
    assert_outcome(result, entry.outcome, corpus.honest)


def test_the_corpus_changes_no_other_result(before, corpus, hostile_server, seed, tmp_path):
    corpus.grade_all()
    for name, result in before.results.items():
        (tmp_path / f"{name}.py").write_text(HONEST[name])
        again = grade(hostile_server, tmp_path / f"{name}.py", seed=seed)
        assert _comparable(again) == _comparable(result), f"{name} was graded differently after the corpus"
    assert before.results["correct"].score == TOTAL_POINTS
    assert before.results["post_ln"].score < TOTAL_POINTS


def test_nothing_outside_the_sandbox_changes(before, corpus, hostile_server):
    corpus.grade_all()
    # The repository and the grader's folders: out of reach for the sandbox user, and not even there in bubblewrap.
    # Other work may go on in the same checkout meanwhile: every change to `git status` is examined, one a
    # submission could have made fails the test, any other is only reported.
    changed = sorted(set(_git_status().splitlines()) ^ set(before.git_status.splitlines()))
    ours = [line for line in changed if _from_a_submission(kit.ROOT / line[3:].split(" -> ")[-1].strip('"'), corpus.uids)]
    assert not ours, f"the corpus changed the repository: {ours}"
    if changed:
        warnings.warn(f"the repository changed during the run, though not by a submission: {changed}")
    forged = [str(path) for path in FORGED_IN_GRADER_FOLDERS if _holds_forgery(path)]
    assert not forged, f"forged results outside the sandbox: {forged}"
    assert (CANARY / "keep.txt").is_file(), "a submission deleted a file outside its sandbox"
    # The shared temporary folder: private to each child (bubblewrap, namespaces) or cleaned when it ends.
    forged = [str(path) for path in FORGED_IN_TMP if _holds_forgery(path)]
    assert not forged, f"forged results in the temporary folder: {forged}"
    new = _tmp_entries() - before.tmp
    stray = [name for name in new if _from_a_submission(CANARY.parent / name, corpus.uids)]
    assert not stray, f"stray files in {CANARY.parent}: {stray}"
    # without a private root, the jobs' folders lie in the server's scratch folder: empty between jobs
    left = os.listdir(hostile_server.scratch) if hostile_server.scratch else []
    assert not left, f"working folders left behind: {left}"


# --- where each entry runs -----------------------------------------------------------------------------------------
# What an entry's own code does, read from its source in words the catalog's data does not use (the calls it makes),
# as an oracle for `Hostile.touches`: a kind of the sandbox's table -> the calls that reach it. RAW (a system call made
# through ctypes) may reach any kind: such an entry must name at least one.
RAW = "a raw system call"
SIGNS = {
    # processes and threads it starts, and memory past the job's limit (the table's row of processes holds the limits)
    "processes": r"\bos\.fork\(|\bthreading\b|\bsubprocess\b|2\s*\*\*\s*(2[7-9]|[3-9]\d)\b|1024\s*\*\*\s*3\b",
    "other_processes": r"\bos\.kill(pg)?\(|\bprlimit\b|\bsetpriority\b|\bsched_setaffinity\b",
    "writable_places": r"\bopen\([^)\n]*[\"'][wax]b?[\"']|\bshutil\.(rmtree|copy\w*|move)\("
    r"|\bos\.(mkdir|makedirs|remove|unlink|rename)\(|\bTemporaryDirectory\(",
    "grading_files": re.escape(str(kit.ROOT)),
    "other_files": r"\bos\.walk\(|/var/tmp\b|/srv\b|/home\b",
    "network": r"\bsocket\b",
    RAW: r"\bctypes\b|\.syscall\(",
}


def _signs(source: str) -> set:
    return {kind for kind, pattern in SIGNS.items() if re.search(pattern, source)}


@pytest.mark.quick
def test_every_entry_that_reaches_a_kind_of_the_table_runs_in_every_layer():
    """The split between every layer and one is data (`Hostile.touches`, `Hostile.once`), held here to each entry's
    code: a call that reaches a kind of the table, seen in its source, must be among the kinds it names, and those run
    it in every layer; an entry that names none says why it runs in one."""
    assert _signs(submission()) == set() and _signs(template()) == set()  # the honest code around the entries
    for entry in CORPUS:
        assert bool(entry.touches) != bool(entry.once), f"{entry.name}: name the kinds it touches, or say why once"
        assert set(entry.touches) <= set(kinds.BY_NAME), entry.name
        seen = _signs(entry.source)
        assert seen - {RAW} <= set(entry.touches), f"{entry.name} reaches {sorted(seen - {RAW})}: {entry.touches}"
        assert RAW not in seen or entry.touches, f"{entry.name} makes raw system calls and runs in one layer"
        assert (entry in EVERY_LAYER_ENTRIES) == bool(entry.touches) == (entry not in ONE_LAYER_ENTRIES), entry.name
    # the oracle can see each kind it knows of (in the entries that run in every layer)
    assert set(SIGNS) <= set().union(*(_signs(entry.source) for entry in CORPUS if entry.every_layer))
    # what the reasons claim: the clocks and the kill over a whole process tree run in every layer
    bomb = next(entry for entry in CORPUS if entry.name == "fork_bomb_in_forward")
    assert bomb.every_layer and "did not finish within" in bomb.phrase
