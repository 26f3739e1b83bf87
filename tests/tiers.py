"""The quick tier (`make test-quick`, which runs `-m "quick and not slow"`) and the full suite (`make test`, every
test). A module marked quick runs whole in the quick tier, but for its tests marked slow; of a long parametrization
the quick tier runs a fixed sample, and the full suite every value."""

from __future__ import annotations

import pytest


def quick_sample(values, every: int, *, several: bool = False) -> list:
    """`values` as parameters, the first and each `every`-th after it in the quick tier, the rest marked slow (the
    full suite only). With `several`, each value is a tuple of the arguments of a parametrization of several names."""
    assert every >= 2, every
    return [
        pytest.param(*(value if several else (value,)), marks=() if i % every == 0 else pytest.mark.slow)
        for i, value in enumerate(values)
    ]
