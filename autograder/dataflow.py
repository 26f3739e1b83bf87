"""What a forward computed, in the grader's own terms: every value it handed a component, and the value it
returned, named as a sum of earlier values.

A recorded run (probe `eval` or `train`) lists each component call with its input and output. With generic
random weights every output a component produces is linearly independent of the values before it, so a
value the student's code built from earlier ones by additions and scalings decomposes uniquely over them
(least squares over the basis: the block input x and every earlier call's output). That gives a `Flow`:
a small program of calls and sums that the parent

* checks call by call against its own copy of the components (a claim it cannot reproduce is not believed);
* reads structure from (which value each half started from, what was added to what, where dropout sat);
* replays with its own components and other weights, to get the gradients and the deep-stack profile the
  student's code must agree with.

Values are compared, not code, so any style of writing the same forward gives the same `Flow`.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import torch
import torch.nn.functional as F

NORMS = ("norm1", "norm2", "layer_norm")
DROPOUTS = ("drop_shortcut", "dropout")
H_NAME = "h"
H_LEGEND = "h = x + drop_shortcut(att(norm1(x))), the first half's result"


def standardized(values, scale=None, shift=None) -> bool:
    """Is every row mean 0 / variance 1, after undoing a LayerNorm's scale and shift? (a normalized value)"""
    v = np.asarray(values, dtype=np.float64)
    if scale is not None:
        v = (v - shift) / scale
    return bool(np.all(np.abs(v.mean(-1)) < 1e-3) and np.all(np.abs(v.var(-1) - 1) < 2e-2))


def tolerance(device: str) -> float:
    """Relative size of a residual that still counts as 'this value is that sum' (float32 values)."""
    return 1e-5 if device == "cpu" else 2e-4


def _tidy(c: float) -> float:
    nice = Fraction(c).limit_denominator(8)
    return float(nice) if abs(float(nice) - c) <= 2e-6 * max(1.0, abs(c)) else float(c)


def coefficient_text(c: float) -> str:
    """Enough digits to show how a coefficient differs from 1 (1.0001 stays 1.0001)."""
    return f"{c:.6g}"


@dataclass
class Step:
    """One recorded call of a component."""
    index: int
    name: str                 # norm1, norm2, att, ff, drop_shortcut, dropout, layer_norm
    kind: str                 # "module" or "function"
    input: np.ndarray         # as recorded (its own shape)
    output: np.ndarray
    takes: dict | None        # the input as a sum of earlier values; None when it is not one
    key: str                  # the name of its output in sums
    verified: bool            # the output is what the grader's component gives for this input
    why: str = ""             # when not verified: what was wrong
    mask: np.ndarray | None = None      # dropouts that dropped: output / input (1 where nothing dropped)
    training: bool | None = None
    via: str | None = None
    where: str | None = None
    no_grad: bool = False      # the call ran with autograd switched off

    @property
    def is_norm(self) -> bool:
        return self.name in NORMS

    @property
    def is_dropout(self) -> bool:
        return self.name in DROPOUTS

    @property
    def drops(self) -> bool:
        """A dropout that changed its input (train mode, or a dropout left on in eval mode)."""
        return self.is_dropout and self.mask is not None


