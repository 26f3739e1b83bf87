"""The same checks without a sandbox: the student's definitions, loaded in this very process, answer the
grader's questions.

Never used to grade students: student code here shares the grader's process, so it could forge anything. It
serves two readers:

* the tests of what a submission earns (tests/graded.py), and the benchmarks' plain-process baseline: `InProcess`
  stands where a `SandboxServer` stands. Its `grade` runs the sandbox child's own job (`questions/job.py: run_job`)
  here, on one torch thread as the sandbox's server runs every child, and hands each answer through the sandbox's
  own framing and bookkeeping (`protocol.frame`, `watch.Run.follow`: encoded, sent as JSON, bounded, loaded cells and
  their errors) before the grader's door (`submission.grade_cells`) evaluates them. Everything a student's grading
  runs, except the isolation; tests/grading/test_parity.py holds every layer's results to these.
* `kernel_report`, the benchmarks' stock-nbgrader baseline: the kit's checks on the definitions a notebook's own
  kernel already made (`benchmarks/class_grading.py`).
"""

from __future__ import annotations

import contextlib
import io
import time
from dataclasses import asdict

from autograder.course import kit
from autograder.engine.questions.cells import load_cells
from autograder.engine.questions.plan import Plan
from autograder.engine.questions.probes import ASKED_FIRST, Probing, run_probe
from autograder.engine.results import SubmissionResult
from autograder.sandbox.inside.protocol import encode_observation
from .evaluation import evaluate


def grade_namespace(
    namespace: dict,
    seed: int,
    *,
    name: str = "notebook",
    device: str = "cpu",
    assignment: kit.Assignment = kit.KIT,
    sources: list[str] = (),
) -> SubmissionResult:
    """Grade definitions already made in `namespace` (a kernel's globals, say) with the kit's checks; `sources`,
    the code that made them, where it is known (the remarks read from the code itself, as the sandbox's grading
    makes them)."""
    started = time.monotonic()
    plan = Plan.draw(seed, device)
    public, errors = load_cells(assignment.public_code())
    if errors:
        raise RuntimeError(f"the kit's own code failed to load: {errors[0]}")
    probing = Probing(namespace, public, plan)

    def ask(probes) -> dict:
        return {probe: encode_observation(run_probe(probe, probing)) for probe in probes}

    found = evaluate({"observations": ask(ASKED_FIRST)}, plan, assignment, sources, ask)
    return SubmissionResult(
        name,
        found.checks,
        seed,
        device,
        ISOLATION,
        round(time.monotonic() - started, 3),
        found.first_divergence,
        found.notes,
        found.profiles,
        facts=found.facts,
        diverged=found.diverged,
    )


ISOLATION = "none: graded in the grader's own process"


class InProcess:
    """A `SandboxServer` for `submission.grade_cells` (see the module's docstring), for one assignment. Only for
    submissions that stay in their lane: a job that leaves a question unanswered (its process would have died),
    or answers with more than the sandbox reads of a job, is a grader error here, and is graded in the sandbox."""

    isolation = ISOLATION

    def __init__(self, assignment: kit.Assignment = kit.KIT):
        self.assignment = assignment

    def grade(self, cells: list, plan: dict, probes: list) -> dict:
        import torch

        from autograder.engine.questions import job
        from autograder.sandbox.inside.protocol import MAX_ANSWER_BYTES, FrameReader, encoded_answer, frame
        from autograder.sandbox.inside.watch import Run
        from autograder.sandbox.parent.policy import Limits

        ready = _ready(self.assignment)
        run = Run(asdict(Limits()), lambda: 0.0, {}, bytearray(), -1, job.PROBES)
        reader, sent = FrameReader(), [0]

        def report(event: dict) -> None:  # as `child.Reporter` sends it and the supervisor's `Run` reads it
            if "observation" in event:
                event = {**event, "observation": encoded_answer(event["observation"])}
            data = frame(event)
            sent[0] += len(data)
            for item in reader.feed(data):
                run.follow(item)

        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # as the sandbox's server runs every child
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                job.run_job(ready, {"cells": cells, "plan": plan, "probes": probes}, report)
        finally:
            torch.set_num_threads(threads)
        missing = [probe for probe in probes if probe not in run.observations]
        if not run.done or missing:
            raise RuntimeError(f"graded in process, the job ended without answering {missing}: grade it in the sandbox")
        if sent[0] > MAX_ANSWER_BYTES:  # past this, the sandbox stops reading a child's answers (`Run.take`)
            raise RuntimeError(f"graded in process, the job answered {sent[0]} bytes, more than the sandbox reads")
        return {"observations": run.observations, "loaded": run.loaded, "cleanup": []}


_READY: dict = {}  # assignment name -> the kit's public code loaded as a child loads it, once per process


def _ready(assignment: kit.Assignment) -> dict:
    if assignment.name not in _READY:
        from autograder.engine.questions import job

        _READY[assignment.name] = job.ready(assignment.public_code(), warm_up=False)
    return _READY[assignment.name]


def grade_cells_in_process(
    cells, seed: int, *, name: str = "notebook", device: str = "cpu", assignment: kit.Assignment = kit.KIT
) -> SubmissionResult:
    """Grade a submission's cells here (no sandbox), through the grader's door: the plain-process baseline."""
    from .submission import grade_cells

    return grade_cells(cells, name, InProcess(assignment), seed=seed, device=device)


_kernel_results: dict = {}


def kernel_report(namespace: dict, check: str, seed: int) -> float:
    """For a hidden-check cell run by stock nbgrader in a kernel (the benchmark's stock baseline): grade the
    kernel's own definitions once, print the named check's message and return its points (nbgrader reads a
    number as the cell's partial credit)."""
    key = (id(namespace), seed)
    if key not in _kernel_results:
        _kernel_results[key] = grade_namespace(namespace, seed)
    found = next(c for c in _kernel_results[key].checks if c.check == check)
    print(f"{found.title}: {found.points:g} / {found.max_points:g}\n{found.message}")
    return found.points
