"""The sweep's answers read against the grader's own computation: where in the space of inputs a block differs from
Pre-LN (`questions/sweep.py` asks).

Every call of the sweep is compared on its own:

* in eval mode, the output (and the input's gradient where asked) against the reference's answer to the same call;
* in train mode, first against the reference's answer under the same random seed (a forward that draws its masks
  as Pre-LN does gives its very values); otherwise against Pre-LN under the masks read from the block's values at
  the boundary between its halves (`masks`), at float32's precision in either dtype (train mode is about the
  dropouts; the float64 block's eval-mode calls ask for float64's).

A difference is a `Miss`: the call, what differed, and the input in words. Nothing here decides points
(`checks` does, from the misses).
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from autograder.engine.facts import Fact
from autograder.engine.questions.parts import make_parts
from autograder.engine.questions.sweep import MAX_NORM2_CALLS, call_input, rate_of
from autograder.engine.tolerance import close, tolerance

from .masks import between_halves, gradient_under, masks_of
from .strict import Malformed, _dict, _field, _short_list, error_info, tensor


@dataclass(frozen=True)
class Miss(Fact):
    """A fact: on one call of the sweep (`where` in words, `input` as data), the block differs from Pre-LN: its output,
    its input's gradient, its values under any dropout mask, its dropout's rate or share kept, its two masks (not
    independent draws), or it raised an error (`what`); in train mode, in the half `half` (None: both or neither)."""

    kind: ClassVar[str] = "differs"
    block: int
    call: int  # 0-based, in the block's sequence of calls
    region: str  # the region of the input space the call stands for (`sweep.REGIONS`)
    what: str  # "error", "output", "gradient", "values", "rate", "share", "masks", "unread"
    half: str | None  # in train mode, the half it shows in ("att", "ff"; None: both or neither)
    size: int  # how many numbers the call's input holds (the smallest input is named)
    where: str  # the input in words
    detail: str  # what differed, in words
    input: tuple = ()  # the input as data: ((name, value), ...) (`as_data`)

    def text(self) -> str:
        return f"{self.where}: {self.detail}"


def _ordinal(n: int) -> str:
    return {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth", 6: "sixth", 7: "seventh"}.get(n, f"{n}th")


def describe(spec: dict, index: int) -> str:
    """A call's input in words: 'with one token, a batch of 3 sequences (emb_dim 24, 6 heads, context length 12), in
    eval mode, on an input that needs no gradient, on the block's third call (after a call in train mode)'."""
    call, cfg = spec["calls"][index], spec["cfg"]
    tokens = "one token" if call["tokens"] == 1 else f"{call['tokens']} tokens"
    if call["tokens"] == cfg["context_length"] and call["tokens"] > 1:
        tokens += " (the whole context)"
    batch = "one sequence" if call["batch"] == 1 else f"a batch of {call['batch']} sequences"
    if call["batch"] > cfg["emb_dim"]:
        batch += " (more than emb_dim)"
    heads = "1 head" if cfg["n_heads"] == 1 else f"{cfg['n_heads']} heads"
    words = [f"with {tokens} and {batch} (emb_dim {cfg['emb_dim']}, {heads}, context length {cfg['context_length']})"]
    if spec["dtype"] == "float64":
        words.append("in float64 after block.double()")
    if call["mode"] == "train":
        rate = rate_of(spec, call)
        how = " set on drop_shortcut after __init__" if isinstance(call["rate"], float) else " (the configuration's drop_rate)"
        words.append(f"in train mode at a dropout rate of {rate:g}{how}")
    else:
        words.append("in eval mode")
    if not call["contiguous"]:
        words.append("on a non-contiguous input")
    words.append({"need": "", "none": "on an input that needs no gradient", "no_grad": "under torch.no_grad()"}[call["grad"]])
    if index:
        before = spec["calls"][index - 1]["mode"]
        switch = f" (after a call in {before} mode)" if before != call["mode"] else ""
        words.append(f"on the block's {_ordinal(index + 1)} call{switch}")
    return ", ".join(w for w in words if w)


def as_data(spec: dict, index: int) -> tuple:
    """A call's input as data: its shape, configuration, dtype, mode, rate, grad mode, layout and place among the
    block's calls (and the mode of the block's first call)."""
    call, cfg = spec["calls"][index], spec["cfg"]
    return (
        ("tokens", call["tokens"]),
        ("batch", call["batch"]),
        ("emb_dim", cfg["emb_dim"]),
        ("n_heads", cfg["n_heads"]),
        ("context_length", cfg["context_length"]),
        ("dtype", spec["dtype"]),
        ("mode", call["mode"]),
        ("rate", rate_of(spec, call)),
        ("rate_set_after", isinstance(call["rate"], float)),
        ("cfg_rate", cfg["drop_rate"]),
        ("grad", call["grad"]),
        ("contiguous", call["contiguous"]),
        ("call", index + 1),
        ("first_mode", spec["calls"][0]["mode"]),
    )


@functools.lru_cache(maxsize=16)
def _parts(kit_id: int, spec_key: str, kit_ref) -> dict:
    spec = json.loads(spec_key)
    dtype = getattr(torch, spec["dtype"])
    parts = make_parts(kit_ref.namespace, spec["cfg"], spec["weights"], drop_p=spec["cfg"]["drop_rate"])
    for part in parts.values():
        part.eval()
    return {name: part.to(dtype) for name, part in parts.items()}


class _Kit:
    """A namespace held by reference in the cache's key (its id is the key; it is kept alive with it)."""

    def __init__(self, namespace: dict):
        self.namespace = namespace

    def __hash__(self) -> int:
        return id(self.namespace)

    def __eq__(self, other) -> bool:
        return isinstance(other, _Kit) and other.namespace is self.namespace


