"""nbgrader configuration of a course that holds the kit's assignment (and any others). Plain nbgrader commands,
run from the course folder (README, "For instructors"):

    nbgrader generate_assignment layernorm   # release: stubs name their task; hidden checks stripped
    nbgrader autograde layernorm             # student code runs in the kit's sandbox, never in a kernel
    nbgrader generate_feedback layernorm     # each check named, no hidden tests, no tracebacks
    nbgrader export                          # grades.csv: nbgrader's columns, then one column per graded cell

Every pipeline below is nbgrader's own, with one class swapped for the kit's. Each kit class acts only on the
kit's assignments (recognised by their source notebook, whatever their name) and behaves exactly like the
stock class it replaces on every other assignment of the course.

The course id is not set here: on a hub it comes from the hub-wide nbgrader_config.py, and a value set in this
file would override it (nbgrader reads the course folder's configuration last).
"""
from nbgrader.converters import Autograde, GenerateAssignment, GenerateFeedback
from nbgrader.preprocessors import ClearSolutions, Execute, GetGrades, OverwriteCells

try:
    from autograder.nbgrader_plugins import (FEEDBACK_TEMPLATE_DIRS, FeedbackWithoutHiddenTests, PerCheckExport,
                                             TaskStubs, TellingOverwriteCells)
except Exception as error:    # fail closed: nbgrader skips a configuration file that raises an Exception and
    # carries on with its stock classes, which would run the students' notebooks in kernels, unsandboxed, and
    # release and give back the hidden checks. SystemExit is not an Exception: nbgrader stops here instead.
    raise SystemExit(f"nbgrader_config.py: the layernorm kit could not be loaded ({type(error).__name__}: {error}). "
                     "Nothing of this course is graded, released or given back until it loads: check that the kit "
                     "is installed in this Python environment and readable by this user.") from None

c = get_config()  # noqa: F821  (provided by nbgrader when it loads this file)


def stock(converter, trait: str, swap: dict) -> list:
    """nbgrader's default pipeline `converter.trait`, each class in `swap` replaced by its list of classes."""
    return [new for old in converter.class_traits()[trait].default() for new in swap.get(old, [old])]


# Release: stubs that name their task.
c.GenerateAssignment.preprocessors = stock(GenerateAssignment, "preprocessors", {ClearSolutions: [TaskStubs]})

# Autograde: locked cells put back (and edits noted), then the sandbox grades the kit's notebooks as a whole.
c.Autograde.sanitize_preprocessors = stock(Autograde, "sanitize_preprocessors",
                                           {OverwriteCells: [TellingOverwriteCells]})
c.Autograde.autograde_preprocessors = stock(Autograde, "autograde_preprocessors", {
    Execute: ["autograder.nbgrader_bridge.SandboxedExecute"],   # by name: only autograde pays for importing torch
})

# Feedback: each check named; no hidden-test source, tracebacks or stale points (nbgrader shows all three).
c.GenerateFeedback.preprocessors = stock(GenerateFeedback, "preprocessors",
                                         {GetGrades: [GetGrades, FeedbackWithoutHiddenTests]})
c.GenerateFeedback.HTMLExporter.template_file = "kit_feedback.html.j2"   # feedback only: formgrader keeps its own
c.GenerateFeedback.HTMLExporter.extra_template_basedirs = FEEDBACK_TEMPLATE_DIRS

# Export: nbgrader's columns, then one column per graded cell (each check of the kit's assignments).
c.ExportApp.plugin_class = PerCheckExport
