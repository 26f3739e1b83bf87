"""The kit inside nbgrader: the sandboxed executor for the kit's assignments, and the recorder that writes
`grade-class` results into an nbgrader course (gradebook, autograded/, feedback/).

Both grade with the course's own source notebook (its provided code, reference solution and points), refuse
when that notebook's check points and the kit's rubric disagree, and annotate the notebook the same way: every
hidden-check cell (`check_<name>`) gets the check's findings as its output and its points as the cell's value,
which nbgrader reads as partial credit.
"""
from __future__ import annotations

import atexit
import base64
import contextlib
import functools
import os
import textwrap
import threading
from pathlib import Path

import nbformat
from jupyter_core.paths import jupyter_config_path
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import AssignLatePenalties, Execute
from nbgrader.utils import determine_grade, is_grade
from traitlets import Integer, Unicode
from traitlets.config import Config, PyFileConfigLoader

from . import kit
from .feedback import profile_figure_png, write_feedback_page
from .grading import grade_cells, new_seed
from .nbgrader_plugins import KIT_KEY, kit_source
from .notebook import HIDDEN_CHECK_PREFIX, cells_from_notebook
from .results import CheckResult, SubmissionResult
from .rubric import RUBRIC
from .sandbox import SandboxServer

WIDTH = 100        # feedback lines wrap here: nbgrader shows outputs preformatted, without wrapping


# --- annotating a notebook with results ------------------------------------------------------------

def _wrap(text: str, indent: str = "") -> str:
    return textwrap.fill(text, WIDTH, initial_indent=indent, subsequent_indent=indent + "    ",
                         break_long_words=False, break_on_hyphens=False)


def check_text(check: CheckResult, result: SubmissionResult) -> str:
    """What a check cell says. No earned points: nbgrader shows the cell's score from the gradebook next to it,
    so after a manual override the student reads one number, the instructor's."""
    lines = [check.title, _wrap(check.message)]
    if check.check == "forward_order":
        if result.first_divergence and not check.passed and result.first_divergence not in check.message:
            lines.append(_wrap("Where your block first went wrong: " + result.first_divergence))
        lines += [_wrap(f"Note: {note}") for note in result.notes]
    lines += [_wrap(f"[{'x' if s.passed else ' '}] {s.name} (worth {s.max_points:g} "
                    f"point{'' if s.max_points == 1 else 's'})", "  ") for s in check.subtests]
    if check.check == "forward_order":
        lines.append(f"(hidden inputs drawn from seed {result.seed}: `--seed {result.seed}` reproduces this grade)")
    return "\n".join(lines) + "\n"


def _check_outputs(check: CheckResult, result: SubmissionResult, remark: str | None) -> list:
    text = check_text(check, result)
    if remark:
        text = _wrap(remark) + "\n" + text
    outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    if check.check == "forward_gradients":
        png = profile_figure_png(result.profile)
        if png:
            alt = "Gradient at each block's input: your block next to Pre-LN, Post-LN and no shortcuts"
            outputs.append(nbformat.v4.new_output("display_data", data={
                "image/png": base64.b64encode(png).decode(), "text/plain": "gradient profile plot"},
                metadata={"image/png": {"alt": alt}}))
    outputs.append(nbformat.v4.new_output("execute_result", data={"text/plain": f"{check.points:g}"},
                                          execution_count=1))
    return outputs


def annotate(notebook: nbformat.NotebookNode, result: SubmissionResult,
             assignment: kit.Assignment = kit.KIT) -> nbformat.NotebookNode:
    """Write each check's result into its `check_<name>` cell; put back check cells the student deleted."""
    checks = {f"{HIDDEN_CHECK_PREFIX}{c.check}": c for c in result.checks}
    grade_id = lambda cell: cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
    edited = [grade_id(c) for c in notebook.cells
              if c.get("metadata", {}).get(KIT_KEY, {}).get("edited") and grade_id(c) not in checks]
    first_remark = (f"You had edited locked cells ({', '.join(edited)}); they were put back as released before "
                    "grading.") if edited else None
    present = set()
    for cell in notebook.cells:
        if cell.cell_type == "code" and grade_id(cell) in checks:
            present.add(grade_id(cell))
            remark, first_remark = first_remark, None
            if cell.metadata.get(KIT_KEY, {}).get("edited"):
                remark = " ".join(filter(None, [remark, "You had edited this locked cell; it was put back as "
                                                        "released before grading."]))
            _fill(cell, checks[grade_id(cell)], result, remark)
    sources = {c.grade_id: c for c in assignment.cells()}
    for name, check in checks.items():
        if name in present or name not in sources:
            continue
        source = sources[name]
        cell = nbformat.v4.new_code_cell(source.source, metadata={"nbgrader": dict(source.nbgrader),
                                                                  "deletable": False, "editable": False})
        _fill(cell, check, result, "This graded cell was missing from your notebook; it was added back for grading.")
        notebook.cells.append(cell)
    return notebook


