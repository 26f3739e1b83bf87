"""Blocks the grader can reason about: the student's class, wired to the kit's five components.

The student's `__init__` runs as written; then the kit replaces the five components with its own copies
(the public classes from the notebook) whose weights come from a seed. Only `forward` is the student's.
Every value a graded block computes is therefore determined by the seed and the student's `forward`.
"""

from __future__ import annotations

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


def install_parts(block: nn.Module, parts: dict[str, nn.Module]) -> None:
    """Put `parts` on `block`, also where its `__init__` kept extra references (lists, dicts, Sequentials)."""
    originals = {name: block._modules.get(name) for name in PART_NAMES}
    for container in list(block.modules()):
        for key, child in list(container._modules.items()):
            for name, original in originals.items():
                if original is not None and child is original:
                    container._modules[key] = parts[name]
    for name, part in parts.items():
        setattr(block, name, part)


def build_block(block_class, cfg: dict, notes: list | None = None) -> nn.Module:
    """An instance of the student's class; if its `__init__` fails, an empty one (the parts come later)."""
    if not (isinstance(block_class, type) and issubclass(block_class, nn.Module)):
        raise TypeError("TransformerBlock must be a class that inherits from torch.nn.Module")
    try:
        return block_class(cfg)
    except Exception as error:  # the student's constructor: grade forward anyway, and say so
        if notes is not None:
            notes.append(f"TransformerBlock.__init__(cfg) raised {type(error).__name__}: {error}")
        block = block_class.__new__(block_class)
        nn.Module.__init__(block)
        return block


def graded_block(block_class, kit: dict, cfg: dict, seed: int, notes: list | None = None, **part_options):
    block = build_block(block_class, cfg, notes)
    install_parts(block, make_parts(kit, cfg, seed, **part_options))
    return block