@dataclass
class Flow:
    """A recorded run, named. `steps` in call order; `y_takes` the returned value as a sum (or None)."""
    x: np.ndarray
    y: np.ndarray
    steps: list[Step]
    y_takes: dict | None
    train: bool
    tol: float
    labels: dict = field(default_factory=dict)       # node key -> readable expression
    vectors: dict = field(default_factory=dict)      # node key -> flat float64 value
    aliases: dict = field(default_factory=dict)      # node key -> the sum it equals (a dropout that kept all)

    # --- reading ------------------------------------------------------------------------------------
    def value(self, combination: dict) -> np.ndarray:
        total = np.zeros(self.x.size)
        for key, c in combination.items():
            total = total + c * self.vectors[key]
        return total

    def describe(self, combination: dict | None) -> str:
        if combination is None:
            return "a value that is not a sum of the block's earlier values"
        terms = dict(combination)
        if not terms:
            return "zero"
        return " + ".join(_term(self.labels[k], c) for k, c in terms.items()).replace("+ -", "- ")

    def calls(self, *names: str) -> list[Step]:
        return [s for s in self.steps if s.name in names]

    def first(self, *names: str) -> Step | None:
        found = self.calls(*names)
        return found[0] if found else None

    def producer(self, key: str) -> Step | None:
        return next((s for s in self.steps if s.key == key), None)

    @property
    def unverified(self) -> list[Step]:
        return [s for s in self.steps if not s.verified]

    def influences(self, key: str, minimum: float = 0.05) -> bool:
        """Does the returned value depend on node `key` (through sums and later calls)?"""
        if self.y_takes is None:
            return False
        seen, todo = set(), [c for c in self.y_takes.items()]
        while todo:
            node, c = todo.pop()
            if abs(c) < minimum or node in seen:
                continue
            if node == key:
                return True
            seen.add(node)
            step = self.producer(node)
            if step is not None and step.takes is not None:
                todo += [(k, 1.0 if abs(v) >= minimum else 0.0) for k, v in step.takes.items()]
            elif node in self.aliases:
                todo += list(self.aliases[node].items())
        return False

    @property
    def replayable(self) -> bool:
        return self.y_takes is not None and all(s.verified and s.takes is not None for s in self.steps)

    def signature(self) -> tuple:
        """The program this flow is, without its values: the calls (a dropout that kept everything left out)
        and what each took, over canonical names. Equal signatures replay to equal results."""
        canonical, steps = {"x": "x"}, []

        def expand(combination: dict) -> tuple:
            total: dict = {}
            for key, c in combination.items():
                parts = expand_key(key)
                for name, weight in parts:
                    total[name] = total.get(name, 0.0) + c * weight
            return tuple(sorted((name, round(c, 9)) for name, c in total.items() if abs(c) > 1e-9))

        def expand_key(key: str) -> tuple:
            if key in self.aliases:
                return expand(self.aliases[key])
            return ((canonical[key], 1.0),)

        for step in self.steps:
            if step.is_dropout and step.mask is None:
                continue                       # identity: already named by its input (see `_alias_key`)
            name = "drop" if step.is_dropout else step.name
            steps.append((name, expand(step.takes) if step.takes is not None else None, tuple(step.input.shape)))
            canonical[step.key] = f"c{len(steps)}"
        return tuple(steps), expand(self.y_takes) if self.y_takes is not None else None

    def why_not_replayable(self) -> str:
        for step in self.steps:
            if not step.verified:
                return step.why
            if step.takes is None:
                return f"the value handed to {step.name} ({_shape(step.input)}) is not a sum of the block's earlier values"
        if self.y_takes is None:
            return "the value your forward returned is not a sum of the block's earlier values"
        return ""


def _term(label: str, c: float) -> str:
    if c == 1:
        return label
    if c == -1:
        return "-" + label
    return f"{coefficient_text(c)}*{label}"


def _shape(value: np.ndarray) -> str:
    return "shape " + str(tuple(value.shape))


class _Basis:
    def __init__(self, tol: float):
        self.keys: list[str] = []
        self.vectors: list[np.ndarray] = []
        self.tol = tol

    def explain(self, value: np.ndarray, size: int) -> dict | None:
        v = np.asarray(value, dtype=np.float64).reshape(-1)
        if v.size != size or not np.all(np.isfinite(v)):
            return None
        scale = max(float(np.linalg.norm(v)), 1.0)
        if not self.vectors:
            return {} if np.linalg.norm(v) <= self.tol * scale else None
        matrix = np.stack(self.vectors, axis=1)
        coefficients, *_ = np.linalg.lstsq(matrix, v, rcond=None)
        if np.linalg.norm(matrix @ coefficients - v) > self.tol * scale:
            return None
        return {key: _tidy(float(c)) for key, c in zip(self.keys, coefficients) if abs(c) > 1e-6}

    def add(self, key: str, value: np.ndarray) -> None:
        self.keys.append(key)
        self.vectors.append(np.asarray(value, dtype=np.float64).reshape(-1))


