"""The sweep: probes drawn from the whole space of inputs a block must handle, from the grade's seed.

A block is right when it computes Pre-LN for every valid configuration, dropout rate, shape, dtype, grad mode and
call sequence, not on one point of that space. The parent draws (`draw`) three blocks, each built from a
configuration of its own as the notebook builds it (`TransformerBlock(cfg)`, the grader's weights loaded into the
student's own modules), and a sequence of calls on each:

* configurations: `emb_dim`, `n_heads` (dividing it) and `context_length` drawn per grade, none equal to the
  recorded runs' or to GPT-2's in any of the three, nor to each other;
* dropout rates: the configuration's `drop_rate`, one rate far below 0.5 and one far above it, another drawn from
  (0.2, 0.8), and 0 (train mode must then give the eval output); some set by the grader on the block's own
  `drop_shortcut` after `__init__`;
* sequence lengths of one token and of the whole context, batches of one sequence to more than `emb_dim`, float32
  and float64 (after `block.double()`), contiguous and non-contiguous inputs;
* inputs that need a gradient (the input's gradient is reported), inputs that need none, calls under
  `torch.no_grad()`; several calls on one block in both modes, interleaved with mode switches, each answered on
  its own.

The child answers each call with the block's output, the input's gradient where asked, and in train mode what the
block's norm2 received (the value between the two halves: with it the parent reads the masks both dropouts drew,
`reading/sweep.py`). Nothing here judges: the parent compares every answer with its own computation.
"""

from __future__ import annotations

import random

import torch

from .cells import describe_error, seed_random
from .parts import PART_NAMES, graded_block, on_device
from .recording import Recorder

# Every call: mode, rate ("cfg": the configuration's drop_rate; a number: set after __init__ on drop_shortcut;
# None: left as it is), batch, tokens, whether the input is contiguous, the grad mode ("need": the input needs a
# gradient, which is reported; "none": it needs none; "no_grad": the call runs under torch.no_grad()), and the
# region of the input space the call stands for (which part of the rubric a difference there costs).
CALL_FIELDS = ("mode", "rate", "batch", "tokens", "contiguous", "grad", "region", "input", "rng", "readout")
MAX_NORM2_CALLS = 64  # what norm2 received in a train-mode call: one tensor per call of it (a call per token, say)
REGIONS = ("config", "length", "batch", "dtype", "calls", "rate")


def _cfg(emb: int, heads: int, context: int, rate: float) -> dict:
    return {
        "vocab_size": 101,
        "context_length": context,
        "emb_dim": emb,
        "n_heads": heads,
        "n_layers": 2,
        "drop_rate": rate,
        "qkv_bias": False,
    }


