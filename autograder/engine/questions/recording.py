"""Recording what a forward did: which component received which value, and notable tensor operations.

Component calls are recorded by wrapping each part's `forward` on the instance, so `self.att(x)` and
`self.att.forward(x)` are both seen. A `TorchFunctionMode` sees what the student's own code does between
those calls, and ignores whatever runs inside a component:

* functional layer norms and dropouts (`F.layer_norm`, `F.dropout`, or an `nn.Dropout` made inside forward)
  are recorded as calls too, so every style of writing the same forward leaves the same record;
* detaching, device moves and in-place writes are noted as events, with the student's line.

Everything recorded here is a claim of the child: the parent checks every call against its own copy of the
components before it believes it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode

from .cells import cell_where

DEVICE_MOVES = ("cpu", "cuda", "to", "numpy", "item", "tolist")
# Tensor factories: without a device= they make CPU tensors, wherever the block's input lives.
FACTORIES = frozenset(
    "zeros ones empty full rand randn randint randperm arange linspace logspace eye tensor as_tensor from_numpy "
    "scalar_tensor".split()
)
# Random draws: a dropout written by hand draws its mask with one of these.
RANDOM = frozenset(
    "rand randn randint randperm rand_like randn_like randint_like bernoulli bernoulli_ multinomial normal normal_ uniform_ "
    "exponential_ random_".split()
)
_IN_PLACE_DUNDERS = {"__iadd__", "__isub__", "__imul__", "__itruediv__", "__setitem__"}
_DROPOUTS = {"dropout", "dropout1d", "dropout2d", "dropout3d", "feature_dropout", "alpha_dropout"}
MAX_CALLS = 96  # a forward run one sequence or one token at a time makes many calls
RESPONSE_CALLS = 48  # in each of the `respond` question's runs
MAX_EVENTS = 48
MAX_LAYER_CALLS = 48  # a component's own layers, called by the forward itself


def student_line() -> str | None:
    """The innermost line of student code on the stack (cells are compiled as `<cell N ...>`, their text in
    linecache). Walks the frames outwards and reads one line: called on every recorded call."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename.startswith("<cell"):
            return cell_where(filename, frame.f_lineno)
        frame = frame.f_back
    return None


def _from_dropout_module() -> bool:
    """Is the functional dropout being called by an `nn.Dropout` module (one the student made)?"""
    frame = sys._getframe(2)
    for _ in range(6):
        if frame is None:
            return False
        if frame.f_code.co_filename.replace("\\", "/").endswith("torch/nn/modules/dropout.py"):
            return True
        frame = frame.f_back
    return False


@dataclass
class Call:
    name: str  # norm1, norm2, att, ff, drop_shortcut, dropout, layer_norm
    kind: str  # "module" or "function"
    input: torch.Tensor
    output: torch.Tensor
    training: bool | None = None  # dropouts: whether it was told to drop
    via: str | None = None  # functional dropouts: "module" (an nn.Dropout made in forward) or "function"
    where: str | None = None
    no_grad: bool = False  # autograd was switched off during the call
    grad_out: torch.Tensor | None = None  # the gradient the backward pass brought to the output (`Recorder._tap`)


def _functorch_wrapped(value) -> bool:
    try:
        return bool(torch._C._functorch.is_functorch_wrapped_tensor(value))
    except Exception:
        return False


def _unbatched(value):
    """The numbers of a tensor inside one torch.vmap, every example's, stacked along the first dimension (the
    examples of `vmap(component)(t)` over t's first dimension are t's own rows, in order); ValueError for any other
    functorch tensor (nested transforms, grad)."""
    functorch = torch._C._functorch
    if not functorch.is_batchedtensor(value):
        raise ValueError("a functorch tensor")
    inner = functorch.get_unwrapped(value)
    if _functorch_wrapped(inner):
        raise ValueError("a functorch tensor inside another")
    return inner.movedim(functorch.maybe_get_bdim(value), 0)


