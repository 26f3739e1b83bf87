"""The grader's command line: one verb per command, each a call into the package."""
from __future__ import annotations

from pathlib import Path

import click


def _checked_device(value: str) -> str:
    """'auto' becomes the device it picks; a device that is not there is a usage error, not a traceback.
    Called inside a command (not as the option's callback) so that a sandbox can start before torch loads."""
    from autograder.grading.reference import resolve_device

    try:
        return resolve_device(value)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="'--device'") from None


DEVICE = click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
                      help="where the checks run; 'auto' picks CUDA when available")
SEED = click.option("--seed", type=int, default=None, help="hidden-input seed (default: a fresh random one, "
                                                          "recorded in the results)")
UNSAFE = click.option("--unsafe", is_flag=True, help="grade even where submissions cannot be isolated (no "
                                                     "bubblewrap, not root); every result then says so")
PRIVATE = click.option("--private", "private", multiple=True, type=click.Path(file_okay=False, path_type=Path),
                       help="a folder submissions must not read, besides the kit and the course (repeatable)")


def _servers_or_exit(make):
    """Start the sandbox, or stop with the reason the grader refuses to (not a graded result: nothing ran); a
    refusal of the course's (nbgrader's plugins') is one line too."""
    from autograder.sandbox.parent.client import IsolationUnavailable

    try:
        return make()
    except IsolationUnavailable as error:
        raise click.ClickException(str(error)) from None
    except Exception as error:
        if type(error).__name__ == "KitRefusal":        # logged by nbgrader's log already: said once more here
            raise click.ClickException(str(error)) from None
        raise


def _interpreter_or_exit() -> None:
    from .interpreter import interpreter_refusal

    why = interpreter_refusal()
    if why:
        raise click.ClickException(f"Not grading: {why}.")


@click.group()
def main() -> None:
    """Autograder for the Pre-LN TransformerBlock assignment."""


@main.command()
@click.argument("submission", type=click.Path(path_type=Path))
@click.option("--results", "results_path", type=click.Path(path_type=Path), required=True,
              help="where to write Gradescope-format results.json")
@click.option("--feedback", "feedback_path", type=click.Path(path_type=Path), default=None,
              help="also write the student's HTML feedback page here")
@click.option("--source", "source", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="the assignment's source notebook to grade against (default: the kit's own; a course's copy "
                   "brings its own code, solution and points)")
@SEED
@DEVICE
@UNSAFE
@PRIVATE
def grade(submission: Path, results_path: Path, feedback_path: Path | None, source: Path | None, seed: int | None,
          device: str, unsafe: bool, private: tuple) -> None:
    """Grade one SUBMISSION (a notebook or a .py file) and write its results.

    The results are written once the submission and everything it started have ended, atomically."""
    from autograder.course import kit
    from autograder.engine.rubric import RUBRIC
    from autograder.sandbox.parent.client import SandboxServer

    try:
        assignment = kit.Assignment(source).verify(RUBRIC) if source else kit.KIT
    except kit.SourceProblem as error:
        raise click.ClickException(f"Not grading: {error}") from None
    _interpreter_or_exit()
    # the sandbox starts first: it imports torch and warms up on the other core while this process does
    folder = submission.resolve().parent
    server = _servers_or_exit(lambda: SandboxServer(private=(folder, *private), unsafe=unsafe, start=False,
                                                    assignment=assignment))
    try:
        server.launch()
        device = _checked_device(device)
        from autograder.grading.submission import grade_file, grader_failure
        from autograder.grading.reference import new_seed, reference
        from autograder.frontends.gradescope.results import write_results

        seed = new_seed() if seed is None else seed
        try:
            reference(seed, device, server.assignment)      # meanwhile: the reference's answers
            server.wait_until_ready()
            result = grade_file(submission, server, seed=seed, device=device)
        except Exception as error:       # never a traceback for a submission: the grader's failure is a result
            result = grader_failure(submission.name, error, seed, device, assignment=assignment)
    finally:
        server.close()
    from .standing import standing_of

    standing = standing_of(result, assignment)
    written = write_results(result, results_path, source=assignment.key, standing=standing)
    if feedback_path:
        from .feedback import write_feedback_page
        write_feedback_page(result, feedback_path, standing)
    click.echo(written["output"])            # what results.json says, word for word
    click.echo(f"results written to {results_path}")


