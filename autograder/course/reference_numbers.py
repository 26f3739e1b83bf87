"""The reference numbers of the visible tests, computed rather than typed: the four fingerprint lists that
`visible_tests.py` compares a student's block with (`EVAL_NUMBERS`, `GRAD_NUMBERS`, `TRAIN_NUMBERS`,
`DOUBLE_NUMBERS`).

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
NAMES = ("EVAL_NUMBERS", "GRAD_NUMBERS", "TRAIN_NUMBERS", "DOUBLE_NUMBERS")


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


def computed(visible_tests: ModuleType, block_class: type, cfg: dict) -> dict[str, list[float]]:
    """The four lists for `block_class`, each from the fixed example of the check that compares with it, with the
    checks' own seeds: weights from seed 1, the input from seed 2, the upstream gradient and dropout's masks from
    seed 3."""
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
        numbers = [eval_numbers, fingerprint(x.grad), train_numbers, fingerprint(double, digits=10)]
    finally:
        torch.set_num_threads(threads)
    return dict(zip(NAMES, numbers))


def written(text: str, numbers: dict[str, list[float]]) -> str:
    """`text` with each constant line `NAME = [...]` holding `numbers[NAME]`; its comment stays where it was."""
    for name, values in numbers.items():
        line = re.compile(rf"^{name} = \[[^\]\n]*\]( *)(?=#|$)", re.MULTILINE)
        found = line.findall(text)
        if len(found) != 1:
            raise ValueError(f"{VISIBLE_TESTS.name} should hold one line `{name} = [...]`, found {len(found)}")

        def new_line(match: re.Match, assignment: str = f"{name} = {values!r}") -> str:
            column = match.end(1) - match.start()  # where a comment after the list starts
            return assignment + (" " * max(2, column - len(assignment)) if match.group(1) else "")

        text = line.sub(new_line, text)
    return text


SAME = 1e-6  # relative: float32 sums on another processor's code path differ in the last digit (the checks allow 1e-4)


def agree(written: list[float], computed: list[float]) -> bool:
    """Are the numbers in the file the computed ones, to well within what the checks tolerate?"""
    scale = max(abs(v) for v in computed)
    return len(written) == len(computed) and all(abs(w - c) <= SAME * scale for w, c in zip(written, computed))


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
