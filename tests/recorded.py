"""A forward run by the fuzzer's oracle (`catalog/oracle.py`: its own block, weights and hooks) and read as the grader
reads a child's answer: its recorded calls, passes over a component's own layers, then the reading's names
(`reading.naming.analyse`). In milliseconds, for the engine's tests of what it reads from a run."""

from __future__ import annotations

import torch

from autograder.engine.diagnosis.own_layers import calls_with_passes
from autograder.engine.reading.naming import analyse
from autograder.engine.tolerance import tolerance
from catalog.oracle import Recorder, Run

COMPONENTS = ("norm1", "att", "norm2", "ff", "drop_shortcut")
TOL = tolerance("cpu")


def read(forward: str, mode: str = "eval", seed: int = 0):
    """The oracle's run of `forward` in `mode` (its block and input drawn from `seed`), the grader's reading of it
    (`Flow`), and its output."""
    run = Run(forward, seed)
    record = Recorder()
    with torch.no_grad():
        y = run.call(mode, record=record)
    kind = {name: "module" for name in COMPONENTS}
    answer = {
        "y": y.double().numpy(),
        "calls": [
            {"name": n, "kind": kind.get(n, "function"), "input": i.double().numpy(), "output": o.double().numpy()}
            for n, i, o in record.calls
            if i is not None
        ],
        "layers": [
            {"name": n, "layer": k, "input": i.double().numpy(), "output": o.double().numpy(), "at": at}
            for n, k, i, o, at in record.layers
        ],
    }
    parts = {name: getattr(run.block, name) for name in COMPONENTS}
    answer["calls"] = calls_with_passes(answer, parts, TOL)
    flow = analyse(run.x.double().numpy(), answer, parts, train=mode == "train")
    assert not flow.unverified, [call.why for call in flow.unverified]  # the oracle's records are the components'
    return run, flow, y


def parts_of(run) -> dict:
    """The oracle block's components, by name."""
    return {name: getattr(run.block, name) for name in COMPONENTS}
