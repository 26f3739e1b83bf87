import os
import random

import pytest

from layers import LAYERS, layer_available

os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture(scope="session")
def server():
    """One warmed sandbox server for the whole test session."""
    from autograder.sandbox.parent.client import SandboxServer

    with SandboxServer() as sandbox:
        yield sandbox


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
