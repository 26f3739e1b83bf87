"""The notebook's visible tests, run the way `run_tests.py` runs them, on the catalogs of wrong and equivalent
submissions: they catch the common mistakes (at least 80 % of every wrong forward we know of, and every forward
that does no work), never reject a correct block, and explain each failure by its concept, not by code."""

import contextlib
import io
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

from autograder.course import kit, reference_numbers
from autograder.course.notebook import cells_from_python
from autograder.grading.reference import reference_namespace
from autograder.engine.checks import compounding
from autograder.engine.questions.probes import ProbeFailure, float_list
from catalog import task2_variants, wrong_forwards
from catalog.build import submission
from catalog.equivalent_forwards import CONTAINER_FORWARD, CONTAINER_INIT, EQUIVALENT
from catalog.leaks import secret_lines
from catalog.unseen_wrong import UNSEEN_WRONG

sys.path.insert(0, str(kit.SOURCE_NOTEBOOK.parent))  # the test cells import the helper released beside the notebook
import visible_tests as released  # noqa: E402  (the helper file students receive)

REQUIRED_FLAG_RATE = 0.8
IDENTITY = "def forward(self, x):\n    return x\n"
FORMULA_COPY = """
import math, torch

def magnitude_by_formula(factor, n_layers):
    return [abs(factor) ** k for k in range(1, n_layers + 1)]

def magnitude_by_autograd(layer, n_layers):
    factor = layer(torch.tensor(1.0, dtype=torch.float64)).item()  # one factor, then the formula: no autograd
    return [abs(factor) ** k for k in range(1, n_layers + 1)]

def classify_factor(factor):
    return "vanishing" if abs(factor) < 1 else "exploding" if abs(factor) > 1 else "stable"
"""


def visible_tests() -> list[tuple[str, str]]:
    return [(c.grade_id, c.source) for c in kit.KIT.cells() if c.kind == "code" and (c.grade_id or "").startswith("test_")]


def run_visible(text: str) -> dict[str, str]:
    """Run a `.py` submission's cells, then every visible test cell on its own, as one run of `run_tests.py` does; the
    failures by test name."""
    released.POINTED["to_trace"] = False  # a new run: its first failing Task 1 test points to trace_calls again
    namespace = {"__name__": "__main__"}
    for cell in cells_from_python(text):
        exec(compile(cell.source, "<submission>", "exec"), namespace)
    failures = {}
    for name, source in visible_tests():
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(source, f"<{name}>", "exec"), namespace)
        except Exception as error:
            failures[name] = f"{type(error).__name__}: {error}"
    return failures


def failed_checks(failures: dict[str, str]) -> set[str]:
    """Names of the single checks that failed (each listed as "- name: message" by run_checks)."""
    return {match for message in failures.values() for match in re.findall(r"^- (\w+):", message, re.MULTILINE)}


def wrong_forwards_known() -> list[tuple[str, str]]:
    """Every wrong forward of the catalogs, read now: the grader's catalog grows while the notebook stays put."""
    return [(w.name, w.forward) for w in wrong_forwards.WRONG] + [(name, forward) for name, forward, _ in UNSEEN_WRONG]


@pytest.fixture(scope="module")
def wrong_results():
    return {name: run_visible(submission(forward=forward)) for name, forward in wrong_forwards_known()}


def test_the_solution_passes_every_visible_test():
    assert run_visible(submission()) == {}


@pytest.mark.parametrize("capability", ["default", "avx2"])
def test_the_solution_passes_on_every_code_path_of_the_processor(capability, tmp_path):
    """A laptop without AVX2 (an ARM Mac, say) takes torch's plain CPU code path, where float32 random draws and
    sums differ in their last bits: the fixed examples are drawn in float64, the same everywhere, so a correct
    block passes there too, float64 check included, and trace_calls finds every row of it the correct block's. Run
    in a process of its own, as torch picks its path once."""
    (tmp_path / "submission.py").write_text(submission())
    script = (
        "import sys; sys.path[:0] = sys.argv[1:3]\n"
        "from test_visible_tests import run_visible, traced\n"
        "print('every row agrees:', 'Every row agrees' in traced()[0])\n"
        "print(repr(run_visible(open(sys.argv[3]).read())))\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            str(kit.ROOT / "tests"),
            str(kit.ROOT / "tests" / "course"),
            str(tmp_path / "submission.py"),
        ],
        env={**os.environ, "ATEN_CPU_CAPABILITY": capability},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-2:] == ["every row agrees: True", "{}"], done.stdout[-3000:]


