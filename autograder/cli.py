"""The grader's command line: one verb per command, each a call into the package."""
from __future__ import annotations

from pathlib import Path

import click


def _checked_device(value: str) -> str:
    """'auto' becomes the device it picks; a device that is not there is a usage error, not a traceback.
    Called inside a command (not as the option's callback) so that a sandbox can start before torch loads."""
    from .grading import resolve_device

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
    """Start the sandbox, or stop with the reason the grader refuses to (not a graded result: nothing ran)."""
    from .sandbox import IsolationUnavailable

    try:
        return make()
    except IsolationUnavailable as error:
        raise click.ClickException(str(error)) from None


@click.group()
def main() -> None:
    """Autograder for the Pre-LN TransformerBlock assignment."""


@main.command()
@click.argument("submission", type=click.Path(path_type=Path))
@click.option("--results", "results_path", type=click.Path(path_type=Path), required=True,
              help="where to write Gradescope-format results.json")
@click.option("--feedback", "feedback_path", type=click.Path(path_type=Path), default=None,
              help="also write the student's HTML feedback page here")
@SEED
@DEVICE
@UNSAFE
@PRIVATE
def grade(submission: Path, results_path: Path, feedback_path: Path | None, seed: int | None, device: str,
          unsafe: bool, private: tuple) -> None:
    """Grade one SUBMISSION (a notebook or a .py file) and write its results.

    The results are written once the submission and everything it started have ended, atomically."""
    from .sandbox import SandboxServer

    # the sandbox starts first: it imports torch and warms up on the other core while this process does
    folder = submission.resolve().parent
    server = _servers_or_exit(lambda: SandboxServer(private=(folder, *private), unsafe=unsafe, start=False))
    try:
        server.launch()
        device = _checked_device(device)
        from .grading import grade_file, grader_failure, new_seed, reference
        from .gradescope import summary, write_results

        seed = new_seed() if seed is None else seed
        try:
            reference(seed, device, server.assignment)      # meanwhile: the reference's answers
            server.wait_until_ready()
            result = grade_file(submission, server, seed=seed, device=device)
        except Exception as error:       # never a traceback for a submission: the grader's failure is a result
            result = grader_failure(submission.name, error, seed, device)
    finally:
        server.close()
    write_results(result, results_path)
    if feedback_path:
        from .feedback import write_feedback_page
        write_feedback_page(result, feedback_path)
    click.echo(summary(result))
    click.echo(f"results written to {results_path}")


@main.command("grade-class")
@click.argument("submissions", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), required=True, help="folder for results, feedback, grades.csv")
@click.option("--workers", type=int, default=None, help="parallel sandbox servers (default: one per CPU core)")
@click.option("--force", is_flag=True, help="grade again students whose results are already up to date")
@click.option("--course", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="an nbgrader course folder: grade with its source notebook, and also write scores into its "
                   "gradebook and pages into its feedback/ (default: the course around SUBMISSIONS when it is "
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

    from . import kit
    from .sandbox import SandboxServer

    # the sandbox servers start first: they import torch and warm up on their own while this process imports
    # the grader (and nbgrader, for a course) and computes the reference
    spawned = _servers_or_exit(lambda: [SandboxServer(start=False, unsafe=unsafe)
                                        for _ in range(workers or os.cpu_count() or 1)])
    try:
        for server in spawned:
            server.spawn()
        from .classgrade import grade_class as run
        from .grading import new_seed

        device, seed = _checked_device(device), new_seed() if seed is None else seed
        course = course or _enclosing_course(submissions)
        on_result, graded = None, kit.KIT
        if course is not None:
            from .nbgrader_bridge import CourseRecorder
            on_result = CourseRecorder(course, assignment)
            graded = on_result.assignment
    except BaseException:
        for server in spawned:
            server.close()
        raise
    rows = _servers_or_exit(lambda: run(submissions, out, workers=workers, seed=seed, device=device, force=force,
                                        on_result=on_result, assignment=graded, unsafe=unsafe, servers=spawned))
    mean = sum(float(r["score"]) for r in rows) / len(rows) if rows else 0.0
    click.echo(f"graded {len(rows)} students (seed {seed}); mean score {mean:.2f}; grades in {out / 'grades.csv'}")
    if course is not None:
        click.echo(f"graded with {graded.source}; scores written to the gradebook of {course}, feedback pages to "
                   f"{course / 'feedback'}")


def _enclosing_course(submissions: Path) -> Path | None:
    parent = submissions.resolve().parent
    if submissions.resolve().name == "submitted" and (parent / "nbgrader_config.py").is_file():
        return parent
    return None


@main.command()
def build() -> None:
    """Regenerate student_template/ and solutions/ from the annotated source."""
    from . import kit
    from .build import build as build_views

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
def gradescope_bundle(out: Path) -> None:
    """Write OUT, the zip to upload as the assignment's Gradescope autograder."""
    from .gradescope_bundle import build_bundle, bundled_files

    build_bundle(out)
    click.echo(f"wrote {out}: setup.sh, run_autograder and {len(bundled_files())} files of the kit")