def grader_parts(kit: dict, spec: dict) -> dict:
    """The grader's own five components for a block of the sweep, in its dtype, eval mode (cached)."""
    key = json.dumps({"cfg": spec["cfg"], "weights": spec["weights"], "dtype": spec["dtype"]}, sort_keys=True)
    return _parts(id(kit), key, _Kit(kit))


class Reader:
    """Compares the child's sweep with the reference's, call by call (see the module docstring)."""

    def __init__(self, plan, kit: dict, close):
        self.plan, self.kit, self.close = plan, kit, close  # close(a, b, scale) -> bool: the device's tolerance

    def _same(self, a, b, dtype: str, scale: float = 1.0) -> bool:
        if dtype == "float64":  # computed in float64 all the way: float32's rounding (about 1e-7) shows
            return close(a, b, tolerance(dtype="float64"), scale)
        return self.close(a, b, scale)

    def misses(self, student: dict, reference: dict) -> list[Miss]:
        """Every call where the student's block differs, smallest input first."""
        found = []
        for b, (spec, mine, theirs) in enumerate(zip(self.plan.sweep, student["blocks"], reference["blocks"])):
            for c, (got, want) in enumerate(zip(mine, theirs)):
                miss = self._call(b, c, spec, got, want)
                if miss is not None:
                    found.append(miss)
        return sorted(found, key=lambda m: (m.size, m.block, m.call))

    def _miss(self, b: int, c: int, spec: dict, what: str, detail: str, half: str | None = None) -> Miss:
        call = spec["calls"][c]
        size = call["batch"] * call["tokens"] * spec["cfg"]["emb_dim"]
        return Miss(call["mode"], b, c, call["region"], what, half, size, describe(spec, c), detail, as_data(spec, c))

    def _call(self, b: int, c: int, spec: dict, got: dict, want: dict) -> Miss | None:
        call = spec["calls"][c]
        # train mode is about the dropouts: its values are compared at float32's precision in either dtype (the
        # float64 block's eval-mode calls ask for float64's)
        dtype = spec["dtype"] if call["mode"] == "eval" else "float32"
        if "error" in got:
            error = got["error"]
            text = (
                error.get("message", "")
                if error.get("type") == "ProbeFailure"
                else f"{error.get('type')}: {error.get('message')}"
            )
            where = f" ({error['where']})" if error.get("where") else ""
            return self._miss(b, c, spec, "error", f"your forward raised {text}{where}"[:400])
        if call["mode"] == "eval" or self._same(got["y"], want["y"], dtype):
            if not self._same(got["y"], want["y"], dtype):
                return self._miss(b, c, spec, "output", f"the output differs from a Pre-LN block's ({_gap(got['y'], want['y'])})")
            if "grad_error" in got:
                return self._miss(b, c, spec, "gradient", _backprop(got["grad_error"]))
            if "x_grad" in got and not self._same(got["x_grad"], want["x_grad"], dtype, 10):
                return self._miss(
                    b,
                    c,
                    spec,
                    "gradient",
                    f"the input's gradient differs from a Pre-LN block's ({_gap(got['x_grad'], want['x_grad'])})",
                )
            return None
        return self._train(b, c, spec, got)

    # --- train mode: the masks read from values ---------------------------------------------------------------
    def _train(self, b: int, c: int, spec: dict, got: dict) -> Miss | None:
        call, dtype = spec["calls"][c], getattr(torch, spec["dtype"])
        p = rate_of(spec, call)
        x = call_input(spec, call).to(dtype)
        parts = grader_parts(self.kit, spec)
        y = torch.as_tensor(got["y"], dtype=dtype)
        read = None
        for h in between_halves(got.get("norm2") or [], tuple(x.shape)):
            read = masks_of(x, torch.as_tensor(h, dtype=dtype), y, parts, p, tolerance())
            if read.get("miss") is None or read["miss"][0] != "values":
                break
        if read is None:
            return self._miss(
                b,
                c,
                spec,
                "unread",
                "the output differs from a Pre-LN block's under the same random seed, and the grader cannot read the "
                "masks its dropouts drew (norm2 did not receive the value between the two halves as one tensor or in "
                "whole sequences or tokens)",
            )
        if read.get("miss") is not None:
            what, half, detail = read["miss"]
            return self._miss(b, c, spec, what, detail, half)
        if "grad_error" in got:
            return self._miss(b, c, spec, "gradient", _backprop(got["grad_error"]))
        if "x_grad" in got:
            expected = gradient_under(x, read["m1"], read["m2"], parts, p, call["readout"])
            if not self._same(got["x_grad"], expected, "float32", 10):
                return self._miss(
                    b,
                    c,
                    spec,
                    "gradient",
                    f"the input's gradient differs from a Pre-LN block's under the masks its own dropouts drew "
                    f"({_gap(got['x_grad'], expected)})",
                )
        return None


