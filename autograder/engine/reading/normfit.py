"""Normalizations written by hand, and near misses of a LayerNorm, recognised from their values.

A LayerNorm maps a value S to scale * (S - mean) / sqrt(var + eps) + shift, with mean and (biased) variance
over each token's features. Students also write it with another eps, the unbiased variance, statistics over
the wrong axis or over a whole sequence, or without the module's scale and shift. Each of these is a
`program.Variant`. Given what a normalization returned (and, for a hand-written one, not even what it
normalized), the grader finds the variant, and the sum of earlier values it normalized, by solving for them:
per group of statistics, (V - shift) / scale is an affine function of S, so S lies in a small linear space
that least squares finds; eps and the kind of variance follow from each group's spread. Every fit is then
checked by computing the variant itself and comparing with what was recorded.
"""

from __future__ import annotations

import numpy as np
import torch

from autograder.engine.tolerance import REPLAYED, close

from .placement import tidy
from .program import Variant

GROUPS = ("token", "sequence", "tokens", "batch", "all")


def _axes(over: str, ndim: int) -> tuple:
    axes = Variant.AXES[over]
    return tuple(range(ndim)) if axes is None else tuple(a % ndim for a in axes)


def _params(parts: dict, name: str | None):
    if name is None:
        return 1.0, 0.0
    norm = parts[name]
    return (norm.scale.detach().numpy().astype(np.float64), norm.shift.detach().numpy().astype(np.float64))


def _eps(source: np.ndarray, standard: np.ndarray, over: str) -> tuple[float, bool] | None:
    """eps and whether the variance was unbiased, from a source and its standardized value (None: neither
    kind of variance gives one eps for every group)."""
    axes = _axes(over, source.ndim)
    count = int(np.prod([source.shape[a] for a in axes]))
    if count < 2:
        return None
    biased = source.var(axis=axes)
    spread = standard.var(axis=axes)
    if np.any(spread <= 1e-12) or np.any(biased <= 1e-12):
        return None
    for unbiased in (False, True):
        denominator = biased / spread  # var(S) + eps, whatever var(S) is
        eps = denominator - (biased * count / (count - 1) if unbiased else biased)
        middle = float(np.median(eps))
        noise = 1e-5 * denominator  # float32's rounding, group by group: a wide group's eps is known less well
        if middle > -float(np.median(noise)) and np.all(np.abs(eps - middle) <= 0.05 * abs(middle) + noise):
            return max(middle, 0.0), unbiased
    return None


def _matches(variant: Variant, source: np.ndarray, value: np.ndarray, parts: dict, tol: float) -> bool:
    with torch.no_grad():
        got = variant.apply(torch.as_tensor(source, dtype=torch.float64), parts).numpy()
    return close(got, value, tol, REPLAYED)


def _nice_eps(eps: float, reference: float) -> float:
    if abs(eps - reference) <= 0.1 * reference + 1e-9:
        return reference
    nice = float(f"{eps:.2g}")
    return nice if abs(nice - eps) <= 0.02 * eps else eps


def fit_call(name: str, source: np.ndarray, value: np.ndarray, parts: dict, tol: float) -> Variant | None:
    """The variant a norm-like call computed, from what it received and returned (None: none fits)."""
    if source.shape != value.shape or source.ndim == 0 or not np.all(np.isfinite(value)):
        return None
    reference = float(getattr(parts.get("norm1"), "eps", 1e-5))
    own = name if name in ("norm1", "norm2") else None
    for params in dict.fromkeys((own, None, "norm1", "norm2")):
        scale, shift = _params(parts, params)
        if np.any(np.abs(scale) < 1e-6):
            continue
        standard = (value - shift) / scale
        for over in GROUPS:
            if over == "batch" and source.ndim < 3:
                continue
            found = _eps(source, standard, over)
            if found is None and not np.any(source.var(axis=_axes(over, source.ndim)) > 1e-12):
                found = (reference, False)  # every group constant: any eps makes it zero, and the output the shift
            if found is None:
                continue
            variant = Variant(over, _nice_eps(found[0], reference), found[1], params)
            if _matches(variant, source, value, parts, tol):
                return variant
    return None


