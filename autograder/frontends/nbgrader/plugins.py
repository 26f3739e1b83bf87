"""The nbgrader plugins the course configuration names (assignments/nbgrader_config.py): release, sanitizing, and
how the kit refuses. (The feedback page, the export and the checks before autograding have modules of their own.)

Each one acts only on the kit's own assignments, recognised by their source notebook in the course being
processed (`kit.is_kit_source`), whatever the assignment is called; on every other assignment of the course it
behaves exactly as the stock nbgrader class it extends. Nothing here imports torch, so nbgrader commands that do
not grade stay fast; the sandboxed executor lives in `autograder.frontends.nbgrader.bridge` and is named by string
in the config.
"""

from __future__ import annotations

import functools
from pathlib import Path

from nbconvert.preprocessors import Preprocessor
from nbgrader.api import MissingEntry
from nbgrader.converters.base import NbGraderException
from nbgrader.coursedir import CourseDirectory
from nbgrader.exchange import ExchangeError
from nbgrader.preprocessors import ClearSolutions, OverwriteCells
from nbgrader.utils import is_grade

from autograder.course import kit
from autograder.course.kit import without_hidden_tests
from autograder.engine.rubric import RUBRIC
from autograder.frontends.shown import line

KIT_KEY = "layernorm_kit"  # metadata the kit writes: {"edited": true} on a locked cell put back; {"check": name,
# "title": ..., "remark": ...} on a graded hidden-check cell; {"result": ..., "source":
# digest} on the notebook (autograder.frontends.nbgrader.annotate)
SCORE_OUTPUT = "score"  # marks the output that hands a check's points to nbgrader's SaveAutoGrades


# --- refusing in one line ------------------------------------------------------------------------------


class KitRefusal(NbGraderException, ExchangeError):
    """The kit will not do what was asked, for the reason its message gives in one sentence, which the kit has
    logged. nbgrader's commands stop on it without a traceback (the converters' apps catch NbGraderException, the
    exchange's ExchangeError), and formgrader's buttons show the log line alone (`_one_line_in_formgrader`)."""


def refuse(log, what: str, why: str) -> KitRefusal:
    """Log the one line ("Not grading layernorm: ...") and give the exception that stops the command. The line is
    text only (`shown.line`): it may name a student's id or file."""
    what, why = line(what), line(why)
    log.error("%s: %s.", what, why)
    return KitRefusal(f"{what}: {why}")


def _one_line_in_formgrader() -> None:
    """Formgrader's buttons show a failed command's log and then its Python traceback (nbgrader's `capture_log`),
    which reads as "the kit crashed". For the kit's refusals the log's one line is the whole answer: the
    traceback is left out. Every other failure keeps nbgrader's report."""
    from nbgrader.apps import api

    original = api.capture_log
    if getattr(original, "kit_refusals", False):
        return

    def capture_log(app, fmt="[%(levelname)s] %(message)s"):
        result = original(app, fmt)
        if not result.get("success") and KitRefusal.__name__ in result.get("error", ""):
            result.pop("error")
        return result

    capture_log.kit_refusals = True
    api.capture_log = capture_log


_one_line_in_formgrader()


# --- which assignments are the kit's ----------------------------------------------------------------


def course_directory(configurable) -> CourseDirectory:
    """The course nbgrader is working on: the converter's own (command line or formgrader), else from config."""
    node = configurable
    while node is not None:
        found = getattr(node, "coursedir", None)
        if isinstance(found, CourseDirectory):
            return found
        node = node.parent
    return CourseDirectory(config=configurable.config)


def course_source(configurable, resources) -> Path:
    """The course's source notebook of the notebook being processed (source/<assignment>/<notebook>.ipynb)."""
    coursedir = course_directory(configurable)
    info = resources["nbgrader"]
    folder = coursedir.format_path(coursedir.source_directory, ".", info["assignment"])
    return Path(folder) / f"{info['notebook']}.ipynb"


@functools.lru_cache(maxsize=64)
def is_kit_notebook(path: str, stamp: tuple) -> bool:
    return kit.is_kit_source(path, RUBRIC)


