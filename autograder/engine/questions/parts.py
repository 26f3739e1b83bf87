"""Blocks the grader can reason about: the student's own block, with the grader's weights loaded in place.

The student's `__init__` runs as written. The grader then loads the weights of its own five components (the
public classes from the notebook, weights drawn from a seed) into the student's very modules, parameter by
parameter and buffer by buffer, and sets drop_shortcut's rate on the student's own dropout. No attribute is ever replaced: a
block that reaches its components through lists, dicts, aliases, closures, `get_submodule` or `_modules` runs
the modules the grader loaded, and is graded as it runs. Where the grader cannot load a component (a module of
another shape, or none of that name), it says so: a missing one is added, one it cannot load is left as the
student made it, and the block is graded by its values alone.
"""

from __future__ import annotations

import copy
import weakref

import torch
import torch.nn as nn

PART_NAMES = ("norm1", "att", "drop_shortcut", "norm2", "ff")


def make_parts(
    kit: dict, cfg: dict, seed: int, *, drop_p: float = 0.0, zero: tuple = (), random_norms: bool = True, draw: bool = True
) -> dict[str, nn.Module]:
    """The five components with weights drawn from `seed` (LayerNorm scale/shift too, unless told not).

    `draw=False` skips drawing attention and feed-forward weights, for callers that re-draw them anyway
    (the deep-stack measurement's `make_stack`)."""
    generator = torch.Generator().manual_seed(int(seed))
    emb = cfg["emb_dim"]
    parts = {
        "norm1": kit["LayerNorm"](emb),
        "norm2": kit["LayerNorm"](emb),
        "att": kit["MultiHeadAttention"](
            d_in=emb,
            d_out=emb,
            context_length=cfg["context_length"],
            dropout=0.0,
            num_heads=cfg["n_heads"],
            qkv_bias=cfg["qkv_bias"],
        ),
        "ff": kit["FeedForward"](cfg),
    }
    with torch.no_grad():
        if random_norms:
            for name in ("norm1", "norm2"):
                sign = torch.where(torch.rand(emb, generator=generator) < 0.5, -1.0, 1.0)
                parts[name].scale.copy_(sign * (0.5 + torch.rand(emb, generator=generator)))
                parts[name].shift.copy_(0.5 * torch.randn(emb, generator=generator))
        for name in ("att", "ff") if draw else ():
            for param in parts[name].parameters():
                if param.dim() > 1:
                    param.copy_(torch.randn(param.shape, generator=generator) / param.shape[-1] ** 0.5)
                else:
                    param.copy_(0.1 * torch.randn(param.shape, generator=generator))
        for name in zero:
            for param in parts[name].parameters():
                param.zero_()
    parts["drop_shortcut"] = nn.Dropout(drop_p)
    return parts


def _pairs(mine: nn.Module, own: list, given: list, their_buffers: list) -> list | None:
    """(the student's tensor, the grader's) for every parameter of the grader's component: by name where every name
    and shape agree, else by position where the shapes agree in order (an `nn.LayerNorm`'s weight and bias for the
    kit's scale and shift); then each buffer of the same name and shape (one of another shape, an attention mask for
    a longer context, stays the student's). `own`: the named parameters of `mine`; `given`, `their_buffers`: the
    component's (`_theirs`). None: `mine` cannot take these weights."""
    own = dict(own)
    if len(own) != len(given):
        return None
    if all(name in own and own[name].shape == value.shape for name, value in given):
        pairs = [(own[name], value) for name, value in given]
    elif all(a.shape == b.shape for a, (_, b) in zip(own.values(), given)):
        pairs = list(zip(own.values(), (value for _, value in given)))
    else:
        return None
    buffers = dict(mine.named_buffers())
    return pairs + [
        (buffers[name], value) for name, value in their_buffers if name in buffers and buffers[name].shape == value.shape
    ]


