"""A student's set-up, exactly as docs/students.md writes it: a fresh virtual environment made by its
lines, in a folder that holds only what students receive (the release; the session's `student_folder`,
tests/student_env.py), and `run_tests.py` run there, on the solution and on three wrong forwards. Nothing of the kit,
or of this test's own environment, is on the path."""

import subprocess
from pathlib import Path

import nbformat
import pytest

from autograder.course import kit

pytestmark = pytest.mark.slow  # a fresh environment: torch, numpy, matplotlib and Jupyter installed (minutes)


WRONG = {  # edits of the solution's forward, and a line each must print
    "post_ln": None,  # the sample class's Post-LN student
    "second_shortcut_missing": ("return x + shortcut", "return x", "FAIL  test_zero_branches: ChecksFailed"),
    "no_dropout": ("x = self.drop_shortcut(x)", "x = x", "FAIL  test_dropout: ChecksFailed"),
}


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
