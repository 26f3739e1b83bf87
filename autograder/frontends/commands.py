"""What the command line's `grade` and `grade-class` do, as keyword-only functions: `autograder.frontends.cli`
parses the options, calls one of them and prints what it returns.

A refusal, before anything ran, is an exception whose message is the whole answer in one line: `NotGrading`,
`autograder.sandbox.parent.policy.IsolationUnavailable` (nothing can isolate a submission),
`autograder.grading.options.DeviceUnavailable`, or nbgrader's refusal of the course (`KitRefusal`, or a
SystemExit naming what is wrong). The sandbox servers start before this process imports torch and the grader:
they warm up on their own meanwhile, so nothing here imports either at the top.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from autograder.course import kit
from autograder.engine.results import points_text
from autograder.engine.rubric import RUBRIC
from autograder.grading.options import GradingOptions
from autograder.sandbox.parent.policy import IsolationUnavailable, isolation_available
from autograder.sandbox.parent.pool import ServerPool
from . import interpreter
from .shown import line


class NotGrading(Exception):
    """The grader refuses, for the reason its message gives in one line; nothing ran."""


def refuse_unrunnable_interpreter() -> None:
    """Every door asks first whether this user can run the kit's Python (`interpreter`)."""
    why = interpreter.interpreter_refusal()
    if why:
        raise NotGrading(f"Not grading: {why}.")


def source_assignment(source: Path | None) -> kit.Assignment:
    """The assignment a course's copy of the source notebook gives (the kit's own without one)."""
    try:
        return kit.Assignment(source).verify(RUBRIC) if source else kit.KIT
    except kit.SourceProblem as error:
        raise NotGrading(f"Not grading: {error}") from None


def grade_submission(
    submission: Path, *, results: Path, feedback: Path | None = None, source: Path | None = None, options: GradingOptions
) -> dict:
    """Grade one submission against `source` (a course's copy of the source notebook; the kit's own without one)
    and write its Gradescope results, atomically, and its feedback page if asked; returns the results written."""
    assignment = source_assignment(source)
    refuse_unrunnable_interpreter()
    from autograder.grading.single import grade_one
    from autograder.frontends.gradescope.results import write_results
    from .standing import standing_of

    result = grade_one(submission, options=replace(options, assignment=assignment))
    standing = standing_of(result, assignment)
    written = write_results(result, results, source=assignment.key, standing=standing)
    if feedback:
        from .feedback import write_feedback_page

        write_feedback_page(result, feedback, standing)
    return written


@dataclass(frozen=True)
class ClassGraded:
    """What `grade_folder` did, for the command line to say."""

    rows: list[dict]
    seed: int
    out: Path
    source: Path
    course: Path | None
    unisolated: list[str]
    graded: tuple = ()  # the students this run graded; the others were up to date and skipped
    open_course: str | None = None  # the course's warning: others can read or write it, by its choice

    def summary(self) -> str:
        """What the run did: how many students it graded (with this run's seed), how many it skipped as up to date
        and the seeds their results keep, then the class's mean and where the files are."""
        scores = [float(r["score"]) for r in self.rows]
        mean = sum(scores) / len(scores) if scores else 0.0
        now = sum(1 for r in self.rows if r["student"] in self.graded)
        kept = [r for r in self.rows if r["student"] not in self.graded]
        done = f"graded {now} student{'s' * (now != 1)} (seed {self.seed})" if now else "graded no student"
        if kept:
            done += (
                f"; skipped {len(kept)} whose results were up to date and keep the seed they were graded with "
                f"({seeds_text(kept)})"
            )
        mean_text = f"mean score {points_text(mean)} of {self.rows[0]['max_score'] if self.rows else '-'}"
        if kept:
            mean_text += f" over all {len(self.rows)} students"
        lines = [f"{done}; {mean_text}; grades in {self.out / 'grades.csv'}, report in {self.out / 'report.html'}"]
        if self.course is not None:
            lines.append(
                f"graded with {self.source}; scores written to the gradebook of {self.course}; nbgrader drew "
                f"the feedback pages in {self.course / 'feedback'}"
            )
        return "\n".join(lines)

    def warning(self) -> str | None:
        lines = [f"WARNING: {self.open_course}"] if self.open_course else []
        if self.unisolated:
            lines.append(
                f"WARNING: {len(self.unisolated)} of {len(self.rows)} submissions were graded WITHOUT isolation: "
                "they could read the solution and other students' files (their results say so)"
            )
        return "\n".join(lines) or None


