"""The grader's command line: one verb per command, each a call into the package. Whatever it prints that a
student's text can reach (their ids, file names, messages) goes through `shown.terminal`: no escape sequence,
control, direction override or invisible character of theirs reaches the terminal as anything but its escape."""

from __future__ import annotations

import contextlib
from pathlib import Path

import click

from .lms.command import lms_export
from .shown import terminal

DEVICE = click.option(
    "--device",
    type=click.Choice(["auto", "cpu", "cuda"]),
    default="auto",
    show_default=True,
    help="where the checks run; 'auto' picks CUDA when available",
)
SEED = click.option(
    "--seed", type=int, default=None, help="hidden-input seed (default: a fresh random one, recorded in the results)"
)
UNSAFE = click.option(
    "--unsafe",
    is_flag=True,
    help="grade even where submissions cannot be isolated (no bubblewrap, not root); every result then says so",
)
ALONE = click.option(
    "--alone",
    is_flag=True,
    help="this machine holds this one submission and nothing a submission must not see (a Gradescope container): "
    "file permissions alone may isolate it where neither namespaces nor Landlock work",
)
PRIVATE = click.option(
    "--private",
    "private",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="a folder submissions must not read, besides the kit and the course (repeatable)",
)


@contextlib.contextmanager
def refusals_in_one_line():
    """A refusal (nothing ran: see `autograder.frontends.commands`) is one line, not a traceback; a device that is
    not there is a usage error. A refusal of the course's (nbgrader's plugins') has been logged by nbgrader's log
    already: it is said once more here."""
    from autograder.grading.options import DeviceUnavailable
    from autograder.sandbox.parent.policy import IsolationUnavailable
    from .commands import NotGrading

    try:
        yield
    except DeviceUnavailable as error:
        raise click.BadParameter(str(error), param_hint="'--device'") from None
    except (IsolationUnavailable, NotGrading) as error:
        raise click.ClickException(terminal(str(error))) from None
    except Exception as error:
        if type(error).__name__ == "KitRefusal":
            raise click.ClickException(terminal(str(error))) from None
        raise


@click.group()
def main() -> None:
    """Autograder for the Pre-LN TransformerBlock assignment."""


@main.command()
@click.argument("submission", type=click.Path(path_type=Path))
@click.option(
    "--results",
    "results_path",
    type=click.Path(path_type=Path),
    required=True,
    help="where to write Gradescope-format results.json",
)
@click.option(
    "--feedback",
    "feedback_path",
    type=click.Path(path_type=Path),
    default=None,
    help="also write the student's HTML feedback page here",
)
@click.option(
    "--source",
    "source",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="the assignment's source notebook to grade against (default: the kit's own; a course's copy "
    "brings its own code, solution and points)",
)
@SEED
@DEVICE
@UNSAFE
@ALONE
@PRIVATE
def grade(
    submission: Path,
    results_path: Path,
    feedback_path: Path | None,
    source: Path | None,
    seed: int | None,
    device: str,
    unsafe: bool,
    alone: bool,
    private: tuple,
) -> None:
    """Grade one SUBMISSION (a notebook or a .py file) and write its results.

    The results are written once the submission and everything it started have ended, atomically."""
    from autograder.grading.options import GradingOptions
    from .commands import grade_submission

    with refusals_in_one_line():
        written = grade_submission(
            submission,
            results=results_path,
            feedback=feedback_path,
            source=source,
            options=GradingOptions(seed, device, unsafe=unsafe, private=private, isolation={"alone": True} if alone else None),
        )
    click.echo(terminal(written["output"]))  # what results.json says, word for word (its lines are text already)
    click.echo(terminal(f"results written to {results_path}"))


