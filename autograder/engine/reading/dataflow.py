"""What a forward computed, in the grader's own terms: every value it handed a component, and the value it
returned, named as a sum of earlier values at the block positions it covers.

A recorded run (probe `eval` or `train`) lists each component call with its input and output. Each input is
placed in the block and named (`placement`): x and earlier outputs, added and scaled, possibly rearranged
(a transpose, a flattened tensor, one sequence, one token). A value that is no sum may be a normalization
written by hand, or a near miss of one (`normfit`). Every call is checked against the grader's own copy of
the component: a claim it cannot reproduce is not believed. Calls made piece by piece (one per sequence,
one per token) are then joined into one call of the program they form (`grouping`). `naming.analyse` does
all this; the result is a `Flow` (this module): the student's forward as a `program.Program`, which the grader
reads, replays and compares.

Values are compared, not code, so any style of writing the same forward gives the same program.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .program import Op, Program, Variant, dead, in_mode, live

NORMS = ("norm1", "norm2", "layer_norm")
DROPOUTS = ("drop_shortcut", "dropout")


def standardized(values, scale=None, shift=None) -> bool:
    """Is every row mean 0 / variance 1, after undoing a LayerNorm's scale and shift? (a normalized value)"""
    v = np.asarray(values, dtype=np.float64)
    if scale is not None:
        v = (v - shift) / scale
    return bool(np.all(np.abs(v.mean(-1)) < 1e-3) and np.all(np.abs(v.var(-1) - 1) < 2e-2))


def coefficient_text(c: float) -> str:
    """Enough digits to show how a coefficient differs from 1 (1.0001 stays 1.0001)."""
    return f"{c:.6g}"


def _shape(value: np.ndarray) -> str:
    return "shape " + str(tuple(value.shape))


class Named:
    """What a call's component name says about it (shared by a recorded `Call` and a program `Step`)."""

    name: str

    @property
    def op_name(self) -> str:
        return "drop" if self.name in DROPOUTS else self.name

    @property
    def is_norm(self) -> bool:
        return self.name in NORMS

    @property
    def is_dropout(self) -> bool:
        return self.name in DROPOUTS


@dataclass
class Call(Named):
    """One recorded call of a component, placed and named."""

    index: int
    name: str  # norm1, norm2, att, ff, drop_shortcut, dropout, layer_norm
    kind: str  # "module", "function" or "manual" (a normalization written out by hand)
    input: np.ndarray  # as recorded (its own shape)
    output: np.ndarray
    place: np.ndarray | None = None  # block position of every element of the input (None: not placed)
    takes: dict | None = None  # the input as a sum of earlier values (None: it is none)
    key: str = ""  # its output's node name
    alias: dict | None = None  # its output is this earlier sum (a dropout that dropped nothing...)
    verified: bool = True
    why: str = ""
    mask: np.ndarray | None = None  # dropouts that dropped: output / input
    scale: float | None = None  # ... and what they multiplied kept values by
    variant: Variant | None = None  # a near miss of a LayerNorm
    training: bool | None = None
    via: str | None = None
    where: str | None = None
    no_grad: bool = False
    group_takes: dict | None = None  # its input over the program's steps (see `grouping`)


@dataclass
class Step(Named):
    """One call of the student's program: recorded calls of one component on one sum, joined (one per
    sequence or token, say) when together they are that component applied to the whole sum."""

    index: int
    name: str
    takes: dict | None
    key: str
    calls: list
    pieces: tuple | None  # placements of the calls' inputs; None: one call on the whole block
    covers: np.ndarray  # bool over block positions
    input: np.ndarray  # flat over block positions (0 where not covered)
    output: np.ndarray
    mask: np.ndarray | None = None
    scale: float | None = None
    variant: Variant | None = None

    @property
    def drops(self) -> bool:
        return self.is_dropout and self.mask is not None

    @property
    def whole(self) -> bool:
        return bool(self.covers.all())

    @property
    def where(self) -> str | None:
        return next((c.where for c in self.calls if c.where), None)

    @property
    def no_grad(self) -> bool:
        return any(c.no_grad for c in self.calls)


