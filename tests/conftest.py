import os
import random

import pytest
from hypothesis import settings

import unit_times
from layers import LAYERS, layer_available

os.environ.setdefault("MPLBACKEND", "Agg")

# Every Hypothesis property draws the same examples on every run (its "ci" profile: derandomized, no database), so a
# commit's suite gives one verdict; KIT_FUZZ_RANDOM=1 draws fresh ones, and a failure found so lands in a catalog.
settings.load_profile("default" if os.environ.get("KIT_FUZZ_RANDOM") else "ci")

# `make test` spreads the suite over the machine's cores (pytest-xdist): a module is one unit of work, so that its
# fixtures (a hub, a server per layer) are made once, and a group of modules is one unit too.
GROUPS = {
    # they look, after a hostile corpus, for what it left in the machine's shared tables (keys, System V objects,
    # /tmp, processes of sandbox users): one corpus at a time, each module after the other on one worker
    "kernel": ("sandbox/test_hostile.py", "sandbox/test_classmates.py", "sandbox/test_kinds.py", "sandbox/test_containment.py"),
    # their root graders close the checkout to other users for as long as they run (no namespaces, no Landlock),
    # and test_host compares the checkout's permissions before and after its own: one at a time
    "checkout": ("sandbox/test_host.py", "sandbox/test_seccomp.py"),
    # they share the session's solved_run (the solved notebook run once in a kernel)
    "solved": ("course/test_assignment.py", "course/test_lesson_claims.py"),
    # they share the session's hub_machine (the hub's environment, installed once: minutes of pip)
    "hub": ("frontends/test_exchange.py", "frontends/test_hub.py"),
    # they grade the same forwards on the same seeds, once in a worker (tests/graded.py remembers them): the catalogs'
    # on the session's seed, the fuzzer's corpus and regressions on its seed, the region cases on 11; test_seeds
    # grades all of them on those seeds and two more
    "graded": (
        "engine/test_catalog.py",
        "engine/test_corpus.py",
        "engine/test_seeds.py",
        "engine/test_fuzz.py",
        "engine/test_regions.py",
    ),
    # they share the session's student_folder (the students' environment, torch and Jupyter installed once)
    "environments": ("course/test_student_setup.py", "frontends/test_install.py"),
}
# The longest units start first (their times in the last fresh-clone run, docs/development.md: from minutes down to
# 40 s), so that the run ends on short ones and no worker is left alone with a long one at the end; the rest (half a
# minute or less each) follow in the order pytest collects them.
FIRST = (
    "hub",
    "kernel",
    "graded",
    "solved",
    "frontends/test_course.py",
    "frontends/test_course_states.py",
    "environments",
    "frontends/test_untrusted_class.py",
    "frontends/test_formgrader_browser.py",
    "checkout",
    "grading/test_parity.py",
    "frontends/test_course_export.py",
    "frontends/test_nbgrader_pipeline.py",
    "frontends/test_gradescope_bundle.py",
    "frontends/test_cli.py",
)


def unit(nodeid: str) -> str:
    """The unit of work a test belongs to: its module (relative to tests/), or the group holding that module."""
    module = nodeid.split("::", 1)[0].removeprefix("tests/")
    return next((group for group, modules in GROUPS.items() if module in modules), module)


def pytest_collection_modifyitems(items):
    rank = {name: place for place, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(unit(item.nodeid), len(FIRST)))  # stable: each unit keeps its order


def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's scheduling by scope, with `unit` as the scope (xdist's own groups, set by marks, are not
    seen by this pytest)."""
    from xdist.scheduler import LoadScopeScheduling

    class ByUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit(nodeid)

    return ByUnit(config, log)


def pytest_configure(config):
    """The run's wall time and slowest units at its end (`unit_times`); one grading seed for the whole run, every
    worker's (the seed fixture reads it); and, where the run is spread over workers, one thread for torch in each
    (two workers of two threads each on two cores wait on each other)."""
    unit_times.register(config, unit)
    if not os.environ.get("GRADER_TEST_SEED") and not os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ["GRADER_TEST_SEED"] = str(random.randrange(1, 2**31))
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
        import torch

        torch.set_num_threads(1)


@pytest.fixture(scope="session")
def server():
    """One warmed sandbox server for the whole test session."""
    from autograder.sandbox.parent.client import SandboxServer

    with SandboxServer() as sandbox:
        yield sandbox


@pytest.fixture(scope="session")
def hub_machine():
    """What the tests' hubs set up from docs/deployment.md share (tests/hub_setup.py): the kit's checkout, the
    environment the first set-up installs and the proxy, made once per test session and removed at its end."""
    import hub_setup

    shared = hub_setup.machine()
    try:
        yield shared
    finally:
        shared.remove()


@pytest.fixture(scope="session")
def student_folder(tmp_path_factory):
    """The release's files and the environment the lines of docs/students.md make there (tests/student_env.py), made
    once per session; gives the folder and the student's shell environment."""
    import student_env

    return student_env.make(tmp_path_factory.mktemp("student") / "layernorm")


