"""The grader's own side of every question: the reference solution, loaded from the annotated source, and its
answers (with the named wrong arrangements') to a plan, read by the very reader the child's answers go through.
"""

from __future__ import annotations

import contextlib
import functools
import random
import threading
from dataclasses import dataclass

import torch

from autograder.course import kit
from autograder.engine.questions.cells import load_cells
from autograder.engine.questions.parts import make_parts
from autograder.engine.questions.plan import Plan
from autograder.engine.questions.probes import Probing, part_params, run_probe
from autograder.engine.reading.answers import Expect, read_answer
from autograder.sandbox.inside.protocol import encode_observation
from .options import DeviceUnavailable

ARRANGEMENTS = {"Post-LN": "PostLNBlock", "no shortcuts": "NoShortcutBlock"}


def new_seed() -> int:
    return random.SystemRandom().randrange(1, 2**31)


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise DeviceUnavailable("--device cuda was asked for, but CUDA is not available here")
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


REFERENCE_PROBES = (
    "eval",
    "train",
    "profile",
    "eval_seeds",
    "eval_other",
    "respond",
    "robust_small",
    "robust_batch",
    "robust_double",
    "sweep",
)


@dataclass(frozen=True)
class Reference:
    answers: dict  # probe -> the reference's answer, read like the child's
    named: dict  # arrangement -> its eval-mode output
    profiles: dict  # curve name -> deep-stack profile, for the feedback plot


_computing = threading.Lock()  # one computation at a time: a caller that comes while it runs waits for its answer


def reference(seed: int, device: str, assignment: kit.Assignment) -> Reference:
    """The reference solution and the named wrong arrangements, through the very same probes and reader
    (once per seed, device and assignment: a class shares it). Any thread may ask; one computes."""
    with _computing:
        return _reference(seed, device, assignment)


@contextlib.contextmanager
def reference_meanwhile(seed: int, device: str, assignment: kit.Assignment):
    """The reference's answers computed in a thread while the body runs (the sandbox's child answers meanwhile).
    Whoever asks for them waits for them; a failure there is not kept, so that asking again raises it where it is
    reported. The thread is joined when the body ends: torch left running in a thread at exit aborts the process."""

    def compute() -> None:
        try:
            reference(seed, device, assignment)
        except Exception:  # asked again where the failure is reported (a grader error, in its part)
            pass

    thread = threading.Thread(target=compute, name="reference")
    thread.start()
    try:
        yield
    finally:
        thread.join()


@functools.lru_cache(maxsize=16)
def _reference(seed: int, device: str, assignment: kit.Assignment) -> Reference:
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


reference.cache_clear = _reference.cache_clear  # type: ignore[attr-defined]  # a benchmark times it anew
