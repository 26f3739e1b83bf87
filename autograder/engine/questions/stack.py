"""The deep stack the gradient check measures: 24 blocks whose weights the notebook's `make_stack` draws, and the
notebook's `gradient_profile` of it."""

from __future__ import annotations

import torch

from .cells import tensor_out
from .parts import PART_NAMES, make_parts, on_device
from .plan import BATCH, PROFILE_DEPTH, Plan


def deep_profile(make_block, kit: dict, plan: Plan) -> list[float]:
    """The notebook's `gradient_profile` of `PROFILE_DEPTH` blocks made by `make_block(parts)`.

    The stack's weights are drawn by the notebook's `make_stack` on bare sets of the kit's five components,
    then handed to the blocks being measured: they never depend on how a student's `__init__` orders its
    modules, and the grader can rebuild the very same stack around its own reading of the student's forward."""
    cfg = plan.cfg
    drawn = _drawn_stack(kit, tuple(sorted(cfg.items())), plan.profile_seed, plan.device)
    blocks = [make_block({name: source[name] for name in PART_NAMES}).eval() for source in drawn]
    stack = on_device(torch.nn.Sequential(*blocks), plan.device)
    generator = torch.Generator().manual_seed(plan.profile_seed)
    x = torch.randn(BATCH, cfg["context_length"], cfg["emb_dim"], generator=generator).to(plan.device)
    tensor_out(stack[0](x.clone()), x)
    profile = kit["gradient_profile"](stack, x, seed=plan.profile_seed)
    return [float(v) for v in list(profile)[:PROFILE_DEPTH]]


def _drawn_stack(kit: dict, cfg: tuple, seed: int, device: str):
    """The deep stack's components for one seed and device, drawn once (they are the same for every block
    measured on that seed; measuring never changes them, and a stack on `device` moves them there)."""
    key = (id(kit), cfg, seed, device)
    if key not in _STACKS:
        if len(_STACKS) >= 4:
            _STACKS.clear()

        def bare_parts():
            return torch.nn.ModuleDict(make_parts(kit, dict(cfg), 0, random_norms=False, draw=False))

        _STACKS[key] = (kit, kit["make_stack"](bare_parts, PROFILE_DEPTH, seed=seed))
    return _STACKS[key][1]


_STACKS: dict = {}  # (kit namespace, config, seed, device) -> (the namespace, kept alive, and its drawn stack)
