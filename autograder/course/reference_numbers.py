"""The reference numbers of the visible tests, computed rather than typed: the four fingerprint lists that
`visible_tests.py` compares a student's block with (`EVAL_NUMBERS`, `GRAD_NUMBERS`, `TRAIN_NUMBERS`,
`DOUBLE_NUMBERS`), and the correct block's trace that `trace_calls` prints beside a student's (`TRACE_PARTS`, the
parts it calls in order, and `TRACE_NUMBERS`, the fingerprint of the value each receives and of what it returns).

The solution's TransformerBlock (the source notebook's code cells, solved, run in order as the grader's reference
runs them), given the notebook's `GPT_CONFIG_TINY` as the test cells give it, goes through the fixed example of
each check that compares with a list, made by the source copy of `visible_tests.py` itself (its `Blocks`,
`fingerprint` and `repeatable_dropout`). The build writes the lists into that file's constant lines before it
copies the file into the views.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

from . import kit

VISIBLE_TESTS = kit.SOURCE_NOTEBOOK.parent / "visible_tests.py"
NAMES = ("EVAL_NUMBERS", "GRAD_NUMBERS", "TRAIN_NUMBERS", "DOUBLE_NUMBERS", "TRACE_PARTS", "TRACE_NUMBERS")


def load_visible_tests(path: Path = VISIBLE_TESTS) -> ModuleType:
    """The file as a module of its own name, apart from the `visible_tests` a notebook imports."""
    spec = importlib.util.spec_from_file_location("_visible_tests_source", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reference_block(assignment: kit.Assignment = kit.KIT) -> tuple[type, dict]:
    """The solution's TransformerBlock class and the notebook's GPT_CONFIG_TINY."""
    namespace = {"__name__": "__main__"}
    for label, code in assignment.reference_code():
        exec(compile(code, f"<{label}>", "exec"), namespace)
    return namespace["TransformerBlock"], namespace["GPT_CONFIG_TINY"]


def computed(visible_tests: ModuleType, block_class: type, cfg: dict) -> dict[str, list]:
    """The lists for `block_class`, each from the fixed example of the check that compares with it, with the
    checks' own seeds: weights from seed 1, the input from seed 2, the upstream gradient and dropout's masks from
    seed 3; the trace from trace_calls' own recording of that block on that input."""
    import torch

    blocks, fingerprint = visible_tests.Blocks(block_class, cfg), visible_tests.fingerprint
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one order of summation, whatever the machine's cores
    try:
        # eval_output_matches_the_reference
        eval_numbers = fingerprint(blocks.fresh(seed=1).eval()(blocks.example_input(seed=2)))
        # input_gradient_matches_the_reference
        x = blocks.example_input(seed=2).requires_grad_(True)
        (blocks.fresh(seed=1).eval()(x.clone()) * blocks.example_input(seed=3)).sum().backward()
        # train_output_matches_the_reference
        block = blocks.fresh(seed=1, drop_rate=0.5).train()
        with visible_tests.repeatable_dropout(seed=3):
            train_numbers = fingerprint(block(blocks.example_input(seed=2)))
        # keeps_float64
        double = blocks.fresh(seed=1).double().eval()(blocks.example_input(seed=2).double())
        # trace_calls
        rows, error = visible_tests.record_calls(blocks.fresh(seed=1).eval(), blocks.example_input(seed=2))
        if error is not None or any(isinstance(value, str) for _, value in rows):
            raise ValueError(f"the reference block cannot be traced: {error or rows}")
        trace = [[part for part, _ in rows], [value[0] for _, value in rows]]
        numbers = [eval_numbers, fingerprint(x.grad), train_numbers, fingerprint(double, digits=10), *trace]
    finally:
        torch.set_num_threads(threads)
    return dict(zip(NAMES, numbers))


def _text(name: str, values: list) -> str:
    """`NAME = [...]` on one line, or a list of lists with one inner list a line."""
    if values and isinstance(values[0], list):
        return f"{name} = [" + (",\n" + " " * (len(name) + 4)).join(repr(v) for v in values) + "]"
    return f"{name} = {values!r}"


def constant(name: str) -> re.Pattern:
    """The constant `NAME = [...]` of the file (a list of lists may go on over lines that begin with spaces), and the
    spaces between it and a comment after it."""
    return re.compile(rf"^{name} = \[(?:[^\[\]\n]|\[[^\[\]\n]*\]|\n(?= ))*\]( *)(?=#|$)", re.MULTILINE)


def written(text: str, numbers: dict[str, list]) -> str:
    """`text` with each constant `NAME = [...]` holding `numbers[NAME]`; a comment after it stays where it was."""
    for name, values in numbers.items():
        line = constant(name)
        found = line.findall(text)
        if len(found) != 1:
            raise ValueError(f"{VISIBLE_TESTS.name} should hold one line `{name} = [...]`, found {len(found)}")

        def new_line(match: re.Match, assignment: str = _text(name, values)) -> str:
            column = match.end(1) - match.start()  # where a comment after the list starts
            return assignment + (" " * max(2, column - len(assignment)) if match.group(1) else "")

        text = line.sub(new_line, text)
    return text


SAME = 1e-6  # relative: float32 sums on another processor's code path differ in the last digit (the checks allow 1e-4)


def agree(written: list, computed: list) -> bool:
    """Are the numbers in the file the computed ones, to well within what the checks tolerate (each inner list of a
    list of lists on its own scale), and its names the same names?"""
    if len(written) != len(computed):
        return False
    if computed and isinstance(computed[0], list):
        return all(isinstance(w, list) and agree(w, c) for w, c in zip(written, computed))
    if any(isinstance(c, str) for c in computed):
        return list(written) == list(computed)
    scale = max(abs(v) for v in computed)
    return all(abs(w - c) <= SAME * scale for w, c in zip(written, computed))


def write_reference_numbers(path: Path = VISIBLE_TESTS, assignment: kit.Assignment = kit.KIT) -> bool:
    """Compute the lists with `path`'s own functions and write them into its constant lines (a list that agrees
    is kept as it is, so that a build on another processor changes nothing); whether it changed."""
    text, module = path.read_text(encoding="utf-8"), load_visible_tests(path)
    numbers = computed(module, *reference_block(assignment))
    kept = {name: values for name, values in numbers.items() if not agree(getattr(module, name), values)}
    new = written(text, kept)
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text
