"""The kit inside nbgrader: the sandboxed executor for the kit's assignments, and what `grade-class --course`
needs to grade like it (the course's configuration and its kit assignments).

Both paths grade with the course's own source notebook (its provided code, reference solution and points: the
rubric's parts share each check cell's points) and annotate the notebook the same way
(`autograder.frontends.nbgrader.annotate`). `autograder.frontends.nbgrader.preflight` has checked the assignment,
and chosen between refusing and grading unsafely where nothing isolates, before nbgrader calls the executor.

The grader (torch, the checks, the pages' figures) is imported when the executor first meets a notebook of the
kit's: `nbgrader autograde` on any other assignment of the course costs what stock nbgrader's does.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import threading
from pathlib import Path

from jupyter_core.paths import jupyter_config_path
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import Execute
from traitlets import Integer, Unicode
from traitlets.config import Config, PyFileConfigLoader

from autograder.course import kit
from autograder.course.notebook import HIDDEN_CHECK_PREFIX, SubmissionError, read_notebook
from autograder.engine.results import points_text
from autograder.engine.rubric import RUBRIC
from autograder.frontends.shown import line
from autograder.sandbox.parent.pool import ServerPool
from .plugins import KIT_KEY, kit_source
from .preflight import unsafe_allowed


def new_seed() -> int:
    from autograder.grading.reference import new_seed  # the grader's module: it imports torch

    return new_seed()


def grade_cells(*args, **kwargs):
    """The grader's `grading.submission.grade_cells`, imported when a kit notebook is graded."""
    from autograder.grading.submission import grade_cells

    return grade_cells(*args, **kwargs)


# --- nbgrader autograde -----------------------------------------------------------------------------

_command_line_servers: dict[str, ServerPool] = {}
_servers_lock = threading.Lock()


def _command_line_server(assignment: kit.Assignment, unsafe: bool) -> ServerPool:
    """One sandbox server per assignment for a whole `nbgrader autograde` command, closed when it exits."""
    with _servers_lock:
        if assignment.key not in _command_line_servers:
            servers = ServerPool(unsafe=unsafe).start(assignment)
            atexit.register(servers.close)
            _command_line_servers[assignment.key] = servers
        return _command_line_servers[assignment.key]


def _run_by_command_line(configurable) -> bool:
    """True under `nbgrader autograde`; False inside a long-lived process (formgrader's Autograde button)."""
    from nbgrader.apps.autogradeapp import AutogradeApp

    node = configurable  # `nbgrader autograde` runs an AutogradeApp under the NbGraderApp at the root
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
    """Does this notebook hold a hidden-check cell of the kit? One that cannot even be read counts as one (fail
    closed: it is never run in a kernel)."""
    try:
        ids = {cell.grade_id for cell in read_notebook(nb).cells}
    except SubmissionError:
        return True
    return any(f"{HIDDEN_CHECK_PREFIX}{name}" in ids for name in RUBRIC)


def verified(source: Path) -> kit.Assignment:
    """The course's kit assignment, once the kit can grade it (else kit.SourceProblem)."""
    return kit.Assignment(source).verify(RUBRIC)


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
            if _has_kit_checks(nb):  # fail closed: a kit notebook is never run in a kernel, whatever went wrong
                raise RuntimeError(
                    "this notebook holds the kit's hidden-check cells, but the course's source of its "
                    "assignment is missing or cannot be read as the kit's: not grading it"
                )
            return super().preprocess(nb, resources, *args, **kwargs)
        assignment = verified(source)  # preflight.KitPreflight refused already, with one line, were it not so
        command_line = _run_by_command_line(self)
        seed = self.seed or int(os.environ.get("AUTOGRADER_SEED", 0)) or (_run_seed() if command_line else new_seed())
        student = resources.get("nbgrader", {}).get("student")
        record = nb.metadata.get(KIT_KEY, {})  # the kit's intake wrote it (a student's own was dropped there)
        from autograder.grading.submission import unreadable
        from .annotate import annotate  # draws the figures: matplotlib

        if record.get("unreadable"):
            result = unreadable(
                assignment.notebook_name, str(record["unreadable"]), seed, self.device, student, assignment=assignment
            )
        else:
            reading = read_notebook(nb, assignment.notebook_name)
            with self._server(assignment, command_line, unsafe_allowed(self.config)) as server:
                result = grade_cells(
                    reading.cells,
                    assignment.notebook_name,
                    server,
                    seed=seed,
                    device=self.device,
                    student=student,
                    notes=tuple(map(str, record.get("reading") or ())) + reading.notes,
                )
        self.log.info(
            "graded %s: the checks give %s (written answers are graded by hand; seed %s)",
            line(student),
            f"{points_text(result.score)} of their {points_text(result.max_score)} points",
            seed,
        )
        return annotate(nb, result, assignment), resources

    @contextlib.contextmanager
    def _server(self, assignment: kit.Assignment, command_line: bool, unsafe: bool):
        if command_line:
            with _command_line_server(assignment, unsafe).lend() as server:
                yield server
        else:  # one notebook (formgrader's button): a server for one job skips the warm-up
            with ServerPool(unsafe=unsafe, warm_up=False).start(assignment) as servers, servers.lend() as server:
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
    return [kit.Assignment(path) for path in sorted(folder.glob("*/*.ipynb")) if kit.is_kit_source(path, RUBRIC)]


def pick_assignment(course: Path, name: str | None = None, config: Config | None = None) -> kit.Assignment:
    """The course's kit assignment called `name`, or its only one; SystemExit saying what is there otherwise."""
    course = Path(course).resolve()
    found = {a.name: a for a in kit_assignments(course, config or course_config(course))}
    if name is not None and name not in found:
        raise SystemExit(
            f"{course}: no assignment '{name}' of the kit in its source folder "
            f"(the kit's assignments there: {', '.join(found) or 'none'})"
        )
    if name is None and len(found) != 1:
        raise SystemExit(
            f"{course}: "
            + (
                f"several assignments of the kit ({', '.join(found)}); name one with --assignment"
                if found
                else "no assignment of the kit in its source folder"
            )
        )
    return found[name or next(iter(found))]
