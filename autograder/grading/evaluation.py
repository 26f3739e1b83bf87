"""Every check on one sandbox reply: the child's answers read strictly, the reference's answers to the same
plan, the student's runs named, the first divergent step found, and each check's verdict turned into points.

Pure apart from the (cached) reference and the grader's replays. A check that crashes is a grader error, visible
to the instructor, and never the student's lost points.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from autograder.course import kit
from autograder.engine.checks import Evidence, compounding, dropout, fail, gradients, order, prenorm, robustness, shortcuts
from autograder.engine.checks import responds
from autograder.engine.checks.walked import train_reading
from autograder.engine.diagnosis.first_step import first_divergence
from autograder.engine.diagnosis.own_layers import calls_with_passes
from autograder.engine.facts import FirstStep
from autograder.engine.replayed import Responds
from autograder.engine.questions.plan import Plan
from autograder.engine.questions.moving import moved_seed, moved_values
from autograder.engine.questions.probes import PROBES, Probing
from autograder.engine.reading.naming import analyse
from autograder.engine.reading.replays import Replays
from autograder.engine.results import CheckResult, Diverged, SubTest
from autograder.engine.rubric import RUBRIC
from autograder.engine.tolerance import tolerance
from .asking import GRADER_MARK, UNREPLAYABLE, Answers
from .errors import grader_error_text
from .reference import expected_shapes, reference, reference_namespace, trusted_parts

CHECKS = (order, shortcuts, prenorm, dropout, gradients, robustness, compounding)
ALL_PROBES = tuple(PROBES)


def _notes(raw: dict, student: dict) -> tuple[str, ...]:
    """Student-facing remarks; everything here came from the sandbox, so nothing about its shape is trusted."""
    notes = []
    loaded = raw.get("loaded") if isinstance(raw.get("loaded"), dict) else {}
    errors = loaded.get("cell_errors") if isinstance(loaded.get("cell_errors"), list) else []
    for error in errors[:5]:
        if isinstance(error, dict):
            notes.append(f"{error.get('cell')} raised {error.get('type')}: {error.get('message')}")
    for note in (student["eval"].get("notes") or [])[:2] if student["eval"]["ok"] else []:
        notes.append(f"{note}.")
    return tuple(str(n)[:500] for n in notes)


@dataclass(frozen=True)
class Evaluation:
    """Everything the checks found for one submission."""

    checks: tuple[CheckResult, ...]
    first_divergence: str | None
    notes: tuple[str, ...]
    profiles: dict
    grader_errors: tuple[str, ...]
    facts: tuple = ()  # every fact the feedback states, as dicts (`engine.facts`)
    diverged: Diverged | None = None  # the first divergent step, as data


NOT_GRADED = (
    "Not graded: the grader itself failed on this part (a grader error, not a mistake of yours); your "
    "instructor can see it and will regrade."
)


def _check_result(module, evidence: Evidence, points: float | None = None, shared: dict | None = None) -> tuple:
    """One check's result, its parts sharing `points` (the course's cell points) by the rubric's weights, with the
    facts its parts' messages state and the error it raised (None: it raised none). A part whose verdict rests on
    an answer the grader itself could not read is the grader's error, not the student's. The check's details are
    `shared` (the runner's own) and what its parts rest on, in the rubric's order of parts."""
    spec = RUBRIC[module.NAME]
    grader_error = raised = None
    try:
        outcomes = module.evaluate(evidence)
        missing = set(spec.parts) - set(outcomes)
        if missing:
            raise KeyError(f"no verdict for {sorted(missing)}")
    except Exception as error:
        grader_error = raised = grader_error_text(f"check {module.NAME}", error)
        outcomes = {part: fail(NOT_GRADED) for part in spec.parts}
    facts = tuple(fact for part in spec.parts for fact in outcomes[part].facts)
    details = dict(shared or {})
    for part in spec.parts:
        details.update(outcomes[part].details)
    unread = [part for part, outcome in outcomes.items() if not outcome.passed and GRADER_MARK in outcome.message.lower()]
    if unread:
        grader_error = grader_error or f"check {module.NAME}: {', '.join(unread)} rest on an answer it could not read"
        outcomes = {**outcomes, **{part: fail(NOT_GRADED) for part in unread}}
    subtests = tuple(
        SubTest(part, worth if outcomes[part].passed else 0.0, worth, outcomes[part].passed, outcomes[part].message)
        for part, worth in spec.parts_for(points).items()
    )
    failed = [_sentence(s.message) for s in subtests if not s.passed]
    message = "All parts passed." if not failed else " ".join(dict.fromkeys(failed))
    return CheckResult(module.NAME, spec.title, subtests, message, spec.visibility, details, grader_error), facts, raised


def _run_checks(evidence: Evidence, points: dict, shared: dict, errors: list) -> tuple:
    """Every check of `CHECKS` on the same evidence, gathered in the rubric's order whatever order they ran in:
    (their results, the facts their messages state). Checks write nothing into the evidence."""
    ran = {module.NAME: _check_result(module, evidence, points.get(module.NAME), shared) for module in CHECKS}
    ordered = [ran[name] for name in RUBRIC if name in ran]
    errors.extend(raised for _, _, raised in ordered if raised)
    return tuple(result for result, _, _ in ordered), tuple(fact for _, facts, _ in ordered for fact in facts)


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


def evaluate(raw: dict, plan: Plan, assignment: kit.Assignment = kit.KIT, sources: list[str] = (), ask=None) -> Evaluation:
    """Every check on one sandbox reply. Pure apart from the (cached) reference, the grader's replays and the
    questions it asks when a verdict needs them (`ask`, see `Answers`). `sources`: the student's code as sent (for
    remarks read from the code itself)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # many small computations: one thread is fastest, and fair to a busy machine
    try:
        return _evaluate(raw, plan, assignment, list(sources), ask)
    finally:
        torch.set_num_threads(threads)


