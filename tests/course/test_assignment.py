"""The assignment's views: generated from the one annotated source, no solution or hidden text in the
release, stubs that name their task, a solution that passes every visible test, a release that runs without the
kit."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.course import kit
from autograder.course.build import build
from autograder.engine.rubric import RUBRIC, WRITTEN
from catalog.leaks import secret_lines

pytestmark = pytest.mark.quick  # in `make test-quick`: this wing's fast tier

HIDDEN_OR_SOLUTION = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
VISIBLE_TESTS = [
    "test_block_shape",
    "test_zero_branches",
    "test_input_unchanged",
    "test_norm_placement",
    "test_dropout",
    "test_reference_numbers",
    "test_compounding",
]
TASK1_TESTS = VISIBLE_TESTS[:-1]


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory):
    root = tmp_path_factory.mktemp("views")
    build(root / "student_template", root / "solutions", root / "sample_class")
    return root


@pytest.mark.parametrize(
    "view, committed",
    [("student_template", kit.TEMPLATE_DIR), ("solutions", kit.SOLUTIONS_DIR), ("sample_class", kit.COURSE_DIR / "sample_class")],
)
def test_committed_views_match_the_source(rebuilt, view, committed):
    fresh = {p.relative_to(rebuilt / view): p.read_bytes() for p in (rebuilt / view).rglob("*") if p.is_file()}
    stored = {p.relative_to(committed): p.read_bytes() for p in committed.rglob("*") if p.is_file()}
    assert sorted(stored) == sorted(fresh), f"{view}: files differ; run `python -m autograder build`"
    stale = [str(name) for name in fresh if fresh[name] != stored[name]]
    assert not stale, f"{view} drifted from the source ({stale}); run `python -m autograder build`"


def test_the_text_the_language_model_trains_on_is_the_lesson_above_the_training_experiment():
    from autograder.course.build import LESSON_TEXT, lesson_text

    text = (kit.SOURCE_NOTEBOOK.parent / LESSON_TEXT).read_text(encoding="utf-8")
    assert text == lesson_text(), "lesson_text.txt drifted from the notebook; run `python -m autograder build`"
    markdown = [c.source.strip() for c in kit.KIT.cells() if c.kind == "markdown"]
    assert text.startswith(markdown[0]) and "## Does it matter in training?" not in text
    assert "### BEGIN SOLUTION" not in text and len(text) > 12_000  # the core path above it: about 14,000 characters


def test_release_holds_no_solution_and_no_hidden_test():
    secret = secret_lines()
    assert len(secret) > 10
    for path in kit.TEMPLATE_DIR.rglob("*"):
        text = path.read_text()
        assert not any(marker in text for marker in HIDDEN_OR_SOLUTION), path
        assert "report(" not in text and "autograder" not in text, path
        leaked = [line for line in secret if line in text]
        assert not leaked, f"{path.name} contains solution lines: {leaked[:3]}"


def test_stubs_fail_loudly_by_task():
    notebook = nbformat.read(kit.TEMPLATE_DIR / kit.KIT.notebook_name, as_version=4)
    stubs = [line.strip() for cell in notebook.cells for line in cell.source.split("\n") if "raise NotImplementedError(" in line]
    assert stubs == [
        'raise NotImplementedError("Task 1: write TransformerBlock.forward")',
        'raise NotImplementedError("Task 2: write magnitude_by_formula")',
        'raise NotImplementedError("Task 2: write magnitude_by_autograd")',
        'raise NotImplementedError("Task 2: write classify_factor")',
    ]


def test_solution_has_the_release_cells_and_metadata_with_every_exercise_solved():
    release = nbformat.read(kit.TEMPLATE_DIR / kit.KIT.notebook_name, as_version=4)
    solution = nbformat.read(kit.SOLUTIONS_DIR / kit.KIT.notebook_name, as_version=4)
    assert [c.metadata for c in release.cells] == [c.metadata for c in solution.cells]
    changed = [c.metadata["nbgrader"]["grade_id"] for c, r in zip(solution.cells, release.cells) if c.source != r.source]
    solved = [c.grade_id for c in kit.KIT.cells() if c.nbgrader.get("solution")]
    assert changed == solved and set(kit.TASKS) < set(solved)
    assert all(grade_id in kit.TASKS or grade_id.startswith("answer_") for grade_id in solved)
    assert "raise NotImplementedError(" not in json.dumps([c.source for c in solution.cells])


def test_rubric_points_equal_the_notebook_check_cells():
    assert kit.KIT.check_points() == {name: spec.points for name, spec in RUBRIC.items()}


def test_written_answer_cells_are_manually_graded_with_the_rubrics_points():
    answers = [c for c in kit.KIT.cells() if (c.grade_id or "").startswith("answer_")]
    assert {c.grade_id: float(c.nbgrader["points"]) for c in answers} == WRITTEN
    assert all(c.kind == "markdown" and c.nbgrader["grade"] and c.nbgrader["solution"] for c in answers)
    assert all("### BEGIN SOLUTION" in c.source and len(c.source) > 300 for c in answers)  # a model answer
    release = nbformat.read(kit.TEMPLATE_DIR / kit.KIT.notebook_name, as_version=4)
    assert [c.source for c in release.cells if c.metadata["nbgrader"]["grade_id"] in WRITTEN] == ["YOUR ANSWER HERE"] * 3


def test_the_release_says_what_to_install_with_the_pinned_versions():
    pins = dict(re.findall(r"^([\w-]+)==([\w.]+)$", (kit.ROOT / "requirements.txt").read_text(), re.MULTILINE))
    intro = nbformat.read(kit.TEMPLATE_DIR / kit.KIT.notebook_name, as_version=4).cells[0].source
    runner = (kit.TEMPLATE_DIR / "run_tests.py").read_text()
    for text in (intro, runner):
        line = next(line for line in text.splitlines() if "pip install torch" in line)
        for package in ("torch", "numpy", "matplotlib", "jupyter"):
            assert f"{package}=={pins[package]}" in line, (package, line)


def _without_the_kit(tmp_path: Path) -> dict:
    """An environment in which `import autograder` fails, as in a student's plain pip environment."""
    blocker = tmp_path / "no_kit"
    (blocker / "autograder").mkdir(parents=True, exist_ok=True)
    (blocker / "autograder" / "__init__.py").write_text('raise ImportError("the kit is not installed here")\n')
    return {**os.environ, "PYTHONPATH": str(blocker)}


