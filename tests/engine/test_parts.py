"""The grader's components loaded into a student's block (`questions/parts.py: graded_block`): drawn once per
configuration and seed in a job, and never shared with a block. A block that lacks a component gets a copy of its
own, so that whatever one block does to its weights (a forward that writes into them, a backward pass) reaches
neither the next block nor the drawn components."""

import pytest
import torch
import torch.nn as nn

from autograder.engine.questions.parts import PART_NAMES, graded_block, load_parts, make_parts, on_device
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


def _tensors(block: nn.Module) -> list:
    """Every parameter, gradient and buffer of a block, with what moving it could change: the object, its memory and
    its version counter."""
    found = []
    for module in block.modules():
        for value in [*module._parameters.values(), *module._buffers.values()]:
            for tensor in (value, getattr(value, "grad", None)):
                if tensor is not None:
                    found.append((tensor, tensor.data_ptr(), tensor._version, tensor.requires_grad))
    return found


def _unchanged(before: list, block: nn.Module) -> bool:
    after = _tensors(block)
    return len(after) == len(before) and all(
        a[0] is b[0] and a[1:] == (b[0].data_ptr(), b[0]._version, b[0].requires_grad) for a, b in zip(after, before)
    )


def test_a_block_already_on_the_cpu_is_left_exactly_as_moving_it_leaves_it():
    """`on_device` skips `to` only where `to` changes nothing: the block, every tensor object, its memory and its
    version, before and after, and after torch's own `to` as well."""
    block = graded_block(lacking("att"), KIT, GRADING_CFG, 3, drop_p=0.25)
    block.ff.layers[0].weight.grad = torch.ones_like(block.ff.layers[0].weight)
    before = _tensors(block)
    assert on_device(block, "cpu") is block and _unchanged(before, block)
    assert block.to("cpu") is block and _unchanged(before, block)


class OwnMove(nn.Module):
    moved: list = []

    def _apply(self, fn, recurse=True):
        self.moved.append(type(self).__name__)
        return super()._apply(fn, recurse)


class Watched(nn.Parameter):
    """A parameter that notes every `Tensor.to` asked of it."""

    asked: list = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") == "to":
            cls.asked.append(func.__name__)
        return super().__torch_function__(func, types, args, kwargs or {})


@pytest.mark.parametrize(
    "case", ["own _apply", "own to on the instance", "parameter subclass", "meta buffer", "parameters replaced on conversion"]
)
def test_where_moving_could_change_anything_the_block_is_moved_by_torch(case):
    """A module that moves itself its own way, a parameter of another type, a tensor on another device, or torch's
    flag that makes `to` replace parameters: `to` runs, and does what it does."""
    block = graded_block(lacking(*PART_NAMES), KIT, GRADING_CFG, 3)
    if case == "own _apply":
        OwnMove.moved = []
        block.extra = OwnMove()
        assert on_device(block, "cpu") is block and OwnMove.moved == ["OwnMove"]
    elif case == "own to on the instance":
        asked = []
        block.ff.to = lambda *args: asked.append(args)
        block.ff._apply = lambda fn, recurse=True: asked.append("_apply")
        assert on_device(block, "cpu") is block and asked == ["_apply"]  # torch's own `to` of the block moves its ff so
    elif case == "parameter subclass":
        Watched.asked = []
        block.norm1.scale = Watched(block.norm1.scale.detach().clone())
        assert on_device(block, "cpu") is block and Watched.asked == ["to"]
    elif case == "meta buffer":
        block.register_buffer("ghost", torch.empty(2, device="meta"))
        with pytest.raises(NotImplementedError):
            on_device(block, "cpu")
    else:
        scale = block.norm1.scale
        torch.__future__.set_overwrite_module_params_on_conversion(True)
        try:
            on_device(block, "cpu")
        finally:
            torch.__future__.set_overwrite_module_params_on_conversion(False)
        assert block.norm1.scale is not scale and torch.equal(block.norm1.scale, scale)


def test_a_component_handed_to_a_block_is_read_anew_after_the_block_changed_it():
    """The deep stack hands a block that lacks a component the grader's own: what that block's code does to it from
    then on is what the next block loading from it reads, as if nothing had been read before."""
    parts = make_parts(KIT, GRADING_CFG, 5)
    load_parts(lacking(*PART_NAMES)(GRADING_CFG), parts)  # read once, for a block with its own five
    holder = lacking("att", "ff", "norm2", "drop_shortcut")(GRADING_CFG)
    load_parts(holder, parts)
    assert holder.norm1 is parts["norm1"]
    holder.norm1.extra = nn.Parameter(torch.zeros(3))  # what its forward may do with it
    notes = []
    load_parts(lacking(*PART_NAMES)(GRADING_CFG), parts, notes)
    assert any("could not load its weights into your norm1" in note for note in notes), notes