def _read_runs(student: dict, x, x_other, parts: dict, device: str, errors: list) -> dict:
    flows = {}
    for mode in ("eval", "train"):
        flows[mode] = None
        if not student[mode]["ok"]:
            continue
        try:
            run = {**student[mode], "calls": calls_with_passes(student[mode], parts, tolerance(device))}
            flows[mode] = analyse(x, run, parts, train=mode == "train", device=device)
        except Exception as error:
            errors.append(grader_error_text(f"reading the {mode}-mode run", error))
            student[mode] = {"ok": False, "error": {"type": "GraderError", "where": None, "message": f"{GRADER_MARK} ('{mode}')"}}
            continue
        wrong = flows[mode].unverified
        if wrong:  # a record the grader cannot reproduce is not believed, in any of its parts
            flows[mode] = None
            student[mode] = {
                "ok": False,
                "error": {"type": "ProtocolError", "message": f"{wrong[0].why}; nothing recorded in that run can be believed"},
            }
    _verify(flows, student, x_other, parts, device, errors)
    return flows


def _verify(flows: dict, student: dict, x_other, parts: dict, device: str, errors: list) -> None:
    """Check the programs read from the recorded runs against the same forward read on another input."""
    if flows.get("eval") is None or not flows["eval"].replayable:
        return
    other = None
    if student["eval_other"]["ok"]:
        try:
            calls = calls_with_passes(student["eval_other"], parts, tolerance(device))
            other = analyse(x_other, {**student["eval_other"], "events": [], "calls": calls}, parts, train=False, device=device)
        except Exception as error:
            errors.append(grader_error_text("reading the run on another input", error))
            return
        if other.unverified:
            other = None
    flows["eval"].verify_against(other)
    flows["eval"].other = other  # the same forward on another input: a coefficient read on one is checked there
    if flows.get("train") is not None and flows["eval"].doubt:
        flows["train"].doubt = flows["eval"].doubt


