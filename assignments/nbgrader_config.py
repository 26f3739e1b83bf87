"""nbgrader configuration of the course: run nbgrader commands from this folder."""
from autograder.nbgrader_plugins import TaskStubs
from nbgrader.preprocessors import (CheckCellMetadata, ClearHiddenTests, ClearMarkScheme, ClearOutput,
                                    ComputeChecksums, IncludeHeaderFooter, InstantiateTests, LockCells, SaveCells)

c = get_config()  # noqa: F821  (provided by nbgrader when it loads this file)

c.CourseDirectory.course_id = "layernorm-kit"
c.CourseDirectory.db_assignments = [dict(name="layernorm")]

# The release: nbgrader's usual pipeline, with stubs that name their task.
c.GenerateAssignment.preprocessors = [
    IncludeHeaderFooter, InstantiateTests, LockCells, TaskStubs, ClearOutput, CheckCellMetadata,
    ComputeChecksums, SaveCells, ClearHiddenTests, ClearMarkScheme, ComputeChecksums, CheckCellMetadata,
]