class Recorder:
    def __init__(self, limit: int = MAX_CALLS, gradients: bool = False):
        self.calls: list[Call] = []
        self.events: list[dict] = []
        self.block_input = None
        self.limit, self.gradients = limit, gradients  # gradients: keep each call's `grad_out` (`_tap`), to be read
        self.params: dict[int, str] = {}  # id(LayerNorm scale) -> "norm1" / "norm2"
        self.detached: dict[int, dict] = {}  # id(detached tensor) -> its event
        self._inside = 0  # > 0 while a component or the recorder itself is running
        self.unrecorded = 0  # calls whose values could not be copied (see `_snapshot`)
        self.counts: dict[str, int] = {}  # every call of each component, recorded or not
        self.layers: list[dict] = []  # a component's own layers called by the forward itself
        self.paused = False  # between recorded calls: the wrapped components run as they are, nothing copied

    def _snapshot(self, value):
        """A plain copy of `value`'s numbers (inside one torch.vmap, every example's, stacked: `_unbatched`), or None
        where it has none to copy here: a tensor inside another functorch transform (its numbers exist only per
        example), or one a subclass will not copy. Such a call is left unrecorded (`unrecorded` counts it); the run is
        graded by its values."""
        self._inside += 1
        try:
            if _functorch_wrapped(value):
                value = _unbatched(value)
            copy = torch.Tensor.detach(value).clone()
            if type(copy) is not torch.Tensor:
                copy = copy.as_subclass(torch.Tensor)
            if _functorch_wrapped(copy) or copy.is_meta:
                raise ValueError("no values")
            return copy
        except Exception:
            self.unrecorded += 1
            return None
        finally:
            self._inside -= 1

    def _record(self, call: Call, value, out) -> None:
        consumer = self.detached.get(id(value))
        if consumer is not None and "consumer" not in consumer:
            consumer["consumer"] = call.name
        if len(self.calls) < self.limit:
            self.calls.append(call)
            self._tap(call, out)

    def _tap(self, call: Call, out) -> None:
        """Keep the gradient that reaches the call's output in the backward pass (every use of it) as `grad_out`: zeros
        until one arrives, None for an output outside autograd's graph. The hook only reads: it returns None."""
        if not self.gradients or not isinstance(out, torch.Tensor) or not out.requires_grad or _functorch_wrapped(out):
            return
        self._inside += 1
        try:
            out.register_hook(lambda grad: setattr(call, "grad_out", self._snapshot(grad)))
            call.grad_out = torch.zeros_like(torch.Tensor.detach(out))
        except Exception:  # a tensor that takes no hooks: the call keeps no gradient, and none is claimed
            pass
        finally:
            self._inside -= 1

    def wrap(self, module, name: str) -> None:
        inner = module.forward
        if name in ("norm1", "norm2") and hasattr(module, "scale"):
            self.params[id(module.scale)] = name

        def forward(*args, **kwargs):
            if self.paused:
                return inner(*args, **kwargs)
            self.counts[name] = self.counts.get(name, 0) + 1
            value = args[0] if args else next(iter(kwargs.values()), None)
            # the input as it was before the call: a call may write into its input (nn.Dropout(inplace=True))
            before = self._snapshot(value) if isinstance(value, torch.Tensor) else None
            self._inside += 1
            try:
                out = inner(*args, **kwargs)
            finally:
                self._inside -= 1
            after = self._snapshot(out) if before is not None and isinstance(out, torch.Tensor) else None
            if after is not None:
                training = module.training if name == "drop_shortcut" else None
                self._record(
                    Call(name, "module", before, after, training, where=student_line(), no_grad=not torch.is_grad_enabled()),
                    value,
                    out,
                )
            return out

        module.forward = forward
        for index, part in enumerate(list(module.modules())[1:], start=1):
            self._count_inner(part, name, index)

    def _count_inner(self, part, name: str, index: int) -> None:
        """A component's own layers called by the forward itself (`self.ff.layers[0](t)`): the component ran, in
        part, though no call of it can be recorded; the count says so, and each such call is kept (`layers`: the
        component, the layer's place among its modules, what it received and gave, and how many calls of the
        components were recorded before it)."""
        inner = part.forward

        def forward(*args, **kwargs):
            if self.paused:
                return inner(*args, **kwargs)
            top = not self._inside
            if top:
                self.counts[name] = self.counts.get(name, 0) + 1
            value = args[0] if args else next(iter(kwargs.values()), None)
            before = self._snapshot(value) if top and isinstance(value, torch.Tensor) else None
            self._inside += 1
            try:
                out = inner(*args, **kwargs)
            finally:
                self._inside -= 1
            after = self._snapshot(out) if before is not None and isinstance(out, torch.Tensor) else None
            if after is not None and len(self.layers) < MAX_LAYER_CALLS:
                self.layers.append({"name": name, "layer": index, "input": before, "output": after, "at": len(self.calls)})
            return out

        part.forward = forward

    def note(self, event: dict) -> None:
        if len(self.events) < MAX_EVENTS:
            self.events.append(event)

    def mode(self) -> "EventMode":
        return EventMode(self)


