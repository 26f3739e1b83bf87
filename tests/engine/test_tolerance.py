"""The grader's one rule for 'the same values', as properties over generated arrays.

The oracle never asks the rule: each case is built at a known distance from its original (a difference of known
length, an element moved by a known amount, a value rounded to float32), so the generator knows whether the two
arrays are the same values within the tolerance or not."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays

from autograder.engine.tolerance import GRADIENTS, REPLAYED, TOLERANCE, close, tolerance

pytestmark = pytest.mark.quick

TOLS = sorted({t for table in TOLERANCE.values() for t in table.values()})
SCALES = [1.0, REPLAYED, GRADIENTS]
values = arrays(np.float64, array_shapes(min_dims=1, max_dims=3, max_side=6), elements=st.floats(-1e3, 1e3, width=64))
examples = settings(max_examples=200, deadline=None)


def length(v) -> float:
    return float(np.sqrt(np.sum(np.square(v))))


def direction(shape, seed: int) -> np.ndarray:
    """A random direction of unit length: where the generated difference points."""
    u = np.random.default_rng(seed).standard_normal(shape)
    return u / length(u)


@examples
@given(values, st.sampled_from(TOLS), st.sampled_from(SCALES), st.integers(0, 2**32 - 1), st.floats(0.0, 0.45))
def test_a_difference_well_inside_the_tolerance_is_the_same_values(b, tol, scale, seed, share):
    """A difference of length `share` (under a half) of tol * scale * the values' size (at least 1) is not seen."""
    allowed = tol * scale * max(length(b), 1.0)
    a = b + share * allowed * direction(b.shape, seed)
    assert close(a, b, tol, scale)
    assert close(b, a, tol, scale)


@examples
@given(values, st.sampled_from(TOLS), st.sampled_from(SCALES), st.integers(0, 2**32 - 1), st.floats(2.0, 1e6))
def test_a_difference_beyond_the_tolerance_is_seen(b, tol, scale, seed, times):
    """A difference `times` (two or more) the allowed length is seen, however it points."""
    allowed = tol * scale * max(length(b), 1.0)
    a = b + times * allowed * direction(b.shape, seed)
    assert not close(a, b, tol, scale)
    assert not close(b, a, tol, scale)


@pytest.mark.slow  # the quick tier runs the others
@examples
@given(values, st.sampled_from(TOLS), st.sampled_from(SCALES), st.data())
def test_one_changed_value_among_many_is_seen(b, tol, scale, data):
    """Moving a single element by three times the allowed length is seen, whichever element it is."""
    index = data.draw(st.integers(0, b.size - 1))
    sign = data.draw(st.sampled_from([-1.0, 1.0]))
    a = b.copy().reshape(-1)
    a[index] += sign * 3 * tol * scale * max(length(b), 1.0)
    assert not close(a.reshape(b.shape), b, tol, scale)


@pytest.mark.slow  # the quick tier runs the others
@examples
@given(values, values, st.sampled_from(TOLS), st.sampled_from(SCALES))
def test_the_rule_is_symmetric(a, b, tol, scale):
    """Which array is the reference never matters (arrays of one shape, or of two)."""
    if a.shape == b.shape:
        b = a + (b - a) * 1e-3 * tol  # pairs near the boundary, too, not only ones far apart
    assert close(a, b, tol, scale) == close(b, a, tol, scale)


@pytest.mark.slow  # the quick tier runs the others
@examples
@given(values, st.sampled_from([t for t in TOLS if t >= 1e-5]), st.sampled_from(SCALES), st.floats(0.0, 0.5))
def test_symmetric_on_the_boundary_too(b, tol, scale, past):
    """An array stretched by just over the tolerance (its difference is tol * scale * (1 + a little) times the
    shorter one's length, and under that times the longer one's) is the same values both ways round, or neither."""
    assume(length(b) >= 1.0)
    bound = tol * scale
    a = b * (1 + bound * (1 + past * bound))
    assert close(a, b, tol, scale) == close(b, a, tol, scale)


@pytest.mark.slow  # the quick tier runs the others
@examples
@given(values, st.integers(0, 2**32 - 1), st.floats(0.0, 4.0), st.integers(0, 40), st.sampled_from(TOLS))
def test_scaling_both_arrays_changes_nothing(b, seed, share, power, tol):
    """Two arrays at least as long as the floor: multiplying both by a power of two (exact in float64) keeps the
    verdict, since rounding is relative to the values' size."""
    assume(length(b) >= 1.0)
    a = b + share * tol * length(b) * direction(b.shape, seed)
    assume(length(a) >= 1.0)
    factor = 2.0**power
    assert close(a, b, tol) == close(a * factor, b * factor, tol)


@examples
@given(values, st.sampled_from(TOLS))
def test_arrays_of_other_shapes_are_never_the_same_values(b, tol):
    """The same numbers laid out in another shape are other values; compared flat (over block positions), they
    are the same; arrays of other sizes never are."""
    other = b.reshape(-1) if b.ndim > 1 else b.reshape(1, -1)
    assert not close(other, b, tol)
    assert close(other, b, tol, flat=True)
    assert not close(np.append(b, 0.0), b, tol, flat=True)


@pytest.mark.slow  # the quick tier runs the others
@examples
@given(values, st.sampled_from([np.nan, np.inf, -np.inf]), st.data(), st.booleans())
def test_a_value_that_is_not_finite_is_never_the_same(b, bad, data, first):
    """NaN or infinity anywhere, in either array, even the very same array twice: never the same values."""
    index = data.draw(st.integers(0, b.size - 1))
    a = b.copy().reshape(-1)
    a[index] = bad
    a = a.reshape(b.shape)
    assert not close(a, a.copy(), 1e-3)
    assert not (close(a, b, 1e-3) if first else close(b, a, 1e-3))


@examples
@given(st.integers(0, 2**32 - 1), st.integers(2, 64))
def test_float32_rounding_is_inside_float32_tolerance_and_outside_float64s(seed, n):
    """The same sums in float32, added in another order, are the same values at float32's tolerance on every
    device; a float64 value rounded to float32 on its way is not the same at float64's."""
    rng = np.random.default_rng(seed)
    terms = rng.standard_normal((n, 4, 8))
    forward = np.zeros((4, 8), dtype=np.float32)
    backward = np.zeros((4, 8), dtype=np.float32)
    for t in terms.astype(np.float32):
        forward = forward + t
    for t in terms.astype(np.float32)[::-1]:
        backward = backward + t
    for device in ("cpu", "cuda"):
        assert close(forward, backward, tolerance(device, "float32"))
    exact = terms.sum(0)
    assert not close(exact.astype(np.float32), exact, tolerance("cpu", "float64"))
    assert close(exact.astype(np.float32), exact, tolerance("cpu", "float32"))


def test_the_table_is_read_by_device_and_number_type():
    """Any CUDA device reads CUDA's row; float64 demands more than float32 everywhere; one table for all."""
    assert tolerance("cuda:1", "float32") == tolerance("cuda", "float32") == TOLERANCE["cuda"]["float32"]
    assert tolerance("cpu", "torch.float64") == TOLERANCE["cpu"]["float64"]
    assert tolerance() == TOLERANCE["cpu"]["float32"]
    for row in TOLERANCE.values():
        assert row["float64"] < row["float32"]
