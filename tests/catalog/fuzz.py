"""A generator of forwards whose vocabulary is not the grader's, each knowing its own truth by construction.

A forward is Pre-LN's dataflow with something put in its slots. Every edge (producer -> consumer, the keys of
`autograder.engine.steps.EDGES`) can carry an operation, every component call can be written another way, and
the two sums can be computed another way:

    n1 = NORM1(e(x -> n1));  a = ATT(e(n1 -> a));  d1 = DROP(e(a -> d1));  h = SUM(e(x -> h), e(d1 -> h))
    n2 = NORM2(e(h -> n2));  f = FF(e(n2 -> f));   d2 = DROP(e(f -> d2));  y = SUM(e(h -> y), e(d2 -> y))
    return e(y -> out)

The operations come from torch at large, not from the mutants' list of edits: elementwise nonlinearities,
gates, flips, rolls, shifts with zero padding, reductions broadcast back, data-dependent scalings, quantizing
round trips, detaches, a component's own layers called directly, hand-written dropout and normalization. The
rewrites that keep values (a token-wise component run on a flipped, padded, chunked tensor and put back, its
layers called one by one, vmap, checkpoint, float64 arithmetic cast back, clones, functional calls) fill the
other slots of right forwards and of wrong ones alike.

What the generator knows of each forward, without asking the grader:
- `right`: values and gradients are Pre-LN's in both modes (only value-keeping rewrites were used);
- `changes`: the slots it changed, each with the steps a change there breaks (`steps.EDGES`, or the component's
  own step), and in which runs the change shows ("both", "train" or "gradients");
- `first`: the steps any of which is right as the first divergent step, from the earliest run that shows a change:
  the step of its first changed slot in Pre-LN's order (`SLOT_ORDER`, the order of `steps.EDGES`), and the smallest
  step any change breaks (a replaced shortcut breaks step 1 or 6, which come first, though its edge is read after
  the half's branch). A data-dependent scaling of a shortcut is both a replaced shortcut and a scaled one, so it
  allows both steps.

Operations are placed only where they change what the consumer computes: nothing per-token affine goes into a
LayerNorm (it would undo it), nothing that only reorders whole token vectors goes into a token-wise component
(the same vectors, reordered, come out), and every wrong operation changes values beyond any tolerance on
generic inputs.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from autograder.engine.steps import EDGES, SHORTCUT_SCALED

EDGE_KEYS = tuple(EDGES)
COMPONENT_STEP = {"n1": 2, "a": 3, "d1": 4, "n2": 7, "f": 8, "d2": 9}
INTO_NORM = {("x", "n1"), ("h", "n2")}
INTO_TOKENWISE = {("x", "n1"), ("h", "n2"), ("n2", "f"), ("a", "d1"), ("f", "d2")}   # dropout: elementwise
INTO_DROPOUT = {("a", "d1"), ("f", "d2")}
SHORTCUTS = {("x", "h"), ("h", "y")}
# A value left out (zeroed) where the table says which step that breaks: a shortcut left out breaks its addition,
# a branch left out its whole half (`steps.BRANCH_LEFT_OUT`), the output zeroed the last step.
ZEROED = {("x", "h"): (5,), ("d1", "h"): (2,), ("h", "y"): (10,), ("d2", "y"): (7,), ("y", "out"): (10,)}


@dataclass(frozen=True)
class Op:
    """An operation on one edge: `code` is an expression in `t` (the value on the edge)."""
    name: str
    code: str
    shows: str = "both"          # "both": values change in both modes; "gradients": only gradients; "keep": nothing
    per_token_affine: bool = False   # t -> a*t + b with a, b constant over each token's features: a LayerNorm undoes it
    reorders_tokens: bool = False    # whole token vectors moved (or zeroed): a token-wise consumer cannot tell
    scalar: bool = False             # t times a scalar (data-dependent): on a shortcut, both "replaced" and "scaled"
    permutes: bool = False           # only moves elements: an elementwise consumer (a dropout) cannot tell
    open: bool = True                # outside the mutants' vocabulary


WRONG_OPS = (
    Op("tanh", "torch.tanh(t)"),
    Op("sigmoid gate", "t * torch.sigmoid(t)"),
    Op("softplus", "torch.nn.functional.softplus(t)"),
    Op("relu", "torch.relu(t)"),
    Op("absolute value", "t.abs()"),
    Op("square", "t * t"),
    Op("sine", "torch.sin(t)"),
    Op("clamp", "t.clamp(-0.3, 0.3)"),
    Op("sign times square root", "torch.sign(t) * t.abs().sqrt()"),
    Op("exponential", "torch.exp(0.5 * t)"),
    Op("gate by another feature", "t * torch.sigmoid(t.roll(1, dims=-1))"),
    Op("tokens reversed", "t.flip(1)", reorders_tokens=True, permutes=True),
    Op("tokens rolled", "torch.roll(t, 1, dims=1)", reorders_tokens=True, permutes=True),
    Op("tokens shifted with zero padding", "torch.nn.functional.pad(t[:, 1:], (0, 0, 0, 1))", reorders_tokens=True),
    Op("last token dropped, padded", "torch.nn.functional.pad(t[:, :-1], (0, 0, 1, 0))", reorders_tokens=True),
    Op("features reversed", "t.flip(-1)", permutes=True),
    Op("features rolled", "torch.roll(t, 3, dims=-1)", permutes=True),
    Op("centred over tokens", "t - t.mean(dim=1, keepdim=True)"),
    Op("running mean over tokens",
       "t.cumsum(1) / torch.arange(1, t.shape[1] + 1, device=t.device, dtype=t.dtype).view(1, -1, 1)"),
    Op("batch mean broadcast", "t.mean(dim=0, keepdim=True).expand_as(t)"),
    Op("plus each token's largest feature", "t + t.amax(dim=-1, keepdim=True)", per_token_affine=True),
    Op("divided by its norm per token", "t / t.norm(dim=-1, keepdim=True)", per_token_affine=True),
    Op("divided by its standard deviation", "t / t.std()", per_token_affine=True, scalar=True),
    Op("times its mean absolute value", "t * (t.abs().mean() + 0.5)", per_token_affine=True, scalar=True),
    Op("quantized to eighths", "torch.round(t * 8) / 8"),
    Op("integer round trip", "(t * 4).to(torch.int32).to(t.dtype) / 4"),
    Op("detached", "t.detach()", shows="gradients"),
    Op("half its gradient", "0.5 * t + 0.5 * t.detach()", shows="gradients"),
    Op("gradient reversed", "2 * t.detach() - t", shows="gradients"),
    # in the mutants' own vocabulary (catalog.edits): scalings by a constant, a value left out
    Op("doubled", "2.0 * t", per_token_affine=True, scalar=True, open=False),
    Op("halved", "0.5 * t", per_token_affine=True, scalar=True, open=False),
    Op("negated", "-t", per_token_affine=True, scalar=True, open=False),
    Op("zeroed", "torch.zeros_like(t)", per_token_affine=True, scalar=True, open=False),
)

KEEP_OPS = (
    Op("clone", "t.clone()", shows="keep"),
    Op("contiguous copy", "t.contiguous() + 0", shows="keep"),
    Op("reshaped and back", "t.reshape(-1, t.shape[-1]).reshape(t.shape)", shows="keep"),
    Op("float64 round trip", "t.double().to(t.dtype)", shows="keep"),
    Op("times one", "t * 1.0", shows="keep"),
    Op("transposed twice", "t.transpose(0, 1).transpose(0, 1)", shows="keep"),
)

# Components: `{t}` is the argument, `{m}` the module's attribute name.
COMPONENT_KEEP = {
    "norm": ("self.{m}({t})",
             "self.{m}({t}.flip(1)).flip(1)",
             "torch.cat([self.{m}(c) for c in {t}.chunk(2, dim=1)], dim=1)",
             "self.{m}(torch.nn.functional.pad({t}, (0, 0, 0, 2)))[:, :{t}.shape[1]]",
             "torch.nn.functional.layer_norm({t}, {t}.shape[-1:], self.{m}.scale, self.{m}.shift, self.{m}.eps)",
             "torch.vmap(self.{m})({t})",
             "self.{m}({t}.double()).to({t}.dtype)"),
    "att": ("self.att({t})",
            "torch.utils.checkpoint.checkpoint(self.att, {t}, use_reentrant=False)",
            "self.att({t}.clone())"),
    "ff": ("self.ff({t})",
           "self.ff({t}.flip(1)).flip(1)",
           "torch.cat([self.ff(c) for c in {t}.chunk(2, dim=1)], dim=1)",
           "self.ff(torch.nn.functional.pad({t}, (0, 0, 0, 3)))[:, :{t}.shape[1]]",
           "self.ff.layers[2](self.ff.layers[1](self.ff.layers[0]({t})))",
           "torch.stack([self.ff({t}[i]) for i in range(len({t}))])",
           "torch.vmap(self.ff)({t})",
           "torch.utils.checkpoint.checkpoint(self.ff, {t}, use_reentrant=False)",
           "self.ff({t}.reshape(-1, {t}.shape[-1])).reshape({t}.shape)"),
    "drop": ("self.drop_shortcut({t})",
             "torch.nn.functional.dropout({t}, self.drop_shortcut.p, self.training)"),
}
COMPONENT_WRONG = {
    "norm": (("RMS norm by hand",
              "self.{m}.scale * {t} / torch.sqrt({t}.pow(2).mean(-1, keepdim=True) + 1e-5) + self.{m}.shift"),
             ("normalized without scale and shift",
              "({t} - {t}.mean(-1, keepdim=True)) / torch.sqrt({t}.var(-1, keepdim=True, unbiased=False) + 1e-5)"),
             ("normalized over the tokens by hand",
              "self.{m}.scale * ({t} - {t}.mean(1, keepdim=True)) / torch.sqrt({t}.var(1, keepdim=True) + 1e-5)"
              " + self.{m}.shift")),
    "att": (("values projected without attention", "self.att.out_proj(self.att.W_value({t}))"),
            ("attention on keys and values of the reversed sequence",
             "self.att.out_proj(torch.softmax(self.att.W_query({t}) @ self.att.W_key({t}.flip(1)).transpose(1, 2)"
             " / 8, dim=-1) @ self.att.W_value({t}.flip(1)))")),
    "ff": (("the feed-forward network without GELU", "self.ff.layers[2](self.ff.layers[0]({t}))"),
           ("the feed-forward network with ReLU", "self.ff.layers[2](torch.relu(self.ff.layers[0]({t})))"),
           ("only the feed-forward network's first layer, folded",
            "self.ff.layers[0]({t}).view(*{t}.shape[:-1], 4, -1).sum(-2)")),
    # a hand-written dropout with something wrong: the run where it shows
    "drop": (("dropout by hand without rescaling", "train",
              "({t} * (torch.rand_like({t}) >= self.drop_shortcut.p) if self.training else {t})"),
             ("dropout by hand, also in eval mode", "both",
              "{t} * (torch.rand_like({t}) >= self.drop_shortcut.p) / (1 - self.drop_shortcut.p)"),
             ("dropout by hand with the wrong rate", "train",
              "({t} * (torch.rand_like({t}) >= 0.9) / 0.1 if self.training else {t})")),
}
SUM_KEEP = ("{a} + {b}", "torch.add({a}, {b})", "torch.stack([{a}, {b}]).sum(0)",
            "({a}.double() + {b}.double()).to({a}.dtype)", "{b} + {a}", "{a}.clone().add_({b})")
SLOTS = {"n1": ("norm", "norm1"), "a": ("att", "att"), "d1": ("drop", "drop_shortcut"), "n2": ("norm", "norm2"),
         "f": ("ff", "ff"), "d2": ("drop", "drop_shortcut")}


# Pre-LN's order of the slots: each component after the edge into it (the order of `steps.EDGES`).
SLOT_ORDER = ("x->n1", "n1", "n1->a", "a", "a->d1", "d1", "x->h", "d1->h", "h->n2", "n2", "n2->f", "f", "f->d2", "d2",
              "h->y", "d2->y", "y->out")


@dataclass(frozen=True)
class Change:
    slot: str                  # an edge "x->n1" or a component "n1"
    what: str                  # the operation's name
    shows: str                 # "both", "train" or "gradients"
    steps: tuple               # the steps a change here breaks
    open: bool = True


@dataclass(frozen=True)
class Forward:
    name: str
    source: str                # a `forward` method, unindented
    changes: tuple = field(default_factory=tuple)
    hidden: tuple = ()         # components run inside nested vmaps: no call of theirs is recorded (their tensors
                               # cannot leave them), so no value at their boundaries can be compared
    plain: str = ""            # the same changes with no value-keeping rewrite: what it earns, this forward earns

    @property
    def located(self) -> bool:
        """Does the first change sit where values at recorded component boundaries show it: not in, or next to, a
        component the forward ran inside vmap?"""
        first = [c for c in self.changes if c.shows != "gradients"]
        if not first:
            return False
        earliest = min(first, key=lambda change: SLOT_ORDER.index(change.slot))
        touched = set(earliest.slot.split("->")) if "->" in earliest.slot else {earliest.slot}
        return not touched & set(self.hidden)

    @property
    def right(self) -> bool:
        return not self.changes

    @property
    def open(self) -> bool:
        return any(change.open for change in self.changes)

    @property
    def shows(self) -> str:
        """The earliest run that shows a change: "eval" (values in both runs), "train" (values in train mode only)
        or "gradients" (values are Pre-LN's in both runs); "" for a right forward."""
        kinds = {change.shows for change in self.changes}
        return "eval" if "both" in kinds else "train" if "train" in kinds else "gradients" if kinds else ""

    @property
    def first(self) -> frozenset:
        """Steps any of which is right as the first divergent step (empty: no step should be named)."""
        return self.first_in(self.shows)

    def _erased(self, change: Change) -> bool:
        """Is `change` on a value that reaches only the block's output, while the output itself is zeroed? Then no
        value the run records shows it."""
        zeroed = any(c.slot == "y->out" and c.what == "zeroed" for c in self.changes)
        return zeroed and change.slot in ("h->y", "d2->y")

    def first_in(self, mode: str | None) -> frozenset:
        """The same, as seen in one run ("eval" or "train"; None: the earliest run that shows a change)."""
        run = {"eval": ("both",), "train": ("both", "train")}.get(mode or self.shows)
        candidates = [change for change in self.changes if run and change.shows in run and not self._erased(change)]
        if not candidates:
            return frozenset()
        low = min(min(change.steps) for change in candidates)
        earliest = min(candidates, key=lambda change: SLOT_ORDER.index(change.slot))
        return frozenset(step for change in candidates for step in change.steps if min(change.steps) == low) | \
            frozenset(earliest.steps)


def _edge_steps(edge: tuple, op: Op) -> tuple:
    if op.name == "zeroed":
        return ZEROED[edge]
    if edge in SHORTCUTS and op.scalar:
        return (EDGES[edge], SHORTCUT_SCALED[edge]) if op.open else (SHORTCUT_SCALED[edge],)
    return (EDGES[edge],)


def _fits(edge: tuple, op: Op) -> bool:
    """Does `op` on `edge` change what the consumer computes (see the module docstring)?"""
    if op.per_token_affine and edge in INTO_NORM:
        return False
    if op.reorders_tokens and edge in INTO_TOKENWISE:
        return False
    if op.permutes and edge in INTO_DROPOUT:
        return False
    if op.name == "zeroed" and edge not in ZEROED:
        return False
    return True


def render(edges: dict, components: dict, sums: dict) -> str:
    """The forward's source: `edges` edge -> expression in t, `components` slot -> call template, `sums` h/y -> sum
    template."""
    lines, count = ["def forward(self, x):"], [0]

    def edge(producer: str, consumer: str) -> str:
        code = edges.get((producer, consumer))
        if code is None:
            return producer
        count[0] += 1
        name = f"e{count[0]}"
        lines.append(f"    {name} = {_subst(code, producer)}")
        return name

    def call(slot: str, argument: str) -> str:
        kind, module = SLOTS[slot]
        template = components.get(slot, COMPONENT_KEEP[kind][0])
        return template.format(t=argument, m=module)

    for slot, producer in (("n1", "x"), ("a", "n1"), ("d1", "a")):
        lines.append(f"    {slot} = {call(slot, edge(producer, slot))}")
    lines.append(f"    h = {sums.get('h', SUM_KEEP[0]).format(a=edge('x', 'h'), b=edge('d1', 'h'))}")
    for slot, producer in (("n2", "h"), ("f", "n2"), ("d2", "f")):
        lines.append(f"    {slot} = {call(slot, edge(producer, slot))}")
    lines.append(f"    y = {sums.get('y', SUM_KEEP[0]).format(a=edge('h', 'y'), b=edge('d2', 'y'))}")
    lines.append(f"    return {edge('y', 'out')}")
    return "\n".join(lines) + "\n"


def _subst(code: str, name: str) -> str:
    """`code` with the variable t replaced by `name` (t is always a whole word in the templates)."""
    return re.sub(r"\bt\b", name, code)


def _keep_rewrites(rng: random.Random, edges: dict, components: dict, sums: dict, busy: set) -> list:
    """Value-keeping rewrites in some free slots; returns their names."""
    names = []
    for slot, (kind, _) in SLOTS.items():
        if slot not in busy and rng.random() < 0.3:
            components[slot] = rng.choice(COMPONENT_KEEP[kind][1:])
            names.append(f"{slot} rewritten")
    for edge in EDGE_KEYS:
        if edge not in busy and rng.random() < 0.12:
            op = rng.choice(KEEP_OPS)
            edges[edge] = op.code
            names.append(op.name)
    for total in ("h", "y"):
        if rng.random() < 0.3:
            sums[total] = rng.choice(SUM_KEEP[1:])
    return names


def draw(rng: random.Random, *, wrong: int, open_only: bool | None = None) -> Forward:
    """One forward with `wrong` changes (0: a right forward), the rest of its slots filled with rewrites that keep
    values. `open_only`: True draws only operations outside the mutants' vocabulary, False only inside it."""
    edges, components, sums, changes, busy = {}, {}, {}, [], set()
    while len(changes) < wrong:
        if rng.random() < 0.7:
            edge = rng.choice(EDGE_KEYS)
            pool = [op for op in WRONG_OPS if open_only is None or op.open == open_only]
            op = rng.choice(pool)
            if edge in busy or not _fits(edge, op):
                continue
            edges[edge], busy = op.code, busy | {edge}
            changes.append(Change(f"{edge[0]}->{edge[1]}", op.name, op.shows, _edge_steps(edge, op), op.open))
        else:
            if open_only is False:
                continue
            slot = rng.choice(tuple(SLOTS))
            kind, _ = SLOTS[slot]
            if slot in busy:
                continue
            choice = rng.choice(COMPONENT_WRONG[kind])
            shows = choice[1] if kind == "drop" else "both"
            components[slot], busy = choice[-1], busy | {slot}
            changes.append(Change(slot, choice[0], shows, (COMPONENT_STEP[slot],)))
    plain = render(dict(edges), dict(components), dict(sums))
    kept = _keep_rewrites(rng, edges, components, sums, busy)
    label = " + ".join(f"{c.what} at {c.slot}" for c in changes) or "Pre-LN"
    if kept:
        label += f" ({len(kept)} value-keeping rewrites)"
    hidden = tuple(slot for slot, code in components.items() if "vmap(torch.vmap" in code)  # none drawn: one vmap is recorded
    return Forward(label, render(edges, components, sums), tuple(changes), hidden, plain)


# The corpus tests/engine/test_fuzz.py grades (`corpus(FORWARDS, CORPUS_SEED)`), and the seed it grades every
# forward on; test_seeds grades the corpus's first forwards on that seed among others, and the two share gradings.
CORPUS_SEED, GRADING_SEED = 1, 7


def corpus(n: int, seed: int = 0) -> list[Forward]:
    """`n` forwards from one seed: a quarter right, half with open-vocabulary changes (one, two or three), a
    quarter with one change from the mutants' own vocabulary (`edits`)."""
    rng = random.Random(seed)
    found = []
    for i in range(n):
        kind = i % 4
        if kind == 0:
            found.append(draw(rng, wrong=0))
        elif kind == 3:
            found.append(draw(rng, wrong=1, open_only=False))
        else:
            found.append(draw(rng, wrong=rng.choice((1, 1, 2, 3)), open_only=True))
    return found