class EventMode(TorchFunctionMode):
    """Records the student's own functional norms and dropouts, and notes detaches, moves and in-place writes."""

    def __init__(self, recorder: Recorder):
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        recorder = self.recorder
        if recorder._inside:
            return func(*args, **kwargs)
        name = getattr(func, "__name__", "")
        if name == "layer_norm" or name in _DROPOUTS:
            value = args[0] if args else kwargs.get("input")
            # the input as it was before the call: F.dropout(..., inplace=True) writes into it
            before = recorder._snapshot(value) if isinstance(value, torch.Tensor) else None
            recorder._inside += 1
            try:
                out = func(*args, **kwargs)
            finally:
                recorder._inside -= 1
            self._functional(name, args, kwargs, before, out)
            return out
        self._observe(func, name, args, kwargs)
        out = func(*args, **kwargs)
        if func is torch.Tensor.detach or (name == "__get__" and getattr(func, "__self__", None) is torch.Tensor.data):
            event = {"op": "detach" if name == "detach" else ".data", "where": student_line()}
            if args and isinstance(args[0], torch.Tensor):
                snapshot = recorder._snapshot(args[0])
                if snapshot is not None:
                    event["value"] = snapshot
            recorder.note(event)
            recorder.detached[id(out)] = event
        return out

    def _functional(self, name, args, kwargs, before, out) -> None:
        value = args[0] if args else kwargs.get("input")
        recorder = self.recorder
        if name == "layer_norm":
            weight = args[2] if len(args) > 2 else kwargs.get("weight")
            label = recorder.params.get(id(weight), "layer_norm") if weight is not None else "layer_norm"
        else:
            label = "dropout"
        recorder.counts[label] = recorder.counts.get(label, 0) + 1
        after = recorder._snapshot(out) if before is not None and isinstance(out, torch.Tensor) else None
        if after is None:
            return
        if name == "layer_norm":
            call = Call(label, "function", before, after, where=student_line())
        else:
            training = args[2] if len(args) > 2 else kwargs.get("training", True)
            call = Call(
                "dropout",
                "function",
                before,
                after,
                bool(training),
                via="module" if _from_dropout_module() else "function",
                where=student_line(),
            )
        recorder._record(call, value, out)

    def _observe(self, func, name, args, kwargs) -> None:
        first = args[0] if args else None
        note = self.recorder.note
        if name in RANDOM:  # once per line: a loop over tokens draws many times
            event = {"op": "random", "name": name, "where": student_line()}
            if event not in self.recorder.events:
                note(event)
        if name in DEVICE_MOVES:
            note({"op": name, "where": student_line()})
        elif name in FACTORIES and kwargs.get("device") is None:
            note({"op": "factory", "name": name, "where": student_line()})
        elif (name.endswith("_") and not name.startswith("_")) or name in _IN_PLACE_DUNDERS:
            if isinstance(first, torch.Tensor):
                note({"op": "inplace", "name": name, "on_input": first is self.recorder.block_input, "where": student_line()})
