"""The same checks without a sandbox: the student's definitions, loaded in this very process, answer the
grader's questions directly.

Never used to grade: student code here shares the grader's process, so it could forge anything. It exists
for the benchmarks, as the baselines a course without the kit's sandbox would have: `benchmarks/
class_grading.py` runs it inside nbgrader's own kernel (stock `nbgrader autograde`, one kernel per notebook)
and in one plain process, on the same submissions and seed as `grade-class`.
"""

from __future__ import annotations

import time

from autograder.course import kit
from autograder.course.notebook import student_code
from autograder.engine.questions.cells import load_cells
from autograder.engine.questions.plan import Plan
from autograder.engine.questions.probes import Probing, run_probe
from autograder.engine.results import SubmissionResult
from autograder.sandbox.inside.protocol import encode_observation
from .evaluation import ALL_PROBES, evaluate
from .reference import reference_namespace


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
    raw = {"observations": {probe: encode_observation(run_probe(probe, probing)) for probe in ALL_PROBES}}
    found = evaluate(raw, plan, assignment, sources)
    return SubmissionResult(
        name,
        found.checks,
        seed,
        device,
        "none: graded in the grader's own process",
        round(time.monotonic() - started, 3),
        found.first_divergence,
        found.notes,
        found.profiles,
        facts=found.facts,
        diverged=found.diverged,
    )


def grade_cells_in_process(
    cells, seed: int, *, name: str = "notebook", device: str = "cpu", assignment: kit.Assignment = kit.KIT
) -> SubmissionResult:
    """Load a submission's cells here (no sandbox) and grade them: the plain-process baseline."""
    cells, _ = assignment.restore_locked_cells(cells)
    code = student_code(cells)
    namespace, _ = load_cells(code)
    reference_namespace(assignment)
    return grade_namespace(
        namespace, seed, name=name, device=device, assignment=assignment, sources=[source for _, source in code]
    )


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
