"""Components whose outputs the grader sets: changed by a seeded amount (the `respond` question), or held at values
of the grader's (the `moved` question: the block run in eval mode with attention's and the feed-forward network's
outputs held, as it is and with one value moved by an amount; `diagnosis/moves.py` reads it); and the block input with
one token of each sequence given other content (the `token` question)."""

from __future__ import annotations

import torch

from .plan import MOVED_RUNS, Plan


# The layer whose output is the kit's component's output: attention returns out_proj's, the feed-forward network
# its last layer's. The `respond` question changes that layer, so that a pass over the component's own layers
# (`self.ff.layers[2](...)`) is changed as a whole call of it is.
OUTPUT_LAYERS = {"att": "out_proj", "ff": "layers.2"}


def output_layer(block, name: str):
    """`block`'s component `name`, or its output layer (OUTPUT_LAYERS) where it has one."""
    module = getattr(block, name)
    try:
        return module.get_submodule(OUTPUT_LAYERS[name]) if name in OUTPUT_LAYERS else module
    except AttributeError:  # a component of another make: changed whole
        return module


def change(module, seed: int) -> None:
    """Make every output of `module` differ from what it computes by a seeded amount of its own size (for the
    `respond` question; the k-th call of the run draws from seed + k)."""
    inner, count = module.forward, [0]
    pool = torch.randn(POOL, generator=torch.Generator().manual_seed(int(seed)), dtype=torch.float64)

    def forward(*args, **kwargs):
        out = inner(*args, **kwargs)
        if not isinstance(out, torch.Tensor) or not out.is_floating_point() or out.numel() == 0:
            return out
        count[0] += 1
        if torch._C._functorch.is_batchedtensor(out):  # inside torch.vmap, which refuses random draws and Python numbers
            return out + _batched_change(out, pool, count[0])
        generator = torch.Generator().manual_seed(int(seed) + count[0])
        noise = torch.randn(tuple(out.shape), generator=generator, dtype=torch.float64)
        size = float(torch.Tensor.detach(out).double().std()) if out.numel() > 1 else 1.0
        return out + (0.5 * (size if size == size and size > 0 else 1.0) * noise).to(dtype=out.dtype, device=out.device)

    module.forward = forward


POOL = 4096  # the amounts a call inside torch.vmap is changed by, drawn when the question starts


def _batched_change(out: torch.Tensor, pool: torch.Tensor, call: int) -> torch.Tensor:
    """The change of one call inside torch.vmap: amounts from the pool drawn beforehand (the same for every example),
    half of each example's own spread in size."""
    numel = out.numel()
    amounts = pool.roll(-97 * call).repeat(numel // POOL + 1)[:numel].view(out.shape)
    size = torch.Tensor.detach(out).double().std() if numel > 1 else torch.ones((), dtype=torch.float64)
    size = torch.where(size > 0, size, torch.ones_like(size))
    return (0.5 * size * amounts).to(dtype=out.dtype, device=out.device)


def moved_values(seed: int, x: torch.Tensor) -> dict:
    """The values of the `moved` question, from its seed and the block input: what attention's and the feed-forward
    network's outputs are held at ("att", "ff"), and the amount moved ("delta"), each of the input's shape and size.
    The parent computes the same values to read the answer."""
    generator = torch.Generator().manual_seed(int(seed))
    scale = float(torch.Tensor.detach(x).double().std())
    return {
        name: (scale * torch.randn(tuple(x.shape), generator=generator, dtype=torch.float64)).to(torch.float32)
        for name in ("att", "ff", "delta")
    }


def hold(module, value: torch.Tensor) -> None:
    """Every output of `module` of `value`'s shape is `value` (the `moved` question)."""
    inner = module.forward

    def forward(*args, **kwargs):
        out = inner(*args, **kwargs)
        if isinstance(out, torch.Tensor) and out.is_floating_point() and tuple(out.shape) == tuple(value.shape):
            return value.to(dtype=out.dtype, device=out.device).clone()
        return out

    module.forward = forward


def moved_runs(plan: Plan, x: torch.Tensor) -> list:
    """The question's runs, in `MOVED_RUNS` order, as (name, block input, held outputs by component): as they are
    ("base"), with the block input moved ("x"), with attention's held output moved ("att"), with the feed-forward
    network's moved ("ff"), each by the same amount."""
    values = moved_values(moved_seed(plan), x)
    delta = values["delta"].to(device=x.device)
    held = {name: values[name].to(device=x.device) for name in ("att", "ff")}
    runs = {"base": ({}, x), "x": ({}, x + delta), "att": ({"att": delta}, x), "ff": ({"ff": delta}, x)}
    return [(name, runs[name][1], {k: v + runs[name][0].get(k, 0) for k, v in held.items()}) for name in MOVED_RUNS]


def moved_seed(plan: Plan) -> int:
    """The `moved` question's seed: one of its own, from the plan's (no draw of the plan's changes for it)."""
    return plan.respond + 7919


def token_changed(x: torch.Tensor, seed: int) -> torch.Tensor:
    """`x` with one token of each sequence (drawn from `seed`) given other content: a change orthogonal to the
    token's mean and to the token itself, half its size, so that the token's mean and (nearly) its spread stay.
    A branch that sees only means (the input's global mean, a token's mean) cannot see it."""
    generator = torch.Generator().manual_seed(int(seed))
    changed = x.detach().clone()
    for row in range(x.shape[0]):
        token = int(torch.randint(x.shape[1], (1,), generator=generator))
        own = changed[row, token].double()
        centred = own - own.mean()
        basis = torch.stack([torch.ones_like(own), centred])
        q, _ = torch.linalg.qr(basis.T)
        delta = torch.randn(own.shape, generator=generator, dtype=torch.float64)
        delta = delta - q @ (q.T @ delta)
        delta = 0.5 * delta * float(centred.norm()) / max(float(delta.norm()), 1e-12)
        changed[row, token] = (own + delta).to(x.dtype)
    return changed
