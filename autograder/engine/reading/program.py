"""A block's forward as a small program, and the grader's own way of running one.

A program is a list of calls of the block's components (norm1, att, drop, norm2, ff, or a functional
layer_norm), each on a sum of earlier values (the block input x and earlier calls' outputs, with
coefficients), and the sum it returns. Pre-LN is one such program (`reading.script.PRE_LN` compiled); a student's recorded run,
once named (`naming.analyse`), is another; the wrong arrangements and every single-step mistake
(`edits`) are others. The grader runs any of them with its own components (`run`), so it can compare them
value by value, differentiate them, stack them and feed them inputs the student's code never saw.

Values live in the block's own positions: a flat vector of x.numel() entries. A call made on a piece of the
block (one sequence, one token, a transposed tensor) carries `pieces`: for each piece, the flat position of
every element of the tensor the component received, in that tensor's shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import torch
import torch.nn.functional as F

NORMS = ("norm1", "norm2", "layer_norm")
TRAIN, ALWAYS = "train", "always"  # when a drop acts: in train mode only (nn.Dropout), or always


@dataclass(frozen=True)
class Variant:
    """A normalization that is not quite a LayerNorm: statistics over other axes, the unbiased variance, another
    eps, or another module's (or no) scale and shift."""

    over: str  # "token" (LayerNorm's), "sequence", "tokens" (each feature over the tokens), "batch", "all"
    eps: float
    unbiased: bool
    params: str | None  # "norm1", "norm2" or None (no scale and shift)

    AXES = {"token": (-1,), "sequence": (-2, -1), "tokens": (-2,), "batch": (0,), "all": None}

    def apply(self, value: torch.Tensor, parts: dict) -> torch.Tensor:
        axes = self.AXES[self.over] or tuple(range(value.dim()))
        mean = value.mean(dim=axes, keepdim=True)
        var = value.var(dim=axes, keepdim=True, unbiased=self.unbiased)
        out = (value - mean) / torch.sqrt(var + self.eps)
        if self.params is not None:
            out = parts[self.params].scale * out + parts[self.params].shift
        return out


@dataclass
class Op:
    """One call: `name` applied to the sum `takes` ({node: coefficient}); its output is node `key`."""

    name: str
    takes: dict
    key: str
    variant: Variant | None = None
    scale: float | None = None  # drop: what kept values are multiplied by
    when: str = TRAIN  # drop: TRAIN or ALWAYS
    pieces: tuple | None = None  # None: one call on the whole block-shaped value


@dataclass
class Program:
    ops: list
    out: dict
    name: str = ""
    notes: dict = field(default_factory=dict)  # free-form facts about how it was made

    def op(self, key: str) -> Op | None:
        return next((op for op in self.ops if op.key == key), None)

    def first(self, name: str) -> Op | None:
        return next((op for op in self.ops if op.name == name), None)


# --- views ---------------------------------------------------------------------------------------------


def substitute(takes: dict, key: str, by: dict) -> dict:
    """`takes` with node `key` replaced by the sum `by`."""
    if key not in takes:
        return dict(takes)
    out = {k: c for k, c in takes.items() if k != key}
    for k, c in by.items():
        out[k] = out.get(k, 0.0) + takes[key] * c
    return {k: c for k, c in out.items() if abs(c) > 1e-12}


def in_mode(program: Program, mode: str) -> Program:
    """The program as it runs in `mode` ("eval" or "train"): drops that do not act are their input."""
    ops, out = [], dict(program.out)
    gone: dict[str, dict] = {}
    for op in program.ops:
        takes = op.takes
        for key, by in gone.items():
            takes = substitute(takes, key, by)
        if op.name == "drop" and (op.scale is None or (mode == "eval" and op.when == TRAIN)):
            gone[op.key] = takes
            continue
        ops.append(replace(op, takes=takes))
    for key, by in gone.items():
        out = substitute(out, key, by)
    return Program(ops, out, program.name, dict(program.notes))


def live(program: Program) -> Program:
    """Only the calls whose output reaches what the program returns."""
    needed = {k for k, c in program.out.items() if c != 0}
    keep = []
    for op in reversed(program.ops):
        if op.key in needed:
            keep.append(op)
            needed |= {k for k, c in op.takes.items() if c != 0}
    keep.reverse()
    return Program(keep, dict(program.out), program.name, dict(program.notes))