def _fill(cell, check: CheckResult, result: SubmissionResult, remark: str | None) -> None:
    cell.outputs = _check_outputs(check, result, remark)
    cell.execution_count = 1
    cell.metadata[KIT_KEY] = {**cell.metadata.get(KIT_KEY, {}), "check": check.check, "title": check.title}


# --- nbgrader autograde -----------------------------------------------------------------------------

_command_line_servers: dict[str, SandboxServer] = {}
_servers_lock = threading.Lock()


def _command_line_server(assignment: kit.Assignment) -> SandboxServer:
    """One sandbox server per assignment for a whole `nbgrader autograde` command, closed when it exits."""
    with _servers_lock:
        if assignment.key not in _command_line_servers:
            server = SandboxServer(assignment=assignment)
            atexit.register(server.close)
            _command_line_servers[assignment.key] = server
        return _command_line_servers[assignment.key]


def _run_by_command_line(configurable) -> bool:
    """True under `nbgrader autograde`; False inside a long-lived process (formgrader's Autograde button)."""
    from nbgrader.apps.autogradeapp import AutogradeApp

    node = configurable         # `nbgrader autograde` runs an AutogradeApp under the NbGraderApp at the root
    while node is not None:
        if isinstance(node, AutogradeApp):
            return True
        node = node.parent
    return False


@functools.lru_cache(maxsize=1)
def _run_seed() -> int:
    """One seed for every notebook of one `nbgrader autograde` command, as grade-class uses one per class."""
    return new_seed()


def _has_kit_checks(nb) -> bool:
    ids = {cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "") for cell in nb.cells}
    return any(f"{HIDDEN_CHECK_PREFIX}{name}" in ids for name in RUBRIC)


def verified(source: Path) -> kit.Assignment:
    """The course's kit assignment, once its check points agree with the kit's rubric (else RubricMismatch)."""
    assignment = kit.Assignment(source)
    assignment.verify_rubric(RUBRIC)
    return assignment


class SandboxedExecute(Execute):
    """nbgrader's Execute for every assignment but the kit's; on the kit's, the student's code runs in the
    kit's sandbox, never in a kernel, and is graded against the course's own source notebook.

    A hanging or crashing notebook costs at most the sandbox's time limit for the whole notebook, output on
    stderr cannot zero a cell, and student code cannot reach the hidden checks. Under `nbgrader autograde` one
    sandbox server serves every notebook of the command; from formgrader's Autograde button, one serves the
    notebook and is closed before the button's request returns.
    """

    seed = Integer(0, help="hidden-input seed; 0 draws a fresh one per run (recorded in each cell's output)").tag(config=True)
    device = Unicode("cpu", help="cpu or cuda").tag(config=True)

    def preprocess(self, nb, resources, *args, **kwargs):
        source = kit_source(self, resources)
        if source is None:
            if _has_kit_checks(nb):     # fail closed: a kit notebook is never run in a kernel, whatever went wrong
                raise RuntimeError("this notebook holds the kit's hidden-check cells, but the course's source of its "
                                   "assignment is missing or cannot be read as the kit's: not grading it")
            return super().preprocess(nb, resources, *args, **kwargs)
        try:
            assignment = verified(source)
        except kit.RubricMismatch as error:
            self.log.error("Not grading: %s", error)
            raise
        command_line = _run_by_command_line(self)
        seed = self.seed or int(os.environ.get("AUTOGRADER_SEED", 0)) or (_run_seed() if command_line else new_seed())
        student = resources.get("nbgrader", {}).get("student")
        with self._server(assignment, command_line) as server:
            result = grade_cells(cells_from_notebook(nb), assignment.notebook_name, server, seed=seed,
                                 device=self.device, student=student)
        self.log.info("graded %s: %s / %s (seed %s)", student, result.score, result.max_score, seed)
        return annotate(nb, result, assignment), resources

    @contextlib.contextmanager
    def _server(self, assignment: kit.Assignment, command_line: bool):
        if command_line:
            yield _command_line_server(assignment)
        else:
            with SandboxServer(assignment=assignment) as server:
                yield server


# --- grade-class into an nbgrader course ------------------------------------------------------------