@main.command("grade-class")
@click.argument("submissions", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), required=True,
              help="folder for results, feedback, grades.csv and report.html")
@click.option("--workers", type=int, default=None, help="parallel sandbox servers (default: one per CPU core)")
@click.option("--force", is_flag=True, help="grade again students whose results are already up to date")
@click.option("--course", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="an nbgrader course folder: grade with its source notebook, write scores into its gradebook and "
                   "have nbgrader draw its feedback pages (default: the course around SUBMISSIONS when it is "
                   "nbgrader's submitted/ folder)")
@click.option("--assignment", default=None, help="with a course: which of its assignments (needed only when the "
                                                  "course holds several of the kit's)")
@SEED
@DEVICE
@UNSAFE
def grade_class(submissions: Path, out: Path, workers: int | None, force: bool, course: Path | None,
                assignment: str | None, seed: int | None, device: str, unsafe: bool) -> None:
    """Grade every student's submission in SUBMISSIONS."""
    import os

    from autograder.course import kit

    course = course or _enclosing_course(submissions)
    _interpreter_or_exit()
    # the sandbox servers start first: they import torch and warm up on their own while this process imports
    # the grader (and nbgrader, for a course) and computes the reference
    spawned = _spawn_servers(workers or os.cpu_count() or 1, unsafe or _course_allows_unsafe(course), course)
    try:
        from .classgrade import grade_class as run
        from autograder.grading.options import GradingOptions
        from autograder.grading.reference import new_seed

        device, seed = _checked_device(device), new_seed() if seed is None else seed
        recorder, graded = None, kit.KIT
        if course is not None:
            from autograder.frontends.nbgrader.recorder import CourseRecorder
            recorder = _servers_or_exit(lambda: CourseRecorder(course, assignment, unsafe=unsafe))
            graded = recorder.assignment
    except BaseException:
        spawned.close()
        raise
    options = GradingOptions(seed, device, graded, unsafe)
    rows = _servers_or_exit(lambda: run(submissions, out, options=options, workers=workers, force=force, course=recorder,
                                        servers=spawned))
    scores = [float(r["score"]) for r in rows]
    mean = sum(scores) / len(scores) if scores else 0.0
    from autograder.engine.results import points_text
    click.echo(f"graded {len(rows)} students (seed {seed}); mean score {points_text(mean)} of "
               f"{rows[0]['max_score'] if rows else '-'}; grades in {out / 'grades.csv'}, report in "
               f"{out / 'report.html'}")
    if course is not None:
        click.echo(f"graded with {graded.source}; scores written to the gradebook of {course}; nbgrader drew the "
                   f"feedback pages in {course / 'feedback'}")
    from .classgrade import unisolated
    unsafe_ones = unisolated(out, [r["student"] for r in rows])
    if unsafe_ones:
        click.echo(f"WARNING: {len(unsafe_ones)} of {len(rows)} submissions were graded WITHOUT isolation: they could "
                   "read the solution and other students' files (their results say so)", err=True)


def _spawn_servers(count: int, unsafe: bool, course: Path | None = None):
    from autograder.sandbox.parent.client import IsolationUnavailable
    from autograder.sandbox.parent.pool import ServerPool

    try:
        spawned = ServerPool(count, unsafe=unsafe)
    except IsolationUnavailable as error:
        if course is None:
            raise click.ClickException(str(error)) from None
        from autograder.frontends.nbgrader.preflight import ISOLATION_REFUSAL  # a course decides in its configuration
        raise click.ClickException(f"Not grading: {ISOLATION_REFUSAL} (or pass --unsafe).") from None
    return spawned.spawn()


