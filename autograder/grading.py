"""Grading one submission: observe it in the sandbox, compute the reference, run every check.

The trusted parent does everything here. Student code only ever runs inside a `SandboxServer` child;
the reference solution runs here, from the annotated source, on the same seeded inputs.
"""
from __future__ import annotations

import functools
import random
import time
from pathlib import Path

import torch

from . import kit
from .checks import Evidence, compounding, fail, dropout, gradients, order, prenorm, robustness, shortcuts
from .diagnosis import first_divergence, gradient_hint
from .harness.child import load_cells
from .harness.parts import make_parts
from .harness.probes import PROBES, Plan, Probing, run_probe
from .harness.protocol import ProtocolError, decode_observation
from .notebook import SubmissionError, read_cells, student_code
from .results import CheckResult, SubmissionResult, SubTest
from .rubric import RUBRIC
from .sandbox import SandboxServer

CHECKS = (order, shortcuts, prenorm, dropout, gradients, robustness, compounding)
ALL_PROBES = tuple(PROBES)


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


@functools.lru_cache(maxsize=64)
def reference_observations(seed: int, device: str, assignment: kit.Assignment = kit.KIT) -> dict:
    """The reference solution and the named wrong arrangements, through the very same probes."""
    ref = reference_namespace(assignment)
    plan = Plan(seed=seed, device=device)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        observe = lambda names, probes: {p: _to_numpy(run_probe(p, Probing(names, ref, plan))) for p in probes}
        observations = {
            "reference": observe(ref, ALL_PROBES),
            "Post-LN": observe({**ref, "TransformerBlock": ref["PostLNBlock"]}, ("eval", "profile")),
            "no shortcuts": observe({**ref, "TransformerBlock": ref["NoShortcutBlock"]}, ("eval", "profile")),
        }
    finally:
        torch.set_num_threads(threads)
    for name, probes in observations.items():
        for probe, observation in probes.items():
            if not observation.get("ok"):
                raise RuntimeError(f"the {name} failed its own '{probe}' probe: {observation.get('error')}")
    return observations


def _to_numpy(value):
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, dict):
        return {k: _to_numpy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_numpy(v) for v in value]
    return value


def _decode(raw: dict) -> dict:
    observations = {}
    for probe in ALL_PROBES:
        try:
            value = decode_observation(raw.get("observations", {}).get(probe))
        except (ProtocolError, ValueError, TypeError):
            value = None
        if not isinstance(value, dict) or "ok" not in value:
            value = {"ok": False, "error": {"type": "ProtocolError", "message": "no usable observation came back"}}
        observations[probe] = value
    return observations


def _check_result(module, evidence: Evidence) -> CheckResult:
    spec = RUBRIC[module.NAME]
    try:
        outcomes = module.evaluate(evidence)
    except Exception as error:  # malformed observations (a forged report, say) fail the check, never the grader
        outcomes = {part: _malformed(error) for part in spec.parts}
    subtests = tuple(
        SubTest(part, points if outcomes[part].passed else 0.0, points, outcomes[part].passed, outcomes[part].message)
        for part, points in spec.parts.items()
    )
    failed = [_sentence(s.message) for s in subtests if not s.passed]
    message = "All parts passed." if not failed else " ".join(dict.fromkeys(failed))
    return CheckResult(module.NAME, spec.title, subtests, message, spec.visibility, dict(evidence.details))


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


def _malformed(error: Exception):
    return fail(f"The observations of your code could not be interpreted ({type(error).__name__}).")


def _trace_explanations(student: dict, reference: dict):
    trace = student.get("trace", {})
    if not trace.get("ok"):
        return None, None
    try:
        divergence = first_divergence(trace, reference["trace"])
        hint = gradient_hint(trace.get("events", []), reference["trace"])
    except Exception:  # an explanation is a bonus: a malformed trace never costs points
        return None, None
    return divergence, hint


def _listed(value) -> list:
    return value if isinstance(value, list) else []


def _notes(raw: dict, student: dict) -> tuple[str, ...]:
    """Student-facing remarks; everything here came from the sandbox, so nothing about its shape is trusted."""
    notes = []
    loaded = raw.get("loaded") if isinstance(raw.get("loaded"), dict) else {}
    for error in _listed(loaded.get("cell_errors"))[:5]:
        if isinstance(error, dict):
            notes.append(f"{error.get('cell')} raised {error.get('type')}: {error.get('message')}")
    for note in _listed(student.get("eval", {}).get("notes"))[:2]:
        notes.append(f"{note}; your forward was graded with the kit's components.")
    return tuple(str(n)[:500] for n in notes)


def evaluate(raw: dict, seed: int, device: str, assignment: kit.Assignment = kit.KIT) -> tuple[tuple[CheckResult, ...], str | None, tuple, dict]:
    """Every check on one sandbox reply. Pure apart from the (cached) reference computation."""
    student = _decode(raw)
    observed = reference_observations(seed, device, assignment)
    reference = observed["reference"]
    divergence, hint = _trace_explanations(student, reference)
    parts = make_parts(reference_namespace(assignment), Plan(seed=seed).cfg, seed, drop_p=0.5)
    named = {name: probes["eval"] for name, probes in observed.items() if name != "reference"}
    checks = []
    for module in CHECKS:
        evidence = Evidence(student, reference, named, parts, device, divergence, hint)
        checks.append(_check_result(module, evidence))
    if all(check.passed for check in checks if check.check != compounding.NAME):
        divergence = None   # the trace only explains lost points; equivalent code in any style has nothing to explain
    profiles = {"student": (student.get("profile") or {}).get("profile"),
                **{name: probes["profile"]["profile"] for name, probes in observed.items() if "profile" in probes}}
    return tuple(checks), divergence.text() if divergence else None, _notes(raw, student), profiles


def unreadable(submission: str, message: str, seed: int, device: str, student: str | None = None) -> SubmissionResult:
    checks = tuple(
        CheckResult(name, spec.title, tuple(SubTest(p, 0.0, pts, False, message) for p, pts in spec.parts.items()),
                    message, spec.visibility)
        for name, spec in RUBRIC.items()
    )
    return SubmissionResult(submission, checks, seed, device, "not run", 0.0, None, (message,), student=student)


def grade_cells(cells: list, name: str, server: SandboxServer, *, seed: int, device: str = "cpu",
                student: str | None = None) -> SubmissionResult:
    """Grade a submission already read into cells (see `notebook.read_cells`)."""
    started = time.monotonic()
    assignment = server.assignment
    cells, restored = assignment.restore_locked_cells(cells)
    raw = server.grade(student_code(cells), {"seed": seed, "device": device}, list(ALL_PROBES))
    if raw.get("grader_error"):      # the grader's own failure (CUDA would not start): never scored as a 0
        raise RuntimeError(f"grading {name} on {device}: {raw['grader_error']}")
    checks, divergence, notes, profiles = evaluate(raw, seed, device, assignment)
    return SubmissionResult(name, checks, seed, device, server.isolation, round(time.monotonic() - started, 3),
                            divergence, tuple(restored) + notes, profiles, student)


def grade_file(path: str | Path, server: SandboxServer, *, seed: int, device: str = "cpu",
               student: str | None = None) -> SubmissionResult:
    path = Path(path)
    try:
        cells = read_cells(path)
    except SubmissionError as error:
        return unreadable(path.name, f"Your submission could not be read: {error}.", seed, device, student)
    return grade_cells(cells, path.name, server, seed=seed, device=device, student=student)
