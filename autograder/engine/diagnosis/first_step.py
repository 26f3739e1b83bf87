"""The first step where a student's forward went wrong, and why, said only as far as the grader has checked it.

Where the student's values first differ from Pre-LN's is a fact, read from values at the component boundaries
(`boundaries`), in eval mode and in train mode (real dropout, the grader's seed): one first step per forward, named
through the table of `steps`, and used by every check. Why they differ is a hypothesis: every single-step mistake
(`edits`) is one, and the grader names a cause only when Pre-LN with exactly that one change, replayed with its own
components on the same input (and, in train mode, the same dropout masks), reproduces the student's own recorded
values, and the change breaks that very step. When no change does, the message says only the facts the boundary
showed.

Gradient-only mistakes (a cut path) are hypotheses too: see `cuts`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from autograder.engine.facts import Received, Said, Sum, Unknown, what_of
from autograder.engine.reading.dataflow import Flow
from autograder.engine.reading.program import ALWAYS, Program, canonical, in_mode, live, run, signature
from autograder.engine.reading.placement import confirms, unconfirmed
from autograder.engine.results import Diverged
from autograder.engine.steps import LAST_STEP_AT, OUTPUT, RECEIVER
from autograder.engine.tolerance import REPLAYED, close
from . import edits, structure
from .boundaries import Walk
from autograder.engine.reading.script import PRE_LN, compile_script

__all__ = ["Divergence", "first_divergence"]


@dataclass(frozen=True)
class Divergence:
    step: int | None  # None: the values show where, not which step
    message: str
    mode: str | None = None  # "train" or "eval": the run this was seen in, when the two runs differ
    cause: str | None = None  # the verified edit's kind; None: facts only
    only: bool = False  # the other run shows no divergence at all
    facts: tuple = field(default_factory=tuple)  # the facts the message states (`facts`)

    def diverged(self) -> Diverged:
        """The same as data: what the result carries and every reader groups by."""
        return Diverged(self.step, self.mode, self.only, self.cause)

    def text(self) -> str:
        """The sentence the student reads: the words of `diverged()`, then the message."""
        label = self.diverged().label() or f"{self.diverged().where()}Where your forward first differs from Pre-LN"
        return f"{label}: {self.message}"


def student_program(flow: Flow, mode: str) -> Program:
    program = flow.program()
    if mode == "eval":
        for op in program.ops:
            if op.name == "drop":
                op.when = ALWAYS
    return program


def _ops(program: Program) -> list:
    sig = signature(program)
    return list(sig[0]) + [("return", sig[1])]


def _common(a: list, b: list) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


class Diagnosis:
    def __init__(self, flows: dict, parts: dict, drop_p: float):
        self.flows, self.parts, self.drop_p = flows, parts, drop_p
        self.modes = [m for m in ("eval", "train") if flows.get(m) is not None]
        self.students = {m: canonical(live(student_program(flows[m], m))) for m in self.modes if flows[m].replayable}
        self.mine = {m: _ops(p) for m, p in self.students.items()}
        self.first = {m: _common(ops, _ops(self.reference(m))) for m, ops in self.mine.items()}

    def reference(self, mode: str) -> Program:
        return canonical(live(in_mode(compile_script(PRE_LN, self.drop_p, "Pre-LN"), mode)))

    def diverging(self) -> list:
        return [m for m in self.modes if m not in self.mine or self.mine[m] != _ops(self.reference(m))]

    @functools.cached_property
    def candidates(self) -> list:
        """Every single-step edit, with the parameters the student's programs show, and its programs."""
        programs = list(self.students.values())
        factors = sorted(
            {c for p in programs for op in p.ops for c in op.takes.values() if c != 1.0}
            | {c for p in programs for c in p.out.values() if c != 1.0}
        )
        variants = tuple(sorted({op.variant for p in programs for op in p.ops if op.variant is not None}, key=repr))
        keep = 1 / (1 - self.drop_p)
        drop_ps = tuple(
            sorted(
                {
                    round(1 - 1 / op.scale, 6)
                    for p in programs
                    for op in p.ops
                    if op.name == "drop" and op.scale and abs(op.scale - keep) > 1e-3
                }
            )
        )
        return _candidates(self.drop_p, tuple(factors), variants, drop_ps, tuple(self.mine))

    def whole(self):
        """One edit that explains every run the grader could follow, verified in each: (edit, its text) or None."""
        diverging = self.diverging()
        if not diverging or any(m not in self.mine for m in self.modes):
            return None
        for edit, ops in self.candidates:
            if all(ops[m] == self.mine[m] for m in self.mine) and all(
                self._reproduces(edit.program(self.drop_p), m, len(ops[m])) for m in self.mine
            ):
                return edit, edit.text
        return None

    def mode(self, mode: str, step: int | None = None):
        """The verified edit (breaking `step`, when given) that reproduces one run as far as its first divergent
        call, and agrees with what the other run shows before it diverges (None: none does)."""
        if mode not in self.mine or mode not in self.diverging():
            return None
        mine, first = self.mine[mode], self.first[mode]
        others = [o for o in self.mine if o != mode]
        ranked = []
        for order, (edit, ops) in enumerate(self.candidates):
            shared = _common(mine, ops[mode])
            if ops[mode] != mine and shared < first + 2:
                continue  # it must reproduce the first divergent call and what is done with its value
            if any(_common(self.mine[o], ops[o]) < self.first[o] for o in others):
                continue  # it contradicts what the other run shows before that run diverges
            total = sum(_common(self.mine[o], ops[o]) for o in self.mine)
            ranked.append((0 if ops[mode] == mine else 1, -shared, -total, order, edit, ops))
        for *_, edit, ops in sorted(ranked, key=lambda r: r[:4])[:6]:
            if step is not None and edit.step != step:
                continue
            program = edit.program(self.drop_p)
            if self._reproduces(program, mode, first + 1) and all(self._reproduces(program, o, self.first[o]) for o in others):
                whole = ops[mode] == mine and all(ops[o] == self.mine[o] for o in others)
                return edit, (edit.text if whole else edit.first_sign)
        return None

    def _reproduces(self, program: Program, mode: str, count: int) -> bool:
        """Does `program` (Pre-LN with one edit), run by the grader on the same input and dropout masks, give the
        student's recorded values for the first `count` calls (and the output, when it claims the whole run)?"""
        flow, student = self.flows[mode], self.students[mode]
        program = canonical(live(in_mode(program, mode)))
        steps = {s.key: s for s in flow.steps}
        recorded = [steps[op.key] for op in student.ops]
        masks, drops = {}, [s for s in recorded if s.is_dropout]
        for op in program.ops:
            if op.name == "drop" and drops:
                masks[op.key] = drops.pop(0).mask
        try:
            with torch.no_grad():
                y, flat = run(program, torch.as_tensor(flow.x, dtype=torch.float32), self.parts, masks=masks)
        except Exception:
            return False
        whole = _ops(program) == _ops(student)
        count = len(program.ops) if whole else min(count, len(program.ops), len(recorded))
        for op, step in zip(program.ops[:count], recorded[:count]):
            covered = step.covers
            if not (
                close(_total(flat, op.takes)[covered], step.input[covered], flow.tol, REPLAYED)
                and close(flat[op.key].numpy()[covered], step.output[covered], flow.tol, REPLAYED)
            ):
                return False
        return not whole or close(y.numpy().reshape(-1), flow.y.reshape(-1), flow.tol, REPLAYED)