def test_visible_tests_flag_most_wrong_forwards(wrong_results):
    missed = sorted(name for name, failures in wrong_results.items() if not failures)
    rate = 1 - len(missed) / len(wrong_results)
    print(f"visible tests flag {rate:.0%} of {len(wrong_results)} wrong forwards; missed: {missed}")
    assert len(wrong_forwards.WRONG) >= 20 and len(UNSEEN_WRONG) >= 20
    assert rate >= REQUIRED_FLAG_RATE, f"only {rate:.0%} flagged; missed {missed}"


@pytest.mark.parametrize("name, forward", [("identity", IDENTITY), *getattr(wrong_forwards, "TRIVIAL", {}).items()])
def test_a_forward_that_does_no_work_fails(name, forward):
    assert run_visible(submission(forward=forward)), f"{name} passes every visible test"


@pytest.mark.parametrize("name", sorted(EQUIVALENT))
def test_a_correct_forward_in_any_style_passes(name):
    assert run_visible(submission(forward=EQUIVALENT[name])) == {}


def test_every_check_fails_for_some_wrong_forward_and_passes_for_the_solution(wrong_results):
    task2 = [run_visible(submission(task2=source)) for *_, source in task2_variants.WRONG]
    task2.append(run_visible(submission(task2=FORMULA_COPY)))
    tripped = failed_checks(
        {
            f"{i}{name}": message
            for i, results in enumerate([*wrong_results.values(), *task2])
            for name, message in results.items()
        }
    )
    defined = {check.__name__ for name, _ in visible_tests() for check in getattr(released, name).checks}
    assert len(defined) >= 15
    assert defined - tripped == set(), "checks no wrong submission trips (they could never fail)"


def test_task2_mistakes_fail_and_correct_answers_pass():
    for name, _, _, source in task2_variants.WRONG:
        assert "test_compounding" in run_visible(submission(task2=source)), name
    copied = run_visible(submission(task2=FORMULA_COPY))
    assert "autograd_follows_a_factor_that_changes" in copied.get("test_compounding", "")
    for name, source in task2_variants.RIGHT.items():
        assert run_visible(submission(task2=source)) == {}, name


def test_every_failing_check_is_reported_not_only_the_first(wrong_results):
    post_ln = wrong_results["post_ln"]["test_zero_branches"]
    assert "silenced_branches_give_back_the_input" in post_ln and "silenced_branches_pass_the_gradient_back" in post_ln
    assert "2 of 2 checks failed" in post_ln


def test_messages_explain_concepts_without_quoting_code(wrong_results):
    secret = secret_lines()
    messages = [m for results in wrong_results.values() for m in results.values()]
    assert len(messages) > 50
    for message in messages:
        assert "self." not in message, message
        assert not [line for line in secret if line in message], message


