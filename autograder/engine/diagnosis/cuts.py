"""Gradient-only mistakes, said only as far as the grader has checked them.

A forward whose values are right can still cut a path from the autograd graph (a .detach(), .data, a
torch.no_grad() block, a trip through NumPy). Which path is a hypothesis: the grader replays the student's own
program with one value detached from some or all of the places it is used, and names the cut only when the
replay gives exactly the gradients the student's code computed.
"""

from __future__ import annotations

import itertools

import torch

from autograder.engine.reading.dataflow import Flow
from autograder.engine.reading.program import Program


def gradient_cause(flow: Flow, mode: str, parts: dict, readout: torch.Tensor, reported: tuple, close) -> str | None:
    """Which value, cut from the autograd graph, makes the grader's replay give the gradients the student's
    code reported (`reported`: (x_grad, {param: grad})); None when no single cut does."""
    if flow is None or not flow.replayable:
        return None
    program = flow.program()
    masks = flow.masks()
    uses: dict = {}
    for consumer, takes in [(op.key, op.takes) for op in program.ops] + [("y", program.out)]:
        for node in takes:
            uses.setdefault(node, []).append(consumer)
    for node, consumers in uses.items():
        for count in range(len(consumers), 0, -1):
            for cut in itertools.combinations(consumers, count):
                grads = _gradients(program, flow, parts, readout, masks, cut=tuple((node, c) for c in cut))
                if (
                    grads is not None
                    and close(reported[0], grads[0])
                    and all(close(reported[1][name], g) for name, g in grads[1].items())
                ):
                    return _cut_text(flow, node, cut, consumers)
    return None


def _cut_text(flow: Flow, node: str, cut: tuple, consumers: list) -> str:
    label = flow.describe({node: 1.0})
    where = " and ".join("what your forward returns" if c == "y" else f"the input of {_step_name(flow, c)}" for c in cut)
    scope = "" if len(cut) == len(consumers) else f" where it enters {where}"
    return (
        f"no gradient flows back through {label}{scope}: the grader's replay of your forward gives the gradients "
        "your code computed only with that path cut from the autograd graph"
    )


def _step_name(flow: Flow, key: str) -> str:
    step = next((s for s in flow.steps if s.key == key), None)
    return step.name if step is not None else key


def _gradients(program: Program, flow: Flow, parts: dict, readout, masks: dict, **cuts):
    from autograder.engine.reading.replays import param_gradients

    try:
        return param_gradients(program, flow.x, parts, readout, masks, **cuts)
    except Exception:
        return None
