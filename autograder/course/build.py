"""One command regenerates every view of the assignment from the annotated source.

* `student_template/` is the nbgrader release, exactly as students receive it;
* `solutions/` is the release with every solution cell of the notebook solved (same cells, same metadata, the
  same files beside it);
* `lesson_text.txt`, beside the source notebook and released with it, is the lesson's Markdown above the training
  experiment: the text the notebook's language model trains on;
* the reference numbers in the source `visible_tests.py` are computed from the solution (`reference_numbers.py`)
  before the file is released.

nbgrader itself makes the release (`nbgrader generate_assignment`, with the kit's configuration), in a
scratch copy of the course so the build never touches the instructor's gradebook.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

from . import kit
from .notebook import read_cells
from .reference_numbers import write_reference_numbers


def solved(release: nbformat.NotebookNode, source: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The release notebook with each solution cell's source taken from the source, markers removed."""
    by_id = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in source.cells}
    solution = nbformat.from_dict(release)
    for cell in solution.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            cell.source = kit.strip_solution_markers(by_id[meta["grade_id"]].source)
    return solution


LESSON_TEXT = "lesson_text.txt"  # released beside the notebook: the text its language model trains on


TRAINING_SECTION = "training_intro"  # the text is the lesson above this cell, so its results never depend on themselves


def lesson_text(source: Path = kit.SOURCE_NOTEBOOK) -> str:
    """The lesson's Markdown above the training experiment, as students receive it (no written answers, which are
    solution cells)."""
    cells = read_cells(source)
    end = next((i for i, c in enumerate(cells) if c.grade_id == TRAINING_SECTION), len(cells))
    return "\n\n".join(c.source.strip() for c in cells[:end] if c.kind == "markdown" and not c.nbgrader.get("solution")) + "\n"


def nbgrader(arguments: list[str], cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run an nbgrader command with this environment's tools on PATH (nbgrader calls `alembic`)."""
    env = {**os.environ, **(env or {}), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    process = subprocess.run(
        [sys.executable, "-m", "nbgrader", *arguments, "--log-level=ERROR"], cwd=cwd, env=env, capture_output=True, text=True
    )
    if process.returncode != 0:
        raise RuntimeError(f"nbgrader {arguments[0]} failed:\n{process.stdout}\n{process.stderr}")
    return process


def release(course_dir: Path = kit.COURSE_DIR, scratch: Path | None = None) -> Path:
    """Run `nbgrader generate_assignment` on a copy of the course; return the release folder."""
    scratch = Path(scratch or tempfile.mkdtemp(prefix="kit-build-"))
    course = scratch / "course"
    shutil.copytree(course_dir / "source", course / "source")
    shutil.copy(course_dir / "nbgrader_config.py", course / "nbgrader_config.py")
    source = course / "source" / kit.KIT.name / kit.KIT.notebook_name
    (source.parent / LESSON_TEXT).write_text(lesson_text(source), encoding="utf-8")
    nbgrader(["generate_assignment", kit.KIT.name, "--force"], cwd=course)
    return course / "release" / kit.KIT.name


def _replace_folder(target: Path, files: dict[str, bytes]) -> None:
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for name, data in files.items():
        (target / name).write_bytes(data)


def build(template_dir: Path = kit.TEMPLATE_DIR, solutions_dir: Path = kit.SOLUTIONS_DIR, sample_dir: Path | None = None) -> None:
    """Regenerate the release and solution views and, from them, the sample class."""
    from .sample_class import SAMPLE_DIR, build_sample_class

    if template_dir == kit.TEMPLATE_DIR:  # the kit's own views: the source folder's text and numbers too
        (kit.SOURCE_NOTEBOOK.parent / LESSON_TEXT).write_text(lesson_text(), encoding="utf-8")
        write_reference_numbers()
    with tempfile.TemporaryDirectory(prefix="kit-build-") as scratch:
        released = release(scratch=Path(scratch))
        files = {p.name: p.read_bytes() for p in sorted(released.iterdir()) if p.is_file()}
        _replace_folder(template_dir, files)
        notebook = nbformat.read(released / kit.KIT.notebook_name, as_version=4)
        source = nbformat.read(kit.SOURCE_NOTEBOOK, as_version=4)
        solution = nbformat.writes(solved(notebook, source)).encode() + b"\n"
        _replace_folder(solutions_dir, {**files, kit.KIT.notebook_name: solution})
    build_sample_class(sample_dir or SAMPLE_DIR, template_dir, solutions_dir)