# The grader's components' named parameters and buffers, read once per component: a component no student's block was
# ever handed (`load_parts` adds the ones a block lacks, and marks them `_HANDED`) is only ever read, by the grader.
_THEIRS: "weakref.WeakKeyDictionary[nn.Module, tuple]" = weakref.WeakKeyDictionary()
_HANDED: "weakref.WeakSet[nn.Module]" = weakref.WeakSet()


def _theirs(theirs: nn.Module) -> tuple[list, list]:
    if theirs in _HANDED:
        return list(theirs.named_parameters()), list(theirs.named_buffers())
    if theirs not in _THEIRS:
        _THEIRS[theirs] = (list(theirs.named_parameters()), list(theirs.named_buffers()))
    return _THEIRS[theirs]


# A student's module whose parameters the grader loaded by position: the grader's names of its parameters, by the
# student's ("norm1.weight" -> "norm1.scale"), so that every answer names them as the grader's components do.
RENAMED: "weakref.WeakKeyDictionary[nn.Module, dict]" = weakref.WeakKeyDictionary()


def load_parts(block: nn.Module, parts: dict[str, nn.Module], notes: list | None = None) -> None:
    """The grader's components' weights, loaded into the student's own modules where they stand (see the module
    docstring); drop_shortcut's rate and the components' inner dropouts' rates set on the student's own dropouts.
    A component the block lacks is added; one it cannot take the weights of stays as it is, and `notes` say so."""
    seen: dict[int, str] = {}
    for name in PART_NAMES:
        theirs, mine = parts[name], block._modules.get(name)
        if mine is None:
            _HANDED.add(theirs)  # the student's forward may change it from now on: read it anew every time
            _THEIRS.pop(theirs, None)
            setattr(block, name, theirs)
            continue
        if id(mine) in seen:
            _note(notes, f"your block's {name} is the very module {seen[id(mine)]} is: one set of weights serves both")
        seen[id(mine)] = name
        if name == "drop_shortcut":
            if isinstance(getattr(mine, "p", None), (int, float)):
                mine.p = theirs.p
            else:
                _note(notes, f"the grader could not set the rate of your drop_shortcut ({type(mine).__name__})")
            continue
        own, (given, their_buffers) = list(mine.named_parameters()), _theirs(theirs)
        pairs = _pairs(mine, own, given, their_buffers)
        if pairs is None:
            _note(
                notes,
                f"the grader could not load its weights into your {name} ({type(mine).__name__} of other "
                "parameters than the notebook's); your block was graded by its values alone",
            )
            continue
        with torch.no_grad():
            for yours, ours in pairs:
                yours.copy_(ours)
        names = dict(zip((n for n, _ in own), (n for n, _ in given)))
        if any(a != b for a, b in names.items()):
            RENAMED.setdefault(block, {}).update({f"{name}.{a}": f"{name}.{b}" for a, b in names.items()})
        for inner in mine.modules():
            if isinstance(inner, nn.Dropout):
                inner.p = 0.0  # the grader's components have no dropout of their own


def _note(notes: list | None, text: str) -> None:
    if notes is not None and text not in notes:
        notes.append(text)


def build_block(block_class, cfg: dict, notes: list | None = None) -> nn.Module:
    """An instance of the student's class; if its `__init__` fails, an empty one (the parts come later)."""
    if not (isinstance(block_class, type) and issubclass(block_class, nn.Module)):
        raise TypeError("TransformerBlock must be a class that inherits from torch.nn.Module")
    try:
        return block_class(cfg)
    except Exception as error:  # the student's constructor: grade forward anyway, and say so
        why = f"TransformerBlock.__init__(cfg) raised {type(error).__name__}: {error}"
        _note(notes, f"{why}; your forward was graded with the kit's components")
        block = block_class.__new__(block_class)
        nn.Module.__init__(block)
        return block