def seeds_text(rows: list[dict], named: int = 5) -> str:
    """Each seed and the students graded with it: "seed 11: ana, bo; seed 12: cy" (at most `named` ids a seed,
    then how many more)."""
    by_seed: dict = {}
    for row in rows:
        by_seed.setdefault(row["seed"], []).append(row["student"])
    parts = []
    for seed, students in by_seed.items():
        more = f" and {len(students) - named} more" if len(students) > named else ""
        parts.append(f"seed {seed}: {', '.join(map(line, students[:named]))}{more}")
    return "; ".join(parts)


def grade_folder(
    submissions: Path,
    *,
    out: Path,
    options: GradingOptions,
    workers: int | None = None,
    force: bool = False,
    course: Path | None = None,
    assignment: str | None = None,
) -> ClassGraded:
    """grade-class: every student's submission in `submissions` into `out`, `workers` at a time (default: one per
    CPU core). With an nbgrader `course` (default: the course around `submissions` when it is nbgrader's
    submitted/ folder) it grades with the course's `assignment` (needed only where it holds several of the
    kit's) and writes into the course what `nbgrader autograde` would; `options.assignment` is then the course's."""
    course = course or enclosing_course(submissions)
    refuse_unrunnable_interpreter()
    servers = spawn_servers(workers or os.cpu_count() or 1, unsafe=options.unsafe or course_allows_unsafe(course), course=course)
    try:  # while the servers warm up: the grader's imports (and nbgrader's, for a course)
        from .classgrade import grade_class, unisolated

        options, recorder = options.resolved(), None
        if course is not None:
            from autograder.frontends.nbgrader.recorder import CourseRecorder

            recorder = CourseRecorder(course, assignment, unsafe=options.unsafe)
            options = replace(options, assignment=recorder.assignment)
    except BaseException:
        servers.close()
        raise
    rows = grade_class(submissions, out, options=options, workers=workers, force=force, course=recorder, servers=servers)
    students = [r["student"] for r in rows]
    return ClassGraded(
        rows,
        options.seed,
        out,
        options.assignment.source,
        course,
        unisolated(out, students),
        rows.graded,
        getattr(recorder, "open_course", None),
    )


def spawn_servers(count: int, *, unsafe: bool, course: Path | None = None) -> ServerPool:
    """`count` sandbox servers, started now: each imports torch on its own while this process goes on."""
    try:
        servers = ServerPool(count, unsafe=unsafe)
    except IsolationUnavailable:
        if course is None:
            raise
        from autograder.frontends.nbgrader.preflight import ISOLATION_REFUSAL  # a course decides in its configuration

        raise NotGrading(f"Not grading: {ISOLATION_REFUSAL} (or pass --unsafe).") from None
    return servers.spawn()


def course_allows_unsafe(course: Path | None) -> bool:
    """The course's (or the hub's) `c.KitSandbox.when_unisolated = "unsafe"`; read only where nothing isolates."""
    if course is None or isolation_available():
        return False
    from autograder.frontends.nbgrader.bridge import course_config
    from autograder.frontends.nbgrader.preflight import unsafe_allowed

    return unsafe_allowed(course_config(course))


def enclosing_course(submissions: Path) -> Path | None:
    parent = submissions.resolve().parent
    if submissions.resolve().name == "submitted" and (parent / "nbgrader_config.py").is_file():
        return parent
    return None
