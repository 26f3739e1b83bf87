"""The masks a train run's dropouts drew, read from the values at a sum (`reading/masks.py: _fit`), as a property over
values the test builds: it draws the mask itself, so it knows every element's truth. Branch elements so small that
"dropped" and "kept and scaled" both lie within tolerance of what was added are put in on purpose: the grader once
read such an element of a right forward as kept, where its dropout had dropped it (an exact 0 added), and took a
point off the forward's train-mode gradients on one seed in many."""

import pytest
import torch
from hypothesis import given, settings, strategies as st

from autograder.engine.reading.masks import _fit

pytestmark = pytest.mark.quick
P, TOL = 0.5, 1e-5


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), tiny=st.integers(1, 12), p=st.sampled_from([0.1, 0.5, 0.8]))
def test_the_mask_read_at_a_sum_is_the_mask_drawn(seed, tiny, p):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(3, 8, 32, generator=generator)
    branch = torch.randn(3, 8, 32, generator=generator)
    where = torch.randint(0, branch.numel(), (tiny,), generator=generator)
    sizes = torch.empty(tiny).uniform_(1e-5, 4e-5, generator=generator)  # within tolerance of 0 once scaled
    branch.view(-1)[where] = sizes * torch.sign(torch.randn(tiny, generator=generator))
    mask = (torch.rand(3, 8, 32, generator=generator) >= p).float()
    h = x + mask * branch / (1 - p)  # float32, as the student's forward adds it
    read, scale = _fit(h - x, branch, p, TOL)
    assert read is not None and scale is None
    assert torch.equal(read, mask), int((read != mask).sum())


def test_a_branch_added_with_another_scale_is_no_mask():
    generator = torch.Generator().manual_seed(1)
    x, branch = torch.randn(3, 8, 32, generator=generator), torch.randn(3, 8, 32, generator=generator)
    mask = (torch.rand(3, 8, 32, generator=generator) >= P).float()
    read, scale = _fit(x + 1.5 * mask * branch - x, branch, P, TOL)
    assert read is None and scale == pytest.approx(1.5, rel=1e-4)
