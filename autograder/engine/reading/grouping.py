"""Joining calls made piece by piece into the program's calls.

A forward that processes the batch one sequence at a time calls each component once per sequence; one that
runs the feed-forward network token by token calls it once per token. Each such call is placed and named on
its own (`dataflow`). Here the calls of one component on the same sum, on disjoint pieces, become one call
of the program (a `dataflow.Step`): the sum is what matters, not how it was cut. Where the pieces together
cover the whole block and the grader's component on the whole sum gives what the pieces gave (the
feed-forward network and the LayerNorms act token by token, attention sequence by sequence), the step is
one whole call; otherwise it keeps its pieces, and replays call the component piece by piece as recorded
(attention cut token by token is not attention on the sequence, and says so in its values).

Joining is sound only where every later sum that uses a piece uses all the pieces it covers with the same
coefficient; a group that is not used that way stays in pieces.
"""

from __future__ import annotations

import numpy as np
import torch

from autograder.engine.tolerance import REPLAYED, close

from .dataflow import Call, Flow, Step, _describe
from .program import Op, component


def _covers(call: Call, size: int) -> np.ndarray:
    covers = np.zeros(size, dtype=bool)
    if call.place is not None:
        covers[call.place.reshape(-1)] = True
    return covers


def _signature(call: Call, takes: dict | None):
    scale = None if call.scale is None else round(call.scale, 4)
    return (
        call.name,
        None if takes is None else tuple(sorted((k, round(c, 6)) for k, c in takes.items())),
        call.variant,
        scale,
        call.mask is not None,
    )


def _propose(calls: list, solo: set, size: int) -> list[list]:
    """Groups of calls: same component, same sum (over groups), disjoint pieces."""
    groups: list[list] = []
    owner: dict = {}  # a call's output key -> its group's index
    for call in calls:
        takes = None if call.takes is None else _over_groups(call.takes, owner)
        found = None
        if call.place is not None and takes is not None and call.key not in solo:
            for index, group in enumerate(groups):
                head = group[0]
                if head.key in solo or _signature(head, head.group_takes) != _signature(call, takes):
                    continue
                if not any((_covers(c, size) & _covers(call, size)).any() for c in group):
                    found = index
                    break
        call.group_takes = takes
        if found is None:
            groups.append([call])
            found = len(groups) - 1
        else:
            groups[found].append(call)
        owner[call.key] = found
    return groups


def _over_groups(takes: dict, owner: dict) -> dict:
    out: dict = {}
    for key, c in takes.items():
        name = "x" if key == "x" else f"g{owner[key]}"
        out[name] = c  # pieces of one group in one sum carry one coefficient (see `_whole_use`)
    return out


def _whole_use(takes: dict | None, place_covers: np.ndarray, groups: list, size: int) -> list[int]:
    """Groups that a sum uses in part: some of their pieces inside its positions are missing or carry
    another coefficient."""
    if takes is None:
        return []
    bad = []
    for index, group in enumerate(groups):
        if len(group) < 2:
            continue
        inside = [c for c in group if (_covers(c, size) & place_covers).any()]
        used = [takes.get(c.key) for c in inside]
        if any(u is not None for u in used) and (None in used or len({round(u, 6) for u in used}) > 1):
            bad.append(index)
    return bad


def _groups(flow: Flow, calls: list, size: int) -> list[list]:
    solo: set = set()
    while True:
        groups = _propose(calls, solo, size)
        bad = set()
        for call in calls:
            bad |= set(_whole_use(call.takes, _covers(call, size), groups, size))
        bad |= set(_whole_use(flow.y_takes, np.ones(size, dtype=bool), groups, size))
        order = {index: min(c.index for c in group) for index, group in enumerate(groups)}
        for index, group in enumerate(groups):  # a step may only use steps that come before it
            for call in group:
                for key in call.group_takes or {}:
                    if key != "x" and order[int(key[1:])] > order[index]:
                        bad.add(index)
        bad = {i for i in bad if len(groups[i]) > 1}
        if not bad:
            return groups
        for index in bad:
            solo |= {c.key for c in groups[index]}


def join(flow: Flow, nodes, labels: dict, parts: dict) -> None:
    """Fill `flow.steps`, its node names and values, and `flow.y_takes` over steps (see the module docstring)."""
    size = flow.x.size
    calls = [c for c in flow.calls if c.alias is None]
    groups = _groups(flow, calls, size)
    names = {"x": "x"}
    flow.labels, flow.vectors, flow.covers = (
        {"x": "x"},
        {"x": flow.x.reshape(-1).astype(np.float64)},
        {"x": np.ones(size, dtype=bool)},
    )
    for index, group in enumerate(groups):
        names[f"g{index}"] = f"s{index}"
    for index, group in enumerate(groups):
        head = group[0]
        takes = None if head.group_takes is None else {names[k]: c for k, c in head.group_takes.items()}
        covers = np.zeros(size, dtype=bool)
        inputs, outputs, mask = np.zeros(size), np.zeros(size), None
        for call in group:
            if call.place is None:
                continue
            spots = call.place.reshape(-1)
            covers[spots] = True
            inputs[spots] = call.input.reshape(-1)
            if call.output.shape == call.input.shape:
                outputs[spots] = call.output.reshape(-1)
            if call.mask is not None:
                mask = np.ones(size) if mask is None else mask
                mask[spots] = call.mask.reshape(-1)
        step = Step(index, head.name, takes, f"s{index}", group, None, covers, inputs, outputs, mask, head.scale, head.variant)
        step.pieces = (
            None if _whole(step, flow.x.shape, parts, flow.tol) else tuple(c.place for c in group if c.place is not None)
        )
        flow.steps.append(step)
        if head.key in nodes.vectors:
            flow.vectors[step.key], flow.covers[step.key] = outputs, covers
            flow.labels[step.key] = f"{step.name}({_describe(flow.labels, takes)})"
    owner = {c.key: f"s{i}" for i, group in enumerate(groups) for c in group}
    if flow.y_takes is not None:
        flow.y_takes = {("x" if k == "x" else owner[k]): c for k, c in flow.y_takes.items()}


def _whole(step: Step, shape: tuple, parts: dict, tol: float) -> bool:
    """Is the step one call of its component on the whole block? (its pieces cover it, and the component on
    the whole input gives what the pieces gave)"""
    if not step.covers.all() or any(c.place is None for c in step.calls):
        return False
    if (
        len(step.calls) == 1
        and step.calls[0].place.shape == shape
        and np.array_equal(step.calls[0].place.reshape(-1), np.arange(step.covers.size))
    ):
        return True
    if step.is_dropout:
        return True
    try:
        with torch.no_grad():
            op = Op(step.op_name, {}, "", step.variant)
            whole = component(op, torch.as_tensor(step.input.reshape(shape), dtype=torch.float32), parts)
    except Exception:
        return False
    return close(whole.numpy().astype(np.float64).reshape(-1), step.output, tol, REPLAYED)
