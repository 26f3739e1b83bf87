"""Grading one submission: ask it the grader's questions in the sandbox, read its answers strictly, compute
the reference's answers to the same questions, run every check.

The trusted parent does everything here. Student code only ever runs inside a `SandboxServer` child; the
reference solution runs here, from the annotated source, on the same plan. A failure of the grader itself
(a check that crashes on unexpected observations, a reference that will not run) is reported as a grader
error, visible to the instructor, and never turned into the student's lost points.
"""
from __future__ import annotations

import functools
import random
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from . import kit
from .answers import Expect, read_answer
from .checks import Evidence, compounding, dropout, fail, gradients, order, prenorm, robustness, shortcuts
from .naming import analyse
from .diagnosis import first_divergence
from .harness.child import load_cells
from .harness.parts import make_parts
from .harness.probes import PROBES, Plan, Probing, part_params, run_probe
from .harness.protocol import encode_observation
from .notebook import SubmissionError, read_cells, student_code
from .replays import Replays
from .results import CheckResult, SubmissionResult, SubTest
from .rubric import RUBRIC
from .sandbox import UNSAFE, SandboxServer

CHECKS = (order, shortcuts, prenorm, dropout, gradients, robustness, compounding)
ALL_PROBES = tuple(PROBES)
ARRANGEMENTS = {"Post-LN": "PostLNBlock", "no shortcuts": "NoShortcutBlock"}


def new_seed() -> int:
    return random.SystemRandom().randrange(1, 2**31)


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda was asked for, but CUDA is not available here")
    return device


@functools.lru_cache(maxsize=8)
def reference_namespace(assignment: kit.Assignment = kit.KIT) -> dict:
    namespace, errors = load_cells(assignment.reference_code())
    if errors:
        raise RuntimeError(f"the reference solution failed to load: {errors[0]}")
    return namespace


def trusted_parts(assignment: kit.Assignment, plan: Plan) -> dict:
    """The grader's own copy of the five components the child's block gets (same seed, same weights)."""
    parts = make_parts(reference_namespace(assignment), plan.cfg, plan.weights, drop_p=plan.drop_p)
    for part in parts.values():
        part.eval()
    return parts


def expected_shapes(plan: Plan, parts: dict) -> Expect:
    """The shapes of every answer to `plan`, the parameters' from the grader's own `parts`."""
    return Expect.of(plan, {name: tuple(p.shape) for name, p in part_params(parts).items()})


REFERENCE_PROBES = ("eval", "train", "profile", "eval_seeds", "robust_small", "robust_batch", "robust_double")


@dataclass(frozen=True)
class Reference:
    answers: dict            # probe -> the reference's answer, read like the child's
    named: dict              # arrangement -> its eval-mode output
    profiles: dict           # curve name -> deep-stack profile, for the feedback plot


@functools.lru_cache(maxsize=16)
def reference(seed: int, device: str, assignment: kit.Assignment) -> Reference:
    """The reference solution and the named wrong arrangements, through the very same probes and reader
    (once per seed, device and assignment: a class shares it)."""
    ref, plan = reference_namespace(assignment), Plan.draw(seed, device)
    expect = expected_shapes(plan, trusted_parts(assignment, plan))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        ask = lambda names, probe: read_answer(probe, encode_observation(run_probe(probe, Probing(names, ref, plan))), expect)  # noqa: E731
        answers = {probe: ask(ref, probe) for probe in REFERENCE_PROBES}
        named, profiles = {}, {"reference": answers["profile"].get("profile")}
        for label, cls in ARRANGEMENTS.items():
            names = {**ref, "TransformerBlock": ref[cls]}
            named[label] = ask(names, "eval").get("y")
            profiles[label] = ask(names, "profile").get("profile")
    finally:
        torch.set_num_threads(threads)
    broken = {probe: a["error"] for probe, a in answers.items() if not a["ok"]}
    if broken or any(v is None for v in (*named.values(), *profiles.values())):
        raise RuntimeError(f"the reference solution failed the grader's own questions: {broken or 'arrangements'}")
    return Reference(answers, named, profiles)


def _notes(raw: dict, student: dict) -> tuple[str, ...]:
    """Student-facing remarks; everything here came from the sandbox, so nothing about its shape is trusted."""
    notes = []
    loaded = raw.get("loaded") if isinstance(raw.get("loaded"), dict) else {}
    errors = loaded.get("cell_errors") if isinstance(loaded.get("cell_errors"), list) else []
    for error in errors[:5]:
        if isinstance(error, dict):
            notes.append(f"{error.get('cell')} raised {error.get('type')}: {error.get('message')}")
    for note in (student["eval"].get("notes") or [])[:2] if student["eval"]["ok"] else []:
        notes.append(f"{note}; your forward was graded with the kit's components.")
    return tuple(str(n)[:500] for n in notes)


