"""One recorded run as the walk reads it (`Recording`): its calls numbered per component, Pre-LN's values so
far, what a component's calls show at a boundary, whose output a value is, whether an output goes anywhere, and
what a call received, said as a fact (a sum of known values, or that the grader cannot say)."""

from __future__ import annotations

import numpy as np
import torch

from autograder.engine.facts import Received, Sum, Unknown
from .own_layers import passes
from .location import locate, locate_padded
from .values import DROPS, VALUE, Seen, close, fewest


class Recording:
    """One recorded run set against Pre-LN's values (the walk's ground; see `boundaries`)."""

    def __init__(self, flow, parts: dict, mode: str, drop_p: float, responses: dict | None = None, moved: dict | None = None):
        self.flow, self.parts, self.mode, self.drop_p, self.tol = flow, parts, mode, drop_p, flow.tol
        self.near = 10 * flow.tol  # elementwise, for telling where a value's elements sit
        self.shape, self.x = flow.x.shape, np.asarray(flow.x, dtype=np.float64).reshape(-1)
        self.y = np.asarray(flow.y, dtype=np.float64).reshape(-1)
        self.calls = [c for c in flow.calls if c.kind != "manual"]
        self.calls = sorted(
            self.calls + passes(getattr(flow, "layers", None) or [], {c.name for c in self.calls}), key=lambda call: call.index
        )  # components run through their own layers
        counts: dict = {}
        for call in self.calls:
            counts[call.name] = counts.get(call.name, 0) + 1
            call.number = counts[call.name]
        for call in self.calls:
            call.total = counts[call.name]
        reported = getattr(flow, "counts", None) or {}  # calls made inside nested vmaps and the like are not recorded:
        self.counts = {
            name: max(counts.get(name, 0), reported.get(name, 0))  # they ran all the same
            for name in {*counts, *reported}
        }
        self.responses = responses or {}  # component -> the eval run with its output changed (see probes)
        self.moved = moved  # the `moved` question's runs and values (see `moves`)
        self.keep = 1.0 / (1.0 - drop_p) if drop_p < 1 else 0.0
        self.values: dict = {"x": self.x}  # Pre-LN's values so far, by the names facts use
        self.gloss = ""
        self.masks: dict | None = None  # a run that follows Pre-LN: the masks its dropouts drew, by node

    # --- values -------------------------------------------------------------------------------------------
    def component(self, name: str, flat: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            out = self.parts[name](torch.as_tensor(flat.reshape(self.shape), dtype=torch.float32))
        return out.numpy().astype(np.float64).reshape(-1)

    def calls_of(self, *names: str) -> list:
        """The recorded calls of these components; a near miss of a LayerNorm (another eps, say) recorded under a
        norm's name is another normalization, not that norm."""
        return [c for c in self.calls if c.name in names and getattr(c, "variant", None) is None]

    def seen(self, names: tuple, expected: np.ndarray) -> Seen:
        calls = self.calls_of(*names)
        positions, covered, outputs = [], np.zeros(expected.size, dtype=bool), np.full(expected.size, np.nan)
        for call in calls:
            where = self.located(call, expected)
            positions.append(where)
            if where is not None:  # what it gave, where it gave a value of its input's shape (else unknown); where
                # two calls received one position (a dropout drawn twice on one value), the first call's
                flat, kept = where.reshape(-1), where.reshape(-1) >= 0
                kept &= ~covered[np.where(kept, flat, 0)]
                covered[flat[kept]] = True
                if call.output.shape == call.input.shape:
                    outputs[flat[kept]] = call.output.reshape(-1)[kept]
        return Seen(calls, positions, bool(covered.all()), outputs if covered.all() else None, expected.size)

    def located(self, call, value: np.ndarray) -> np.ndarray | None:
        """Where `call`'s input sits in `value` (padded; a component's input in whole token vectors, the same
        numbers moved within or across tokens being another value; a dropout's element by element)."""
        where = locate_padded(call.input, value, self.near, features=self.shape[-1])
        if where is None and call.name in DROPS:
            where = locate_padded(call.input, value, self.near)
        return where

    def sits(self, value, reference: np.ndarray) -> bool:
        """Is `value` `reference`, or a piece or a rearrangement of it (`location.locate`)?"""
        return locate(value, reference, self.near) is not None

    def placed(self, call) -> np.ndarray | None:
        """A call's input in block positions, where it has the block's shape (None: it has not)."""
        return call.input.reshape(-1) if tuple(call.input.shape) == tuple(self.shape) else None

    def output_of(self, value: np.ndarray, names=None, besides=()):
        """The recorded call (of one of `names`, not one of `besides`) whose output `value` is (a piece of, in whole
        token vectors: the same numbers moved within a token are another value)."""
        for call in self.calls:
            if (names is None or call.name in names) and call not in besides and call.output.size >= np.size(value):
                if locate(value, call.output, self.near, features=self.shape[-1]) is not None:
                    return call
        return None

    def outputs(self) -> dict:
        """Every recorded call's output that has the block's shape and is none of Pre-LN's values so far, by the
        names facts use ("att#2"), each value once."""
        found: dict = {}
        for c in self.calls:
            value = c.output.reshape(-1)
            if tuple(c.output.shape) == tuple(self.shape) and not any(
                close(value, known, self.tol) for known in [*self.values.values(), *found.values()]
            ):
                found[f"{c.name}#{c.number}"] = value
        return found

    def used(self, call) -> bool:
        """Does `call`'s output go anywhere the grader can see: into a later call's input (as a piece, or added to
        x), or into what the block returned?"""
        out = call.output.reshape(-1)
        if not np.any(out):
            return False
        for later in self.calls:
            if later.index <= call.index:
                continue
            if locate_padded(later.input, out, self.near) is not None:
                return True
            flat = self.placed(later)
            if (
                flat is not None
                and tuple(call.output.shape) == tuple(self.shape)
                and locate(flat - self.x, out, self.near) is not None
            ):
                return True
        bases = [0.0, self.x] + ([self.values["h"]] if "h" in self.values else [])
        if tuple(call.output.shape) == tuple(self.shape):
            return any(locate(self.y - base, out, self.near) is not None for base in bases)
        features = self.shape[-1]  # pieces of what the block returned, less a shortcut (outputs stacked, say)
        return out.size % features == 0 and any(
            locate(out, self.y - base, self.near, features=features) is not None for base in bases
        )

    def received(self, call, value: str, equal: bool = False):
        """Whether `call` received Pre-LN's `value` (whole, in pieces or rearranged, as `seen` reads it), as a fact:
        evaluated here whenever that value is known, whatever the caller expected."""
        name = VALUE.get(value, value)
        known = self.values.get(name)
        if known is not None:
            equal = self.located(call, known) is not None
        return Received(self.mode, call.name, call.number, name, equal, call.total)

    def said(self, call, value: str) -> list:
        """What `call` received, as a sum of Pre-LN's values so far or of recorded outputs when it is one of few
        terms, else that the grader cannot say."""
        flat = self.placed(call)
        if flat is not None:
            terms = fewest(flat, {**self.values, **self.outputs()}, self.tol)
            if terms is not None:
                return [Sum(self.mode, call.name, call.number, tuple(terms.items()), call.total)]
        return [Unknown(self.mode, call.name, call.number, VALUE.get(value, value), call.total)]