@dataclass
class Flow:
    """A recorded run, named. `steps`: the program's calls in order (those whose value reaches the output
    first, see `live`); `y_takes` the returned value as a sum (or None)."""

    x: np.ndarray
    y: np.ndarray
    train: bool
    tol: float  # the device's float32 tolerance (`engine.tolerance`)
    calls: list = field(default_factory=list)  # every recorded call
    steps: list = field(default_factory=list)  # every call of the program (joined), in order
    y_takes: dict | None = None
    labels: dict = field(default_factory=dict)  # node -> readable expression
    vectors: dict = field(default_factory=dict)  # node -> flat float64 value over block positions
    covers: dict = field(default_factory=dict)  # node -> positions it covers
    counts: dict = field(default_factory=dict)  # component -> calls the run reported, recorded or not
    layers: list = field(default_factory=list)  # calls of a component's own layers the forward made itself

    # --- reading ------------------------------------------------------------------------------------
    def value(self, combination: dict) -> np.ndarray:
        total = np.zeros(self.x.size)
        for key, c in combination.items():
            total = total + c * self.vectors[key]
        return total

    def describe(self, combination: dict | None) -> str:
        if combination is None:
            return "a value the grader cannot write as a sum of the block's earlier values"
        if not combination:
            return "zero"
        return " + ".join(_term(self.labels[k], c) for k, c in combination.items()).replace("+ -", "- ")

    @property
    def live_keys(self) -> set:
        return {op.key for op in live(self.full_program()).ops} if self.y_takes is not None else set()

    @property
    def live(self) -> list:
        """The calls whose value reaches what the forward returns (all of them, when that is no sum)."""
        if self.y_takes is None:
            return list(self.steps)
        keys = self.live_keys
        return [s for s in self.steps if s.key in keys]

    @property
    def decoys(self) -> list:
        """Calls whose value never reaches what the forward returns. Said only of a run every value of which the
        grader can name: where one live value is no sum it can name, what that value depends on is unknown."""
        if not self.replayable:
            return []
        keys = self.live_keys
        return [s for s in self.steps if s.key not in keys]

    def calls_of(self, *names: str) -> list:
        return [s for s in self.live if s.name in names]

    def first(self, *names: str) -> Step | None:
        found = self.calls_of(*names)
        return found[0] if found else None

    def producer(self, key: str) -> Step | None:
        return next((s for s in self.steps if s.key == key), None)

    @property
    def unverified(self) -> list:
        return [c for c in self.calls if not c.verified]

    def full_program(self) -> Program:
        ops = [Op(s.op_name, s.takes or {}, s.key, s.variant, s.scale, pieces=s.pieces) for s in self.steps]
        return Program(ops, dict(self.y_takes or {}), "yours")

    doubt: str = ""  # set when another reading of the same forward disagrees (see `verify_against`)

    @property
    def replayable(self) -> bool:
        return not self.doubt and self.y_takes is not None and all(s.takes is not None for s in self.live)

    def verify_against(self, other: "Flow | None") -> None:
        """A program read on one input is a hypothesis: the same forward, read on another input (`other`), must
        give the very same program, coefficients included, or nothing is built on it (a scale computed from the
        values, a / a.std() say, reads as another number on every input)."""
        if not self.replayable:
            return
        from .program import canonical, signature

        if other is None or not other.replayable:
            self.doubt = "on another input the grader could not read your forward as a program of the block's values at all"
        elif signature(canonical(self.program())) != signature(canonical(other.program())):
            self.doubt = (
                "the coefficients the grader reads from your forward's values change with the input (a "
                "scale computed from the values, say), so they are not constants of your program"
            )

    def program(self) -> Program:
        """The student's forward as the grader runs it: the live calls (ValueError: it cannot be run)."""
        if not self.replayable:
            raise ValueError(self.why_not_replayable())
        return live(self.full_program())

    @property
    def exact(self) -> bool:
        """Are the program's coefficients short numbers, so that replaying it in float64 gives what the student's
        code gives in float64? (a coefficient such as 0.7071... is known only to ~1e-8; a near-miss LayerNorm's eps
        is fitted to float32 values, and is never known that well: LayerNorm(2h) is LayerNorm(h) with eps / 4)"""
        from .placement import exact

        program = self.program()
        numbers = [c for op in program.ops for c in op.takes.values()] + list(program.out.values())
        return all(exact(c) for c in numbers) and not any(op.variant is not None for op in program.ops)

    def masks(self) -> dict:
        return {s.key: s.mask for s in self.steps if s.mask is not None}

    def why_not_replayable(self) -> str:
        if self.doubt:
            return self.doubt
        for step in self.live:
            if step.takes is None:
                return (
                    f"the grader cannot write the value handed to {step.name} ({_shape(step.calls[0].input)}) as a sum of the "
                    "block's earlier values"
                )
        if self.y_takes is None:
            return "the grader cannot write the value your forward returned as a sum of the block's earlier values"
        return ""


def _describe(labels: dict, takes: dict | None) -> str:
    if takes is None:
        return "..."
    if not takes:
        return "zero"
    return " + ".join(_term(labels[k], c) for k, c in takes.items()).replace("+ -", "- ")


def _term(label: str, c: float) -> str:
    if c == 1:
        return label
    if c == -1:
        return "-" + label
    return f"{coefficient_text(c)}*{label}"


__all__ = ["Call", "Flow", "Step", "Op", "coefficient_text", "dead", "in_mode", "standardized"]
