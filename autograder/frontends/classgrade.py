"""Grading a whole class: one warmed sandbox server per worker, one fresh child per submission.

Reads a folder of submissions (one per student: a notebook, a .py, or a folder holding one) or nbgrader's
`submitted/<student>/<assignment>/` layout, and writes for every student `OUT/<student>/results.json`
(Gradescope format) and `OUT/<student>/feedback.html`, then `OUT/grades.csv` and the class report
`OUT/report.html`. A student whose results are newer than their submission, and were graded against the source
as it is now, is not graded again unless `force`.

Each student is graded inside a fence: whatever escapes (from their file, their folder, their name) becomes that
student's result, the others are graded, and grades.csv and the report are always written. Student ids and file
names are plain text (`discovery`), and every CSV cell is neutralized (`exports`). Two student ids that read
alike (`ids`: `alice` and the Cyrillic `\u0430lice`, or one of the course's gradebook beside a folder's) are
refused before anyone is graded: `commands.NotGrading`, one line naming both.
"""

from __future__ import annotations

import concurrent.futures
import json
import sys
import os
import shutil
from pathlib import Path

from tqdm import tqdm

from autograder.course import kit
from autograder.engine.results import SubmissionResult, points_text
from autograder.engine.rubric import RUBRIC
from autograder.frontends.gradescope.results import result_from_json, standing_from_json, write_results
from autograder.grading.options import GradingOptions
from autograder.grading.reference import reference_meanwhile
from autograder.grading.submission import grade_file, grader_failure, unreadable
from autograder.sandbox.parent.containment import own_folder
from autograder.sandbox.parent.pool import ServerPool
from .exports import csv_text
from .feedback import write_feedback_page
from .files import write_atomically
from .report import open_course_note, write_class_report
from .shown import line
from .commands import NotGrading
from .discovery import Submission, discover, id_forms
from .ids import refusal as alike_refusal
from .standing import UNISOLATED, Standing, standing_of


def _is_fresh(results: Path, submission: Submission, assignment: kit.Assignment) -> bool:
    """Graded after the submission was last changed, against the source as it is now (its points, say)."""
    try:
        graded = results.is_file() and submission.path is not None
        fresh = graded and results.stat().st_mtime >= os.lstat(submission.path).st_mtime
        return fresh and json.loads(results.read_text()).get("extra_data", {}).get("source") == assignment.key
    except (OSError, ValueError):
        return False


class ClassRows(list):
    """What `grade_class` returns: the grade rows (one per student, as grades.csv holds them), and `graded`, the
    students this run graded (the others were up to date and kept their results, their seed included)."""

    def __init__(self, rows: list[dict], graded):
        super().__init__(rows)
        self.graded = tuple(graded)


def grade_row(student: str, result: SubmissionResult, standing: Standing) -> dict:
    """One row of grades.csv: the standing's numbers (the gradebook's, in a course), the grader's findings."""
    return {
        "student": student,
        "submission": result.submission,
        "score": points_text(standing.score),
        "max_score": points_text(standing.max_score),
        "late_penalty": points_text(standing.late_penalty),
        "late_by": standing.late_by,
        "seconds_late": "" if standing.seconds_late is None else points_text(standing.seconds_late),  # "": not known
        "awaiting": points_text(standing.awaiting),
        **{name: points_text(cell.points) if cell.points is not None else "" for name, cell in standing.checks.items()},
        **{cell.grade_id: points_text(cell.points) if cell.points is not None else "" for cell in standing.written},
        "first_divergence": result.first_divergence or "",
        "seed": result.seed,
        "grader_errors": " | ".join(result.grader_errors),
    }


def write_grades_csv(out: Path, rows: list[dict], assignment: kit.Assignment = kit.KIT) -> Path:
    header = [
        "student",
        "submission",
        "score",
        "max_score",
        "late_penalty",
        "late_by",
        "seconds_late",
        "awaiting",
        *RUBRIC,
        *assignment.written_points(),
        "first_divergence",
        "seed",
        "grader_errors",
    ]
    write_atomically(out / "grades.csv", csv_text(header, sorted(rows, key=lambda r: r["student"])))
    return out / "grades.csv"


def read_results(out: Path, students: list[str]) -> dict[str, SubmissionResult]:
    """Each student's result as results.json holds it (graded now or in an earlier run)."""
    results = {}
    for student in students:
        path = out / student / "results.json"
        if path.is_file():
            try:
                results[student] = result_from_json(json.loads(path.read_text()))
            except Exception as error:  # a results.json of any shape: this student's, the rest go on
                results[student] = unreadable(
                    student, "The results could not be read.", 0, "none", student, (f"results unreadable: {error}",)
                )
    return results


def results_rows(out: Path, assignment: kit.Assignment = kit.KIT) -> list:
    """(student, result, standing) of every student with results in a grade-class folder, for the report: the
    standing each results.json was written with (the gradebook's, for a course)."""
    students = sorted(p.parent.name for p in Path(out).glob("*/results.json"))
    rows = []
    for student, result in read_results(Path(out), students).items():
        try:
            standing = standing_from_json(json.loads((Path(out) / student / "results.json").read_text()), result)
        except (OSError, ValueError, KeyError, TypeError):
            standing = standing_of(result, assignment)
        rows.append((student, result, standing))
    return rows


def unisolated(out: Path, students: list[str]) -> list[str]:
    """The students whose results say they were graded without isolation."""
    return [s for s, r in read_results(Path(out), students).items() if r.isolation.startswith(UNISOLATED)]