def _backprop(error: dict) -> str:
    return f"backpropagation through your forward raised {error.get('type')}: {error.get('message')}"[:400]


def _gap(a, b) -> str:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if not np.all(np.isfinite(a)):
        return "it holds NaN or inf"
    return f"largest difference {float(np.max(np.abs(a - b))):.3g}"


def read_sweep(answer: dict, asked: tuple) -> dict:
    """Every call of every block of the sweep: its output (and the input's gradient where asked, what norm2 received
    in train mode), or the error it raised; read strictly (`strict`), against `asked`: per block, per call, (its
    input's shape, train mode?, input gradient asked?)."""
    _dict(answer, "answer", {"ok", "blocks"})
    blocks = _short_list(_field(answer, "blocks", "answer"), "blocks", len(asked))
    if len(blocks) != len(asked):
        raise Malformed("the answers do not match the grader's blocks")
    out = []
    for b, (raw_calls, asked) in enumerate(zip(blocks, asked)):
        calls = _short_list(raw_calls, f"blocks[{b}]", len(asked))
        if len(calls) != len(asked):
            raise Malformed(f"blocks[{b}] does not answer every call")
        found = []
        for c, (raw, (shape, train, need)) in enumerate(zip(calls, asked)):
            where = f"blocks[{b}][{c}]"
            call = _dict(raw, where, {"y", "x_grad", "grad_error", "norm2", "error"})
            if "error" in call:
                found.append({"error": error_info(call["error"], f"{where}.error")})
                continue
            read = {"y": tensor(_field(call, "y", where), f"{where}.y", shape)}
            if need and call.get("grad_error") is not None:
                read["grad_error"] = error_info(call["grad_error"], f"{where}.grad_error")
            elif need:
                read["x_grad"] = tensor(_field(call, "x_grad", where), f"{where}.x_grad", shape)
            elif call.get("x_grad") is not None or call.get("grad_error") is not None:
                raise Malformed(f"{where} answers a gradient the grader did not ask for")
            if train:
                pieces = _short_list(_field(call, "norm2", where), f"{where}.norm2", MAX_NORM2_CALLS)
                # a padded or repeated call may hold more than the block's values; the reader joins what it can
                read["norm2"] = [tensor(v, f"{where}.norm2[]", max_numel=16 * math.prod(shape)) for v in pieces]
            elif call.get("norm2") is not None:
                raise Malformed(f"{where} answers what norm2 received in eval mode")
            found.append(read)
        out.append(found)
    return {"blocks": out}
