"""A generator of forwards that are right everywhere, or wrong only on a region of the space of valid inputs, each
knowing its truth by construction.

A forward is Pre-LN reaching its components one way or another (`ACCESS`: registered attributes, a plain list or
dict made in `__init__`, aliases, a closure, `get_submodule`, `_modules`, a bound method kept in `__init__`), and
then, for a wrong one, one of:

* a region bug: Pre-LN's output replaced by a wrong value on a region of the input space only (`REGIONS`: one
  token, past 8 tokens, a short sequence, a batch as large as emb_dim, one sequence, a batch past five, float64,
  under no_grad, an input that needs no gradient, a non-contiguous input, from the k-th call on, after a mode
  switch, an emb_dim other than 32, a high dropout rate, a rate of 0), by a wrong value (`WRONG`);
* a dropout that is right only at some rates, or whose two halves share a draw (`DROPOUTS`);
* a component kept outside the registered attributes, so that the grader's weights never reach it (`HIDDEN`).

A right one may also compute its output another way on a region (`KEEP`: the same values). Each region has a
predicate on an input of the grader's sweep, as data (`reading/sweep.as_data`): every input the grader names for
a wrong forward must satisfy it.

The forwards compute the same function whatever the grader's seed: their regions are of the input space, which
every grade's sweep covers (a configuration with a context past 8, a batch past emb_dim, float64, every grad mode,
seven calls on one block with mode switches, rates far below and far above 0.5, a rate set after `__init__`).
"""

from __future__ import annotations

import random
import textwrap
from dataclasses import dataclass

GRADING_SEED = 11  # the seed tests/engine/test_regions.py grades the region forwards on

INIT = """
def __init__(self, cfg):
    super().__init__()
    self.att = MultiHeadAttention(d_in=cfg["emb_dim"], d_out=cfg["emb_dim"], context_length=cfg["context_length"],
                                  num_heads=cfg["n_heads"], dropout=cfg["drop_rate"], qkv_bias=cfg["qkv_bias"])
    self.ff = FeedForward(cfg)
    self.norm1 = LayerNorm(cfg["emb_dim"])
    self.norm2 = LayerNorm(cfg["emb_dim"])
    self.drop_shortcut = nn.Dropout(cfg["drop_rate"])
"""

# How the forward reaches its five components: (what __init__ adds, the names n1, att, n2, ff, drop in forward).
ACCESS = {
    "attributes": ("", "self.norm1, self.att, self.norm2, self.ff, self.drop_shortcut"),
    "plain list": (
        "self.halves = [(self.norm1, self.att), (self.norm2, self.ff)]",
        "self.halves[0][0], self.halves[0][1], self.halves[1][0], self.halves[1][1], self.drop_shortcut",
    ),
    "plain dict": (
        'self.table = {"n1": self.norm1, "att": self.att, "n2": self.norm2, "ff": self.ff, "drop": self.drop_shortcut}',
        'self.table["n1"], self.table["att"], self.table["n2"], self.table["ff"], self.table["drop"]',
    ),
    "aliases": (
        "self.first_norm = self.norm1\n    self.second_norm = self.norm2\n    self.mix = self.ff",
        "self.first_norm, self.att, self.second_norm, self.mix, self.drop_shortcut",
    ),
    "closure": (
        "att, ff = self.att, self.ff\n    self.attend = lambda t: att(t)\n    self.feed = lambda t: ff(t)",
        "self.norm1, self.attend, self.norm2, self.feed, self.drop_shortcut",
    ),
    "get_submodule": (
        "",
        'self.get_submodule("norm1"), self.get_submodule("att"), self.get_submodule("norm2"), '
        'self.get_submodule("ff"), self.get_submodule("drop_shortcut")',
    ),
    "_modules": (
        "",
        'self._modules["norm1"], self._modules["att"], self._modules["norm2"], self._modules["ff"], '
        'self._modules["drop_shortcut"]',
    ),
    "a bound method kept": (
        "self.feed = self.ff.forward",
        "self.norm1, self.att, self.norm2, self.feed, self.drop_shortcut",
    ),
}


@dataclass(frozen=True)
class Region:
    """A region of the input space: a condition in the forward (on x and self), and the same as a predicate on an
    input of the grader's sweep (a dict of `as_data`)."""

    name: str
    condition: str
    holds: object  # dict -> bool
    prelude: str = ""  # lines the condition needs first (a call counter)