def grade_class(
    root: Path,
    out: Path,
    *,
    options: GradingOptions,
    workers: int | None = None,
    force: bool = False,
    progress: bool = True,
    course=None,
    servers: ServerPool | None = None,
) -> ClassRows:
    """Grade every submission under `root` into `out`; returns the grade rows (and which students this run graded).
    Never stops for one student.

    `options` says how (`options.assignment` is the source notebook graded against: the kit's own, or a
    course's; `options.seed` must be given). `course` (an `autograder.frontends.nbgrader.recorder.CourseRecorder`)
    writes each result into the course and then has nbgrader draw the feedback pages; the numbers of grades.csv,
    the pages and the report are then the gradebook's. The submissions and `out` are private: no submission can
    read another's file or results. `servers`: a pool the caller spawned early (its servers warm up while it
    imports), used as the workers (with its own limits and isolation) and closed here, like a pool of its own."""
    out, assignment = Path(out), options.assignment
    try:
        submissions = discover(root, assignment)
        recorded = course.students() if course is not None else []  # a folder's student, as nbgrader or this names it
        folders = {form for forms in id_forms(submissions) for form in forms}
        alike = alike_refusal(id_forms(submissions) + [s for s in recorded if s not in folders])
        if alike:
            raise NotGrading(f"Not grading: {alike}.")
    except BaseException:
        if servers is not None:
            servers.close()
        raise
    out.mkdir(parents=True, exist_ok=True)  # exists before the sandbox hides it
    stale = course.stale([s.student for s in submissions]) if course is not None else {}
    todo = [
        s for s in submissions if force or s.student in stale or not _is_fresh(out / s.student / "results.json", s, assignment)
    ]
    with servers or ServerPool(0, limits=options.limits, unsafe=options.unsafe, isolation=options.isolation) as pool:
        if todo:  # nothing to grade: no server is made (nor refused)
            pool.resize(max(1, min(workers or os.cpu_count() or 1, len(todo))))
            _grade_all(todo, pool, root=root, out=out, options=options, course=course, progress=progress)
    students = [s.student for s in submissions]
    results = read_results(out, students)
    if course is not None:
        standings = course.finish([s for s in students if s in results])
        for student in standings:  # every file of the student's says the gradebook's numbers
            write_results(results[student], out / student / "results.json", source=assignment.key, standing=standings[student])
            shutil.copyfile(course.feedback_page(student), out / student / "feedback.html")
    else:
        standings = {s: standing_of(r, assignment) for s, r in results.items()}
    rows = []
    for student in (s for s in students if s in results and s in standings):
        try:
            rows.append(grade_row(student, results[student], standings[student]))
        except Exception as error:  # the grader's failure for this student: the class's files are still written
            results[student] = grader_failure(student, error, options.seed, options.device, student, assignment)
            standings[student] = standing_of(results[student], assignment)
            rows.append(grade_row(student, results[student], standings[student]))
    write_grades_csv(out, rows, assignment)
    write_class_report(
        out / "report.html",
        [(s, results[s], standings[s]) for s in students if s in standings],
        title=f"{assignment.name}: class report",
        notes=open_course_note(getattr(course, "open_course", None)),
    )
    return ClassRows(rows, [s.student for s in todo])


def _grade_all(
    todo: list[Submission], pool: ServerPool, *, root: Path, out: Path, options: GradingOptions, course, progress: bool
) -> None:
    """Every submission of `todo`, one worker per server of the pool."""
    pool.launch(options.assignment, private=(root, out, *options.private))  # the servers warm up on their own
    with reference_meanwhile(options.seed, options.device, options.assignment):  # once, for every worker to share
        pool.wait_until_ready()
        with concurrent.futures.ThreadPoolExecutor(len(pool.servers)) as executor:
            futures = [executor.submit(grade_student, s, pool=pool, out=out, options=options, course=course) for s in todo]
            done = concurrent.futures.as_completed(futures)
            for future in tqdm(done, total=len(futures), unit="student", desc="grading", disable=not progress):
                future.result()


def grade_student(
    submission: Submission, *, pool: ServerPool, out: Path, options: GradingOptions, course=None
) -> SubmissionResult:
    """One student, inside the fence: anything that escapes is this student's grader failure; the class goes on."""
    try:
        return _graded(submission, pool=pool, out=out, options=options, course=course)
    except Exception as error:
        print(line(f"grade-class: {submission.student}: {type(error).__name__}: {error}"), file=sys.stderr)
        result = grader_failure(submission.student, error, options.seed, options.device, submission.student, options.assignment)
        try:
            write_results(result, own_folder(out / submission.student) / "results.json", source=options.assignment.key)
        except Exception:
            pass
        return result


def _graded(submission: Submission, *, pool: ServerPool, out: Path, options: GradingOptions, course):
    seed, device, assignment = options.seed, options.device, options.assignment
    if submission.path is None:
        result = unreadable(
            submission.student,
            "No notebook or .py file was found in your submission.",
            seed,
            device,
            student=submission.student,
            assignment=assignment,
        )
    else:
        with pool.lend() as server:
            result = grade_file(submission.path, server, seed=seed, device=device, student=submission.student)
    folder = own_folder(out / submission.student)  # a link put there is replaced, never followed
    try:
        write_results(result, folder / "results.json", source=assignment.key, standing=standing_of(result, assignment))
        if course is not None:
            course(submission, result)
        else:
            write_feedback_page(result, folder / "feedback.html", standing_of(result, assignment))
    except Exception as error:  # the grader's failure: recorded for this student, the class goes on
        result = grader_failure(submission.student, error, seed, device, submission.student, assignment)
        write_results(result, folder / "results.json", source=assignment.key, standing=standing_of(result, assignment))
    return result
