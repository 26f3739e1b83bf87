"""The first step where a student's forward went wrong, said only as far as the grader has checked it.

The student's recorded runs, named as programs (`dataflow`), are set against Pre-LN's ten steps, in eval
mode and in train mode (real dropout, the grader's seed). Where they first differ is a fact. Why they differ
is a hypothesis: every single-step mistake (`edits`) is one, and the grader names a cause only when Pre-LN
with exactly that one change, replayed with its own components on the same input (and, in train mode, the
same dropout masks), reproduces the student's own recorded values up to and including the step where they
first differ. When no change does, the message says only what the grader saw: the step, what the
component received there (as a sum of earlier values), and what Pre-LN hands it.

Gradient-only mistakes (a cut path) are hypotheses too: see `cuts`.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch

from autograder.engine.reading.dataflow import Flow
from autograder.engine.reading.program import ALWAYS, Program, canonical, in_mode, live, run, signature
from . import edits
from .script import PRE_LN, STEPS, compile_script

__all__ = ["STEPS", "Divergence", "first_divergence"]

PRE_LN_INPUT = {"norm1": "x", "att": "norm1(x)", "drop1": "att(norm1(x))", "norm2": "h = x + drop_shortcut(att(norm1(x)))",
                "ff": "norm2(h)", "drop2": "ff(norm2(h))"}
PRE_LN_OUTPUT = "h + drop_shortcut(ff(norm2(h))), where h = x + drop_shortcut(att(norm1(x)))"
OP_STEP = {"norm1": 2, "att": 3, "drop1": 4, "norm2": 7, "ff": 8, "drop2": 9}


@dataclass(frozen=True)
class Divergence:
    step: int
    message: str
    mode: str | None = None          # "train" or "eval": the run this was seen in, when the two runs differ
    cause: str | None = None         # the verified edit's kind; None: facts only
    only: bool = False               # the other run shows no divergence at all

    def text(self) -> str:
        body = f"Step {self.step} of 10 ({STEPS[self.step]}): {self.message}"
        if not self.mode:
            return body
        return f"In {self.mode} mode{' only' if self.only else ''}: {body}"


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


def _roles(program: Program) -> list:
    """Pre-LN's calls by role (norm1, att, drop1, ...), in order."""
    roles, drops = [], 0
    for op in program.ops:
        if op.name == "drop":
            drops += 1
            roles.append(f"drop{drops}")
        else:
            roles.append(op.name)
    return roles


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
        factors = sorted({c for p in programs for op in p.ops for c in op.takes.values() if c != 1.0} |
                         {c for p in programs for c in p.out.values() if c != 1.0})
        variants = tuple(sorted({op.variant for p in programs for op in p.ops if op.variant is not None}, key=repr))
        keep = 1 / (1 - self.drop_p)
        drop_ps = tuple(sorted({round(1 - 1 / op.scale, 6) for p in programs for op in p.ops
                                if op.name == "drop" and op.scale and abs(op.scale - keep) > 1e-3}))
        return _candidates(self.drop_p, tuple(factors), variants, drop_ps, tuple(self.mine))

    def whole(self) -> Divergence | None:
        """One edit that explains every run the grader could follow, verified in each."""
        diverging = self.diverging()
        if not diverging or any(m not in self.mine for m in self.modes):
            return None
        for edit, ops in self.candidates:
            if all(ops[m] == self.mine[m] for m in self.mine) and all(
                    self._reproduces(edit.program(self.drop_p), m, len(ops[m])) for m in self.mine):
                mode = diverging[0] if len(diverging) == 1 and len(self.modes) == 2 else None
                return Divergence(edit.step, edit.text, mode, edit.kind, only=mode is not None)
        return None

    def mode(self, mode: str) -> Divergence | None:
        """The first divergence of one run: a verified edit when one reproduces it that far, else facts."""
        flow: Flow = self.flows.get(mode)
        if flow is None or mode not in self.diverging():
            return None
        reference = self.reference(mode)
        if mode not in self.mine:
            return self._unfollowed(flow, reference)
        mine, first = self.mine[mode], self.first[mode]
        others = [o for o in self.mine if o != mode]
        ranked = []
        for order, (edit, ops) in enumerate(self.candidates):
            shared = _common(mine, ops[mode])
            if ops[mode] != mine and shared < first + 2:
                continue            # it must reproduce the first divergent call and what is done with its value
            if any(_common(self.mine[o], ops[o]) < self.first[o] for o in others):
                continue            # it contradicts what the other run shows before that run diverges
            total = sum(_common(self.mine[o], ops[o]) for o in self.mine)
            ranked.append((0 if ops[mode] == mine else 1, -shared, -total, order, edit))
        for *_, edit in sorted(ranked, key=lambda r: r[:4])[:6]:
            program = edit.program(self.drop_p)
            if self._reproduces(program, mode, first + 1) and all(
                    self._reproduces(program, o, self.first[o]) for o in others):
                whole = ops[mode] == mine and all(ops[o] == self.mine[o] for o in others)
                return Divergence(edit.step, edit.text if whole else edit.first_sign, cause=edit.kind)
        return self._facts(flow, self.students[mode], reference, first)

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
            if not (_near(_total(flat, op.takes)[covered], step.input[covered], flow.tol) and
                    _near(flat[op.key].numpy()[covered], step.output[covered], flow.tol)):
                return False
        return not whole or _near(y.numpy().reshape(-1), flow.y.reshape(-1), flow.tol)

    def _facts(self, flow: Flow, student: Program, reference: Program, first: int) -> Divergence:
        roles = _roles(reference)
        steps = {s.key: s for s in flow.steps}
        if first < min(len(student.ops), len(reference.ops)):
            op, role = student.ops[first], roles[first]
            wanted, step = reference.ops[first], steps[op.key]
            got = f"{step.name}({flow.describe(op.takes)})"
            if op.pieces is not None:
                covered, count = int(step.covers.sum()), len(op.pieces)
                calls = "once on a piece" if count == 1 else f"{count} times on pieces"
                text = (f"{step.name} was called {calls} of shape {tuple(op.pieces[0].shape)} covering {covered} of "
                        f"the block's {step.covers.size} values, receiving there {flow.describe(op.takes)}"
                        + ("" if covered < step.covers.size else ", and the pieces together give other values than "
                                                                 "one call on the whole block")
                        + f"; Pre-LN calls {_name(role)} once, on {PRE_LN_INPUT[role]} for the whole block")
            elif op.name == wanted.name and op.variant is None:
                text = f"{step.name} received {flow.describe(op.takes)}; Pre-LN hands it {PRE_LN_INPUT[role]}"
            else:
                text = (f"your forward's call number {first + 1} was {got}, where Pre-LN calls "
                        f"{_name(role)} on {PRE_LN_INPUT[role]}")
            return Divergence(OP_STEP[role], text)
        if first < len(reference.ops):
            role = roles[first]
            return Divergence(OP_STEP[role], f"your forward made no more calls where Pre-LN calls {_name(role)} on "
                                             f"{PRE_LN_INPUT[role]}")
        if first < len(student.ops):
            op = student.ops[first]
            return Divergence(10, f"after the calls Pre-LN makes, your forward also called {steps[op.key].name}("
                                  f"{flow.describe(op.takes)})")
        return Divergence(10, f"the block returned {flow.describe(flow.y_takes)}; Pre-LN returns {PRE_LN_OUTPUT}")

    def _unfollowed(self, flow: Flow, reference: Program) -> Divergence:
        roles = _roles(reference)
        drops = 0
        for step in flow.live:
            drops += step.is_dropout
            role = f"drop{drops}" if step.is_dropout else step.name
            if step.takes is None:
                if role in OP_STEP:
                    return Divergence(OP_STEP[role], f"{step.name} received a value that is not a sum of the block's "
                                                     f"earlier values; Pre-LN hands {_name(role)} {PRE_LN_INPUT[role]}")
                step_number = OP_STEP[roles[min(len(roles) - 1, step.index)]]
                return Divergence(step_number, f"{step.name} received a value that is not a sum of the block's "
                                               "earlier values")
        return Divergence(10, "the value your forward returned is not a sum of the block's earlier values; Pre-LN "
                              f"returns {PRE_LN_OUTPUT}")