REGIONS = (
    Region("one token", "x.shape[1] == 1", lambda i: i["tokens"] == 1),
    Region("past 8 tokens", "x.shape[1] > 8", lambda i: i["tokens"] > 8),
    Region("fewer than 4 tokens", "x.shape[1] < 4", lambda i: i["tokens"] < 4),
    Region("a batch as large as emb_dim", "x.shape[0] >= x.shape[-1]", lambda i: i["batch"] >= i["emb_dim"]),
    Region("one sequence", "x.shape[0] == 1", lambda i: i["batch"] == 1),
    Region("more than five sequences", "x.shape[0] > 5", lambda i: i["batch"] > 5),
    Region("float64", "x.dtype == torch.float64", lambda i: i["dtype"] == "float64"),
    Region("under no_grad", "not torch.is_grad_enabled()", lambda i: i["grad"] == "no_grad"),
    Region("an input that needs no gradient", "not x.requires_grad", lambda i: i["grad"] != "need"),
    Region("a non-contiguous input", "not x.is_contiguous()", lambda i: not i["contiguous"]),
    Region(
        "from the second call on",
        "self.calls_made > 1",
        lambda i: i["call"] > 1,
        "self.calls_made = getattr(self, 'calls_made', 0) + 1",
    ),
    Region(
        "from the fourth call on",
        "self.calls_made > 3",
        lambda i: i["call"] > 3,
        "self.calls_made = getattr(self, 'calls_made', 0) + 1",
    ),
    Region(
        "after a mode switch",
        "self.training != self.first_mode",
        lambda i: i["mode"] != i["first_mode"],
        "self.first_mode = getattr(self, 'first_mode', self.training)",
    ),
    Region("an emb_dim other than 32", "x.shape[-1] != 32", lambda i: i["emb_dim"] != 32),
    Region("a dropout rate above 0.6", "self.training and drop.p > 0.6", lambda i: i["mode"] == "train" and i["rate"] > 0.6),
    Region("a dropout rate of 0", "self.training and drop.p == 0", lambda i: i["mode"] == "train" and i["rate"] == 0),
)

# Wrong values for Pre-LN's y (with h, x at hand), each far from y on every input.
WRONG = (
    ("the feed-forward half left out", "h"),
    ("the output squashed", "torch.tanh(y)"),
    ("the feed-forward branch halved", "h + 0.5 * (y - h)"),
    ("the output normalized again", "n2(y)"),
    ("attention's half doubled", "y + (h - x)"),
)
# The same values computed otherwise.
KEEP = (
    ("a clone", "y.clone()"),
    ("a float64 round trip", "y.double().to(y.dtype)"),
    ("times one", "y * 1.0"),
    ("each sequence on its own", "torch.cat([y[i:i + 1] for i in range(y.shape[0])])"),
)

TRAIN_AWAY_FROM_HALF = lambda i: i["mode"] == "train" and i["rate"] != 0.5  # noqa: E731
TRAIN_DROPPING = lambda i: i["mode"] == "train" and i["rate"] > 0  # noqa: E731
# Dropouts right at some rates only, or sharing one draw: (name, what __init__ adds, the dropout, the region).
DROPOUTS = (
    (
        "keep and drop probabilities confused",
        "",
        "torch.nn.functional.dropout(t, 1 - drop.p, self.training)",
        TRAIN_AWAY_FROM_HALF,
    ),
    (
        "the mask built the wrong way round",
        "",
        "t * (torch.rand_like(t) < drop.p) / (1 - drop.p) if self.training else t",
        lambda i: i["mode"] == "train" and i["rate"] not in (0.5,),
    ),
    (
        "the rate kept from __init__",
        'self.rate = cfg["drop_rate"]',
        "torch.nn.functional.dropout(t, self.rate, self.training)",
        lambda i: i["mode"] == "train" and i["rate"] != i["cfg_rate"],
    ),
    (
        "one mask for both halves",
        "",
        "t * self.mask",
        TRAIN_DROPPING,
    ),
    (
        "one draw reused for both halves",
        "",
        "(torch.manual_seed(1234), drop(t))[1]",
        TRAIN_DROPPING,
    ),
)
# A component kept outside the registered attributes: (name, what __init__ adds, which of n1/att/n2/ff it replaces).
HIDDEN = (
    ("norm1 kept in a plain list", 'self.spare = [LayerNorm(cfg["emb_dim"])]', "n1", "self.spare[0]"),
    ("the feed-forward network kept in a plain dict", 'self.spare = {"ff": FeedForward(cfg)}', "ff", 'self.spare["ff"]'),
)