def course_config(course: Path) -> Config:
    """The configuration nbgrader itself would use in this course: the Jupyter config folders (a hub-wide
    nbgrader_config.py, the user's), then the course folder's own, which wins."""
    config = Config()
    for folder in [*reversed(jupyter_config_path()), str(course)]:
        if (Path(folder) / "nbgrader_config.py").is_file():
            config.merge(PyFileConfigLoader("nbgrader_config.py", path=folder).load_config())
    return config


def kit_assignments(course: Path, config: Config | None = None) -> list[kit.Assignment]:
    """Every assignment of the course whose source notebook is one of the kit's."""
    coursedir = CourseDirectory(config=config or Config(), root=str(Path(course).resolve()))
    folder = Path(coursedir.format_path(coursedir.source_directory, ".", "."))
    return [kit.Assignment(path) for path in sorted(folder.glob("*/*.ipynb"))
            if kit.is_kit_source(path, RUBRIC)]


class CourseRecorder:
    """Called once per graded student: gradebook scores (as nbgrader autograde records them, late penalty
    included), autograded notebook, feedback page. Grades with the course's own source notebook."""

    def __init__(self, course: Path, assignment_name: str | None = None):
        self.course = Path(course).resolve()
        self.config = course_config(self.course)
        self.coursedir = CourseDirectory(config=self.config, root=str(self.course))
        self.db_url = self.coursedir.db_url
        self.lock = threading.Lock()
        found = {a.name: a for a in kit_assignments(self.course, self.config)}
        if assignment_name is not None and assignment_name not in found:
            raise SystemExit(f"{self.course}: no assignment '{assignment_name}' of the kit in its source folder "
                             f"(the kit's assignments there: {', '.join(found) or 'none'})")
        if assignment_name is None and len(found) != 1:
            raise SystemExit(f"{self.course}: " + (f"several assignments of the kit ({', '.join(found)}); name one "
                                                   "with --assignment" if found else
                                                   "no assignment of the kit in its source folder"))
        try:
            self.assignment = verified(found[assignment_name or next(iter(found))].source)
        except kit.RubricMismatch as error:
            raise SystemExit(f"Not grading: {error}") from None
        with Gradebook(self.db_url) as gradebook:
            try:
                gradebook.find_assignment(self.assignment.name)
            except MissingEntry:
                raise SystemExit(f"{self.course}: the gradebook has no assignment '{self.assignment.name}'; run "
                                 "`nbgrader generate_assignment` there first") from None

    def __call__(self, submission, result: SubmissionResult) -> None:
        name, student = self.assignment.name, submission.student
        notebook = self._annotated(submission, result)
        with self.lock:
            self._record(student, notebook, self._timestamp(submission))
        autograded = Path(self.coursedir.format_path(self.coursedir.autograded_directory, student, name))
        path = autograded / self.assignment.notebook_name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)        # nbgrader leaves its autograded copies read-only
        nbformat.write(notebook, path)
        feedback = Path(self.coursedir.format_path(self.coursedir.feedback_directory, student, name))
        write_feedback_page(result, feedback / f"{self.assignment.notebook_id}.html")

    def _annotated(self, submission, result: SubmissionResult) -> nbformat.NotebookNode:
        notebook = None
        if submission.path is not None and submission.path.suffix == ".ipynb":
            try:
                notebook = nbformat.read(submission.path, as_version=4)
            except Exception:
                notebook = None
        return annotate(notebook or nbformat.v4.new_notebook(), result, self.assignment)

    def _timestamp(self, submission):
        """nbgrader's submission time (timestamp.txt beside the notebook, written by `nbgrader collect`)."""
        if submission.path is None:
            return None
        return self.coursedir.get_existing_timestamp(str(submission.path.parent))

    def _record(self, student: str, notebook: nbformat.NotebookNode, timestamp) -> None:
        name, notebook_id = self.assignment.name, self.assignment.notebook_id
        cells = {c.metadata["nbgrader"]["grade_id"]: c for c in notebook.cells if is_grade(c)}
        with Gradebook(self.db_url, self.coursedir.course_id) as gradebook:
            gradebook.update_or_create_student(student)
            gradebook.update_or_create_submission(name, student, **({"timestamp": timestamp} if timestamp else {}))
            for grade in gradebook.find_submission_notebook(notebook_id, name, student).grades:
                cell = cells.get(grade.name)
                # nbgrader's own rule (SaveAutoGrades): a check cell's value, None for a written answer
                grade.auto_score = determine_grade(cell)[0] if cell is not None else None
                grade.needs_manual_grade = grade.manual_score is not None or grade.auto_score is None
            gradebook.db.commit()
        resources = {"nbgrader": {"notebook": notebook_id, "assignment": name, "student": student,
                                  "db_url": self.db_url}}
        AssignLatePenalties(config=self.config).preprocess(notebook, resources)
