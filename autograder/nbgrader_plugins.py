"""nbgrader preprocessors the kit's course configuration plugs in (see assignments/nbgrader_config.py)."""
from __future__ import annotations

from nbgrader.preprocessors import ClearSolutions

from . import kit


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