def _course_allows_unsafe(course: Path | None) -> bool:
    """The course's (or the hub's) `c.KitSandbox.when_unisolated = "unsafe"`; read only where nothing isolates."""
    from autograder.sandbox.parent.client import isolation_available

    if course is None or isolation_available():
        return False
    from autograder.frontends.nbgrader.bridge import course_config
    from autograder.frontends.nbgrader.preflight import unsafe_allowed
    return unsafe_allowed(course_config(course))


@main.command("class-report")
@click.argument("results", type=click.Path(exists=True, file_okay=False, path_type=Path), required=False)
@click.option("--course", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="an nbgrader course: the report of its gradebook and autograded notebooks (nbgrader autograde "
                   "or grade-class --course)")
@click.option("--assignment", default=None, help="with a course: which of its kit assignments")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="where to write the page (default: RESULTS/report.html, or report.html in the course)")
def class_report(results: Path | None, course: Path | None, assignment: str | None, out: Path | None) -> None:
    """Write the class report from grade-class's RESULTS folder, or from a graded nbgrader course."""
    from .report import write_class_report

    if (results is None) == (course is None):
        raise click.UsageError("give a RESULTS folder (from grade-class) or --course, one of them")
    if course is not None:
        from autograder.frontends.nbgrader.recorder import course_rows
        from .standing import stale_line
        name, rows = course_rows(course, assignment)
        out = out or Path(course) / f"report-{name}.html"
        stale = {student: standing.stale for student, _, standing in rows if standing.stale}
        if stale:
            click.echo(f"WARNING: {stale_line(name, stale)}; the report says so at its top", err=True)
    else:
        from .classgrade import results_rows
        name, rows = results.name, results_rows(results)
        out = out or results / "report.html"
    write_class_report(out, rows, title=f"{name}: class report")
    click.echo(f"class report of {len(rows)} students: {out}")


def _enclosing_course(submissions: Path) -> Path | None:
    parent = submissions.resolve().parent
    if submissions.resolve().name == "submitted" and (parent / "nbgrader_config.py").is_file():
        return parent
    return None


@main.command()
def build() -> None:
    """Regenerate student_template/ and solutions/ from the annotated source."""
    from autograder.course import kit
    from autograder.course.build import build as build_views

    build_views()
    click.echo(f"wrote {kit.TEMPLATE_DIR} and {kit.SOLUTIONS_DIR} from {kit.SOURCE_NOTEBOOK}")


@main.command()
@click.option("--out", type=click.Path(path_type=Path), default=Path("demo-out"), show_default=True,
              help="scratch folder for the demo course (replaced on every run)")
@click.option("--workers", type=int, default=None)
@SEED
def demo(out: Path, workers: int | None, seed: int | None) -> None:
    """The whole instructor pipeline on the bundled sample class."""
    from .demo import run_demo

    run_demo(out, seed=seed, workers=workers)


@main.command("gradescope-bundle")
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--course", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="bundle this nbgrader course's copy of the assignment (its code, solution and points)")
@click.option("--assignment", default=None, help="with a course: which of its kit assignments")
def gradescope_bundle(out: Path, course: Path | None, assignment: str | None) -> None:
    """Write OUT, the zip to upload as the assignment's Gradescope autograder."""
    from autograder.course import kit
    from autograder.frontends.gradescope.bundle import build_bundle, bundled_files
    from autograder.engine.rubric import RUBRIC

    source = kit.KIT
    if course is not None:
        from autograder.frontends.nbgrader.bridge import pick_assignment
        source = pick_assignment(course, assignment)
    elif assignment is not None:
        raise click.UsageError("--assignment needs --course")
    try:
        source.verify(RUBRIC)
    except kit.SourceProblem as error:
        raise click.ClickException(f"Not bundling: {error}") from None
    build_bundle(out, source=source)
    points = sum(source.check_points().values())
    click.echo(f"wrote {out}: setup.sh, run_autograder and {len(bundled_files(source=source))} files of the kit; "
               f"grades {source.source} ({points:g} points of checks)")
