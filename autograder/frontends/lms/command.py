"""`python -m autograder lms-export`: the command line's door to the LMS's file (`autograder.frontends.nbgrader.lms`
does the work; nbgrader is imported only when the command runs)."""

from __future__ import annotations

from pathlib import Path

import click

from autograder.frontends.shown import terminal


@click.command("lms-export")
@click.option("--course", type=click.Path(exists=True, file_okay=False, path_type=Path), required=True, help="the course")
@click.option("--lms", type=click.Choice(["canvas", "moodle"]), required=True, help="whose file to write")
@click.option(
    "--roster",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="the LMS's own gradebook export (Canvas: Grades > Export; Moodle: Export > Plain text file)",
)
@click.option("--match-column", default="", help="the roster's column that holds nbgrader's student ids")
@click.option(
    "--mapping",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="instead: a two-column CSV, nbgrader's student id and the value of the roster column its header names",
)
@click.option("--assignment", "assignments", multiple=True, help="one of the kit's assignments (repeatable; default: all)")
@click.option("--column", default="", help="the LMS's column for the assignment (default: its name)")
@click.option("--identifier", default="", help="Moodle: the roster column that identifies students (default: the match column)")
@click.option("--missing-as-zero", is_flag=True, help="give 0 to roster rows with no submission (default: leave them out)")
@click.option("--awaiting-as-zero", is_flag=True, help="count written answers awaiting grading as 0 (default: refuse)")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="the file to import into the LMS")
def lms_export(
    course: Path,
    lms: str,
    roster: Path,
    match_column: str,
    mapping: Path | None,
    assignments: tuple,
    column: str,
    identifier: str,
    missing_as_zero: bool,
    awaiting_as_zero: bool,
    out: Path,
) -> None:
    """Write the file Canvas or Moodle imports: the LMS's own export, each student's standing filled in.

    Ends with status 3 when a grade of the gradebook is not in the file (each such student is said in one line)."""
    from autograder.frontends.lms.grades import Choices, Refused
    from autograder.frontends.nbgrader.lms import Request, lms_export as write, summary

    choices = Choices(missing_as_zero, awaiting_as_zero, column, identifier)
    try:
        written = write(
            course=course,
            lms=lms,
            roster=roster,
            out=out,
            assignments=assignments,
            match_column=match_column,
            mapping=mapping,
            choices=choices,
        )
    except Refused as error:
        raise click.ClickException(terminal(str(error))) from None
    for line in written.lines:
        click.echo(terminal(line), err=True)
    click.echo(terminal(summary(Request(lms, roster, out, assignments), written)))
    if written.held_back:
        click.echo(terminal(f"Held back from {out} (every other grade is in it): {written.held_back}."), err=True)
    if not written.complete:
        raise SystemExit(3)
