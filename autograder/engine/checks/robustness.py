"""Robustness: the forward computes the same function for a batch of one with a short context, for a batch of
five, in float64 (with float64's precision), and again on a second call in eval mode with the same input tensor
(so a forward that writes into its input shows in values: the second call sees another input).

Each question comes with an input of its own, drawn by the grader, that no earlier answer contains: the
child must compute its block's output for it. The grader computes the same output itself, from the
reference when the student's eval run matches Pre-LN, otherwise by replaying the student's own program (so a
wrong but robust forward keeps these points), and each part pays only for a block that did the work
(`Evidence.work`).

What the grader cannot see in values it does not grade: which device a tensor sat on while the child ran.
A forward whose code moves tensors off their device gets a note (`device_note`), read from the code the
grader itself sent, and no point depends on it.
"""

from __future__ import annotations

import ast
import re

import numpy as np
import torch

from autograder.engine.questions.plan import Plan
from autograder.engine.questions.probes import Probing
from autograder.engine.tolerance import REPLAYED, close, tolerance
from . import Evidence, PASS, difference, error_text, fail, swept
from .measured import same_function

NAME = "forward_robustness"
SMALL, BATCH, DOUBLE, REPEAT = (
    "batch of one, short context",
    "a batch of five sequences",
    "float64 after .double()",
    "the same output on every call, input left unchanged (eval mode)",
)
INEXACT = 1000.0  # a scale of float64's tolerance: a program whose coefficients the grader knows to ~1e-8 (Flow.exact)
DEVICE_CODE = re.compile(
    r"\.cpu\(\)|\.numpy\(\)|device\s*=\s*['\"]cpu['\"]|\.to\(\s*['\"]cpu['\"]|"
    r"\b(?:torch\.)?(?:Float|Double|Long|Int)?Tensor\("
)
FACTORY = re.compile(r"\btorch\.(zeros|ones|empty|full|rand|randn|arange|linspace|eye|tensor)\(")


def _input(evidence: Evidence, which: str, dtype=torch.float32) -> np.ndarray:
    plan = Plan(**{**evidence.plan.__dict__, "device": "cpu"})
    return Probing({}, evidence.replays.kit, plan).fresh(which, dtype).numpy()


def _expected(evidence: Evidence, probe: str, which: str, dtype=torch.float32):
    """What the student's block should answer, by the grader's own computation (ValueError: it cannot tell)."""
    if evidence.matches("eval"):
        return _reference(evidence, probe)
    return evidence.replays.output(_input(evidence, which, dtype), dtype)


def _reference(evidence: Evidence, probe: str):
    reference = evidence.reference[probe]
    return reference["y_a"] if probe == "eval_seeds" else reference["y"]


def _part(evidence: Evidence, probe: str, which: str, label: str, dtype=torch.float32):
    answer = evidence.obs(probe)
    if not answer["ok"]:
        return fail(f"{label}: {error_text(answer)}.")
    try:
        expected, replayed = _expected(evidence, probe, which, dtype), not evidence.matches("eval")
    except ValueError as why:
        if not evidence.gives_reference("eval"):  # judged on the block's own output instead
            return same_function(evidence, probe, label, str(why))
        expected, replayed = _reference(evidence, probe), False  # the block computes Pre-LN's function on the grader's inputs
    got = [answer["y_a"], answer["y_b"]] if probe == "eval_seeds" else [answer["y"]]
    flow = evidence.flows.get("eval")
    double = 1 if not replayed or flow.exact else INEXACT
    scale = REPLAYED if replayed else 1
    readings = [expected]
    if dtype == torch.float64 and replayed:
        readings.append(evidence.replays.output(_input(evidence, which, dtype), dtype, float32_numbers=True))
    for index, value in enumerate(got):
        if dtype == torch.float64:
            if not any(close(value, e, tolerance(dtype="float64"), double) for e in readings):
                if np.shape(value) != np.shape(expected) or not np.all(np.isfinite(value)):
                    return fail(f"{label}: your output is not the grader's ({difference(value, expected)}).")
                error = min(float(np.linalg.norm(value - e) / max(np.linalg.norm(e), 1e-12)) for e in readings)
                return fail(
                    f"{label}: your output differs from the grader's float64 computation of your block "
                    f"(relative difference {error:.2g}, where float64 agrees to about 1e-15 and float32 "
                    "rounding gives about 1e-7): some of the computation did not run in float64."
                )
        elif not evidence.close(value, expected, scale):
            if index == 1:
                return fail(
                    f"{label}: the first call gave the grader's computation of your block, the second call on "
                    f"the same input tensor did not ({difference(value, expected)}). Does your forward write "
                    "into its input (x += ..., an in-place method)? That changes the caller's tensor."
                )
            return fail(
                f"{label}: your output differs from the grader's computation of your block for this input "
                f"({difference(value, expected)})."
            )
    return PASS


def _block_methods(sources: list) -> list[str]:
    """The source of TransformerBlock's methods other than __init__ (parsed, never run)."""
    found = []
    for code in sources:
        if "TransformerBlock" not in code:
            continue
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name == "TransformerBlock":
                found += [
                    ast.get_source_segment(code, item) or ""
                    for item in node.body
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name != "__init__"
                ]
    return found


def device_note(sources: list) -> str | None:
    """A remark (never points) for a forward whose code moves tensors off their device: read from the code the
    grader sent (TransformerBlock's methods), since the CPU grader cannot see a device in values."""
    sources = _block_methods(sources)
    found = {_shown(match.group(0)) for code in sources for match in DEVICE_CODE.finditer(code)}
    for code in sources:
        for match in FACTORY.finditer(code):
            call = _call_text(code, match.end() - 1)
            if "device" not in call and "_like" not in match.group(0):
                found.add(f"torch.{match.group(1)}(...) without device=")
    found = sorted(found)
    if not found:
        return None
    return (
        f"Your code uses {', '.join(found[:3])}: on a GPU a forward must keep every tensor on x.device (no .cpu() "
        "or .numpy() inside forward, new tensors with device=x.device). Graded on the CPU, this costs no point"
    )


def _shown(text: str) -> str:
    text = " ".join(text.split())
    return text + "...)" if text.endswith("(") else text


def _call_text(code: str, start: int) -> str:
    """The text of a call from its opening parenthesis at `start` to the matching one."""
    depth = 0
    for end in range(start, min(len(code), start + 2000)):
        depth += {"(": 1, ")": -1}.get(code[end], 0)
        if depth == 0:
            return code[start : end + 1]
    return code[start : start + 2000]


def evaluate(evidence: Evidence) -> dict:
    run = evidence.obs("eval")
    if not run["ok"]:
        message = error_text(run)
        return {part: fail(message) for part in (SMALL, BATCH, DOUBLE, REPEAT)}
    outcomes = {
        SMALL: _part(evidence, "robust_small", "small", "With a batch of one and fewer tokens than context_length"),
        BATCH: _part(evidence, "robust_batch", "batch", "With a batch of five sequences"),
        DOUBLE: _part(evidence, "robust_double", "double", "After block.double() with a float64 input", torch.float64),
        REPEAT: _part(evidence, "eval_seeds", "repeat", "Called twice in eval mode on the same new input tensor"),
    }
    if evidence.gives_reference("eval"):  # the grader's other inputs, against Pre-LN's values
        outcomes = {part: swept(evidence, part, outcome, evidence.matches("eval")) for part, outcome in outcomes.items()}
    return {part: evidence.gate(outcome) for part, outcome in outcomes.items()}