@dataclass(frozen=True)
class Forward:
    name: str
    init: str  # the whole __init__, unindented
    source: str  # the forward method, unindented
    right: bool
    region: object = None  # for a wrong forward, the predicate every input named must satisfy

    def in_region(self, data: dict) -> bool:
        return self.region is None or bool(self.region(data))


def _init(extra: str) -> str:
    return INIT + (f"    {extra}\n" if extra else "")


def _forward(access: str, prelude: str = "", ending: str = "", drop: str | None = None, mask: bool = False) -> str:
    lines = ["def forward(self, x):", f"    n1, att, n2, ff, drop = {access}"]
    if prelude:
        lines.append(f"    {prelude}")
    if drop is not None:
        if mask:
            lines.append("    self.mask = drop(torch.ones_like(x))")
        lines += ["    def dropped(t):", f"        return {drop}"]
    dropper = "dropped" if drop is not None else "drop"
    lines += [f"    h = x + {dropper}(att(n1(x)))", f"    y = h + {dropper}(ff(n2(h)))"]
    if ending:
        lines += textwrap.indent(ending, "    ").splitlines()
    lines.append("    return y")
    return "\n".join(lines) + "\n"


def draw(rng: random.Random, kind: str | None = None) -> Forward:
    """One forward: `kind` "right", "region", "dropout" or "hidden" (None: drawn, half of them right)."""
    style = rng.choice(tuple(ACCESS))
    extra, access = ACCESS[style]
    kind = kind or rng.choice(("right", "right", "right", "region", "region", "region", "dropout", "hidden"))
    if kind == "right":
        if rng.random() < 0.5:
            region, (how, code) = rng.choice(REGIONS), rng.choice(KEEP)
            ending = f"if {region.condition}:\n    y = {code}"
            return Forward(f"Pre-LN via {style}, {how} on {region.name}", _init(extra), _forward(access, region.prelude, ending), True)
        return Forward(f"Pre-LN via {style}", _init(extra), _forward(access), True)
    if kind == "region":
        region, (what, code) = rng.choice(REGIONS), rng.choice(WRONG)
        ending = f"if {region.condition}:\n    y = {code}"
        name = f"{what} on {region.name} (via {style})"
        return Forward(name, _init(extra), _forward(access, region.prelude, ending), False, region.holds)
    if kind == "dropout":
        name, init_extra, code, region = rng.choice(DROPOUTS)
        lines = "\n    ".join(line for line in (extra, init_extra) if line)
        source = _forward(access, drop=code, mask=name == "one mask for both halves")
        return Forward(f"{name} (via {style})", _init(lines), source, False, region)
    name, init_extra, slot, code = rng.choice(HIDDEN)
    lines = "\n    ".join(line for line in (extra, init_extra) if line)
    source = _forward(access).replace(f"    n1, att, n2, ff, drop = {access}", f"    n1, att, n2, ff, drop = {access}\n    {slot} = {code}")
    return Forward(f"{name} (via {style})", _init(lines), source, False, lambda i: True)


def corpus(n: int, seed: int = 0) -> list[Forward]:
    """`n` forwards from one seed: half right (a third of those computing some region otherwise), the others wrong
    on a region, at some rates, or everywhere through a hidden component."""
    rng = random.Random(seed)
    kinds = ("right", "region", "right", "dropout", "right", "region", "right", "hidden")
    return [draw(rng, kinds[i % len(kinds)]) for i in range(n)]


# --- regression cases: forwards written as students write them, each wrong on a region only, or right --------------


def _case(name: str, body: str, region=None, init: str = INIT) -> Forward:
    source = "def forward(self, x):\n" + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + "\n"
    return Forward(name, init, source, region is None, region)


