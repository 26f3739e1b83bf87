"""nbgrader configuration of the course. Run plain nbgrader commands from this folder:

    nbgrader generate_assignment layernorm   # release (stubs name their task; hidden checks stripped)
    nbgrader autograde layernorm             # student code runs in the kit's sandbox, not in a kernel
    nbgrader generate_feedback layernorm     # feedback pages without hidden tests or tracebacks
    nbgrader export                          # grades.csv with per-check partial credit
"""
from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, ClearHiddenTests, ClearMarkScheme,
                                    ClearOutput, ComputeChecksums, DeduplicateIds, GetGrades, IncludeHeaderFooter,
                                    InstantiateTests, LimitOutput, LockCells, OverwriteKernelspec, SaveAutoGrades,
                                    SaveCells)

from autograder.nbgrader_plugins import FeedbackWithoutHiddenTests, TaskStubs, TellingOverwriteCells

c = get_config()  # noqa: F821  (provided by nbgrader when it loads this file)

c.CourseDirectory.course_id = "layernorm-kit"

# Release: nbgrader's pipeline, with stubs that name their task.
c.GenerateAssignment.preprocessors = [
    IncludeHeaderFooter, InstantiateTests, LockCells, TaskStubs, ClearOutput, CheckCellMetadata,
    ComputeChecksums, SaveCells, ClearHiddenTests, ClearMarkScheme, ComputeChecksums, CheckCellMetadata,
]

# Autograde: locked cells restored (and edits noted), then the sandbox grades the notebook as a whole.
c.Autograde.sanitize_preprocessors = [
    ClearOutput, DeduplicateIds, OverwriteKernelspec, TellingOverwriteCells, CheckCellMetadata,
]
c.Autograde.autograde_preprocessors = [
    "autograder.nbgrader_bridge.SandboxedExecute",    # by name: only autograde pays for importing torch
    ClearMetadataPreprocessor, LimitOutput, SaveAutoGrades, AssignLatePenalties, CheckCellMetadata,
]

# Feedback: scores and messages, never hidden-test source or tracebacks (nbgrader shows both by default).
c.GenerateFeedback.preprocessors = [GetGrades, FeedbackWithoutHiddenTests, CSSHTMLHeaderPreprocessor]
