"""`nbgrader validate` (what the Validate button of Jupyter's assignment list runs) tells a student the truth
before they submit: it fails on the untouched release with the tasks' own messages, fails on a Post-LN attempt
with the visible checks' messages, and passes the solution."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.course import kit

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """A course folder with the kit's nbgrader configuration and three notebooks to validate."""
    folder = tmp_path_factory.mktemp("course")
    shutil.copy(kit.COURSE_DIR / "nbgrader_config.py", folder)
    shutil.copy(kit.TEMPLATE_DIR / kit.KIT.notebook_name, folder / "untouched.ipynb")
    shutil.copy(kit.SOLUTIONS_DIR / kit.KIT.notebook_name, folder / "solution.ipynb")
    shutil.copy(
        kit.COURSE_DIR / "sample_class" / "ben_post_ln" / kit.KIT.name / kit.KIT.notebook_name, folder / "post_ln.ipynb"
    )  # the sample student whose block is Post-LN
    shutil.copy(kit.TEMPLATE_DIR / "visible_tests.py", folder)  # released beside the notebook
    return folder


def validate(course: Path, notebook: str) -> str:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    run = subprocess.run(
        [sys.executable, "-m", "nbgrader", "validate", notebook], cwd=course, env=env, capture_output=True, text=True, timeout=600
    )
    return run.stdout


def test_validate_fails_the_untouched_release_with_each_tasks_message(course):
    output = validate(course, "untouched.ipynb")
    assert "VALIDATION FAILED ON 10 CELL(S)" in output  # seven graded checks, three written answers
    assert output.count("NotImplementedError: Task 1: write TransformerBlock.forward") == 6
    assert output.count("NotImplementedError: Task 2: write magnitude_by_formula") == 1
    assert output.count("You did not provide a response.") == 3
    assert "Success" not in output


def test_validate_fails_a_post_ln_attempt_with_the_visible_checks_messages(course):
    output = validate(course, "post_ln.ipynb")
    assert "VALIDATION FAILED ON 5 CELL(S)" in output
    assert "- silenced_branches_give_back_the_input: with attention and feed-forward" in output
    assert "- norm1_acts_only_through_attention: with attention silenced, norm1's scale and" in output
    assert "NotImplementedError" not in output and "Success" not in output
    # the checks' messages alone: no traceback, a few lines per failing check, and once (one run: one kernel) the
    # pointer to trace_calls
    assert "Traceback" not in output and "site-packages" not in output and ".py\", line" not in output, output
    assert output.count("ChecksFailed: ") == 5 and output.count("trace_calls(") == 1
    assert len(output.splitlines()) <= 120, len(output.splitlines())


def test_validate_passes_the_solution(course):
    output = validate(course, "solution.ipynb")
    assert "Success! Your notebook passes all the tests." in output and "FAILED" not in output