def test_every_test_cell_is_a_line_or_two_that_calls_the_helper():
    for name, source in visible_tests():
        code = [line for line in source.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        assert code == [f"from visible_tests import {name}", code[1]] and code[1].startswith(f"{name}("), source
    for cell in kit.KIT.cells():
        if cell.is_hidden_check:
            visible = cell.source.split("### BEGIN HIDDEN TESTS")[0]
            assert f"from visible_tests import {cell.grade_id}" in visible, cell.grade_id
            assert len([line for line in visible.splitlines() if not line.startswith("#")]) == 2, cell.grade_id


def test_the_dropout_hint_comes_only_when_the_eval_mode_output_is_right(wrong_results):
    hint = "Which values does dropout act on?"
    for name in ("post_ln", "shortcut_after_norm", "halves_swapped"):  # eval mode is wrong too
        message = " ".join(wrong_results[name].get("test_dropout", "").split())
        assert "train_output_matches_the_reference" in message and hint not in message, (name, message)
        assert "the eval-mode output differs too" in message, (name, message)
    for name in ("dropout_on_sum", "dropout_before_layer", "dropout_twice_on_attention"):  # eval mode is right
        assert hint in " ".join(wrong_results[name]["test_dropout"].split()), name
        assert (
            "test_reference_numbers" not in wrong_results[name]
            or "eval_output_matches_the_reference" not in wrong_results[name]["test_reference_numbers"]
        ), name


@pytest.mark.parametrize(
    "name, path", [("post_ln", "norm1 and then norm2"), ("shortcut_after_norm", "norm1"), ("second_shortcut_after_norm", "norm2")]
)
def test_a_layer_norm_on_the_shortcut_path_is_named(wrong_results, name, path):
    message = " ".join(wrong_results[name]["test_zero_branches"].split())
    assert (
        f"your block returned its input passed through {path}, not the input itself: a LayerNorm sits on the "
        "shortcut path" in message
    ), message


def test_the_shortcut_path_is_not_blamed_where_no_layer_norm_sits_on_it(wrong_results):
    for name, results in wrong_results.items():
        message = " ".join(results.get("test_zero_branches", "").split())
        if name not in (
            "post_ln",
            "shortcut_after_norm",
            "second_shortcut_after_norm",
            "post_ln_second_half",
            "normalized_before_and_after",
            "extra_final_norm",
        ):
            assert "a LayerNorm sits on the shortcut path (the value" not in message, (name, message)


LIST_LIKE = [
    [2.0, 4.0],
    (2, 4),
    [np.float64(2), np.float32(4)],
    np.array([2.0, 4.0]),
    np.array([[2.0], [4.0]]),
    np.array([2, 4], dtype=np.int64),
    torch.tensor([2.0, 4.0], dtype=torch.float64),
    torch.tensor([2.0, 4.0]),
    [torch.tensor(2.0), torch.tensor([4.0])],
    [np.array(2.0), np.array([4.0])],
    [],
    np.float64(2.0),
    torch.tensor(2.0),
    [True, 2.0],
    ["2.0", "4.0"],
    "2.0",
    {2.0, 4.0},
    {"a": 2.0},
    (v for v in [2.0]),
    None,
    2.0,
    [1 + 2j],
    np.array([1 + 2j]),
    torch.tensor([1 + 2j]),
    torch.tensor([True]),
    np.array([True]),
    [[2.0], [4.0]],
    [None],
    [torch.tensor([2.0, 4.0])],
    [np.array([2.0, 4.0])],
    [np.bool_(True)],
    [float("nan")],
]


@pytest.mark.parametrize("value", LIST_LIKE, ids=[f"{i}-{type(v).__name__}" for i, v in enumerate(LIST_LIKE)])
def test_the_visible_tests_and_the_grader_read_a_list_of_floats_alike(value):
    """One rule for "a list of floats": what the visible tests accept, the grader accepts, with the same numbers."""
    try:
        seen_locally = released.as_floats(value, "f()")
    except AssertionError:
        seen_locally = "refused"
    try:
        graded = float_list(value, 100)
    except ProbeFailure:
        graded = "refused"
    same = seen_locally == graded or (isinstance(graded, list) and np.array_equal(seen_locally, graded, equal_nan=True))
    assert same, (value, seen_locally, graded)


def test_a_numpy_array_from_magnitude_by_formula_passes_locally_and_in_grading(grade_here):
    """NumPy arrays are lists of floats for both (they once passed here and lost a point in grading)."""
    task2 = task2_variants.RIGHT["numpy_arrays_and_local_factors"]
    assert "test_compounding" not in run_visible(submission(task2=task2))
    result = grade_here(submission(task2=task2))
    assert next(c for c in result.checks if c.check == "compounding").passed


def test_the_visible_tests_and_the_grader_ask_the_same_exactness():
    assert released.EXACT == compounding.EXACT


def test_the_reference_numbers_are_the_reference_solution_s_on_the_checks_examples():
    """The fingerprint lists and the correct block's trace are what the build's step computes now, with the grader's
    own reference block too, and writing them leaves the source file as it is."""
    source = reference_numbers.load_visible_tests()
    numbers = reference_numbers.computed(source, *reference_numbers.reference_block())
    in_the_file = {name: getattr(released, name) for name in reference_numbers.NAMES}
    stale = [name for name in numbers if not reference_numbers.agree(in_the_file[name], numbers[name])]
    assert not stale, f"the reference numbers are stale: run `python -m autograder build` ({stale})"
    ref = reference_namespace()
    assert reference_numbers.computed(source, ref["TransformerBlock"], ref["GPT_CONFIG_TINY"]) == numbers
    text = reference_numbers.VISIBLE_TESTS.read_text(encoding="utf-8")
    assert reference_numbers.written(text, in_the_file) == text
    assert not reference_numbers.agree([v * (1 + 1e-5) for v in numbers["EVAL_NUMBERS"]], numbers["EVAL_NUMBERS"])
    nudged = [row[:2] + [row[2] * (1 + 1e-5)] for row in numbers["TRACE_NUMBERS"]]
    assert not reference_numbers.agree(nudged, numbers["TRACE_NUMBERS"])
    assert not reference_numbers.agree(numbers["TRACE_PARTS"][::-1], numbers["TRACE_PARTS"])


def test_the_build_s_step_rewrites_reference_numbers_that_were_changed(tmp_path):
    text = reference_numbers.VISIBLE_TESTS.read_text(encoding="utf-8")

    def other_digits(match: re.Match) -> str:  # every digit one up: other numbers (and names), the same line widths
        return match.group().translate(str.maketrans("0123456789", "1234567890"))

    changed = text
    for name in reference_numbers.NAMES:
        changed, count = reference_numbers.constant(name).subn(other_digits, changed)
        assert count == 1, name
    assert changed != text
    copy = tmp_path / "visible_tests.py"
    copy.write_text(changed, encoding="utf-8")
    assert reference_numbers.write_reference_numbers(copy)
    # the numbers back (this processor's: float32 sums differ in the last digit between code paths), each comment
    # where it was, and nothing else changed
    restored, committed = reference_numbers.load_visible_tests(copy), reference_numbers.load_visible_tests()
    for name in reference_numbers.NAMES:
        assert reference_numbers.agree(getattr(restored, name), getattr(committed, name)), name

    def lists_out(source: str) -> str:
        for name in reference_numbers.NAMES:
            source = reference_numbers.constant(name).sub(f"{name} = [...]  ", source)
        return source

    rewritten = copy.read_text(encoding="utf-8")
    assert lists_out(rewritten) == lists_out(text)
    assert [line.index("#") for line in rewritten.splitlines() if "_NUMBERS = [" in line and "#" in line] == [
        line.index("#") for line in text.splitlines() if "_NUMBERS = [" in line and "#" in line
    ]
    assert not reference_numbers.write_reference_numbers(copy)


def test_while_nbgrader_validates_the_graded_cells_run_every_visible_check(monkeypatch):
    """Validate reports only the graded cells: they hold every check of the test cells, which then stand aside."""
    tests = [
        released.test_block_shape,
        released.test_zero_branches,
        released.test_input_unchanged,
        released.test_norm_placement,
        released.test_dropout,
        released.test_reference_numbers,
        released.test_compounding,
    ]
    graded = [getattr(released, c.grade_id) for c in kit.KIT.cells() if c.is_hidden_check]
    assert {check for test in tests for check in test.checks} == {check for cell in graded for check in cell.checks}

    class Broken(torch.nn.Module):
        def __init__(self, cfg):
            super().__init__()

        def forward(self, x):
            raise AssertionError("ran")

    monkeypatch.setenv("NBGRADER_EXECUTION", "validate")
    assert released.test_block_shape(Broken, {}) is None  # left to the graded cells
    with pytest.raises(AssertionError):
        released.check_forward_order(Broken, {})
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    with pytest.raises(AssertionError):
        released.test_block_shape(Broken, {})


# --- messages that never mislead, each tested both ways over the catalogs --------------------------------------


def _said(results: dict) -> str:
    return " ".join(" ".join(results.values()).split())


def test_the_autograd_hint_comes_only_when_the_output_is_right(wrong_results):
    hint = "while the output is right: part of the computation is hidden from autograd"
    hinted = {name for name, results in wrong_results.items() if hint in _said(results)}
    eval_right = {
        name for name, results in wrong_results.items() if "eval_output_matches_the_reference" not in failed_checks(results)
    }
    assert hinted and hinted <= eval_right, hinted - eval_right
    for name in ("detached_shortcut", "detached_branch", "no_grad_branch"):
        assert hint in _said(wrong_results[name]), (name, wrong_results[name])
    for name in ("post_ln", "missing_first_shortcut", "missing_second_shortcut"):
        said = _said(wrong_results[name])
        assert "hidden from autograd" not in said and (
            "input_gradient_matches_the_reference" not in said or "the eval-mode output differs too" in said
        ), (name, said)


def test_every_fingerprint_says_what_its_three_numbers_are(wrong_results):
    compared = [m for results in wrong_results.values() for m in re.findall(r"\(expected[^)]*\)?[^;]*", _said(results))]
    assert compared and all(m.startswith("(expected (sum, norm, dot product with a fixed random tensor) [") for m in compared), (
        compared[:3]
    )


def test_a_missing_second_shortcut_is_said_to_return_the_feed_forward_half_alone(wrong_results):
    phrase = "your block returned the feed-forward half's output alone"
    said = {name for name, results in wrong_results.items() if phrase in _said(results)}
    assert "missing_second_shortcut" in said
    for name in said:  # every forward it is said of returns ff(norm2(h)) in eval mode: checked on its values
        namespace = {"__name__": "__main__"}
        source = next(f for n, f in wrong_forwards_known() if n == name)
        for cell in cells_from_python(submission(forward=source)):
            exec(compile(cell.source, "<submission>", "exec"), namespace)
        blocks = released.Blocks(namespace["TransformerBlock"], namespace["GPT_CONFIG_TINY"])
        block, x = blocks.fresh(seed=1).eval(), blocks.example_input(seed=2)
        with torch.no_grad():
            h = x + block.att(block.norm1(x))
            assert torch.allclose(block(x), block.ff(block.norm2(h)), atol=1e-4), name


def test_the_first_failing_task_1_test_of_a_run_points_to_trace_calls_and_no_other(wrong_results):
    """Said once per run (the footer of every failing test once made a Post-LN block's run repeat it four times),
    by the first Task 1 test that fails, in the order the notebook runs them; never by Task 2's test."""
    order = [name for name, _ in visible_tests()]
    for name, results in wrong_results.items():
        failing = sorted((test for test in results if test != "test_compounding"), key=order.index)
        pointing = [test for test, message in results.items() if released.LOOK in " ".join(message.split())]
        assert pointing == failing[:1], (name, pointing, failing)
        assert " ".join(results[failing[0]].split()).endswith(released.LOOK), (name, results[failing[0]][-200:])
    task2 = run_visible(submission(task2=task2_variants.WRONG[0][-1]))
    assert "test_compounding" in task2 and "trace_calls" not in task2["test_compounding"]
    assert "trace_calls(TransformerBlock, GPT_CONFIG_TINY)" in released.LOOK and "Finding the first wrong step" in released.LOOK
    assert "Finding the first wrong step" in next(c.source for c in kit.KIT.cells() if c.grade_id == "debugging")


def test_one_run_of_run_tests_points_to_trace_calls_once(tmp_path):
    """A Post-LN block fails four Task 1 tests in one run of `run_tests.py`: the pointer comes once, after the first."""
    for helper in ("run_tests.py", "visible_tests.py"):
        shutil.copy(kit.TEMPLATE_DIR / helper, tmp_path / helper)
    shutil.copy(kit.COURSE_DIR / "sample_class" / "ben_post_ln" / kit.KIT.name / kit.KIT.notebook_name, tmp_path)
    done = subprocess.run([sys.executable, "run_tests.py"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    failed = done.stdout.split("  FAIL  ")[1:]  # one chunk per failing test, in the order they ran
    assert len(failed) >= 4 and released.LOOK in " ".join(failed[0].split()), done.stdout[-3000:]
    assert not any("trace_calls" in chunk for chunk in failed[1:]), done.stdout[-3000:]


def test_a_failing_check_shows_in_jupyter_as_its_message_alone():
    """Jupyter, and so nbgrader's Validate, prints an exception's `_render_traceback_` instead of a traceback."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.user_ns["released"] = released
    released.POINTED["to_trace"] = False
    cell = "released.run_checks([lambda s: (_ for _ in ()).throw(AssertionError('off'))], None, point_to_trace=True)"
    shown = []
    for _ in range(2):  # the same kernel: the second failure no longer points to trace_calls
        with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()) as err:
            shell.run_cell(cell)
        shown.append(out.getvalue() + err.getvalue())
    for text in shown:
        assert "ChecksFailed: 1 of 1 checks failed" in text and "Traceback" not in text and "run_cell" not in text, text
        assert text.strip().splitlines()[:2] == ["ChecksFailed: 1 of 1 checks failed:", "- <lambda>: off"], text
    assert " ".join(" ".join(shown[0].strip().splitlines()[2:]).split()) == released.LOOK, shown[0]
    assert len(shown[1].strip().splitlines()) == 2, shown[1]


# --- trace_calls: a correct block's rows beside the student's, tested both ways over the catalogs ------------------


def traced(forward: str | None = None, init: str | None = None) -> tuple[str, dict]:
    """What the notebook's trace_calls prints for a submission with `forward` (None: the solution), and the
    submission's namespace."""
    namespace = {"__name__": "__main__"}
    for cell in cells_from_python(submission(forward=forward, init=init)):
        exec(compile(cell.source, "<submission>", "exec"), namespace)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        namespace["trace_calls"](namespace["TransformerBlock"], namespace["GPT_CONFIG_TINY"])
    return out.getvalue(), namespace


def example(namespace: dict, block_class=None):
    """The fixed example trace_calls runs, built here on its own: a block of `block_class` with the weights of the
    visible tests' seed 1, and their input of seed 2."""
    blocks = released.Blocks(block_class or namespace["TransformerBlock"], namespace["GPT_CONFIG_TINY"])
    return blocks.fresh(seed=1).eval(), blocks.example_input(seed=2)


def eval_output_is_pre_ln(namespace: dict) -> bool:
    """The oracle: does the block return, on trace_calls' example, what the grader's reference block returns with the
    same weights? (A forward that raises or returns no tensor does not.)"""
    reference = reference_namespace()["TransformerBlock"]
    with torch.no_grad():
        expected = example(namespace, reference)[0](example(namespace)[1])
        block, x = example(namespace)
        try:
            got = block(x.clone())
        except Exception:
            return False
    return isinstance(got, torch.Tensor) and got.shape == expected.shape and (got - expected).abs().max() < 1e-4


def marked(text: str) -> list[tuple[int, int | None, str]]:
    """(row, the correct block's step on that row, the mark) of every marked row of a trace."""
    return [
        (int(row), int(step) if step else None, mark)
        for row, step, mark in re.findall(r"^ *(\d+) +(\d+)?  .*<- (first difference|differs)$", text, re.MULTILINE)
    ]


def test_the_trace_of_a_correct_block_agrees_on_every_row():
    text, _ = traced()
    assert not marked(text) and "Every row agrees" in text, text
    rows = re.findall(r"^ *\d+ +(\d+)  (\w+) .*    (\w+) ", text, re.MULTILINE)
    assert [(int(step), left) for step, left, _ in rows] == list(zip(released.TRACE_STEPS, released.TRACE_PARTS))
    assert [right for *_, right in rows] == released.TRACE_PARTS


def test_the_trace_s_rows_are_the_ten_steps_that_call_a_part():
    """Each row of the correct block's column is a step of the grader's table that calls a part, in its order, and
    then what the block returns (step 10)."""
    from autograder.engine.steps import STEPS

    calls = [(step.number, step.component) for step in STEPS if step.component]
    assert list(zip(released.TRACE_STEPS, released.TRACE_PARTS)) == calls + [(10, released.RETURNED)]


@pytest.mark.parametrize("name, forward", wrong_forwards_known())
def test_the_trace_marks_the_first_difference_of_every_wrong_forward_that_returns_other_values(name, forward):
    """Tested both ways: where the eval-mode output differs from Pre-LN's (the oracle), the trace marks one row as the
    first difference, never before the step where the grader says the forward first goes wrong; where the output
    is right (a mistake of gradients, of training mode or of float64), it claims no mistake."""
    text, namespace = traced(forward)
    marks = marked(text)
    if eval_output_is_pre_ln(namespace):
        assert all(mark == "differs" for *_, mark in marks) and "is the first that differs" not in text, text
        return
    assert [mark for *_, mark in marks] == ["first difference"] and "is the first that differs" in text, text
    step = next((w.step for w in wrong_forwards.WRONG if w.name == name), None)
    row, row_step, _ = marks[0]
    assert step is None or row_step is None or row_step >= step, (name, step, text)


@pytest.mark.parametrize("name", sorted(EQUIVALENT))
def test_the_trace_never_calls_a_correct_forward_wrong(name):
    text, namespace = traced(EQUIVALENT[name])
    assert eval_output_is_pre_ln(namespace), name
    assert all(mark == "differs" for *_, mark in marked(text)) and "is the first that differs" not in text, text


def test_the_trace_of_blocks_kept_in_containers_agrees():
    text, _ = traced(CONTAINER_FORWARD, init=CONTAINER_INIT)
    assert not marked(text) and "Every row agrees" in text, text


def test_a_shortcut_saved_after_norm1_is_shown_where_its_value_first_differs_with_both_values():
    """The first three parts receive what they should; norm2 receives norm1(x) + att(norm1(x)) where Pre-LN hands
    it x + att(norm1(x)). The row and the sentence under the trace give both, as computed here by hand."""
    forward = next(w.forward for w in wrong_forwards.WRONG if w.name == "shortcut_after_norm")
    text, namespace = traced(forward)
    block, x = example(namespace)
    with torch.no_grad():
        branch = block.drop_shortcut(block.att(block.norm1(x)))
        right, wrong = x + branch, block.norm1(x) + branch
    said = [(f"{v.mean().item():+.3f}", f"{v.std(unbiased=False).item():.3f}") for v in (right, wrong)]
    assert marked(text) == [(4, 7, "first difference")], text
    row = next(line for line in text.splitlines() if line.endswith("<- first difference"))
    assert re.findall(r"([+-]\d\.\d{3}) +(\d\.\d{3})", row) == said and row.count("norm2") == 2, row
    sentence = " ".join(text.split())
    assert (
        f"Rows 1 to 3 agree. Row 4 is the first that differs: the value your block handed to norm2 has mean "
        f"{said[1][0]} and standard deviation {said[1][1]}, where a correct block's has mean {said[0][0]} and "
        f"standard deviation {said[0][1]}"
    ) in sentence, sentence


def test_a_value_that_moves_in_the_fifth_digit_is_shown_with_the_digits_that_differ():
    forward = next(w.forward for w in wrong_forwards.WRONG if w.name == "second_shortcut_scaled_slightly")
    text, _ = traced(forward)
    row = next(line for line in text.splitlines() if line.endswith("<- first difference"))
    means, stds = zip(*re.findall(r"([+-]\d\.\d+) +(\d\.\d+)", row))
    assert row.split()[2] == released.RETURNED and stds[0] != stds[1] and len(stds[0]) > 5, row


def test_an_unfinished_block_sees_the_correct_trace_and_a_crashing_one_sees_where_it_stopped():
    todo = 'def forward(self, x):\n    raise NotImplementedError("Task 1: write TransformerBlock.forward")\n'
    text, _ = traced(todo)
    assert not marked(text) and "Your forward raised NotImplementedError: Task 1" in text, text
    assert all(part in text for part in released.TRACE_PARTS) and text.count("(raised an error)") == 1
    crash = "def forward(self, x):\n    h = self.att(self.norm1(x))\n    return h @ h\n"
    text, _ = traced(crash)
    assert "Your forward raised RuntimeError" in text and "(after row 2)" in " ".join(text.split()), text
    assert marked(text) == [(3, 4, "first difference")], text


def test_the_trace_names_no_line_of_the_solution():
    secret = secret_lines()
    outputs = [traced(forward)[0] for _, forward in wrong_forwards_known()[:12]] + [traced()[0]]
    for text in outputs:
        assert "self." not in text and not [line for line in secret if line in text], text
    source = (kit.SOURCE_NOTEBOOK.parent / "visible_tests.py").read_text(encoding="utf-8")
    assert not [line for line in secret if line in source]