def _heads(rng: random.Random, emb: int, choices: tuple) -> int:
    return rng.choice([h for h in choices if emb % h == 0 and emb // h >= 2])


def draw(seed: int, taken: tuple = ()) -> tuple:
    """The sweep's blocks for one grade: ({"cfg", "dtype", "weights", "calls"}, ...), JSON-friendly. `taken`: the
    (emb_dim, n_heads, context_length) of configurations the grade uses already (none is drawn again)."""
    rng = random.Random(f"sweep:{seed}")
    seeds = lambda: rng.randrange(1, 2**31)  # noqa: E731
    used = set(taken) | {(768, 12, 1024)}  # whole configurations; each size avoids theirs too (below)

    def config(embs: tuple, heads: tuple, contexts: tuple, rate: float) -> dict:
        while True:
            emb = rng.choice(embs)
            shape = (emb, _heads(rng, emb, heads), rng.randint(*contexts))
            if shape not in used:
                used.add(shape)
                return _cfg(*shape, rate)

    def call(mode, rate, batch, tokens, region, contiguous=True, grad="need") -> dict:
        return {
            "mode": mode,
            "rate": rate,
            "batch": batch,
            "tokens": tokens,
            "contiguous": contiguous,
            "grad": grad,
            "region": region,
            "input": seeds(),
            "rng": seeds(),
            "readout": seeds(),
        }

    low, high, middle = round(rng.uniform(0.05, 0.25), 3), round(rng.uniform(0.75, 0.95), 3), round(rng.uniform(0.2, 0.8), 3)
    # Drawn sizes stay clear of the recorded runs' and GPT-2's (emb_dim 32 and 768, 4 and 12 heads, contexts 8, 16 and
    # 1024), and every call's lengths and batches are the extremes of its block (one token, the whole context; one
    # sequence, more than emb_dim): a forward that hard-codes a size, or is wrong past a threshold, shows on the same
    # calls on every draw, so that its points do not depend on the grade's seed.
    wide = config((16, 24, 40, 48), (2, 3, 6, 8), (9, 14), low)  # longer than the recorded runs' context
    ctx = wide["context_length"]
    narrow = config((6, 8, 10, 12), (1, 2, 3), (4, 7), round(rng.uniform(0.2, 0.8), 3))
    mid = config((12, 20, 28, 36), (2, 3, 6), (4, 7), middle)
    blocks = (
        {
            "cfg": wide,
            "dtype": "float32",
            "weights": seeds(),
            "calls": [
                call("eval", None, 2, ctx, "config"),
                call("train", "cfg", 2, ctx, "rate"),
                call("eval", None, 3, 1, "length", grad="none"),
                call("train", high, 2, ctx, "rate", grad="no_grad"),
                call("eval", None, 2, ctx, "calls", contiguous=False, grad="no_grad"),
                call("train", 0.0, 2, ctx, "rate", grad="none"),
                call("eval", None, 1, ctx, "calls"),
            ],
        },
        {
            "cfg": narrow,
            "dtype": "float32",
            "weights": seeds(),
            "calls": [
                call("eval", None, narrow["emb_dim"] + rng.randint(1, 3), narrow["context_length"], "batch"),
                call("eval", None, 1, 1, "length", grad="none"),
            ],
        },
        {
            "cfg": mid,
            "dtype": "float64",
            "weights": seeds(),
            "calls": [
                call("eval", None, 2, mid["context_length"], "dtype"),
                call("train", "cfg", 2, mid["context_length"], "rate"),
                call("eval", None, 3, mid["context_length"], "dtype", contiguous=False, grad="none"),
            ],
        },
    )
    return blocks


def rate_of(block: dict, call: dict) -> float | None:
    """The dropout rate a call runs at (None in eval mode)."""
    if call["mode"] != "train":
        return None
    return float(block["cfg"]["drop_rate"] if call["rate"] in ("cfg", None) else call["rate"])


def randn(shape: tuple, seed: int, dtype: torch.dtype, device: str = "cpu") -> torch.Tensor:
    generator = torch.Generator().manual_seed(int(seed))
    return torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype=dtype, device=device)


def call_input(block: dict, call: dict, device: str = "cpu") -> torch.Tensor:
    """A call's input: (batch, tokens, emb_dim), drawn from its seed; a non-contiguous one is a transposed view of
    the same numbers laid out (batch, emb_dim, tokens)."""
    dtype = getattr(torch, block["dtype"])
    batch, tokens, emb = call["batch"], call["tokens"], block["cfg"]["emb_dim"]
    if call["contiguous"]:
        return 1.5 * randn((batch, tokens, emb), call["input"], dtype, device) + 0.3
    return (1.5 * randn((batch, emb, tokens), call["input"], dtype, device) + 0.3).transpose(1, 2)


def _answer(p, block, recorder: Recorder, spec: dict, call: dict) -> dict:
    x = call_input(spec, call, p.plan.device)
    rate = call["rate"]
    drop = block._modules.get("drop_shortcut")
    if isinstance(rate, float) and drop is not None and isinstance(getattr(drop, "p", None), (int, float)):
        drop.p = rate  # a rate the grader sets after __init__, on the block's own dropout
    block.train(call["mode"] == "train")
    leaf = x.clone().requires_grad_(True) if call["grad"] == "need" else None
    given = leaf.clone() if leaf is not None else x.clone()  # a copy: a forward may write into its input
    recorder.calls, recorder.events, recorder.counts = [], [], {}
    recorder.paused = call["mode"] != "train"  # only a train-mode call reports what norm2 received
    seed_random(call["rng"], p.plan.device)
    with torch.set_grad_enabled(call["grad"] != "no_grad"):
        if recorder.paused:
            y = block(given)
        else:
            with recorder.mode():
                y = block(given)
    if not isinstance(y, torch.Tensor) or tuple(y.shape) != tuple(x.shape):
        shown = tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__
        return {
            "error": {"type": "ProbeFailure", "where": None, "message": f"forward returned {shown}, expected {tuple(x.shape)}"}
        }
    if y.is_complex() or not y.is_floating_point():
        return {"error": {"type": "ProbeFailure", "where": None, "message": f"forward returned a tensor of {y.dtype}"}}
    answer = {"y": torch.Tensor.detach(y).clone()}
    if call["mode"] == "train":
        answer["norm2"] = [c.input for c in recorder.calls if c.name == "norm2"][:MAX_NORM2_CALLS]
    if leaf is not None:
        try:
            if y.requires_grad:
                readout = randn(tuple(y.shape), call["readout"], y.dtype, p.plan.device)
                (y * readout).sum().backward()
            answer["x_grad"] = leaf.grad if leaf.grad is not None else torch.zeros_like(x)
        except Exception as error:  # backpropagation through the student's forward: its own answer
            answer["grad_error"] = describe_error(error)
    return answer


def probe_sweep(p) -> dict:
    """Every call of every block of the sweep, answered one by one: a call that raises is that call's error, and
    the block goes on to its next call."""
    answers = []
    for spec in p.plan.sweep:
        cls = p.definition("TransformerBlock")
        block = graded_block(cls, p.kit, spec["cfg"], spec["weights"], p.notes, drop_p=spec["cfg"]["drop_rate"])
        block = on_device(block, p.plan.device)
        if spec["dtype"] == "float64":
            block = block.double()
        recorder = Recorder()
        for name in PART_NAMES:
            recorder.wrap(block._modules[name], name)
        found = []
        for call in spec["calls"]:
            try:
                found.append(_answer(p, block, recorder, spec, call))
            except Exception as error:  # the student's forward, on this call
                found.append({"error": describe_error(error)})
        answers.append(found)
    return {"blocks": answers}