def _run_part(parts: dict, name: str, value: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return _apply(parts, name, torch.as_tensor(value, dtype=torch.float32)).numpy().astype(np.float64)


def arrays_close(a, b, rtol: float, atol: float) -> bool:
    """Same shape, finite, and equal within the tolerances."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and bool(np.all(np.isfinite(a))) and bool(np.allclose(a, b, rtol=rtol, atol=atol))


def _close(a: np.ndarray, b: np.ndarray, tol: float) -> bool:
    return arrays_close(a, b, 10 * tol, 10 * tol)


def _verify(step: Step, parts: dict, tol: float) -> None:
    """Is the recorded output what the grader's own component gives for the recorded input?"""
    if step.is_dropout:
        if step.output.shape != step.input.shape:
            step.verified, step.why = False, f"{step.name} changed the shape of its input"
            return
        if _close(step.output, step.input, tol):
            return                                  # nothing dropped (eval mode, or p = 0)
        kept = np.abs(step.input) > 1e-12
        ratio = np.where(kept, step.output / np.where(kept, step.input, 1.0), 1.0)
        scales = ratio[kept & (np.abs(ratio) > 1e-6)]
        dropped_or_scaled = np.all((np.abs(ratio[kept]) < 1e-6) | (np.abs(ratio[kept] - (scales[0] if scales.size else 1)) < 1e-4))
        if not dropped_or_scaled:
            step.verified, step.why = False, f"what {step.name} returned is not its input with some values dropped"
            return
        step.mask = np.where(kept, ratio, scales[0] if scales.size else 1.0)
        return
    try:
        expected = _run_part(parts, step.name, step.input)
    except Exception as error:   # the component cannot take this input at all
        step.verified, step.why = False, f"{step.name} could not have received a value of {_shape(step.input)} ({type(error).__name__})"
        return
    if not _close(step.output, expected, tol):
        step.verified = False
        step.why = (f"the values recorded for {step.name} are not what {step.name} computes from its input (did your "
                    "forward change the component's weights?)")


def norm_of(parts: dict, name: str, value: np.ndarray, shape) -> np.ndarray | None:
    """The grader's `name` norm of a flat value taken in `shape`, flat again (None: it cannot take it)."""
    try:
        return _run_part(parts, name, value.reshape(shape)).reshape(-1)
    except Exception:
        return None


def analyse(x: np.ndarray, run: dict, parts: dict, *, train: bool, device: str = "cpu") -> Flow:
    """Name every value of a recorded run (see the module docstring). Pure apart from running the grader's
    own components on the recorded inputs."""
    tol = tolerance(device)
    size = x.size
    basis = _Basis(tol)
    flow = Flow(x=x, y=run["y"], steps=[], y_takes=None, train=train, tol=tol)
    basis.add("x", x)
    flow.labels["x"], flow.vectors["x"] = "x", x.reshape(-1).astype(np.float64)
    for call in run["calls"]:
        takes = basis.explain(call["input"], size)
        if takes is None and call["input"].size == size:
            takes = _manual_norm(flow, basis, parts, call["input"], x.shape, tol)
        index = len(flow.steps)
        step = Step(index, call["name"], call["kind"], call["input"], call["output"], takes, f"s{index}", True,
                    training=call.get("training"), via=call.get("via"), where=call.get("where"),
                    no_grad=call.get("no_grad", False))
        _verify(step, parts, tol)
        inner = flow.describe(step.takes) if step.takes is not None else "..."
        label = f"{step.name}({inner})"
        alias = basis.explain(call["output"], size) if call["output"].size == size else None
        if alias is not None and step.is_dropout:      # an identity dropout: its output is its input
            step.key = _alias_key(flow, alias, label)
        elif call["output"].size == size:
            basis.add(step.key, call["output"])
            flow.labels[step.key], flow.vectors[step.key] = label, call["output"].reshape(-1).astype(np.float64)
        flow.steps.append(step)
    flow.y_takes = basis.explain(run["y"], size)
    return flow


def _alias_key(flow: Flow, alias: dict, label: str) -> str:
    """A dropout that dropped nothing is named by its input: sums then show the branch it passed through."""
    if len(alias) == 1 and next(iter(alias.values())) == 1.0:
        return next(iter(alias))
    key = f"a{len(flow.labels)}"
    flow.labels[key] = label
    flow.vectors[key] = flow.value(alias)
    flow.aliases[key] = alias
    return key


def _manual_norm(flow: Flow, basis: _Basis, parts: dict, value: np.ndarray, shape, tol: float) -> dict | None:
    """A value normalized by hand (mean and variance written out): find which earlier sum, and which norm's
    scale and shift, give it. Candidates: x plus any set of earlier outputs, each with coefficient 1."""
    outputs = [k for k in flow.vectors if k != "x"][-6:]
    target = value.reshape(-1)
    for count in range(len(outputs) + 1):
        for chosen in itertools.combinations(outputs, count):
            combination = {"x": 1.0, **{k: 1.0 for k in chosen}}
            source = flow.value(combination)
            for name in ("norm1", "norm2", "layer_norm"):
                normalized = norm_of(parts, name, source, shape)
                if normalized is not None and np.linalg.norm(normalized - target) <= 10 * tol * max(np.linalg.norm(target), 1.0):
                    index = len(flow.steps)      # recorded as a step of its own, as if the norm had been called
                    step = Step(index, name, "manual", source.reshape(shape), value, combination, f"s{index}", True)
                    flow.steps.append(step)
                    flow.labels[step.key] = f"{name}({flow.describe(combination)})"
                    flow.vectors[step.key] = target.astype(np.float64)
                    basis.add(step.key, target)
                    return {step.key: 1.0}
    return None


# --- replaying a flow with the grader's own components ------------------------------------------------

def replay(flow: Flow, x: torch.Tensor, parts: dict) -> torch.Tensor:
    """The student's forward as the grader understood it, recomputed with `parts` on `x` (differentiable).

    Dropouts that dropped are applied with the recorded mask, so replay on other weights is only meaningful
    for a flow without them (eval mode); the caller checks that."""
    if not flow.replayable:
        raise ValueError(flow.why_not_replayable())
    nodes = {"x": x.reshape(-1)}

    def combine(combination: dict) -> torch.Tensor:
        total = torch.zeros_like(nodes["x"])
        for key, c in combination.items():
            total = total + c * node(key)
        return total

    def node(key: str) -> torch.Tensor:
        if key not in nodes and key in flow.aliases:
            nodes[key] = combine(flow.aliases[key])
        return nodes[key]

    for step in flow.steps:
        value = combine(step.takes).reshape(step.input.shape)
        if step.is_dropout:
            out = value * torch.as_tensor(step.mask, dtype=value.dtype) if step.mask is not None else value
        else:
            out = _apply(parts, step.name, value)
        if step.key.startswith("s"):
            nodes[step.key] = out.reshape(-1)
    return combine(flow.y_takes).reshape(x.shape)


def _apply(parts: dict, name: str, value: torch.Tensor) -> torch.Tensor:
    if name == "layer_norm":
        return F.layer_norm(value, value.shape[-1:])
    return parts[name](value)


class ReplayedBlock(torch.nn.Module):
    """A block whose forward is a student's flow, on the five components it is given (for deep stacks)."""

    def __init__(self, flow: Flow, parts: dict):
        super().__init__()
        self.flow = flow
        self.parts = torch.nn.ModuleDict(parts)

    def forward(self, x):
        return replay(self.flow, x, dict(self.parts))


# --- the two halves ---------------------------------------------------------------------------------

@dataclass
class Half:
    """One branch of the block (attention or feed-forward) and the values around it, as the student wrote it."""
    branch: Step
    norm: Step | None            # the norm-like call whose output the branch received, if any
    start: dict | None           # the value the half started from (what was normalized, or the branch input)
    drops: list[Step]            # dropouts applied to the branch's output, in order (each on the previous)
    added_to: dict | None        # what the branch's final value was added to (None: never added)
    coefficient: float           # the branch's coefficient in that sum
    added_in: str | None         # where the sum went: a step's key ("s4") or "y"
    raw_used: bool               # the branch's output was added without its dropout

    @property
    def out_key(self) -> str:
        return self.drops[-1].key if self.drops else self.branch.key

    @property
    def result(self) -> dict | None:
        """The half's result: the sum its branch went into (None when the branch was never used)."""
        if self.added_to is None:
            return None
        return {**self.added_to, self.out_key: self.added_to.get(self.out_key, 0.0) + self.coefficient}


def half(flow: Flow, name: str) -> Half | None:
    branch = flow.first(name)
    if branch is None:
        return None
    norm = None
    if branch.takes is not None and len(branch.takes) == 1 and next(iter(branch.takes.values())) == 1.0:
        producer = flow.producer(next(iter(branch.takes)))
        if producer is not None and producer.is_norm:
            norm = producer
    start = norm.takes if norm is not None else branch.takes
    drops, current = [], branch.key
    for step in flow.steps[branch.index + 1:]:
        if step.is_dropout and step.takes == {current: 1.0} and step.key != current:
            drops.append(step)
            current = step.key
    out_key = drops[-1].key if drops else branch.key
    added_to, coefficient, added_in, raw_used = None, 0.0, None, False
    dropped = {d.index for d in drops}
    later = [(s.key, s.takes) for s in flow.steps[branch.index + 1:]     # identity dropouts pass values through
             if s.index not in dropped and not (s.takes is not None and s.key in s.takes)]
    for where, takes in later + [("y", flow.y_takes)]:
        if takes is None:
            continue
        for key in (out_key, branch.key) if drops else (out_key,):
            if key in takes and abs(takes[key]) > 1e-6:
                coefficient = takes[key]
                added_to = {k: c for k, c in takes.items() if k != key}
                added_in, raw_used = where, key != out_key
                break
        if added_in is not None:
            break
    return Half(branch, norm, start, drops, added_to, coefficient, added_in, raw_used)
