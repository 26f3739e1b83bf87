"""Light nbgrader preprocessors the course configuration plugs in (assignments/nbgrader_config.py).

Nothing here imports torch, so nbgrader commands that do not grade stay fast; the sandboxed executor lives
in `nbgrader_bridge` and is named by string in the configuration.
"""
from __future__ import annotations

from nbgrader.preprocessors import ClearSolutions, NbGraderPreprocessor, OverwriteCells

from . import kit

from .kit import without_hidden_tests

RESTORED_KEY = "layernorm_kit"     # cell metadata: "edited" when a locked cell was put back before grading


class TaskStubs(ClearSolutions):
    """ClearSolutions whose stubs raise NotImplementedError naming the task and the function to write."""

    def _replace_solution_region(self, cell, language):
        task = kit.TASKS.get(cell.metadata.get("nbgrader", {}).get("grade_id", ""))
        if cell.cell_type != "code" or task is None:
            return super()._replace_solution_region(cell, language)
        stubbed = kit.stub_solutions(cell.source, task)
        replaced = stubbed != cell.source
        cell.source = stubbed
        return replaced


class TellingOverwriteCells(OverwriteCells):
    """nbgrader's OverwriteCells, which also marks locked cells the student had edited, so feedback can say so."""

    def preprocess_cell(self, cell, resources, cell_index):
        before = cell.source
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if cell.source != before and cell.metadata.get("nbgrader", {}).get("locked"):
            if before.strip() != without_hidden_tests(cell.source).strip():
                cell.metadata[RESTORED_KEY] = "edited"
        return cell, resources


class FeedbackWithoutHiddenTests(NbGraderPreprocessor):
    """For generate_feedback: hidden-test source out of every cell, tracebacks out of every output."""

    def preprocess_cell(self, cell, resources, index):
        cell.source = without_hidden_tests(cell.source)
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return cell, resources
