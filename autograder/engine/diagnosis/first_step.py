"""The first step where a student's forward went wrong, said only as far as the grader has checked it.

Where the student's values first differ from Pre-LN's is a fact, read from values at the component boundaries
(`boundaries`), in eval mode and in train mode (real dropout, the grader's seed): one first step per forward, named
through the table of `steps` by its rules for what each component received, and used by every check. What the
forward did there is said as facts the values show (`facts`: what a call received, as a sum of earlier values where
it is one); where the values cannot tell which step broke, no step is named and only the facts are said.

Gradient-only mistakes (a cut path) are hypotheses, each verified by a replay: see `cuts`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from autograder.engine.facts import Received, Said, Sum, Unknown
from autograder.engine.reading.placement import confirms, unconfirmed
from autograder.engine.results import Diverged
from .boundaries import Walk

__all__ = ["Divergence", "first_divergence"]


@dataclass(frozen=True)
class Divergence:
    step: int | None  # None: the values show where, not which step
    message: str
    mode: str | None = None  # "train" or "eval": the run this was seen in, when the two runs differ
    only: bool = False  # the other run shows no divergence at all
    facts: tuple = field(default_factory=tuple)  # the facts the message states (`facts`)

    def diverged(self) -> Diverged:
        """The same as data: what the result carries and every reader groups by."""
        return Diverged(self.step, self.mode, self.only)

    def text(self) -> str:
        """The sentence the student reads: the words of `diverged()`, then the message."""
        label = self.diverged().label() or f"{self.diverged().where()}Where your forward first differs from Pre-LN"
        return f"{label}: {self.message}"


def first_divergence(
    flows: dict, parts: dict, drop_p: float, responses: dict | None = None, moved: dict | None = None, walked: dict | None = None
) -> Divergence | None:
    """The earliest boundary where the eval or train run differs from Pre-LN (see `boundaries`), with its step and
    its facts. `responses`: the
    `respond` question's runs; `moved`: the `moved` question's runs ("runs") and the values it held and moved
    ("values"), both of the eval run; `walked`: mode -> what `Walk.first` gave for that run where it was walked
    already (the checks read the same train walk), read and never changed."""
    found = {}
    for mode in ("eval", "train"):
        if flows.get(mode) is not None:
            seen = (
                walked[mode]
                if walked and mode in walked
                else Walk(
                    flows[mode], parts, mode, drop_p, responses if mode == "eval" else None, moved if mode == "eval" else None
                ).first()
            )
            if seen is not None:
                found[mode] = _checked_sums(seen, mode, getattr(flows[mode], "other", None), parts, drop_p)
    if not found:
        return None
    mode, seen = min(found.items(), key=lambda pair: (pair[1].boundary, pair[1].step is None, pair[0] != "eval"))
    both = all(flows.get(m) is not None for m in ("eval", "train"))
    same = len(found) == 2 and (
        found["eval"].boundary == found["train"].boundary or found["eval"].step == found["train"].step is not None
    )
    label = None if same or not both else mode
    lesson = seen.lesson()
    said = Said(tuple(seen.facts), "; ".join(t for t in (seen.gloss, lesson) if t))
    return Divergence(seen.step, said.text(), label, label is not None and len(found) == 1, tuple(seen.facts))


def _checked_sums(seen, mode: str, other, parts: dict, drop_p: float):
    """A coefficient is a hypothesis: a sum read with a coefficient other than 1 or -1 is said only where the same
    forward, walked on the grader's other input (`other`, an eval run), gives the same sum with the same
    coefficients; elsewhere the fact is that the grader cannot express the value (`Unknown`), which says all that
    "received a value that is not ..." of the same call would."""
    doubtful = [f for f in seen.facts if isinstance(f, Sum) and any(unconfirmed(c) for _, c in f.terms)]
    there = Walk(other, parts, "eval", drop_p, None).first() if doubtful and other is not None and mode == "eval" else None
    confirmed = {
        (f.component, f.call, tuple(n for n, _ in f.terms)): [c for _, c in f.terms]
        for f in (there.facts if there is not None else ())
        if isinstance(f, Sum)
    }

    def holds(fact) -> bool:
        again = confirmed.get((fact.component, fact.call, tuple(n for n, _ in fact.terms)))
        return again is not None and all(confirms(a, c) for a, (_, c) in zip(again, fact.terms))

    facts = [
        fact if fact not in doubtful or holds(fact) else Unknown(fact.mode, fact.component, fact.call, seen.expected, fact.calls)
        for fact in seen.facts
    ]
    # what a call received, said as a sum or as unknown, needs no "received a value that is not ..." beside it
    said = {(f.component, f.call) for f in facts if isinstance(f, (Unknown, Sum))}
    kept = dict.fromkeys(f for f in facts if not (isinstance(f, Received) and not f.equal and (f.component, f.call) in said))
    return replace(seen, facts=list(kept))  # a copy: `seen` may be a walk the checks read too
