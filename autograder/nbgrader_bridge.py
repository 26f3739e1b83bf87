"""The kit inside nbgrader: the sandboxed replacement for nbgrader's Execute, and the recorder that writes
`grade-class` results into an nbgrader course (gradebook, autograded/, feedback/).

Both paths grade with the same engine and annotate the notebook the same way: every hidden-check cell
(`check_<name>`) gets the check's message as its output and its points as the cell's value, which nbgrader
reads as partial credit.
"""
from __future__ import annotations

import atexit
import base64
import functools
import os
import threading
import warnings
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.preprocessors import NbGraderPreprocessor
from sqlalchemy.exc import SAWarning
from traitlets import Integer, Unicode

from . import kit
from .feedback import profile_figure_png, write_feedback_page
from .grading import grade_cells, new_seed
from .nbgrader_plugins import RESTORED_KEY
from .notebook import HIDDEN_CHECK_PREFIX, cells_from_notebook
from .results import CheckResult, SubmissionResult
from .sandbox import SandboxServer

# --- annotating a notebook with results ------------------------------------------------------------

def _check_outputs(check: CheckResult, result: SubmissionResult, remark: str | None) -> list:
    lines = [f"{check.title}: {check.points:g} / {check.max_points:g}", check.message]
    if check.check == "forward_order":
        if result.first_divergence and not check.passed:
            lines.append("Where your block first went wrong: " + result.first_divergence)
        lines += [f"Note: {note}" for note in result.notes]
        lines.append(f"(hidden inputs drawn from seed {result.seed}: `--seed {result.seed}` reproduces this grade)")
    lines += [f"  [{'x' if s.passed else ' '}] {s.name} ({s.points:g}/{s.max_points:g})" for s in check.subtests]
    if remark:
        lines.insert(0, remark)
    outputs = [nbformat.v4.new_output("stream", name="stdout", text="\n".join(lines) + "\n")]
    if check.check == "forward_gradients":
        png = profile_figure_png(result.profile)
        if png:
            outputs.append(nbformat.v4.new_output("display_data", data={
                "image/png": base64.b64encode(png).decode(), "text/plain": "gradient profile plot"}))
    outputs.append(nbformat.v4.new_output("execute_result", data={"text/plain": f"{check.points:g}"},
                                          execution_count=1))
    return outputs


def annotate(notebook: nbformat.NotebookNode, result: SubmissionResult) -> nbformat.NotebookNode:
    """Write each check's result into its `check_<name>` cell; put back check cells the student deleted."""
    checks = {f"{HIDDEN_CHECK_PREFIX}{c.check}": c for c in result.checks}
    edited = [c.metadata["nbgrader"].get("grade_id", "?") for c in notebook.cells
              if c.get("metadata", {}).get(RESTORED_KEY) == "edited"
              and c.metadata["nbgrader"].get("grade_id", "") not in checks]
    first_remark = (f"You had edited locked cells ({', '.join(edited)}); they were put back as released before "
                    "grading.") if edited else None
    present = set()
    for cell in notebook.cells:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
        if cell.cell_type == "code" and grade_id in checks:
            present.add(grade_id)
            remark, first_remark = first_remark, None
            if cell.metadata.get(RESTORED_KEY) == "edited":
                remark = " ".join(filter(None, [remark, "You had edited this locked cell; it was put back as "
                                                        "released before grading."]))
            cell.outputs = _check_outputs(checks[grade_id], result, remark)
            cell.execution_count = 1
    sources = {c.grade_id: c for c in kit.KIT.cells()}
    for grade_id, check in checks.items():
        if grade_id in present or grade_id not in sources:
            continue
        source = sources[grade_id]
        cell = nbformat.v4.new_code_cell(source.source, metadata={"nbgrader": dict(source.nbgrader),
                                                                  "deletable": False, "editable": False})
        cell.outputs = _check_outputs(check, result, "This graded cell was missing from your notebook; it was "
                                                     "added back for grading.")
        cell.execution_count = 1
        notebook.cells.append(cell)
    return notebook


