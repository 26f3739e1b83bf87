"""A student's set-up, exactly as docs/students.md writes it: a fresh virtual environment made by its
lines, in a folder that holds only what students receive (the release), and `run_tests.py` run there, on the
solution and on three wrong forwards. Nothing of the kit, or of this test's own environment, is on the path."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest

from autograder.course import kit

pytestmark = pytest.mark.slow  # a fresh environment: torch, numpy, matplotlib and Jupyter installed (minutes)

OPTIONAL = "pip install nbgrader"  # docs/students.md says this line is only for Validate; run_tests.py must not need it


def student_lines() -> list[str]:
    """The shell lines of the student set-up (docs/students.md), comments removed, the optional nbgrader line left
    out."""
    block = re.search(r"```bash\n(.*?)```", kit.documentation("students.md"), re.S).group(1)
    lines = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    lines = [line for line in lines if line]
    assert any(line.startswith(OPTIONAL) for line in lines), "docs/students.md no longer says how to get Validate"
    assert "only for Jupyter's Validate button; run_tests.py does not need it" in block
    return [line for line in lines if not line.startswith(OPTIONAL)]


WRONG = {  # edits of the solution's forward, and a line each must print
    "post_ln": None,  # the sample class's Post-LN student
    "second_shortcut_missing": ("return x + shortcut", "return x", "FAIL  test_zero_branches: ChecksFailed"),
    "no_dropout": ("x = self.drop_shortcut(x)", "x = x", "FAIL  test_dropout: ChecksFailed"),
}


@pytest.fixture(scope="module")
def student_folder(tmp_path_factory):
    """A folder with the release's files and a virtual environment made there by the lines of docs/students.md."""
    folder = tmp_path_factory.mktemp("student") / "layernorm"
    shutil.copytree(kit.TEMPLATE_DIR, folder)
    assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in kit.TEMPLATE_DIR.iterdir())
    script = "set -e\n" + "\n".join(student_lines()) + "\npython -c 'import torch, numpy, matplotlib'\n"
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if "/.venv/" not in p + "/")
    # pip compiles no bytecode ahead ("0" is pip's spelling of --no-compile in its environment): the student's
    # Python writes it for the modules it imports, on the first run (compiling all of torch ahead was three quarters
    # of its install here, 36 s against 10 s); what is installed is the same
    env["PIP_NO_COMPILE"] = "0"
    made = subprocess.run(["bash", "-c", script], cwd=folder, env=env, capture_output=True, text=True, timeout=1800)
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    return folder, env


def run_tests(folder: Path, env: dict, notebook: nbformat.NotebookNode) -> subprocess.CompletedProcess:
    nbformat.write(notebook, folder / kit.KIT.notebook_name)
    activate = "source layernorm-env/bin/activate && python run_tests.py"
    return subprocess.run(["bash", "-c", activate], cwd=folder, env=env, capture_output=True, text=True, timeout=600)


def _solution() -> nbformat.NotebookNode:
    return nbformat.read(kit.SOLUTIONS_DIR / kit.KIT.notebook_name, as_version=4)


def test_the_environment_is_the_students_own(student_folder):
    folder, env = student_folder
    probe = subprocess.run(
        [
            "bash",
            "-c",
            "source layernorm-env/bin/activate && python -c 'import sys, torch; print(sys.prefix); import autograder'",
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
    )
    assert probe.stdout.splitlines()[0] == str(folder / "layernorm-env")
    assert "ModuleNotFoundError: No module named 'autograder'" in probe.stderr


def test_the_solution_passes_every_visible_test(student_folder):
    folder, env = student_folder
    run = run_tests(folder, env, _solution())
    assert run.returncode == 0, run.stdout + run.stderr
    assert "7 passed, 0 failed" in run.stdout and "FAIL" not in run.stdout


@pytest.mark.parametrize("name", WRONG)
def test_a_wrong_forward_fails_with_a_clear_message(student_folder, name):
    folder, env = student_folder
    if WRONG[name] is None:
        notebook = nbformat.read(
            kit.COURSE_DIR / "sample_class" / "ben_post_ln" / kit.KIT.name / kit.KIT.notebook_name, as_version=4
        )
        expected = "FAIL  test_zero_branches: ChecksFailed: 2 of 2 checks failed:"
    else:
        old, new, expected = WRONG[name]
        notebook = _solution()
        cell = next(c for c in notebook.cells if c.metadata["nbgrader"]["grade_id"] == "task1_forward")
        assert old in cell.source
        cell.source = cell.source.replace(old, new)
    run = run_tests(folder, env, notebook)
    assert run.returncode == 1, run.stdout + run.stderr
    assert expected in run.stdout, run.stdout
    assert "Traceback" not in run.stdout + run.stderr  # the messages, not a crash of the runner
    assert "PASS  test_compounding" in run.stdout  # Task 2 is judged on its own
