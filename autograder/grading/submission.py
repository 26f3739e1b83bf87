"""Grading one submission: ask it the grader's questions in the sandbox, then evaluate its answers.

The trusted parent does everything here. Student code only ever runs inside a `SandboxServer` child; the
reference solution runs here, from the annotated source, on the same plan. A failure of the grader itself
(a check that crashes on unexpected observations, a reference that will not run) is reported as a grader
error, visible to the instructor, and never turned into the student's lost points.
"""

from __future__ import annotations

import concurrent.futures
import sys
import time
from pathlib import Path

from autograder.course import kit
from autograder.course.fence import name_text, visible
from autograder.course.notebook import SubmissionError, read_submission, student_code
from autograder.engine.questions.plan import Plan
from autograder.engine.questions.probes import ASKED_FIRST
from autograder.engine.results import CheckResult, SubmissionResult, SubTest
from autograder.engine.rubric import RUBRIC
from autograder.sandbox.isolation import unisolated
from autograder.sandbox.parent.client import SandboxServer
from .errors import grader_error_text


def unreadable(
    submission: str,
    message: str,
    seed: int,
    device: str,
    student: str | None = None,
    grader_errors: tuple = (),
    assignment: kit.Assignment = kit.KIT,
) -> SubmissionResult:
    points = assignment.check_points()
    checks = tuple(
        CheckResult(
            name,
            spec.title,
            tuple(SubTest(p, 0.0, pts, False, message) for p, pts in spec.parts_for(points.get(name)).items()),
            message,
            spec.visibility,
        )
        for name, spec in RUBRIC.items()
    )
    return SubmissionResult(
        submission, checks, seed, device, "not run", 0.0, None, (message,), student=student, grader_errors=tuple(grader_errors)
    )


def grader_failure(
    submission: str,
    error: BaseException,
    seed: int,
    device: str,
    student: str | None = None,
    assignment: kit.Assignment = kit.KIT,
):
    """The whole grading of one submission failed for the grader's own reasons: a result that says so."""
    text = grader_error_text("grading", error)
    print(f"grader error while grading {student or submission}: {text}", file=sys.stderr)
    return unreadable(
        submission,
        "Not graded: the grader itself failed (a grader error, not a mistake of yours); your "
        "instructor can see it and will regrade.",
        seed,
        device,
        student,
        (text,),
        assignment,
    )


def grade_cells(
    cells: list,
    name: str,
    server: SandboxServer,
    *,
    seed: int,
    device: str = "cpu",
    student: str | None = None,
    notes: tuple = (),
) -> SubmissionResult:
    """Grade a submission already read into cells (see `notebook.read_submission`; `notes`: what it said about
    odd cells). Never raises for anything the submission did; a failure of the grader becomes a result that
    names it."""
    started = time.monotonic()
    try:
        assignment = server.assignment
        plan = Plan.draw(seed, device)
        cells, restored = assignment.restore_locked_cells(cells)
        code = student_code(cells)
        cleanup: list[str] = []  # the sandbox's own problems: the grader's, never the student's

        def replied(raw: dict) -> dict:
            cleanup.extend(raw.get("cleanup") or ())
            if raw.get("grader_error"):  # the grader's own failure (CUDA would not start): never scored as a 0
                raise RuntimeError("; ".join([f"on {device}: {raw['grader_error']}", *cleanup]))
            return raw

        def ask(probes: list) -> dict:  # a question only some verdicts need, asked when one does (`Answers`)
            observations = replied(server.grade(code, plan.to_dict(), probes)).get("observations")
            return observations if isinstance(observations, dict) else {}

        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="asking") as asking:
            answered = asking.submit(server.grade, code, plan.to_dict(), list(ASKED_FIRST))
            from .evaluation import evaluate  # the checks, imported (once) while the child answers

            raw = replied(answered.result())
        found = evaluate(raw, plan, assignment, [source for _, source in code], ask)
    except Exception as error:
        return grader_failure(name, error, seed, device, student, getattr(server, "assignment", kit.KIT))
    grader_errors = found.grader_errors + tuple(cleanup)
    for text in grader_errors:
        print(f"grader error while grading {student or name}: {text}", file=sys.stderr)
    unsafe = (f"Graded without isolation ({server.isolation}).",) if unisolated(server.isolation) else ()
    return SubmissionResult(
        name,
        found.checks,
        seed,
        device,
        server.isolation,
        round(time.monotonic() - started, 3),
        found.first_divergence,
        unsafe + tuple(notes) + tuple(restored) + found.notes,
        found.profiles,
        student,
        grader_errors,
        found.facts,
        found.diverged,
    )


def grade_file(
    path: str | Path, server: SandboxServer, *, seed: int, device: str = "cpu", student: str | None = None
) -> SubmissionResult:
    path, name = Path(path), name_text(Path(path).name)
    try:
        reading = read_submission(path)
    except SubmissionError as error:
        print(f"could not read {name_text(str(path))} ({visible(str(student or name))}): {visible(str(error))}", file=sys.stderr)
        return unreadable(name, could_not_read(path, error), seed, device, student, assignment=server.assignment)
    return grade_cells(reading.cells, name, server, seed=seed, device=device, student=student, notes=reading.notes)


def could_not_read(path: Path, error: Exception) -> str:
    """The student's result when their file cannot be read: theirs, not a grader error."""
    what = "notebook" if path.suffix == ".ipynb" else "submission"
    return f"Your {what} could not be read: {error}, so nothing was graded."