@pytest.fixture(scope="session")
def released(tmp_path_factory):
    """The session's nbgrader courses with their assignments generated (tests/nbgrader_course.py: `Released`), each
    made once; `released.copy(folder, ordinary=...)` gives a test its own copy."""
    from nbgrader_course import Released

    return Released(tmp_path_factory.mktemp("released"))


@pytest.fixture(scope="module", params=list(LAYERS))
def layer_server(request):
    """A sandbox server in each isolation layer of tests/layers.py (skipped where this machine lacks it), one per
    module and layer."""
    from autograder.sandbox.parent.client import SandboxServer

    why = layer_available(request.param)
    if why:
        pytest.skip(f"layer '{request.param}' not available: {why}")
    with SandboxServer(**LAYERS[request.param]) as server:
        yield server


@pytest.fixture(scope="session")
def seed():
    """A random grading seed per test session (printed on failure), as in real grading runs."""
    value = int(os.environ.get("GRADER_TEST_SEED") or random.randrange(1, 2**31))
    print(f"grading seed for this session: {value} (set GRADER_TEST_SEED to repeat)")
    return value


@pytest.fixture
def grade_source(server, seed, tmp_path):
    """Grade `.py` source text through the real sandbox; returns the SubmissionResult."""
    from autograder.grading.submission import grade_file

    def grade(text: str, name: str = "submission.py", seed: int = seed):
        path = tmp_path / name
        path.write_text(text)
        return grade_file(path, server, seed=seed)

    return grade


@pytest.fixture
def grade_here(seed):
    """Grade `.py` source text in this process as the sandbox grades it (tests/graded.py: once per source and seed
    in a test process); returns the SubmissionResult. For tests of what a submission earns: tests of the sandbox
    itself grade through `server` or `layer_server`."""
    import graded

    return lambda text, seed=seed: graded.grade(text, seed)


@pytest.fixture(scope="session")
def solved_run(tmp_path_factory):
    """The solved notebook run once per session as a student runs it: in a Jupyter kernel, top to bottom, from a
    copy of solutions/ (the files released beside it included), figures drawn inline, the kit not importable. Gives
    the executed notebook, the CPU seconds of every cell and of the whole run, and the data its cells left behind
    (every picklable global: the measurements the lesson's sentences describe)."""
    import pickle
    import shutil
    from types import SimpleNamespace

    import nbformat
    from nbclient import NotebookClient

    from autograder.course import kit

    folder = tmp_path_factory.mktemp("solved")
    shutil.copytree(kit.SOLUTIONS_DIR, folder / "notebook")
    blocker = folder / "no_kit" / "autograder"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text('raise ImportError("the kit is not installed here")\n')
    data_file = folder / "data.pickle"
    notebook = nbformat.read(folder / "notebook" / kit.KIT.notebook_name, as_version=4)
    graded = [c for c in notebook.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id", "").startswith("check_")]
    notebook.cells = (
        [
            nbformat.v4.new_code_cell(
                "import resource as _resource\n"
                "_cell_cpu = []\n"
                "def _cpu():\n"
                "    usage = _resource.getrusage(_resource.RUSAGE_SELF)\n"
                "    return usage.ru_utime + usage.ru_stime\n"
                "get_ipython().events.register('pre_run_cell', lambda info: _cell_cpu.append(_cpu()))\n"
                "get_ipython().events.register('post_run_cell', lambda result: _cell_cpu.append(_cpu()))"
            )
        ]
        + [c for c in notebook.cells if c not in graded]
        + [
            nbformat.v4.new_code_cell(
                "import pickle as _pickle\n"
                "_data = {}\n"
                "for _name, _value in list(globals().items()):\n"
                "    if not _name.startswith('_') and _name not in ('In', 'Out', 'exit', 'quit'):\n"
                "        try:\n"
                "            _bytes = _pickle.dumps(_value)\n"
                "        except Exception:\n"
                "            continue\n"
                "        if b'__main__' not in _bytes:\n"  # values that refer to the notebook's classes stay behind
                "            _data[_name] = _value\n"
                "_data['cell_cpu'] = [_b - _a for _a, _b in zip(_cell_cpu[1::2], _cell_cpu[2::2])]\n"
                "_data['total_cpu'] = _cpu()\n"
                f"_pickle.dump(_data, open({str(data_file)!r}, 'wb'))"
            )
        ]
    )
    env = {key: value for key, value in os.environ.items() if key not in ("MPLBACKEND", "NBGRADER_EXECUTION")}
    saved = os.environ.copy()
    os.environ.clear()
    os.environ.update({**env, "PYTHONPATH": str(blocker.parent)})  # the kernel inherits this environment
    try:
        NotebookClient(
            notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder / "notebook")}}
        ).execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    data = pickle.loads(data_file.read_bytes())
    cells = [c for c in notebook.cells[1:-1] if c.cell_type == "code"]  # the hooks see code cells only
    seconds = dict(zip([c.metadata.get("nbgrader", {}).get("grade_id", "") for c in cells], data["cell_cpu"]))
    return SimpleNamespace(notebook=notebook, cells=cells, data=data, cell_cpu=seconds, total_cpu=data["total_cpu"])