@functools.lru_cache(maxsize=64)
def _candidates(drop_p: float, factors: tuple, variants: tuple, drop_ps: tuple, modes: tuple) -> tuple:
    """Every edit (and named arrangement) with its programs' calls in each mode; the same for every student whose
    programs show the same parameters, so computed once for a class."""
    found = []
    for edit in edits.single_edits(factors=factors, variants=variants, drop_ps=drop_ps) + structure.arrangements(drop_p):
        program = edit.program(drop_p)
        found.append((edit, {m: _ops(canonical(live(in_mode(program, m)))) for m in modes}))
    return tuple(found)


def _total(flat: dict, takes: dict) -> np.ndarray:
    value = torch.zeros_like(flat["x"])
    for key, c in takes.items():
        value = value + c * flat[key]
    return value.numpy()


def first_divergence(
    flows: dict, parts: dict, drop_p: float, responses: dict | None = None, moved: dict | None = None, walked: dict | None = None
) -> Divergence | None:
    """The earliest boundary where the eval or train run differs from Pre-LN (see `boundaries`), with its facts,
    and the verified cause where one edit of Pre-LN reproduces the runs and breaks that very step. `responses`: the
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
    cause = _cause(flows, parts, drop_p, mode, seen.step)
    if cause and cause[0].step > LAST_STEP_AT[seen.boundary]:
        # an edit later than where this run's values first differ does not explain this run (a hand-written dropout
        # the replay reads as masks, say): it is said of the other run where its values agree with it, else not at all
        agree = [m for m in found if m != mode and cause[0].step <= LAST_STEP_AT[found[m].boundary]]
        if agree:
            mode, seen, label = agree[0], found[agree[0]], agree[0]
        else:
            cause = None
    step = cause[0].step if cause else seen.step
    lesson = (
        f"Pre-LN hands {what_of(RECEIVER[seen.boundary])} {seen.expected}"
        if seen.expected and seen.boundary < OUTPUT
        else f"Pre-LN returns {seen.expected}"
        if seen.expected
        else ""
    )
    said = Said(tuple(seen.facts), "; ".join(t for t in (seen.gloss, lesson) if t))
    message = cause[1] if cause else said.text()
    return Divergence(
        step, message, label, cause[0].kind if cause else None, label is not None and len(found) == 1, tuple(seen.facts)
    )


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


def _cause(flows: dict, parts: dict, drop_p: float, mode: str, step: int | None):
    """A verified single-step edit: (edit, its text), or None. An edit that reproduces every run whole names its own
    step (the step of the edge it changes); one that reproduces a run only up to where it first differs must break
    the step the values showed."""
    readable = {m: f for m, f in flows.items() if f is not None and f.replayable}
    if not readable:
        return None
    diagnosis = Diagnosis(readable, parts, drop_p)
    whole = diagnosis.whole()
    if whole is not None:
        return whole
    return diagnosis.mode(mode, step) if mode in readable and step is not None else None
