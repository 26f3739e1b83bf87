"""Facts: what the grader says about a forward, as typed predicates it evaluated on recorded values.

Every sentence of feedback that describes what a student's forward did is one of these, rendered to words only at
the end (`text`). Each fact is a claim about values the grader recorded or computed, so that anyone holding the
same values can check it; a generator that knows the truth of a forward evaluates them in the kit's tests. What the
grader cannot express is a fact of its own (`Unknown`): where the grader stopped following, never what it might be.

Components are named as the block names them (norm1, att, drop_shortcut, norm2, ff; a functional `dropout` or
`layer_norm` the forward called itself), and calls by their place among that component's recorded calls in that
run (1-based). Pre-LN's values are named in the notation of `steps.STEPS`; in train mode, the values after the
first dropout are Pre-LN's under the masks the student's own dropout calls drew.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import ClassVar

WHAT = {
    "norm1": "norm1",
    "norm2": "norm2",
    "att": "attention",
    "ff": "the feed-forward network",
    "drop_shortcut": "drop_shortcut",
    "dropout": "torch's dropout called in your forward (not drop_shortcut)",  # F.dropout, an nn.Dropout made in forward
    "layer_norm": "torch's layer_norm called in your forward (without norm1's or norm2's scale and shift)",
}


def what_of(component: str | None) -> str:
    return WHAT.get(component or "", component or "the block")


def _call(component: str, call: int | None, calls: int | None) -> str:
    """'attention', 'attention (call 2 of 3)'."""
    if call is None or not calls or calls == 1:
        return what_of(component)
    return f"{what_of(component)} (call {call} of {calls})"


KINDS: dict = {}  # kind -> its class: every fact class registers itself when its module is imported (`replayed`'s too)


@dataclass(frozen=True)
class Fact:
    """A predicate on recorded values; `mode` is the run it was evaluated on ("eval", "train" or None)."""

    kind: ClassVar[str] = ""
    mode: str | None

    def __init_subclass__(cls, **options):
        super().__init_subclass__(**options)
        if cls.kind:
            KINDS[cls.kind] = cls

    def text(self) -> str:
        raise NotImplementedError

    def to_dict(self) -> dict:
        return {"kind": self.kind, **asdict(self)}


@dataclass(frozen=True)
class Ran(Fact):
    """`component` was called `count` times in that run (0: it never ran)."""

    kind: ClassVar[str] = "ran"
    component: str
    count: int

    def text(self) -> str:
        times = "never ran" if self.count == 0 else f"ran {'once' if self.count == 1 else f'{self.count} times'}"
        return f"{what_of(self.component)} {times}"


@dataclass(frozen=True)
class Received(Fact):
    """Call `call` of `component` received (`equal`) or did not receive Pre-LN's value `value` on the same input,
    as a whole or as pieces or a rearrangement of its token vectors (each token's features whole and in order,
    zero padding allowed; a dropout's input may be rearranged element by element)."""

    kind: ClassVar[str] = "received"
    component: str
    call: int | None
    value: str
    equal: bool
    calls: int | None = None  # how many calls of the component the run made (for the wording)

    def text(self) -> str:
        who = _call(self.component, self.call, self.calls)
        return f"{who} received {self.value}" if self.equal else f"{who} received a value that is not {self.value}"


@dataclass(frozen=True)
class Unreceived(Fact):
    """No call of any of `components` received Pre-LN's value `value` (as `Received` reads receiving)."""

    kind: ClassVar[str] = "unreceived"
    components: tuple
    value: str

    def text(self) -> str:
        names = ("torch's dropout" if name == "dropout" else what_of(name) for name in self.components)
        return f"no call of {' or of '.join(names)} received {self.value}"


@dataclass(frozen=True)
class Sum(Fact):
    """What call `call` of `component` received (or, with component None, what the block returned) equals the sum
    `terms`: ((name, coefficient), ...), names being "x", Pre-LN values, or "<component>#<k>" (call k's output).
    A sum of one term "<component>#<k>" with coefficient 1 may be a piece of that output, in whole token vectors
    ("received the output of norm2": some of its tokens, or all of them reordered)."""

    kind: ClassVar[str] = "sum"
    component: str | None
    call: int | None
    terms: tuple
    calls: int | None = None

    def expression(self) -> str:
        if not self.terms:
            return "zero"
        text = ""
        for name, c in self.terms:
            label = _term_name(name)
            size = f"{abs(c):.6g}*{label}" if abs(c) != 1 else label
            text = (("-" if c < 0 else "") + size) if not text else f"{text} {'-' if c < 0 else '+'} {size}"
        return text

    def text(self) -> str:
        who = "your forward returned" if self.component is None else f"{_call(self.component, self.call, self.calls)} received"
        return f"{who} {self.expression()}"


def _term_name(name: str) -> str:
    if "#" in name:
        component, call = name.split("#")
        return f"the output of {what_of(component)}" + ("" if call == "1" else f" (call {call})")
    return name


@dataclass(frozen=True)
class Unknown(Fact):
    """The grader cannot write what call `call` of `component` received (None: what the block returned) as a sum of
    x and the outputs of the components before it: it is not Pre-LN's `value` there, and the grader says no more."""

    kind: ClassVar[str] = "unknown"
    component: str | None
    call: int | None
    value: str
    calls: int | None = None

    def text(self) -> str:
        who = "your forward returned" if self.component is None else f"{_call(self.component, self.call, self.calls)} received"
        what = "the outputs of the components before it" if self.component else "its components' outputs"
        return f"{who} a value that is not {self.value} and that the grader cannot write as a sum of the block input and {what}"


@dataclass(frozen=True)
class Curved(Fact):
    """What the block returned is one curved function of Pre-LN's `value` (its output, a sum), applied to each
    element: tanh of it, say; not a line through it (the value itself, or a number times it plus another)."""

    kind: ClassVar[str] = "curved"
    value: str

    def text(self) -> str:
        return f"your forward returned one curved function of {self.value}, applied to each element, not that sum itself"


@dataclass(frozen=True)
class Gave(Fact):
    """The calls of `component` received Pre-LN's value `received` (whole, in pieces or rearranged), and what they
    returned, put back where each piece came from, is (`equal`) or is not Pre-LN's value `value`."""

    kind: ClassVar[str] = "gave"
    component: str
    received: str
    value: str
    equal: bool

    def text(self) -> str:
        said = f"{what_of(self.component)} received {self.received} (whole, in pieces or rearranged)"
        return f"{said}, and what it returned, put back in place, {'is' if self.equal else 'is not'} {self.value}"


@dataclass(frozen=True)
class Output(Fact):
    """What the block returned equals (`equal`) or differs from `equals`: "pre_ln" (Pre-LN's output), "x" (its
    input), "post_ln" or "no_shortcuts" (those arrangements' outputs), "eval" (its own eval-mode output)."""

    kind: ClassVar[str] = "output"
    equals: str
    equal: bool

    NAMES: ClassVar[dict] = {
        "pre_ln": "a Pre-LN block's output",
        "x": "its input x",
        "post_ln": "the Post-LN arrangement's output",
        "no_shortcuts": "the output of the same block without shortcuts",
        "eval": "what it returns in eval mode",
    }

    def text(self) -> str:
        verb = "equals" if self.equal else "differs from"
        return f"what your block returned {verb} {self.NAMES[self.equals]}"


@dataclass(frozen=True)
class Dropout(Fact):
    """Call `call` of a dropout (`component`: drop_shortcut or dropout) zeroed some values (`dropped`) and
    multiplied the others by `scale`, or returned its input unchanged."""

    kind: ClassVar[str] = "dropout"
    component: str
    call: int | None
    dropped: bool
    scale: float | None = None
    calls: int | None = None

    def text(self) -> str:
        who = _call(self.component, self.call, self.calls)
        if not self.dropped:
            return f"{who} returned its input unchanged"
        if self.scale is None:
            return f"{who} zeroed some of its input's values"
        rate = f" (dropout with p = {1 - 1 / self.scale:.3g})" if self.scale > 1 else ""
        return f"{who} zeroed some values and multiplied the others by {self.scale:.4g}{rate}"


# How a gradient reaches a value with two uses, by the use (`Backward.user`)
_PATHS = {
    "norm1.in": "through norm1",
    "norm2": "through norm2",
    "norm2.in": "along the first shortcut",
    "y": "along the second shortcut",
}


@dataclass(frozen=True)
class Backward(Fact):
    """Pre-LN, run on the same input (in train mode under the run's own dropouts) with the gradient that flows back
    through the boundary value `value` multiplied by `factor`, gives every gradient the run reported: the block
    input's and every parameter's. `user`: only the gradient from that use of it (the value or component it goes
    into, `steps.EQUATIONS`' names); None: from every use. Said of a run whose values are Pre-LN's."""

    kind: ClassVar[str] = "backward"
    value: str  # "x", "norm1.out", "att.out", "drop1.out", "norm2.in" (h), "norm2.out", "ff.out", "drop2.out", "y"
    user: str | None
    factor: float

    def text(self) -> str:
        named = {"x": "x", "norm2.in": "h", "y": "what your forward returns"}.get(self.value)
        if named is None:
            from .steps import BY_NODE, NODES

            named = BY_NODE[NODES[self.value]].value
        how = _PATHS.get(self.user or "", "")
        where = f"to {named} {how}" if self.user else f"{'from' if self.value == 'y' else 'through'} {named}"
        if abs(self.factor) < 1e-6:
            return f"no gradient flows back {where}"
        return f"{self.factor:.3g} times the gradient the chain rule gives flows back {where}"


@dataclass(frozen=True)
class FirstStep(Fact):
    """The first step of Pre-LN, in its order, where the student's values differ (see `steps`)."""

    kind: ClassVar[str] = "step"
    step: int

    def text(self) -> str:
        from .steps import step_text

        return step_text(self.step)


@dataclass(frozen=True)
class Said:
    """Facts and the sentence they make: what a message says, with what it rests on."""

    facts: tuple = field(default_factory=tuple)
    extra: str = ""  # lesson text that states no fact about the forward ("Pre-LN hands it ...")

    def text(self) -> str:
        body = "; ".join(fact.text() for fact in self.facts if not isinstance(fact, FirstStep))
        return body + (f"; {self.extra}" if body and self.extra else self.extra)
