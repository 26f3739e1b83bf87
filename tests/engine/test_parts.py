"""The grader's components loaded into a student's block (`questions/parts.py: graded_block`): drawn once per
configuration and seed in a job, and never shared with a block. A block that lacks a component gets a copy of its
own, so that whatever one block does to its weights (a forward that writes into them, a backward pass) reaches
neither the next block nor the drawn components."""

import pytest
import torch
import torch.nn as nn

from autograder.engine.questions.parts import PART_NAMES, graded_block, make_parts
from autograder.engine.questions.plan import GRADING_CFG
from autograder.grading.reference import reference_namespace

pytestmark = pytest.mark.quick
KIT = reference_namespace()


class Lacking(nn.Module):
    """A block whose `__init__` makes only some of the five components (the grader adds the others)."""

    keep: tuple = ()

    def __init__(self, cfg):
        super().__init__()
        fresh = make_parts(KIT, cfg, 999)
        for name in self.keep:
            setattr(self, name, fresh[name])


def lacking(*keep):
    return type("Block", (Lacking,), {"keep": keep})


def state(block: nn.Module) -> dict:
    return {name: value.detach().clone() for name, value in block.state_dict().items()}


@pytest.mark.parametrize("keep", [(), ("norm1", "att"), ("ff", "drop_shortcut"), PART_NAMES])
@pytest.mark.parametrize("seed", [3, 321])
def test_every_block_holds_the_drawn_weights_and_none_shares_them(keep, seed):
    drawn = {name: state(part) for name, part in make_parts(KIT, GRADING_CFG, seed, drop_p=0.25).items()}
    first = graded_block(lacking(*keep), KIT, GRADING_CFG, seed, drop_p=0.25)
    with torch.no_grad():
        for value in first.parameters():
            value.add_(1.0)  # what a forward that writes into its weights would do
    second = graded_block(lacking(*keep), KIT, GRADING_CFG, seed, drop_p=0.25)
    for name in PART_NAMES:
        for key, value in state(second._modules[name]).items():
            assert torch.equal(value, drawn[name][key]), (name, key)
    ours = {value.data_ptr() for value in first.parameters()}
    assert not ours & {value.data_ptr() for value in second.parameters()}
    assert second.drop_shortcut.p == 0.25 and second._modules["drop_shortcut"] is not first._modules["drop_shortcut"]


def test_another_seed_or_rate_draws_other_components():
    one = graded_block(lacking(), KIT, GRADING_CFG, 3, drop_p=0.25)
    other_seed = graded_block(lacking(), KIT, GRADING_CFG, 4, drop_p=0.25)
    other_rate = graded_block(lacking(), KIT, GRADING_CFG, 3, drop_p=0.5)
    assert not torch.equal(one.ff.state_dict()["layers.0.weight"], other_seed.ff.state_dict()["layers.0.weight"])
    assert other_rate.drop_shortcut.p == 0.5 and one.drop_shortcut.p == 0.25
