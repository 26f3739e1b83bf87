"""The main job: the whole instructor pipeline on the bundled sample class, in a scratch course.

release -> collect -> autograde (plain nbgrader, sandboxed) -> feedback -> export, then the hardened,
parallel `grade-class` path into a copy of the course, with the same seed: both must agree on every check.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import click
from nbgrader.api import Gradebook

from autograder.course import kit
from autograder.course.build import nbgrader
from autograder.course.sample_class import SAMPLE_DIR
from autograder.engine.rubric import RUBRIC
from autograder.frontends import shown
from autograder.frontends.nbgrader.recorder import CourseRecorder
from autograder.grading.options import GradingOptions
from autograder.grading.reference import new_seed
from .classgrade import grade_class

MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")


def leak_markers() -> tuple[str, ...]:
    """What no released or feedback file may hold: the region markers and every line of a hidden-test region."""
    hidden, inside = [], False
    for cell in kit.KIT.cells():
        for line in cell.source.splitlines():
            inside = (inside or "BEGIN HIDDEN TESTS" in line) and "END HIDDEN TESTS" not in line
            if inside and "BEGIN HIDDEN TESTS" not in line and line.strip():
                hidden.append(line.strip())
    return MARKERS + tuple(hidden)


def _step(title: str):
    click.secho(f"\n== {title}", bold=True)
    return time.monotonic()


def _done(started: float, what: str) -> None:
    click.echo(f"   {what} ({time.monotonic() - started:.1f} s)")


def _leaks(folder: Path) -> list[str]:
    markers = leak_markers()
    return [
        f"{path.relative_to(folder)}: {marker}"
        for path in sorted(folder.rglob("*"))
        if path.is_file()
        for marker in markers
        if marker in path.read_text(errors="replace")
    ]


def gradebook_table(course: Path) -> list[dict]:
    """Per student, per check: the points nbgrader's gradebook holds."""
    rows = []
    with Gradebook(f"sqlite:///{(course / 'gradebook.db').resolve()}") as gradebook:
        for student in sorted(s.id for s in gradebook.students):
            try:
                notebook = gradebook.find_submission_notebook(Path(kit.KIT.notebook_name).stem, kit.KIT.name, student)
            except Exception:
                continue
            scores = {g.name.removeprefix("check_"): g.score for g in notebook.grades}
            rows.append({"student": student, "total": notebook.score, **{name: scores.get(name) for name in RUBRIC}})
    return rows


def print_table(rows: list[dict]) -> None:
    names = list(RUBRIC)
    header = f"{'student':24s} {'total':>6s} " + " ".join(f"{n.removeprefix('forward_'):>11s}" for n in names)
    click.echo(header)
    click.echo("-" * len(header))
    for row in rows:
        cells = " ".join(f"{row[n]:>11g}" if row[n] is not None else f"{'-':>11s}" for n in names)
        click.echo(f"{shown.line(row['student']):24s} {row['total']:>6g} {cells}")  # an id from the gradebook, as text


def run_demo(out: Path, seed: int | None = None, workers: int | None = None) -> None:
    out = Path(out).resolve()
    if out.exists():
        shutil.rmtree(out)
    course = out / "course"
    shutil.copytree(kit.COURSE_DIR / "source", course / "source")
    shutil.copy(kit.COURSE_DIR / "nbgrader_config.py", course / "nbgrader_config.py")
    course.chmod(0o700)  # a course is its instructor's alone (docs/instructors.md): the kit refuses one others can read
    seed = seed or new_seed()
    click.echo(f"scratch course: {course}\nseed for every grading step: {seed}")

    started = _step("1/6 release: nbgrader generate_assignment")
    nbgrader(["generate_assignment", kit.KIT.name], cwd=course)
    leaks = _leaks(course / "release")
    _done(
        started,
        f"release in {course / 'release' / kit.KIT.name}; "
        + ("no solution or hidden-test text in it" if not leaks else f"LEAKS: {leaks}"),
    )

    started = _step("2/6 collect: the bundled sample class into submitted/")
    shutil.copytree(SAMPLE_DIR, course / "submitted")
    hardened = out / "course-hardened"  # the same course, for the second path
    shutil.copytree(course, hardened)
    _done(started, ", ".join(sorted(p.name for p in (course / "submitted").iterdir())))

    started = _step("3/6 nbgrader autograde (student code runs in the kit's sandbox)")
    nbgrader(["autograde", kit.KIT.name], cwd=course, env={"AUTOGRADER_SEED": str(seed)})
    plain = {row["student"]: row for row in gradebook_table(course)}
    _done(started, f"{len(plain)} notebooks graded")

    started = _step("4/6 nbgrader generate_feedback and export")
    nbgrader(["generate_feedback", kit.KIT.name], cwd=course)
    nbgrader(["export"], cwd=course)
    leaks = _leaks(course / "feedback")
    _done(
        started,
        f"feedback in {course / 'feedback'}; grades in {course / 'grades.csv'}; "
        + ("no hidden-test text in feedback" if not leaks else f"LEAKS: {leaks}"),
    )

    started = _step("5/6 grade-class: the hardened, parallel path, into a copy of the course")
    recorder = CourseRecorder(hardened)
    grade_class(
        hardened / "submitted",
        out / "grade-class",
        options=GradingOptions(seed, assignment=recorder.assignment),
        workers=workers,
        force=True,
        course=recorder,
    )
    second = {row["student"]: row for row in gradebook_table(hardened)}
    agree = plain == second
    _done(started, f"results in {out / 'grade-class'}; both paths agree on every check: {'yes' if agree else 'NO'}")

    _step("6/6 the gradebook (points per check, from nbgrader's database)")
    print_table(list(plain.values()))
    notebook = Path(kit.KIT.notebook_name).stem
    click.echo(f"\nfeedback pages: {course / 'feedback'}/<student>/{kit.KIT.name}/{notebook}.html (nbgrader)")
    click.echo(f"                {hardened / 'feedback'}/<student>/{kit.KIT.name}/{notebook}.html (grade-class)")
    click.echo(
        f"grades: {course / 'grades.csv'} and {course / 'grades_per_check.csv'} (nbgrader export), "
        f"{out / 'grade-class' / 'grades.csv'} (grade-class)"
    )
    click.echo(f"class report: {out / 'grade-class' / 'report.html'}")
    if not agree or leaks:
        raise SystemExit(1)