PRE_LN = """
h = x + self.drop_shortcut(self.att(self.norm1(x)))
return h + self.drop_shortcut(self.ff(self.norm2(h)))
"""
TINY_INIT = INIT.replace("super().__init__()", "super().__init__()\n    cfg = GPT_CONFIG_TINY")
CASES = (
    _case(
        "keep and drop probabilities confused",
        """
        p = self.drop_shortcut.p
        h = x + torch.nn.functional.dropout(self.att(self.norm1(x)), 1 - p, self.training)
        return h + torch.nn.functional.dropout(self.ff(self.norm2(h)), 1 - p, self.training)
        """,
        TRAIN_AWAY_FROM_HALF,
    ),
    _case(
        "the mask built the wrong way round",
        """
        p = self.drop_shortcut.p
        def drop(t):
            return t * (torch.rand_like(t) < p) / (1 - p) if self.training else t
        h = x + drop(self.att(self.norm1(x)))
        return h + drop(self.ff(self.norm2(h)))
        """,
        TRAIN_AWAY_FROM_HALF,
    ),
    _case("wrong for one token", "if x.shape[1] == 1:\n    return x + self.ff(self.norm2(x))\n" + PRE_LN, lambda i: i["tokens"] == 1),
    _case(
        "attention in windows of 8 tokens",
        """
        a = torch.cat([self.att(self.norm1(c)) for c in x.split(8, dim=1)], dim=1)
        h = x + self.drop_shortcut(a)
        return h + self.drop_shortcut(self.ff(self.norm2(h)))
        """,
        lambda i: i["tokens"] > 8,
    ),
    _case("nothing for a batch as large as emb_dim", "if x.shape[0] >= x.shape[-1]:\n    return x\n" + PRE_LN, lambda i: i["batch"] >= i["emb_dim"]),
    _case("32 features hard-coded", "x = x.reshape(x.shape[0], x.shape[1], 32)\n" + PRE_LN, lambda i: i["emb_dim"] != 32),
    _case(
        "the tiny configuration hard-coded",
        PRE_LN,
        lambda i: (i["emb_dim"], i["n_heads"]) != (32, 4),
        TINY_INIT,
    ),
    _case(
        "another arrangement under no_grad",
        "if not torch.is_grad_enabled():\n    return x + self.att(self.norm1(x))\n" + PRE_LN,
        lambda i: i["grad"] == "no_grad",
    ),
    _case(
        "attention halved for an input that needs no gradient",
        "if not x.requires_grad:\n    return x + 0.5 * self.att(self.norm1(x))\n" + PRE_LN,
        lambda i: i["grad"] != "need",
    ),
    _case(
        "a call counter",
        'self.calls = getattr(self, "calls", 0) + 1\nif self.calls > 1:\n    x = x * 1.0001 + 0.01\n' + PRE_LN,
        lambda i: i["call"] > 1,
    ),
    _case(
        "a cache keyed by the sequence length",
        """
        cache = self.__dict__.setdefault("cache", {})
        if x.shape[1] not in cache:
            cache[x.shape[1]] = self.norm1(x).detach()
        h = x + self.drop_shortcut(self.att(cache[x.shape[1]]))
        return h + self.drop_shortcut(self.ff(self.norm2(h)))
        """,
        lambda i: True,
    ),
    _case(
        "a hook never removed",
        """
        h = x + self.drop_shortcut(self.att(self.norm1(x)))
        y = h + self.drop_shortcut(self.ff(self.norm2(h)))
        self.norm2.register_forward_hook(lambda module, given, out: out + 0.05)
        return y
        """,
        lambda i: i["call"] > 1,
    ),
    _case("float32 inside for a float64 input", "if x.dtype == torch.float64:\n    x = x.float()\n" + PRE_LN, lambda i: i["dtype"] == "float64"),
    _case(
        "one dropout mask for both halves",
        """
        mask = self.drop_shortcut(torch.ones_like(x))
        h = x + mask * self.att(self.norm1(x))
        return h + mask * self.ff(self.norm2(h))
        """,
        TRAIN_DROPPING,
    ),
    # wrong everywhere, and graded on a measured quantity (the deep stack's growth): the same points on every seed
    _case(
        "each branch normalized after it ran",
        """
        h = x + self.drop_shortcut(self.norm1(self.att(x)))
        return h + self.drop_shortcut(self.norm2(self.ff(h)))
        """,
        lambda i: True,
    ),
    _case(
        "components kept in a plain list",
        """
        for norm, sublayer in self.halves:
            x = x + self.drop_shortcut(sublayer(norm(x)))
        return x
        """,
        init=INIT + "    self.halves = [(self.norm1, self.att), (self.norm2, self.ff)]\n",
    ),
)