RELEASED_BESIDE = ("run_tests.py", "visible_tests.py")  # what a student's folder holds next to the notebook


def _run_local_tests(folder: Path, notebook: Path, tmp_path: Path, name: str = kit.KIT.notebook_name, *arguments):
    work = tmp_path / folder
    work.mkdir(exist_ok=True)
    shutil.copy(notebook, work / name)
    for helper in RELEASED_BESIDE:
        shutil.copy(kit.TEMPLATE_DIR / helper, work / helper)
    return subprocess.run(
        [sys.executable, "run_tests.py", *arguments],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
        env=_without_the_kit(tmp_path),
    )


@pytest.mark.slow  # the quick tier runs the others
def test_local_tests_on_the_template_fail_with_each_task_named(tmp_path):
    run = _run_local_tests(Path("template"), kit.TEMPLATE_DIR / kit.KIT.notebook_name, tmp_path)
    assert run.returncode == 1
    failed = [line.split()[1].rstrip(":") for line in run.stdout.splitlines() if line.strip().startswith("FAIL")]
    assert failed == VISIBLE_TESTS
    for name in TASK1_TESTS:
        assert f"FAIL  {name}: NotImplementedError: Task 1: write TransformerBlock.forward" in run.stdout
    assert "FAIL  test_compounding: NotImplementedError: Task 2: write magnitude_by_formula" in run.stdout
    assert f"0 passed, {len(VISIBLE_TESTS)} failed" in run.stdout