@dataclass(frozen=True)
class Evaluation:
    """Everything the checks found for one submission."""
    checks: tuple[CheckResult, ...]
    first_divergence: str | None
    notes: tuple[str, ...]
    profiles: dict
    grader_errors: tuple[str, ...]


def _grader_error(where: str, error: BaseException) -> str:
    line = traceback.format_exception_only(type(error), error)[-1].strip()
    frame = traceback.extract_tb(error.__traceback__)[-1] if error.__traceback__ else None
    at = f" at {Path(frame.filename).name}:{frame.lineno}" if frame else ""
    return f"{where}: {line}{at}"


def _check_result(module, evidence: Evidence, errors: list, points: float | None = None) -> CheckResult:
    """One check's result, its parts sharing `points` (the course's cell points) by the rubric's weights."""
    spec = RUBRIC[module.NAME]
    grader_error = None
    try:
        outcomes = module.evaluate(evidence)
        missing = set(spec.parts) - set(outcomes)
        if missing:
            raise KeyError(f"no verdict for {sorted(missing)}")
    except Exception as error:
        grader_error = _grader_error(f"check {module.NAME}", error)
        errors.append(grader_error)
        outcomes = {part: fail("Not graded: the grader itself failed on this check (a grader error, not a mistake of "
                               "yours); your instructor can see it and will regrade.") for part in spec.parts}
    subtests = tuple(SubTest(part, worth if outcomes[part].passed else 0.0, worth, outcomes[part].passed,
                             outcomes[part].message) for part, worth in spec.parts_for(points).items())
    failed = [_sentence(s.message) for s in subtests if not s.passed]
    message = "All parts passed." if not failed else " ".join(dict.fromkeys(failed))
    return CheckResult(module.NAME, spec.title, subtests, message, spec.visibility, dict(evidence.details), grader_error)


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


def evaluate(raw: dict, plan: Plan, assignment: kit.Assignment = kit.KIT, sources: list[str] = ()) -> Evaluation:
    """Every check on one sandbox reply. Pure apart from the (cached) reference and the grader's replays.
    `sources`: the student's code as sent (for remarks read from the code itself)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)         # many small computations: one thread is fastest, and fair to a busy machine
    try:
        return _evaluate(raw, plan, assignment, list(sources))
    finally:
        torch.set_num_threads(threads)


def _read_runs(student: dict, x, parts: dict, device: str, errors: list) -> dict:
    flows = {}
    for mode in ("eval", "train"):
        flows[mode] = None
        if not student[mode]["ok"]:
            continue
        try:
            flows[mode] = analyse(x, student[mode], parts, train=mode == "train", device=device)
        except Exception as error:
            errors.append(_grader_error(f"reading the {mode}-mode run", error))
            student[mode] = {"ok": False, "error": {"type": "ProtocolError", "message":
                             "the grader could not read your forward's run (a grader error, reported)"}}
            continue
        wrong = flows[mode].unverified
        if wrong:      # a record the grader cannot reproduce is not believed, in any of its parts
            flows[mode] = None
            student[mode] = {"ok": False, "error": {"type": "ProtocolError", "message":
                             f"{wrong[0].why}; nothing recorded in that run can be believed"}}
    return flows


def _evaluate(raw: dict, plan: Plan, assignment: kit.Assignment, sources: list) -> Evaluation:
    parts = trusted_parts(assignment, plan)
    expect = expected_shapes(plan, parts)
    answers = raw.get("observations") if isinstance(raw.get("observations"), dict) else {}
    student = {probe: read_answer(probe, answers.get(probe), expect) for probe in ALL_PROBES}
    broken = [f"'{probe}': {a['error']['message']}" for probe, a in student.items()
              if not a["ok"] and a["error"].get("type") in ("GraderError", "EncoderError")]
    if broken:     # the grader's own encoder (in the sandbox) or reader failed: nothing is scored as the student's
        raise RuntimeError(f"encoding or reading the sandbox's answers: {'; '.join(broken)}")
    errors: list[str] = []
    ref = reference(plan.seed, plan.device, assignment)
    cpu_plan = Plan(**{**plan.__dict__, "device": "cpu"})
    x = Probing({}, reference_namespace(assignment), cpu_plan).x().numpy().astype(np.float64)
    flows = _read_runs(student, x, parts, plan.device, errors)
    evidence = Evidence(student, ref.answers, ref.named, parts, x, flows,
                        replays=Replays(flows, parts, plan, reference_namespace(assignment)), plan=plan,
                        device=plan.device, drop_p=plan.drop_p, sources=sources)
    try:
        matching = evidence.matches("eval") and evidence.matches("train")
        divergence = None if matching else first_divergence(flows, parts, plan.drop_p)
    except Exception as error:   # an explanation is a bonus: its failure costs no points, but is reported
        errors.append(_grader_error("finding the first divergent step", error))
        divergence = None
    evidence.divergence = divergence
    if divergence is not None:     # for the instructor (and the kit's tests): the step, and the cause if verified
        evidence.details["divergence"] = {"step": divergence.step, "mode": divergence.mode, "cause": divergence.cause,
                                          "message": divergence.message}
    points = assignment.check_points()
    checks = tuple(_check_result(module, evidence, errors, points.get(module.NAME)) for module in CHECKS)
    if all(check.passed for check in checks if check.check != compounding.NAME):
        divergence = None   # the trace only explains lost points; equivalent code in any style has nothing to explain
    profiles = {"student": _student_profile(evidence, student), **ref.profiles}
    notes = _notes(raw, student) + _code_notes(evidence)
    return Evaluation(checks, divergence.text() if divergence else None, notes, profiles, tuple(errors))


def _student_profile(evidence: Evidence, student: dict):
    """The profile drawn as the student's: the grader's own stack of the student's program where it has one."""
    try:
        return evidence.reference["profile"]["profile"] if evidence.matches("eval") else evidence.replays.profile
    except (ValueError, KeyError):
        return student["profile"].get("profile") if student["profile"]["ok"] else None