# --- nbgrader autograde -----------------------------------------------------------------------------

_servers: dict[str, SandboxServer] = {}
_servers_lock = threading.Lock()


def shared_server() -> SandboxServer:
    """One sandbox server per process, started on first use (nbgrader grades notebooks one by one)."""
    with _servers_lock:
        if "server" not in _servers:
            _servers["server"] = SandboxServer()
            atexit.register(_servers["server"].close)
        return _servers["server"]


class SandboxedExecute(NbGraderPreprocessor):
    """Replaces nbgrader's Execute: the student's code runs in the kit's sandbox, never in a kernel.

    A hanging or crashing notebook costs at most the sandbox's time limit for the whole notebook, output on
    stderr cannot zero a cell, and student code cannot reach the hidden checks.
    """

    seed = Integer(0, help="hidden-input seed; 0 draws a fresh one per run (recorded in each cell's output)").tag(config=True)
    device = Unicode("cpu", help="cpu or cuda").tag(config=True)

    def preprocess(self, nb, resources):
        seed = self.seed or int(os.environ.get("AUTOGRADER_SEED", 0)) or _run_seed()
        student = resources.get("nbgrader", {}).get("student")
        result = grade_cells(cells_from_notebook(nb), kit.KIT.notebook_name, shared_server(), seed=seed,
                             device=self.device, student=student)
        self.log.info("graded %s: %s / %s (seed %s)", student, result.score, result.max_score, seed)
        return annotate(nb, result), resources


@functools.lru_cache(maxsize=1)
def _run_seed() -> int:
    """One seed for every notebook of one `nbgrader autograde` run, as grade-class uses one per class."""
    return new_seed()


# --- grade-class into an nbgrader course ------------------------------------------------------------

class CourseRecorder:
    """Called once per graded student: gradebook scores, autograded notebook, feedback page."""

    def __init__(self, course: Path):
        self.course = Path(course)
        self.db_url = f"sqlite:///{(self.course / 'gradebook.db').resolve()}"
        self.lock = threading.Lock()
        with Gradebook(self.db_url) as gradebook:
            try:
                gradebook.find_assignment(kit.KIT.name)
            except MissingEntry:
                raise SystemExit(f"{self.course}: the gradebook has no assignment '{kit.KIT.name}'; run "
                                 "`nbgrader generate_assignment` there first") from None

    def __call__(self, submission, result: SubmissionResult) -> None:
        student, notebook_id = submission.student, Path(kit.KIT.notebook_name).stem
        with self.lock, warnings.catch_warnings():
            warnings.simplefilter("ignore", SAWarning)     # nbgrader's own session handling, harmless here
            with Gradebook(self.db_url) as gradebook:
                gradebook.update_or_create_student(student)
                gradebook.update_or_create_submission(kit.KIT.name, student)
                scores = {f"{HIDDEN_CHECK_PREFIX}{c.check}": c.points for c in result.checks}
                for grade in gradebook.find_submission_notebook(notebook_id, kit.KIT.name, student).grades:
                    if grade.name in scores:
                        grade.auto_score = scores[grade.name]
                        grade.needs_manual_grade = False
                gradebook.db.commit()
        folder = Path(student) / kit.KIT.name
        autograded = self.course / "autograded" / folder / kit.KIT.notebook_name
        autograded.parent.mkdir(parents=True, exist_ok=True)
        if submission.path is not None and submission.path.suffix == ".ipynb":
            try:
                notebook = nbformat.read(submission.path, as_version=4)
            except Exception:
                notebook = nbformat.v4.new_notebook()
        else:
            notebook = nbformat.v4.new_notebook()
        autograded.unlink(missing_ok=True)        # nbgrader leaves its autograded copies read-only
        nbformat.write(annotate(notebook, result), autograded)
        write_feedback_page(result, self.course / "feedback" / folder / f"{notebook_id}.html")