def test_local_tests_on_the_solution_all_pass(tmp_path):
    run = _run_local_tests(Path("solution"), kit.SOLUTIONS_DIR / kit.KIT.notebook_name, tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert [line.split()[1] for line in run.stdout.splitlines() if "PASS" in line] == VISIBLE_TESTS


def test_local_tests_report_a_wrong_forward_by_name(tmp_path):
    notebook = nbformat.read(kit.SOLUTIONS_DIR / kit.KIT.notebook_name, as_version=4)
    cell = next(c for c in notebook.cells if c.metadata["nbgrader"]["grade_id"] == "task1_forward")
    cell.source = cell.source.replace("return x + shortcut", "return x")  # drop the second shortcut
    path = tmp_path / "wrong.ipynb"
    nbformat.write(notebook, path)
    run = _run_local_tests(Path("wrong"), path, tmp_path)
    assert run.returncode == 1
    assert "PASS  test_block_shape" in run.stdout and "FAIL  test_zero_branches: ChecksFailed" in run.stdout


@pytest.mark.slow  # the quick tier runs the others
def test_local_tests_list_every_failing_check_of_a_test(tmp_path):
    post_ln = kit.COURSE_DIR / "sample_class" / "ben_post_ln" / kit.KIT.name / kit.KIT.notebook_name
    run = _run_local_tests(Path("post_ln"), post_ln, tmp_path)
    report = run.stdout.split("FAIL  test_zero_branches: ChecksFailed: 2 of 2 checks failed:")[1].split("FAIL")[0]
    assert "- silenced_branches_give_back_the_input: " in report
    assert "- silenced_branches_pass_the_gradient_back: " in report
    assert "PASS  test_compounding" in run.stdout and "PASS  test_input_unchanged" in run.stdout


@pytest.mark.slow  # the quick tier runs the others
def test_local_tests_find_a_renamed_notebook(tmp_path):
    run = _run_local_tests(Path("renamed"), kit.SOLUTIONS_DIR / kit.KIT.notebook_name, tmp_path, "my attempt (2).ipynb")
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines()[0] == "Testing my attempt (2).ipynb"
    assert f"{len(VISIBLE_TESTS)} passed, 0 failed" in run.stdout


@pytest.mark.slow  # the quick tier runs the others
def test_local_tests_pick_the_latest_of_several_copies_and_say_so(tmp_path):
    import os

    _run_local_tests(Path("copies"), kit.TEMPLATE_DIR / kit.KIT.notebook_name, tmp_path, "layernorm.ipynb")
    os.utime(tmp_path / "copies" / "layernorm.ipynb", (1_000_000_000, 1_000_000_000))
    run = _run_local_tests(Path("copies"), kit.SOLUTIONS_DIR / kit.KIT.notebook_name, tmp_path, "layernorm-Copy1.ipynb")
    first = run.stdout.splitlines()[0]
    assert first.startswith("Testing layernorm-Copy1.ipynb, the most recently saved") and "also: layernorm.ipynb" in first
    assert run.returncode == 0, run.stdout + run.stderr


def test_local_tests_say_in_one_line_what_to_do_without_the_notebook(tmp_path):
    work = tmp_path / "elsewhere"
    work.mkdir()
    for helper in RELEASED_BESIDE:
        shutil.copy(kit.TEMPLATE_DIR / helper, work / helper)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")]), work / "notes.ipynb")
    (work / "broken.ipynb").write_text("{not json")
    run = subprocess.run([sys.executable, "run_tests.py"], cwd=work, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and not run.stderr
    assert len(run.stdout.splitlines()) == 1 and "holds this assignment's cells" in run.stdout
    assert "python run_tests.py path/to/notebook.ipynb" in run.stdout
    named = subprocess.run(
        [sys.executable, "run_tests.py", "missing.ipynb"], cwd=work, capture_output=True, text=True, timeout=60
    )
    assert named.returncode == 2 and len(named.stdout.splitlines()) == 1 and not named.stderr


@pytest.mark.slow  # the quick tier runs the others
def test_local_tests_run_a_notebook_named_on_the_command_line(tmp_path):
    notebook = tmp_path / "drafts" / "try.ipynb"
    notebook.parent.mkdir()
    shutil.copy(kit.SOLUTIONS_DIR / kit.KIT.notebook_name, notebook)
    run = _run_local_tests(Path("runner"), kit.TEMPLATE_DIR / kit.KIT.notebook_name, tmp_path, "layernorm.ipynb", str(notebook))
    assert run.returncode == 0 and run.stdout.splitlines()[0] == "Testing try.ipynb", run.stdout + run.stderr


@pytest.mark.slow
def test_solution_notebook_runs_headless_top_to_bottom_with_its_figures(solved_run):
    """Runs, with its figures and no error, on any machine; how long it takes is measured by
    benchmarks/notebook_runtime.py, never asserted here (a timed test fails on a slower machine)."""
    outputs = [o for c in solved_run.cells for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error" or o.get("name") == "stderr"]
    figures = {
        c.metadata["nbgrader"]["grade_id"]: sum("image/png" in o.get("data", {}) for o in c.outputs) for c in solved_run.cells
    }
    assert {name: count for name, count in figures.items() if count} == dict.fromkeys(
        ("diagram", "plot_compounding", "depth_experiment", "prepost_experiment", "training_experiment", "mlp_experiment"), 1
    )
    slowest = sorted(solved_run.cell_cpu.items(), key=lambda item: -item[1])[:3]
    print(f"solved notebook: {solved_run.total_cpu:.1f} s of CPU; slowest cells {slowest}")


def test_every_experiment_waits_while_nbgrader_validates(monkeypatch):
    """nbgrader sets NBGRADER_EXECUTION while it runs a notebook (Validate, autograde): the experiment cells then
    only define things (no figure, no measurement, no training), so Validate takes seconds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.setenv("NBGRADER_EXECUTION", "validate")
    monkeypatch.chdir(kit.SOLUTIONS_DIR)  # where the text the model trains on lies beside the notebook
    namespace, drawn = {"__name__": "__main__"}, []
    monkeypatch.setattr(plt, "show", lambda *args, **kwargs: drawn.append(plt.gcf()))
    for cell in kit.KIT.cells():
        if cell.kind == "code" and not (cell.is_visible_test or cell.is_hidden_check):
            exec(compile(kit.strip_solution_markers(cell.source), f"<{cell.grade_id}>", "exec"), namespace)
    assert namespace["RUN_EXPERIMENTS"] is False and not drawn and not plt.get_fignums()
    measured = {"profiles", "pre_post", "mlp_gradients", "training_losses", "sin_chain", "pre_post_outputs"}
    assert not measured & set(namespace), measured & set(namespace)
    assert {"block_factors", "train_characters", "CharacterModel", "LETTER_ENTROPY", "TRAINING_SETTINGS"} <= set(namespace)
    assert "lesson_figures" not in namespace and "SPREAD" not in namespace  # the files beside it are not needed
