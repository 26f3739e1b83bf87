"""Naming a recorded run: place and name every value, check every call, and join calls made piece by piece.

See `dataflow` for what the result (a `Flow`) holds, `placement` for how values are placed and named,
`normfit` for normalizations written by hand and near misses of a LayerNorm, and `grouping` for how calls on
pieces become the program's calls.
"""

from __future__ import annotations

import itertools

import numpy as np
import torch

from . import normfit
from autograder.engine.tolerance import REPLAYED, close, tolerance

from .dataflow import DROPOUTS, Call, Flow, _describe, _shape
from .grouping import join
from .placement import Nodes
from .program import Op, component


def _run_part(parts: dict, call: Call, value: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        op = Op(call.op_name, {}, "", call.variant)
        return component(op, torch.as_tensor(value, dtype=torch.float32), parts).numpy().astype(np.float64)


def _verify(call: Call, parts: dict, tol: float) -> None:
    """Is the recorded output what the grader's own component gives for the recorded input?"""
    if call.is_dropout:
        if call.output.shape != call.input.shape:
            call.verified, call.why = False, f"{call.name} changed the shape of its input"
            return
        if close(call.output, call.input, tol, REPLAYED):
            return  # nothing dropped (eval mode, or p = 0)
        kept = np.abs(call.input) > 1e-12
        ratio = np.where(kept, call.output / np.where(kept, call.input, 1.0), 1.0)
        scales = ratio[kept & (np.abs(ratio) > 1e-6)]
        scale = float(np.median(scales)) if scales.size else 0.0
        if not np.all((np.abs(ratio[kept]) < 1e-6) | (np.abs(ratio[kept] - scale) < 1e-4 * max(1.0, scale))):
            call.verified, call.why = False, f"what {call.name} returned is not its input with some values dropped"
            return
        call.mask = np.where(kept, np.where(np.abs(ratio) < 1e-6, 0.0, scale), scale)
        call.scale = scale
        return
    try:
        expected = _run_part(parts, call, call.input)
    except Exception as error:  # the component cannot take this input at all
        call.verified = False
        call.why = f"{call.name} could not have received a value of {_shape(call.input)} ({type(error).__name__})"
        return
    if close(call.output, expected, tol, REPLAYED):
        return
    if call.is_norm:  # another eps, the unbiased variance, another axis: a near miss, not a forgery
        variant = normfit.fit_call(call.name, call.input, call.output, parts, tol)
        if variant is not None:
            call.variant = variant
            return
    call.verified = False
    size = float(np.linalg.norm(expected)) or 1.0
    gap = (
        float(np.linalg.norm(np.asarray(call.output, dtype=np.float64) - expected)) / size
        if call.output.shape == expected.shape
        else float("nan")
    )
    how = f" (relative difference {gap:.2g})" if np.isfinite(gap) else ""
    call.why = (
        f"what {call.name} returned in your forward is not what {call.name} computes in float32 from the "
        f"value it received{how}: it ran with other weights or in another precision (autocast, .half(), a "
        "changed parameter)"
    )


def analyse(x: np.ndarray, run: dict, parts: dict, *, train: bool, device: str = "cpu") -> Flow:
    """Name every value of a recorded run (see the module docstring). Pure apart from running the grader's
    own components on the recorded inputs."""
    tol = tolerance(device)
    nodes = Nodes(x.shape, tol)
    nodes.add("x", x.reshape(-1).astype(np.float64), np.ones(x.size, dtype=bool))
    nodes.remember(nodes.grid)
    flow = Flow(x=x, y=run["y"], train=train, tol=tol, counts=dict(run.get("counts") or {}), layers=list(run.get("layers") or []))
    labels = {"x": "x"}
    for raw in run["calls"]:
        reversible = raw["name"] != "att"  # attention's input is never read with its tokens reversed
        place, takes = nodes.locate(raw["input"], tokens_reversed=reversible)
        if takes is None and raw["name"] not in DROPOUTS:
            place, takes = _hand_norm(flow, nodes, labels, parts, raw["input"], tol, place, tokens_reversed=reversible)
        call = Call(
            len(flow.calls),
            raw["name"],
            raw["kind"],
            raw["input"],
            raw["output"],
            place,
            takes,
            training=raw.get("training"),
            via=raw.get("via"),
            where=raw.get("where"),
            no_grad=raw.get("no_grad", False),
        )
        call.key = f"r{call.index}"
        _verify(call, parts, tol)
        label = f"{call.name}({_describe(labels, call.takes)})"
        if call.place is not None and call.output.shape == call.input.shape:
            call.alias = nodes.explain(call.output, call.place)
            if call.alias is None:
                covers = np.zeros(nodes.size, dtype=bool)
                covers[call.place.reshape(-1)] = True
                flat = np.zeros(nodes.size)
                flat[call.place.reshape(-1)] = call.output.reshape(-1)
                nodes.add(call.key, flat, covers)
                labels[call.key] = label
        flow.calls.append(call)
    flow.y_takes = nodes.explain(run["y"], nodes.grid)
    if flow.y_takes is None:
        flow.y_takes = _hand_norm(flow, nodes, labels, parts, run["y"], tol, nodes.grid, (nodes.grid,))[1]
    join(flow, nodes, labels, parts)
    return flow


def _hand_norm(
    flow: Flow, nodes: Nodes, labels: dict, parts: dict, value: np.ndarray, tol: float, place, places=None, tokens_reversed=True
) -> tuple:
    """A value normalized by hand (or a near miss of a LayerNorm), at some placement (`tokens_reversed`: see
    `Nodes.locate`): recorded as a call of its own, as if the norm had been called. Returns (placement, the sum
    naming it) or (`place`, None)."""
    value = np.asarray(value, dtype=np.float64)
    tried = (
        places
        if places is not None
        else itertools.islice(
            itertools.chain([nodes.grid] if value.shape == nodes.shape else [], nodes.candidates(value.shape, tokens_reversed)),
            24,
        )
    )
    for where in tried:
        index = where.reshape(-1)
        columns = {k: nodes.vectors[k][index].reshape(value.shape) for k in nodes.keys if nodes.covers[k][index].any()}
        found = normfit.fit_value(value, columns, parts, tol)
        if found is None:
            continue
        variant, source = found
        name = normfit.plain(variant, parts)
        call = Call(
            len(flow.calls),
            name or (variant.params or "layer_norm"),
            "manual",
            sum(c * columns[k] for k, c in source.items()),
            value,
            where,
            source,
            variant=None if name else variant,
        )
        call.key = f"r{call.index}"
        flow.calls.append(call)
        covers = np.zeros(nodes.size, dtype=bool)
        covers[index] = True
        flat = np.zeros(nodes.size)
        flat[index] = value.reshape(-1)
        nodes.add(call.key, flat, covers)
        nodes.remember(where)
        labels[call.key] = f"{call.name}({_describe(labels, source)})"
        return where, {call.key: 1.0}
    return place, None
