"""Where one value sits in another (`diagnosis/location.py`), as properties over values the test builds: the
test knows where every element came from, and moves each by float noise below the tolerance, as another
processor's kernels or a LayerNorm called functionally do. Near-equal elements are put in on purpose: among
thousands of elements two are often closer than that noise, and the nearest element is then not the right one
(on an AVX-512 processor the grader once said that the feed-forward network "received a value that is not
norm2(h)" of a forward that handed it exactly that)."""

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from autograder.engine.diagnosis.location import locate, locate_padded, whole_tokens

pytestmark = pytest.mark.quick
TOL = 1e-4


@st.composite
def arranged(draw):
    """(reference, value, true positions of the value's elements in the reference, -1 for padding)."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    batch, tokens, features = draw(st.integers(1, 3)), draw(st.integers(1, 12)), draw(st.sampled_from([4, 8, 32]))
    reference = rng.standard_normal((batch, tokens, features)).astype(np.float32).astype(np.float64)
    flat = reference.reshape(-1)
    bound = TOL * max(float(np.abs(flat).max()), 1.0)
    for _ in range(draw(st.integers(0, 6))):  # near-equal elements, in other tokens or the same one
        i, j = rng.integers(flat.size, size=2)
        if i != j:
            flat[j] = flat[i] + rng.uniform(-0.2, 0.2) * bound
    bound = TOL * max(float(np.abs(flat).max()), 1.0)  # the grader's, now: a copy may have replaced the largest
    rows = np.arange(batch * tokens)
    kept = rng.permutation(rows)[: draw(st.integers(1, rows.size))] if draw(st.booleans()) else rows
    kept = kept if not draw(st.booleans()) else rng.permutation(kept)
    positions = (kept[:, None] * features + np.arange(features)).reshape(-1)
    pads = draw(st.integers(0, 2))
    positions = np.concatenate([np.full(pads * features, -1), positions])
    value = np.where(positions >= 0, flat[np.maximum(positions, 0)], 0.0)
    value = value + np.where(positions >= 0, rng.uniform(-0.4, 0.4, value.shape) * bound, 0.0)
    return reference, value.reshape(-1, features), positions, features


def a_matching(found, value, reference) -> bool:
    """Every element of `value` at a distinct position of `reference`, within the tolerance (padding aside)."""
    flat, r = np.asarray(found).reshape(-1), reference.reshape(-1)
    kept = flat >= 0
    bound = TOL * max(float(np.abs(r).max()), 1.0)
    near = np.abs(r[flat[kept]] - value.reshape(-1)[kept]) <= bound
    return bool(near.all()) and np.unique(flat[kept]).size == int(kept.sum())


@settings(max_examples=300, deadline=None)
@given(arranged())
def test_token_vectors_are_found_where_they_came_from(case):
    reference, value, positions, features = case
    found = locate_padded(value, reference, TOL, features)
    assert found is not None
    assert np.array_equal(found.reshape(-1), positions)
    assert whole_tokens(found, features)


@settings(max_examples=300, deadline=None)
@given(arranged())
def test_element_by_element_a_value_that_came_from_the_reference_is_located(case):
    reference, value, positions, _ = case
    found = locate_padded(value, reference, TOL)
    assert found is not None and a_matching(found, value, reference)


@settings(max_examples=200, deadline=None)
@given(arranged(), st.data())
def test_a_value_with_one_element_from_elsewhere_is_not_located(case, data):
    reference, value, positions, features = case
    kept = np.flatnonzero(positions >= 0)
    value = value.reshape(-1).copy()
    value[data.draw(st.sampled_from(kept.tolist()))] = float(np.abs(reference).max()) + 1.0  # no element is near it
    assert locate_padded(value, reference, TOL) is None
    assert locate_padded(value, reference, TOL, features) is None


@settings(max_examples=200, deadline=None)
@given(arranged(), st.data())
def test_one_element_used_twice_is_not_a_piece(case, data):
    """Copied over another, an element with no other element of the reference near it cannot be located twice."""
    reference, value, positions, features = case
    flat = reference.reshape(-1)
    bound = TOL * max(float(np.abs(flat).max()), 1.0)
    lonely = [k for k in np.flatnonzero(positions >= 0) if np.sum(np.abs(flat - flat[positions[k]]) <= 3 * bound) == 1]
    assume(len(lonely) >= 1 and np.sum(positions >= 0) >= 2)
    i = data.draw(st.sampled_from(lonely))
    j = data.draw(st.sampled_from([k for k in np.flatnonzero(positions >= 0).tolist() if k != i]))
    value = value.reshape(-1).copy()
    value[j] = value[i]
    assert locate_padded(value, reference, TOL) is None
    assert locate_padded(value, reference, TOL, features) is None


def test_features_moved_within_a_token_are_another_value():
    reference = np.random.default_rng(3).standard_normal((2, 5, 8))
    assert locate(reference[..., ::-1], reference, TOL) is not None  # the same numbers
    assert locate(reference[..., ::-1], reference, TOL, features=8) is None  # not the same token vectors
    assert locate(reference[:, ::-1], reference, TOL, features=8) is not None  # tokens reordered


def test_two_elements_nearest_to_one_are_matched_to_two():
    """The case the nearest element alone got wrong: b's noise puts it nearer a than its own b."""
    reference = np.array([0.5, 0.5 + 2e-7, -1.0, 2.0])
    value = np.array([0.5 + 1e-7, 0.5 + 0.9e-7, -1.0, 2.0])  # b, a moved by float noise
    found = locate(value, reference, TOL)
    assert found is not None and sorted(found[:2]) == [0, 1]
    assert np.array_equal(locate(value, reference, TOL, features=4), np.arange(4))
