"""A component run through its own layers by the forward itself (`self.ff.layers[2](self.ff.layers[1](...))`, an
attention written out with `self.att.W_query` and `self.att.out_proj`): each pass over its layers read as one call
of the component, so that what it received and gave can be set against Pre-LN's values like any call's.

A pass is a run of the component's layers called one after another by the forward, with no recorded call of any
component between them, ending where one of its layers is called again (the next chunk, say). What the pass
received is its first layer's input; what it gave, its last layer's output. The facts said of such a call are
about those values: "attention received norm1(x)" means the first of attention's layers the forward called
received it. Where the component was also called whole, its layers are not read as calls of it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from autograder.engine.tolerance import REPLAYED, close


@dataclass
class Pass:
    """One pass over a component's own layers, read as a call of it (the fields the walk reads of a call)."""

    index: float  # between the recorded calls it came between
    name: str
    input: np.ndarray
    output: np.ndarray
    kind: str = "layers"
    variant: None = None
    training: None = None
    via: None = None
    where: None = None
    no_grad: bool = False


def passes(layers: list, called: set) -> list[Pass]:
    """The passes of `layers` (the run's own-layer calls, in order) of components not in `called`, each placed in
    the order of the recorded calls by how many came before it."""
    found, current = [], None
    for raw in layers:
        if raw["name"] in called:
            continue
        if current is None or current["name"] != raw["name"] or raw["layer"] in current["layers"] or current["at"] != raw["at"]:
            current = {"name": raw["name"], "layers": set(), "at": raw["at"], "input": raw["input"]}
            found.append(current)
        current["layers"].add(raw["layer"])
        current["output"] = raw["output"]
    return [
        Pass(
            group["at"] - 0.5 + k * 1e-3,
            group["name"],
            np.asarray(group["input"], dtype=np.float64),
            np.asarray(group["output"], dtype=np.float64),
        )
        for k, group in enumerate(found)
    ]


def calls_with_passes(run: dict, parts: dict, tol: float) -> list:
    """A recorded run's calls, and each pass over a component's own layers that computes that very component (its
    last layer's output is what the grader's component gives for its first layer's input) as a call of it, in its
    place: the forward's program then reads as if the component had been called whole. A pass that computes something
    else (a layer left out) stays out: the walk reads it (`passes`)."""
    calls = list(run["calls"])
    for found in reversed(passes(run.get("layers") or [], {call["name"] for call in calls})):
        try:
            with torch.no_grad():
                given = parts[found.name](torch.as_tensor(found.input, dtype=torch.float32)).numpy()
        except Exception:
            continue
        if given.shape == found.output.shape and close(given, found.output, tol, REPLAYED):
            calls.insert(
                int(found.index + 0.5), {"name": found.name, "kind": "module", "input": found.input, "output": found.output}
            )
    return calls
