"""The nbgrader plugins the course configuration names (assignments/nbgrader_config.py).

Each one acts only on the kit's own assignments, recognised by their source notebook in the course being
processed (`kit.is_kit_source`), whatever the assignment is called; on every other assignment of the course it
behaves exactly as the stock nbgrader class it extends. Nothing here imports torch, so nbgrader commands that do
not grade stay fast; the sandboxed executor lives in `nbgrader_bridge` and is named by string in the config.
"""
from __future__ import annotations

import csv
import functools
from pathlib import Path

import nbgrader
from nbconvert.preprocessors import Preprocessor
from nbgrader.api import MissingEntry
from nbgrader.coursedir import CourseDirectory
from nbgrader.plugins import ExportPlugin
from nbgrader.preprocessors import ClearSolutions, OverwriteCells

from . import kit
from .kit import without_hidden_tests
from .rubric import RUBRIC

KIT_KEY = "layernorm_kit"     # cell metadata the kit writes: {"edited": true} on a locked cell put back, and
                              # {"check": name, "title": title} on a graded hidden-check cell
# where the feedback page's template (`feedback/kit_feedback.html.j2`) and nbgrader's own, which it extends, live
FEEDBACK_TEMPLATE_DIRS = [str(Path(__file__).resolve().parent / "templates"),
                          str(Path(nbgrader.__file__).resolve().parent / "server_extensions" / "formgrader" / "templates")]


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
def _is_kit(path: str, stamp: tuple) -> bool:
    return kit.is_kit_source(path, RUBRIC)


def kit_source(configurable, resources) -> Path | None:
    """The course's source notebook when it is one of the kit's assignments, else None (stock nbgrader)."""
    path = course_source(configurable, resources).resolve()
    try:
        stat = path.stat()
    except OSError:
        return None
    return path if _is_kit(str(path), (stat.st_mtime_ns, stat.st_size)) else None


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
    * marks each locked cell it had to put back, so that the feedback can tell the student.
    """

    def preprocess_cell(self, cell, resources, cell_index):
        if not self.kit_notebook:
            return super().preprocess_cell(cell, resources, cell_index)
        nbgrader = cell.metadata.get("nbgrader", {})
        original = self._source_cell(nbgrader.get("grade_id"))
        if original is not None and original.locked and cell.source != original.source:
            if cell.source.strip() == without_hidden_tests(original.source).strip():
                cell.source = original.source         # exactly as released: nothing to report
        before = cell.source
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if cell.source != before and nbgrader.get("locked"):
            cell.metadata[KIT_KEY] = {**cell.metadata.get(KIT_KEY, {}), "edited": True}
        return cell, resources

    def _source_cell(self, grade_id):
        if grade_id is None:
            return None
        try:
            return self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
        except MissingEntry:
            return None


# --- feedback ---------------------------------------------------------------------------------------

class FeedbackWithoutHiddenTests(KitOnly, Preprocessor):
    """For generate_feedback on the kit's assignments: no hidden-test source, no tracebacks, and no score in a
    check cell's output (the page shows each check's score from the gradebook, so a manual override is the
    only number the student reads).

    An nbconvert Preprocessor, not nbgrader's: nbgrader's base class makes `display_data_priority` unconfigurable,
    and generate_feedback then warns that the option is "not recognized"."""

    enabled = True

    def preprocess_cell(self, cell, resources, index):
        if not self.kit_notebook:
            return cell, resources
        cell.source = without_hidden_tests(cell.source)
        outputs = cell.get("outputs", [])
        if cell.get("metadata", {}).get(KIT_KEY, {}).get("check"):
            outputs = [o for o in outputs if o.get("output_type") != "execute_result"]
        for output in outputs:
            if output.get("output_type") == "error":
                output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        if "outputs" in cell:
            cell.outputs = outputs
        return cell, resources


# --- export -----------------------------------------------------------------------------------------

STOCK_COLUMNS = ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email",
                 "raw_score", "late_submission_penalty", "score", "max_score"]


def check_columns(assignment) -> dict[tuple[str, str], str]:
    """(notebook, grade_id) -> column name for every graded cell: `<assignment>/<grade_id>`, with the
    notebook's name in between when the assignment has several notebooks."""
    several = len(assignment.notebooks) > 1
    return {(notebook.name, cell.name): "/".join([assignment.name, *([notebook.name] if several else []), cell.name])
            for notebook in assignment.notebooks for cell in notebook.grade_cells}


class PerCheckExport(ExportPlugin):
    """`nbgrader export` with nbgrader's own columns (same values) followed by one column per graded cell of
    every assignment (`layernorm/check_forward_order`, ...): the points in the gradebook, a manual override
    included; empty where the student submitted nothing or a written answer is not graded yet."""

    def export(self, gradebook) -> None:
        destination = self.to or "grades.csv"
        wanted_students = {str(s) for s in self.student}
        wanted_assignments = {str(a) for a in self.assignment}
        assignments = [a for a in gradebook.assignments if not wanted_assignments or a.name in wanted_assignments]
        columns = {name: check_columns(a) for name, a in ((a.name, a) for a in assignments)}
        header = STOCK_COLUMNS + [c for a in assignments for c in columns[a.name].values()]
        self.log.info("Exporting grades, one column per graded cell, to %s", destination)
        with open(destination, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=header, restval="")
            writer.writeheader()
            for assignment in assignments:
                for student in gradebook.students:
                    if not wanted_students or student.id in wanted_students:
                        writer.writerow(self._row(gradebook, assignment, student, columns[assignment.name]))

    @staticmethod
    def _row(gradebook, assignment, student, columns) -> dict:
        row = {"assignment": assignment.name, "duedate": assignment.duedate, "student_id": student.id,
               "last_name": student.last_name, "first_name": student.first_name, "email": student.email,
               "max_score": assignment.max_score}
        try:
            submission = gradebook.find_submission(assignment.name, student.id)
        except MissingEntry:
            row.update(timestamp="", raw_score=0.0, late_submission_penalty=0.0, score=0.0)
        else:
            penalty = submission.late_submission_penalty
            row.update(timestamp=submission.timestamp, raw_score=submission.score, late_submission_penalty=penalty,
                       score=max(0.0, submission.score - penalty))
            for notebook in submission.notebooks:
                for grade in notebook.grades:
                    column = columns.get((notebook.name, grade.name))
                    if column and (grade.manual_score is not None or grade.auto_score is not None):
                        row[column] = grade.score       # nbgrader's: the manual score where one was given
        return {key: "" if value is None else value for key, value in row.items()}

