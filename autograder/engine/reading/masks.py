"""The masks a train-mode run's two dropouts drew, read from values at the boundary between the block's halves.

What norm2 received is h = x + (attention's branch after its dropout); what the block returned is h + (the
feed-forward branch after its dropout). With the grader's own components, each branch is Pre-LN's, computed from those
boundary values: every element of what was added must be the branch's, either dropped or kept and scaled by exactly
1 / (1 - p). The share kept must be what a dropout with rate p keeps, and the two halves' masks must be independent
draws; both are decided with a margin of `MARGIN` standard deviations of the draw, which no valid draw crosses (its
chance is below 1e-14). The reading depends on no draw, and on no record of a dropout call: a dropout written by hand
is read as one called from torch.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from autograder.engine.questions.sweep import randn
from autograder.engine.tolerance import tolerance

MARGIN = 8.0  # standard deviations of a dropout's draw that a share of kept values, or two masks' agreement, may stray


def between_halves(pieces: list, shape: tuple) -> list:
    """What norm2 received, as the value between the halves: one tensor of the block's shape, or its pieces joined
    along the batch or the tokens (sequence by sequence, in chunks of tokens), or their token vectors in order,
    sequences first or tokens first (a call per token)."""
    batch, tokens, emb = shape
    if len(pieces) == 1 and tuple(pieces[0].shape) == shape:
        return [pieces[0]]
    if not pieces or any(p.shape[-1:] != (emb,) for p in pieces):
        return []
    found = []
    if all(p.ndim == 3 for p in pieces):
        found += [np.concatenate(pieces, axis=axis) for axis in (0, 1) if _joins(pieces, axis, shape)]
    rows = np.concatenate([np.asarray(p).reshape(-1, emb) for p in pieces])
    if rows.shape[0] == batch * tokens:
        found += [rows.reshape(batch, tokens, emb), rows.reshape(tokens, batch, emb).transpose(1, 0, 2)]
    return found


def _joins(pieces: list, axis: int, shape: tuple) -> bool:
    """Do `pieces` make a tensor of `shape` joined along `axis`?"""
    other = [d for d in range(3) if d != axis]
    return all(all(p.shape[d] == shape[d] for d in other) for p in pieces) and sum(p.shape[axis] for p in pieces) == shape[axis]


def _fit(added: torch.Tensor, branch: torch.Tensor, p: float, tol: float) -> tuple[torch.Tensor | None, float | None]:
    """The mask (0 or 1 per element) under which `added` is `branch` dropped at rate p, or (None, the scale the
    kept values show) where `added` is no such thing."""
    keep = 1.0 / (1.0 - p)
    size = tol * max(1.0, float(branch.abs().max()) * keep)
    kept = (added - keep * branch).abs() <= size
    dropped = added.abs() <= size
    if bool((kept | dropped).all()):
        # where the branch is so small that both readings hold, the nearer one: a dropped element adds exactly 0
        nearer = ((added - keep * branch).abs() < added.abs()).to(branch.dtype)
        return torch.where(kept & ~dropped, 1.0, torch.where(dropped & ~kept, 0.0, nearer)).to(branch.dtype), None
    live = (branch.abs() > 1e-3 * float(branch.abs().max())) & ~dropped
    ratios = (added[live] / branch[live]).reshape(-1)
    scale = float(ratios.median()) if ratios.numel() else None
    if scale is not None and bool((((added - scale * branch).abs() <= size * max(1.0, abs(scale))) | dropped).all()):
        return None, scale
    return None, None


def masks_of(x, h, y, parts: dict, p: float, tol: float, independent: bool = True) -> dict:
    """Pre-LN's two branches from the boundary values, and the masks under which the block's values are them
    (see the module docstring): {"m1", "m2"}, or {"miss": (what, half, detail)}: half None where both halves
    show it."""
    with torch.no_grad():
        a = parts["att"](parts["norm1"](x))
        m1, scale1 = _fit(h - x, a, p, tol)
        f = parts["ff"](parts["norm2"](h))
        m2, scale2 = _fit(y - h, f, p, tol)
    found = [
        problem
        for problem in (_half(m1, scale1, "att", "attention's", p), _half(m2, scale2, "ff", "the feed-forward", p))
        if problem is not None
    ]
    if found:
        what, half, detail = found[0]
        if len(found) == 2:
            half, detail = None, f"{detail}; {found[1][2]}"
        return {"miss": (what, half, detail)}
    both = ~torch.isnan(m1) & ~torch.isnan(m2)
    n = int(both.sum())
    if independent and p > 0.0 and n:
        agree = float((m1[both] == m2[both]).double().mean())
        expected = (1 - p) ** 2 + p**2
        spread = math.sqrt(expected * (1 - expected) / n)
        if abs(agree - expected) > MARGIN * spread:
            how = (
                "the same mask"
                if agree == 1.0
                else "complementary masks"
                if agree == 0.0
                else f"masks that agree on {agree:.0%} of the values (independent draws agree on about {expected:.0%})"
            )
            return {"miss": ("masks", None, f"the two dropouts drew {how}: each half's dropout must draw a mask of its own")}
    return {"m1": torch.nan_to_num(m1, nan=1.0), "m2": torch.nan_to_num(m2, nan=1.0)}


def _half(mask, scale, half: str, name: str, p: float) -> tuple | None:
    """What is wrong with one half's dropout, as read (`_fit`): (what, half, detail), or None."""
    keep = 1.0 / (1.0 - p)
    if mask is None:
        if scale is not None:
            return (
                "rate",
                half,
                f"the dropout on {name} output kept values scaled by {scale:.4g}, where a rate of {p:g} keeps them "
                f"scaled by 1 / (1 - p) = {keep:.4g}",
            )
        value = "x plus" if half == "att" else "h (what norm2 received) plus"
        where = "norm2" if half == "att" else "the output"
        return (
            "values",
            half,
            f"the values are not Pre-LN's under any dropout mask: what reaches {where} is not {value} {name} output "
            "with some values dropped",
        )
    known = mask[~torch.isnan(mask)]
    n, kept = known.numel(), float(known.sum())
    if not n:
        return None
    if p == 0.0:
        return ("share", half, f"the dropout on {name} output dropped {n - kept:.0f} values at a rate of 0") if kept < n else None
    if abs(kept / n - (1 - p)) > MARGIN * math.sqrt(p * (1 - p) / n):
        return (
            "share",
            half,
            f"the dropout on {name} output kept {kept / n:.0%} of the values, where a rate of {p:g} keeps about "
            f"{1 - p:.0%} of them (the mask is built the wrong way round, or with another rate)",
        )
    return None