def graded_block(block_class, kit: dict, cfg: dict, seed: int, notes: list | None = None, **part_options):
    """The student's block with the components of (`cfg`, `seed`, `part_options`) loaded. Those components are
    drawn once per job and only read from here on: a component the block lacks gets a copy of its own."""
    block = build_block(block_class, cfg, notes)
    parts = _drawn_parts(kit, cfg, seed, part_options)
    missing = {name: copy.deepcopy(parts[name]) for name in PART_NAMES if block._modules.get(name) is None}
    load_parts(block, {**parts, **missing}, notes)
    return block


def _drawn_parts(kit: dict, cfg: dict, seed: int, part_options: dict) -> dict[str, nn.Module]:
    key = (id(kit), repr(sorted(cfg.items())), int(seed), repr(sorted(part_options.items())))
    if key not in _DRAWN:
        if len(_DRAWN) >= 64:
            _DRAWN.clear()
        _DRAWN[key] = (kit, make_parts(kit, cfg, seed, **part_options))
    return _DRAWN[key][1]


_DRAWN: dict = {}  # (kit namespace, config, seed, options) -> (the namespace, kept alive, and its drawn components)


# What `Module.to` runs on every module it moves: a module whose class takes these from torch's own `Module`, and
# whose instance sets none of them, moves as torch moves it, whatever else the class changes.
_MOVING = ("to", "_apply", "children", "named_children", "__eq__", "__hash__", "__getattribute__")
_TORCH_MOVES = tuple(getattr(nn.Module, name) for name in _MOVING)


def on_device(module: nn.Module, device: str) -> nn.Module:
    """`module.to(device)`, the very call, except where it is provably a no-op: on the CPU, for a module whose
    every module moves as torch's own `Module` moves it (`_MOVING`) and whose every parameter, gradient and buffer is
    a plain tensor already on the CPU. `to` then hands each of them back unchanged (`Tensor.to` returns the tensor
    itself, and `param.data = param` changes nothing), so skipping it leaves every object as it would have been.
    Not where torch's future flags make `to` replace or swap parameters."""
    future = torch.__future__
    replaces = future.get_overwrite_module_params_on_conversion() or future.get_swap_module_params_on_conversion()
    if device == "cpu" and not replaces and _stays_on_cpu(module, set()):
        return module
    return module.to(device)


def _stays_on_cpu(module, seen: set) -> bool:
    kind, own = type(module), getattr(module, "__dict__", {})  # read anew each time: a class may change while graded
    if not all(getattr(kind, name, None) is torch_own for name, torch_own in zip(_MOVING, _TORCH_MOVES)):
        return False
    if any(name in own for name in _MOVING) or not all(type(own.get(d)) is dict for d in ("_parameters", "_buffers", "_modules")):
        return False
    seen.add(id(module))
    for param in module._parameters.values():
        if param is not None and not (type(param) is nn.Parameter and _on_cpu(param) and _plain_cpu(param.grad, True)):
            return False
    if not all(buffer is None or _plain_cpu(buffer) for buffer in module._buffers.values()):
        return False
    return all(child is None or id(child) in seen or _stays_on_cpu(child, seen) for child in module._modules.values())


def _plain_cpu(value, optional: bool = False) -> bool:
    if value is None:
        return optional
    return type(value) is torch.Tensor and _on_cpu(value)


def _on_cpu(value) -> bool:
    return value.is_cpu


def part_params(block) -> dict:
    """The parameters of a block's five components (or of a dict of them), by dotted name, as the grader's own
    components name them (a student's module loaded by position: `parts.RENAMED`)."""
    parts = block if isinstance(block, dict) else {name: block._modules.get(name) for name in PART_NAMES}
    renamed = {} if isinstance(block, dict) else RENAMED.get(block, {})
    found = {
        f"{name}.{pname}": param
        for name in PART_NAMES
        if parts[name] is not None
        for pname, param in parts[name].named_parameters()
    }
    return {renamed.get(key, key): param for key, param in found.items()}