def _residuals(columns: np.ndarray, standard: np.ndarray, axes: tuple) -> np.ndarray:
    """Each column (`columns` stacks them on a first axis) with, per group, its projection on (1, standard) taken
    out; one column of the result per column given."""
    centred = standard - standard.mean(axis=axes, keepdims=True)
    spread = (centred**2).sum(axis=axes, keepdims=True)
    spread = np.where(spread > 1e-12, spread, np.inf)
    within = tuple(a + 1 for a in axes)  # the same groups, past the stacking axis
    columns = columns - columns.mean(axis=within, keepdims=True)
    out = columns - centred * (columns * centred).sum(axis=within, keepdims=True) / spread
    return out.reshape(len(columns), -1).T


def fit_value(value: np.ndarray, columns: dict, parts: dict, tol: float) -> tuple[Variant, dict] | None:
    """A value that is no sum of earlier values: is it a normalization (of some variant) of one? `columns`:
    name -> an earlier value at the same positions, in `value`'s shape. Returns the variant and the sum it
    normalized ({name: coefficient}), or None."""
    value = np.asarray(value, dtype=np.float64)
    keys = [k for k, c in columns.items() if np.any(c)]
    if not keys or not np.all(np.isfinite(value)) or value.ndim == 0:
        return None
    stacked = np.stack([columns[k] for k in keys])
    smallest = float(min(np.linalg.norm(c) for c in stacked))
    reference = float(getattr(parts.get("norm1"), "eps", 1e-5))
    for params in ("norm1", "norm2", None):
        scale, shift = _params(parts, params)
        if params is not None and (value.shape[-1] != len(scale) or np.any(np.abs(scale) < 1e-6)):
            continue
        standard = (value - shift) / scale
        for over in GROUPS:
            if over == "batch" and value.ndim < 3:
                continue
            axes = _axes(over, value.ndim)
            matrix = _residuals(stacked, standard, axes)
            _, singular, vt = np.linalg.svd(matrix, full_matrices=False)
            if singular[-1] > 1e-4 * smallest or (len(singular) > 1 and singular[-2] < 10 * singular[-1]):
                continue
            weights = vt[-1] / vt[-1][np.argmax(np.abs(vt[-1]))]
            # the null vector's sign is rounding's choice where two terms are equally large (x - a against a - x),
            # and a normalization is not: both signs are tried, so that the reading does not depend on the draw
            for sign in (1.0, -1.0):
                takes = {k: tidy(sign * float(c)) for k, c in zip(keys, weights) if abs(c) > 1e-6}
                source = sum(c * columns[k] for k, c in takes.items())
                found = _eps(source, standard, over)
                if found is None:
                    continue
                variant = Variant(over, _nice_eps(found[0], reference), found[1], params)
                if _matches(variant, source, value, parts, tol):
                    return variant, takes
    return None


def plain(variant: Variant, parts: dict) -> str | None:
    """The component a variant is exactly (norm1, norm2, or a parameter-free layer_norm), if it is one."""
    if variant.over != "token" or variant.unbiased:
        return None
    name = variant.params or "layer_norm"
    eps = float(getattr(parts.get(variant.params or "norm1"), "eps", 1e-5)) if variant.params else 1e-5
    return name if abs(variant.eps - eps) <= 0.1 * eps else None


def describe_variant(variant: Variant, reference_eps: float) -> str:
    """How a near-miss normalization differs from a LayerNorm, in words."""
    how = []
    if variant.over != "token":
        how.append(
            {
                "sequence": "took one mean and variance per sequence (over its tokens and features)",
                "tokens": "took each feature's mean and variance over the tokens (dim=1) instead of each "
                "token's over its features (dim=-1)",
                "batch": "took each feature's mean and variance over the batch (dim=0)",
                "all": "took one mean and variance over the whole batch",
            }[variant.over]
        )
    if variant.unbiased:
        how.append("used the unbiased variance (divided by n - 1; a LayerNorm divides by n)")
    if abs(variant.eps - reference_eps) > 0.1 * reference_eps:
        how.append(f"added eps = {variant.eps:g} to the variance (the LayerNorm's eps is {reference_eps:g})")
    if variant.params is None:
        how.append("left out the scale and shift")
    return "; ".join(how) if how else "matches a LayerNorm"