def kit_source(configurable, resources) -> Path | None:
    """The course's source notebook when it is one of the kit's assignments, else None (stock nbgrader)."""
    path = course_source(configurable, resources).resolve()
    try:
        stat = path.stat()
    except OSError:
        return None
    return path if is_kit_notebook(str(path), (stat.st_mtime_ns, stat.st_size)) else None


class KitOnly:
    """Mixin: `self.kit_notebook` is, per notebook, the course's source when the notebook belongs to one of the
    kit's assignments, and None for every other assignment."""

    kit_notebook: Path | None = None

    def preprocess(self, nb, resources):
        self.kit_notebook = kit_source(self, resources)
        return super().preprocess(nb, resources)


# --- release ----------------------------------------------------------------------------------------


class TaskStubs(KitOnly, ClearSolutions):
    """ClearSolutions whose stubs raise NotImplementedError naming the task and the function to write."""

    def _replace_solution_region(self, cell, language):
        task = kit.TASKS.get(cell.metadata.get("nbgrader", {}).get("grade_id", "")) if self.kit_notebook else None
        if cell.cell_type != "code" or task is None:
            return super()._replace_solution_region(cell, language)
        stubbed = kit.stub_solutions(cell.source, task)
        replaced = stubbed != cell.source
        cell.source = stubbed
        return replaced


# --- autograde: sanitizing ---------------------------------------------------------------------------


class TellingOverwriteCells(KitOnly, OverwriteCells):
    """nbgrader's OverwriteCells, which on the kit's assignments also

    * takes a locked cell whose only difference from the source is the hidden-test region stripped at release
      as unchanged (stock nbgrader reports "Attribute 'checksum' ... has changed!" for every such cell, which
      instructors read as tampering); any other difference is still reported and put back;
    * takes a graded cell's points from the course, silently: a submission still carries the points it was
      released with, and after the instructor changes them (and `generate_assignment --force`) stock nbgrader
      reports every student's every changed cell as tampered with ("Attribute 'points' ... has changed!").
      Points are the course's whatever a notebook says, so a student's own edit of them changes nothing either;
    * marks each locked cell it had to put back, so that the feedback can tell the student.
    """

    def preprocess_cell(self, cell, resources, cell_index):
        if not self.kit_notebook:
            return super().preprocess_cell(cell, resources, cell_index)
        nbgrader = cell.metadata.get("nbgrader", {})
        points = self._points(nbgrader.get("grade_id")) if is_grade(cell) else None
        if points is not None:
            nbgrader["points"] = points
        original = self._source_cell(nbgrader.get("grade_id"))
        if original is not None and original.locked and cell.source != original.source:
            if cell.source.strip() == without_hidden_tests(original.source).strip():
                cell.source = original.source  # exactly as released: nothing to report
        before = cell.source
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if cell.source != before and nbgrader.get("locked"):
            cell.metadata[KIT_KEY] = {**cell.metadata.get(KIT_KEY, {}), "edited": True}
        return cell, resources

    def _points(self, grade_id) -> float | None:
        try:
            return float(self.gradebook.find_grade_cell(grade_id, self.notebook_id, self.assignment_id).max_score)
        except MissingEntry:
            return None

    def _source_cell(self, grade_id):
        if grade_id is None:
            return None
        try:
            return self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
        except MissingEntry:
            return None


# --- autograde: after the points are saved ---------------------------------------------------------------


class WithoutScoreOutputs(Preprocessor):
    """After nbgrader's SaveAutoGrades has read each check's points from its cell: the number goes, so formgrader
    shows the findings under a check and the gradebook's points beside it, and no "Out[1]: 3".

    An nbconvert Preprocessor, not nbgrader's: nbgrader's base class makes `display_data_priority` unconfigurable,
    and nbgrader then warns that the option is "not recognized"."""

    enabled = True

    def preprocess_cell(self, cell, resources, index):
        if cell.get("metadata", {}).get(KIT_KEY, {}).get("check") and "outputs" in cell:
            cell.outputs = without_score_outputs(cell.outputs)
        return cell, resources


def without_score_outputs(outputs: list) -> list:
    return [o for o in outputs if o.get("metadata", {}).get(KIT_KEY) != SCORE_OUTPUT]
