"""Recording what a forward did: which component received which value, and notable tensor operations.

Component calls are recorded by wrapping each part's `forward` on the instance, so `self.att(x)` and
`self.att.forward(x)` are both seen. Operations the student's own code performs between calls (detaching,
moving devices, functional layer norms or dropout, in-place changes to the block input) are seen by a
`TorchFunctionMode`, which ignores whatever runs inside the kit's components.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode

_DEVICE_MOVES = {"cpu", "cuda", "to", "numpy", "item", "tolist"}
_IN_PLACE_DUNDERS = {"__iadd__", "__isub__", "__imul__", "__itruediv__", "__setitem__"}


@dataclass
class Call:
    name: str
    input: torch.Tensor
    output: torch.Tensor


class Recorder:
    def __init__(self, limit: int = 24):
        self.calls: list[Call] = []
        self.events: list[dict] = []
        self.block_input = None
        self.limit = limit
        self._inside = 0          # > 0 while a kit component or the recorder itself is running

    def _snapshot(self, value):
        self._inside += 1
        try:
            return value.detach().clone()
        finally:
            self._inside -= 1

    def wrap(self, module, name: str) -> None:
        inner = module.forward

        def forward(*args, **kwargs):
            self._inside += 1
            try:
                out = inner(*args, **kwargs)
            finally:
                self._inside -= 1
            value = args[0] if args else next(iter(kwargs.values()), None)
            if len(self.calls) < self.limit and isinstance(value, torch.Tensor) and isinstance(out, torch.Tensor):
                self.calls.append(Call(name, self._snapshot(value), self._snapshot(out)))
            return out

        module.forward = forward

    def note(self, event: dict) -> None:
        if len(self.events) < 4 * self.limit:
            self.events.append(event)

    def mode(self) -> "EventMode":
        return EventMode(self)


class EventMode(TorchFunctionMode):
    """Notes operations of the student's own code that explain gradient, device and in-place mistakes."""

    def __init__(self, recorder: Recorder):
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not self.recorder._inside:
            self._observe(func, args, kwargs)
        return func(*args, **kwargs)

    def _observe(self, func, args, kwargs) -> None:
        name = getattr(func, "__name__", "")
        first = args[0] if args else None
        note = self.recorder.note
        if func is torch.Tensor.detach or (name == "__get__" and getattr(func, "__self__", None) is torch.Tensor.data):
            if isinstance(first, torch.Tensor):
                note({"op": "detach" if name == "detach" else ".data", "value": self.recorder._snapshot(first)})
        elif name in _DEVICE_MOVES:
            note({"op": name})
        elif name == "layer_norm":
            weight = args[2] if len(args) > 2 else kwargs.get("weight")
            note({"op": "layer_norm", "with_params": weight is not None})
        elif name in {"dropout", "dropout1d", "dropout2d", "feature_dropout"}:
            training = args[2] if len(args) > 2 else kwargs.get("training", True)
            note({"op": "dropout", "training": bool(training)})
        elif (name.endswith("_") and not name.startswith("_")) or name in _IN_PLACE_DUNDERS:
            if first is not None and first is self.recorder.block_input:
                note({"op": "inplace_on_input", "name": name})