def read_masks(
    x: np.ndarray, pieces: list, y: np.ndarray, parts: dict, p: float, tol: float | None = None, independent: bool = True
) -> dict | None:
    """A recorded train run's masks, read from its values at the boundary between the halves (what norm2 received,
    `pieces`, and what the block returned, `y`), as the walk holds them ({"d1", "d2"}: each branch's factor, 0 or
    1 / (1 - p), per element); None where the values are not Pre-LN's under two such masks, with the share kept
    that p keeps and, with `independent`, independent draws (without it: one mask twice is read too)."""
    x = torch.as_tensor(x, dtype=torch.float32)
    y = torch.as_tensor(y, dtype=torch.float32)
    keep, tol = 1.0 / (1.0 - p), tolerance() if tol is None else tol
    for h in between_halves(pieces, tuple(x.shape)):
        read = masks_of(x, torch.as_tensor(h, dtype=torch.float32), y, parts, p, tol, independent)
        if read.get("miss") is None:
            return {name: (keep * read[m]).double().numpy().reshape(-1) for name, m in (("d1", "m1"), ("d2", "m2"))}
    return None


def gradient_under(x, m1, m2, parts: dict, p: float, readout_seed: int) -> np.ndarray:
    """The input's gradient of the read-out through Pre-LN under the masks read (the masks held fixed)."""
    keep = 1.0 / (1.0 - p)
    leaf = x.clone().requires_grad_(True)
    h = leaf + keep * m1 * parts["att"](parts["norm1"](leaf))
    y = h + keep * m2 * parts["ff"](parts["norm2"](h))
    (grad,) = torch.autograd.grad((y * randn(tuple(y.shape), readout_seed, y.dtype)).sum(), leaf)
    return grad.numpy().astype(np.float64)