def dead(program: Program) -> list:
    alive = {op.key for op in live(program).ops}
    return [op for op in program.ops if op.key not in alive]


def canonical(program: Program) -> Program:
    """The same program with its calls in a canonical order (by depth, then component and input), so that two
    programs that differ only in the order of independent calls compare equal."""
    depth = {"x": 0}
    for op in program.ops:
        depth[op.key] = 1 + max((depth.get(k, 0) for k in op.takes), default=0)
    names, ordered, left = {"x": "x"}, [], list(program.ops)
    while left:
        ready = [op for op in left if all(k in names for k in op.takes)]
        op = min(
            ready,
            key=lambda o: (
                depth[o.key],
                o.name,
                sorted((names[k], round(c, 6)) for k, c in o.takes.items()),
                repr(o.variant),
                o.scale or 0.0,
            ),
        )
        names[op.key] = f"c{len(ordered)}"
        ordered.append(op)
        left.remove(op)
    return Program(ordered, dict(program.out), program.name, dict(program.notes))


def signature(program: Program) -> tuple:
    """What the program computes, without names or values: equal signatures, equal programs."""
    names = {"x": "x"}

    def sums(takes: dict) -> tuple:
        return tuple(sorted((names.get(k, "?"), round(c, 6)) for k, c in takes.items() if abs(c) > 1e-9))

    steps = []
    for op in program.ops:
        pieces = (
            None
            if op.pieces is None
            else (len(op.pieces), tuple(p.shape for p in op.pieces[:1]), int(sum(p.size for p in op.pieces)))
        )
        steps.append(
            (op.name, sums(op.takes), op.variant, round(op.scale, 4) if op.name == "drop" and op.scale else None, pieces)
        )
        names[op.key] = f"c{len(steps)}"
    return tuple(steps), sums(program.out)


# --- running a program with the grader's components ---------------------------------------------------


def component(op: Op, value: torch.Tensor, parts: dict) -> torch.Tensor:
    if op.variant is not None:
        return op.variant.apply(value, parts)
    if op.name == "layer_norm":
        return F.layer_norm(value, value.shape[-1:])
    return parts[op.name](value)


def run(
    program: Program, x: torch.Tensor, parts: dict, *, masks: dict | None = None, cut_outputs: tuple = ()
) -> tuple[torch.Tensor, dict]:
    """`program` on `x` with `parts` (differentiable). Returns the output and every node's flat value.

    `masks`: drop op key -> flat multiplier (what that drop did in a recorded run); a drop without one drops
    nothing. `cut_outputs`: op names or keys whose outputs are detached everywhere (no gradient flows back through
    them)."""
    shape, masks = x.shape, masks or {}
    flat = {"x": x.reshape(-1)}

    def total(takes: dict) -> torch.Tensor:
        value = torch.zeros_like(flat["x"])
        for node, c in takes.items():
            value = value + c * flat[node]
        return value

    for op in program.ops:
        value = total(op.takes)
        if op.name == "drop":
            mask = masks.get(op.key)
            out = value if mask is None else value * torch.as_tensor(mask, dtype=value.dtype, device=value.device)
        elif op.pieces is None:
            out = component(op, value.reshape(shape), parts).reshape(-1)
        else:
            out = torch.zeros_like(value)
            for place in op.pieces:
                index = torch.as_tensor(place.reshape(-1), device=value.device)
                piece = component(op, value[index].reshape(place.shape), parts)
                out = out.index_put((index,), piece.reshape(-1))
        flat[op.key] = out.detach() if (op.name in cut_outputs or op.key in cut_outputs) else out
    return total(program.out).reshape(shape), flat


def shape_free(program: Program) -> bool:
    """Can the program run on a block input of another shape? (no call on pieces, no recorded masks)"""
    return all(op.pieces is None and op.name != "drop" for op in program.ops)


def numpy_run(program: Program, x: np.ndarray, parts: dict, masks: dict | None = None) -> tuple[np.ndarray, dict]:
    """`run` without gradients, on and to float64 NumPy arrays (values computed in float32, as recorded)."""
    with torch.no_grad():
        y, flat = run(program, torch.as_tensor(x, dtype=torch.float32), parts, masks=masks)
    return y.numpy().astype(np.float64), {k: v.numpy().astype(np.float64) for k, v in flat.items()}