def _code_notes(evidence: Evidence) -> tuple:
    notes = []
    note = robustness.device_note(evidence.sources)
    if note:
        notes.append(note + ".")
    flow = evidence.flows.get("eval")
    if flow is not None and flow.decoys:
        names = ", ".join(dict.fromkeys(step.name for step in flow.decoys))
        notes.append(f"Your forward also called {names} on values whose results never reach what it returns; such "
                     "calls earn nothing.")
    return tuple(notes)


def unreadable(submission: str, message: str, seed: int, device: str, student: str | None = None,
               grader_errors: tuple = (), assignment: kit.Assignment = kit.KIT) -> SubmissionResult:
    points = assignment.check_points()
    checks = tuple(
        CheckResult(name, spec.title, tuple(SubTest(p, 0.0, pts, False, message)
                                            for p, pts in spec.parts_for(points.get(name)).items()),
                    message, spec.visibility)
        for name, spec in RUBRIC.items()
    )
    return SubmissionResult(submission, checks, seed, device, "not run", 0.0, None, (message,), student=student,
                            grader_errors=tuple(grader_errors))


def grader_failure(submission: str, error: BaseException, seed: int, device: str, student: str | None = None,
                   assignment: kit.Assignment = kit.KIT):
    """The whole grading of one submission failed for the grader's own reasons: a result that says so."""
    text = _grader_error("grading", error)
    print(f"grader error while grading {student or submission}: {text}", file=sys.stderr)
    return unreadable(submission, "Not graded: the grader itself failed (a grader error, not a mistake of yours); your "
                      "instructor can see it and will regrade.", seed, device, student, (text,), assignment)


def grade_cells(cells: list, name: str, server: SandboxServer, *, seed: int, device: str = "cpu",
                student: str | None = None) -> SubmissionResult:
    """Grade a submission already read into cells (see `notebook.read_cells`). Never raises for anything the
    submission did; a failure of the grader becomes a result that names it."""
    started = time.monotonic()
    try:
        assignment = server.assignment
        plan = Plan.draw(seed, device)
        cells, restored = assignment.restore_locked_cells(cells)
        code = student_code(cells)
        raw = server.grade(code, plan.to_dict(), list(ALL_PROBES))
        cleanup = tuple(raw.get("cleanup") or ())      # the sandbox's own problems: the grader's, never the student's
        if raw.get("grader_error"):      # the grader's own failure (CUDA would not start): never scored as a 0
            raise RuntimeError("; ".join([f"on {device}: {raw['grader_error']}", *cleanup]))
        found = evaluate(raw, plan, assignment, [source for _, source in code])
    except Exception as error:
        return grader_failure(name, error, seed, device, student, getattr(server, "assignment", kit.KIT))
    grader_errors = found.grader_errors + cleanup
    for text in grader_errors:
        print(f"grader error while grading {student or name}: {text}", file=sys.stderr)
    unsafe = (f"Graded without isolation ({server.isolation}).",) if server.isolation == UNSAFE else ()
    return SubmissionResult(name, found.checks, seed, device, server.isolation, round(time.monotonic() - started, 3),
                            found.first_divergence, unsafe + tuple(restored) + found.notes, found.profiles, student,
                            grader_errors)


def grade_file(path: str | Path, server: SandboxServer, *, seed: int, device: str = "cpu",
               student: str | None = None) -> SubmissionResult:
    path = Path(path)
    try:
        cells = read_cells(path)
    except SubmissionError as error:
        return unreadable(path.name, f"Your submission could not be read: {error}.", seed, device, student,
                          assignment=server.assignment)
    return grade_cells(cells, path.name, server, seed=seed, device=device, student=student)