@functools.lru_cache(maxsize=64)
def _candidates(drop_p: float, factors: tuple, variants: tuple, drop_ps: tuple, modes: tuple) -> tuple:
    """Every edit (and named arrangement) with its programs' calls in each mode; the same for every student whose
    programs show the same parameters, so computed once for a class."""
    found = []
    for edit in edits.single_edits(factors=factors, variants=variants, drop_ps=drop_ps) + edits.arrangements(drop_p):
        program = edit.program(drop_p)
        found.append((edit, {m: _ops(canonical(live(in_mode(program, m)))) for m in modes}))
    return tuple(found)


def _name(role: str) -> str:
    return "drop_shortcut" if role.startswith("drop") else role


def _total(flat: dict, takes: dict) -> np.ndarray:
    value = torch.zeros_like(flat["x"])
    for key, c in takes.items():
        value = value + c * flat[key]
    return value.numpy()


def _near(a: np.ndarray, b: np.ndarray, tol: float) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and bool(np.linalg.norm(a - b) <= 10 * tol * max(float(np.linalg.norm(b)), 1.0))


def first_divergence(flows: dict, parts: dict, drop_p: float) -> Divergence | None:
    """The earliest divergent step over the eval and train runs, with its verified cause where there is one."""
    diagnosis = Diagnosis(flows, parts, drop_p)
    whole = diagnosis.whole()
    if whole is not None:
        return whole
    found = {mode: diagnosis.mode(mode) for mode in ("eval", "train") if flows.get(mode) is not None}
    found = {mode: d for mode, d in found.items() if d is not None}
    if not found:
        return None
    if len(found) == 1:
        mode, divergence = next(iter(found.items()))
        both = len([f for f in flows.values() if f is not None]) == 2
        return Divergence(divergence.step, divergence.message, mode if both else None, divergence.cause, both)
    eval_, train = found["eval"], found["train"]
    if (eval_.step, eval_.message) == (train.step, train.message):
        return eval_
    earliest, mode = min((eval_, "eval"), (train, "train"), key=lambda pair: (pair[0].step, pair[1] != "eval"))
    return Divergence(earliest.step, earliest.message, mode, earliest.cause)