def _evaluate(raw: dict, plan: Plan, assignment: kit.Assignment, sources: list, ask=None) -> Evaluation:
    parts = trusted_parts(assignment, plan)
    expect = expected_shapes(plan, parts)
    answers = raw.get("observations") if isinstance(raw.get("observations"), dict) else {}
    errors: list[str] = []
    student = Answers(answers, expect, ask, errors)
    ref = reference(plan.seed, plan.device, assignment)
    cpu_plan = Plan(**{**plan.__dict__, "device": "cpu"})
    probing = Probing({}, reference_namespace(assignment), cpu_plan)
    x = probing.x().numpy().astype(np.float64)
    x_other = probing.fresh("other").numpy().astype(np.float64)
    flows = _read_runs(student, x, x_other, parts, plan.device, errors)
    if student["eval"]["ok"] and (flows["eval"] is None or not flows["eval"].replayable):
        student.expect(UNREPLAYABLE)  # what a block the grader cannot replay is judged by: asked with the next job
    evidence = Evidence(
        student,
        ref.answers,
        ref.named,
        parts,
        x,
        flows,
        replays=Replays(flows, parts, plan, reference_namespace(assignment)),
        plan=plan,
        device=plan.device,
        drop_p=plan.drop_p,
        sources=sources,
    )
    try:
        matching = evidence.matches("eval") and evidence.matches("train")
        moved = (
            {
                "runs": student["moved"],
                "values": {
                    k: v.numpy().astype(np.float64).reshape(-1) for k, v in moved_values(moved_seed(plan), probing.x()).items()
                },
            }
            if not matching and student["moved"]["ok"]
            else None
        )  # read only by the diagnosis
        read = {} if matching else {"train": train_reading(evidence)}  # the checks read the same train run
        divergence = None if matching else first_divergence(flows, parts, plan.drop_p, tolerance(plan.device), moved, read)
    except Exception as error:  # an explanation is a bonus: its failure costs no points, but is reported
        errors.append(grader_error_text("finding the first divergent step", error))
        divergence = None
    evidence.divergence = divergence
    shared = {}
    if divergence is not None:  # for the instructor: the step, and what the values showed there
        shared["divergence"] = {"step": divergence.step, "mode": divergence.mode, "message": divergence.message}
    checks, checked = _run_checks(evidence, assignment.check_points(), shared, errors)
    if all(check.passed for check in checks if check.check != compounding.NAME):
        divergence = None  # the trace only explains lost points; equivalent code in any style has nothing to explain
    profiles = {"student": _student_profile(evidence, student), **ref.profiles}
    remarks, remarked = _code_notes(evidence)
    notes = _notes(raw, student) + remarks
    told = (
        ()
        if divergence is None
        else (*([FirstStep(divergence.mode, divergence.step)] if divergence.step is not None else []), *divergence.facts)
    )
    facts = tuple(dict.fromkeys(f for f in (*told, *checked, *remarked)))
    facts = tuple(f.to_dict() for f in sorted(facts, key=_smallest_input_first))
    diverged = divergence.diverged() if divergence else None
    return Evaluation(checks, divergence.text() if divergence else None, notes, profiles, tuple(errors), facts, diverged)


def _smallest_input_first(fact) -> int:
    """Facts in the order stated, but the sweep's inputs the block differs on smallest first (the page names the
    first); `sorted` is stable."""
    if fact.kind != "differs":
        return 0
    data = dict(fact.input)
    return data.get("tokens", 0) * data.get("batch", 0) * data.get("emb_dim", 0)


def _student_profile(evidence: Evidence, student: dict):
    """The profile drawn as the student's: the stack of the student's own blocks as they ran (where a block's
    gradients are right, the gradient check holds it to the grader's own stack of what the block computes), else
    the grader's stack of the student's program, where it has one."""
    if student["profile"]["ok"]:
        return student["profile"]["profile"]
    try:
        return evidence.reference["profile"]["profile"] if evidence.matches("eval") else evidence.replays.profile
    except (ValueError, KeyError):
        return None


def _code_notes(evidence: Evidence) -> tuple:
    """Remarks read from the code and the runs, and the facts they state: (notes, facts)."""
    notes, facts = [], []
    note = robustness.device_note(evidence.sources)
    if note:
        notes.append(note + ".")
    flow = evidence.flows.get("eval")
    if flow is not None and flow.decoys:
        # said only of a component whose every call the grader's reading leaves out of the result, and that the
        # values confirm: what the block returns does not change when the grader changes that component's output
        live = {step.name for step in flow.live}
        idle = [
            name
            for name in dict.fromkeys(step.name for step in flow.decoys)
            if name not in live and responds(evidence, name) is False
        ]
        if idle:
            for name in idle:
                facts.append(Responds("eval", name, False))
            notes.append(
                f"Your forward also called {', '.join(idle)}, but what it returns does not change when "
                f"{'its' if len(idle) == 1 else 'their'} output changes: such calls earn nothing."
            )
    return tuple(notes), tuple(facts)