@main.command("grade-class")
@click.argument("submissions", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--out", type=click.Path(path_type=Path), required=True, help="folder for results, feedback, grades.csv and report.html"
)
@click.option("--workers", type=int, default=None, help="parallel sandbox servers (default: one per CPU core)")
@click.option("--force", is_flag=True, help="grade again students whose results are already up to date")
@click.option(
    "--course",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="an nbgrader course folder: grade with its source notebook, write scores into its gradebook and "
    "have nbgrader draw its feedback pages (default: the course around SUBMISSIONS when it is "
    "nbgrader's submitted/ folder)",
)
@click.option(
    "--assignment",
    default=None,
    help="with a course: which of its assignments (needed only when the course holds several of the kit's)",
)
@SEED
@DEVICE
@UNSAFE
def grade_class(
    submissions: Path,
    out: Path,
    workers: int | None,
    force: bool,
    course: Path | None,
    assignment: str | None,
    seed: int | None,
    device: str,
    unsafe: bool,
) -> None:
    """Grade every student's submission in SUBMISSIONS."""
    from autograder.grading.options import GradingOptions
    from .commands import grade_folder

    with refusals_in_one_line():
        done = grade_folder(
            submissions,
            out=out,
            options=GradingOptions(seed, device, unsafe=unsafe),
            workers=workers,
            force=force,
            course=course,
            assignment=assignment,
        )
    click.echo(terminal(done.summary()))
    if done.warning():
        click.echo(terminal(done.warning()), err=True)


@main.command("class-report")
@click.argument("results", type=click.Path(exists=True, file_okay=False, path_type=Path), required=False)
@click.option(
    "--course",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="an nbgrader course: the report of its gradebook and autograded notebooks (nbgrader autograde or grade-class --course)",
)
@click.option("--assignment", default=None, help="with a course: which of its kit assignments")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="where to write the page (default: RESULTS/report.html, or report.html in the course)",
)
def class_report(results: Path | None, course: Path | None, assignment: str | None, out: Path | None) -> None:
    """Write the class report from grade-class's RESULTS folder, or from a graded nbgrader course."""
    from .report import write_class_report

    if (results is None) == (course is None):
        raise click.UsageError("give a RESULTS folder (from grade-class) or --course, one of them")
    if course is not None:
        from autograder.frontends.nbgrader.recorder import course_rows, course_warning
        from .report import open_course_note
        from .standing import stale_line

        warning = course_warning(course)  # refuses, in one line, a course others can read or write
        if warning:
            click.echo(terminal(f"WARNING: {warning}"), err=True)
        notes = open_course_note(warning)
        name, rows = course_rows(course, assignment)
        out = out or Path(course) / f"report-{name}.html"
        stale = {student: standing.stale for student, _, standing in rows if standing.stale}
        if stale:
            click.echo(terminal(f"WARNING: {stale_line(name, stale)}; the report says so at its top"), err=True)
    else:
        from .classgrade import results_rows

        name, rows, notes = results.name, results_rows(results), ()
        out = out or results / "report.html"
    write_class_report(out, rows, title=f"{name}: class report", notes=notes)
    click.echo(terminal(f"class report of {len(rows)} students: {out}"))


main.add_command(lms_export)


@main.command()
def build() -> None:
    """Regenerate student_template/ and solutions/ from the annotated source."""
    from autograder.course import kit
    from autograder.course.build import build as build_views

    build_views()
    click.echo(f"wrote {kit.TEMPLATE_DIR} and {kit.SOLUTIONS_DIR} from {kit.SOURCE_NOTEBOOK}")


@main.command()
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=Path("demo-out"),
    show_default=True,
    help="scratch folder for the demo course (replaced on every run)",
)
@click.option("--workers", type=int, default=None)
@SEED
def demo(out: Path, workers: int | None, seed: int | None) -> None:
    """The whole instructor pipeline on the bundled sample class."""
    from .demo import run_demo

    run_demo(out, seed=seed, workers=workers)


@main.command("gradescope-bundle")
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--course",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="bundle this nbgrader course's copy of the assignment (its code, solution and points)",
)
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
    click.echo(
        f"wrote {out}: setup.sh, run_autograder and {len(bundled_files(source=source))} files of the kit; "
        f"grades {source.source} ({points:g} points of checks)"
    )
