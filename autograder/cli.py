"""The grader's command line: one verb per command, each a call into the package."""
from __future__ import annotations

from pathlib import Path

import click

DEVICE = click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
                      help="where the checks run; 'auto' picks CUDA when available")
SEED = click.option("--seed", type=int, default=None, help="hidden-input seed (default: a fresh random one, "
                                                          "recorded in the results)")


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
def grade(submission: Path, results_path: Path, feedback_path: Path | None, seed: int | None, device: str) -> None:
    """Grade one SUBMISSION (a notebook or a .py file) and write its results."""
    from .grading import grade_file, new_seed, resolve_device
    from .gradescope import summary, write_results
    from .sandbox import SandboxServer

    device = resolve_device(device)
    with SandboxServer() as server:
        result = grade_file(submission, server, seed=seed or new_seed(), device=device)
    write_results(result, results_path)
    if feedback_path:
        from .feedback import write_feedback_page
        write_feedback_page(result, feedback_path)
    click.echo(summary(result))
    click.echo(f"results written to {results_path}")


@main.command()
def build() -> None:
    """Regenerate student_template/ and solutions/ from the annotated source."""
    from . import kit
    from .build import build as build_views

    build_views()
    click.echo(f"wrote {kit.TEMPLATE_DIR} and {kit.SOLUTIONS_DIR} from {kit.SOURCE_NOTEBOOK}")
