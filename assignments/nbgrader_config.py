"""nbgrader configuration of a course that holds the kit's assignment (and any others). Plain nbgrader commands,
run from the course folder (docs/instructors.md):

    nbgrader generate_assignment layernorm   # release: stubs name their task; hidden checks stripped
    nbgrader autograde layernorm             # student code runs in the kit's sandbox, never in a kernel
    nbgrader generate_feedback layernorm     # the kit's page, every number from the gradebook
    nbgrader export                          # nbgrader's grades.csv, the kit's late columns; grades_per_check.csv

Every pipeline below is nbgrader's own, with one class swapped for the kit's. Each kit class acts only on the
kit's assignments (recognised by their source notebook, whatever their name) and behaves exactly like the
stock class it replaces on every other assignment of the course, at about its speed: the grader (torch, the
checks, the pages' figures) is imported only when a command meets one of the kit's notebooks. Classes are named
by string, so that the configuration serializes (formgrader shows it on its Manage Assignments page).

The course id is not set here: on a hub it comes from the hub-wide nbgrader_config.py, and a value set in this
file would override it (nbgrader reads the course folder's configuration last).
"""
from nbgrader.converters import Autograde, GenerateAssignment
from nbgrader.preprocessors import ClearSolutions, Execute, OverwriteCells, SaveAutoGrades

try:
    from autograder.frontends.nbgrader.plugins import TaskStubs, TellingOverwriteCells, WithoutScoreOutputs
except Exception as error:    # fail closed: nbgrader skips a configuration file that raises an Exception and
    # carries on with its stock classes, which would run the students' notebooks in kernels, unsandboxed, and
    # release and give back the hidden checks. SystemExit is not an Exception: nbgrader stops here instead.
    raise SystemExit(f"nbgrader_config.py: the layernorm kit could not be loaded ({type(error).__name__}: {error}). "
                     "Nothing of this course is graded, released or given back until it loads: check that the kit "
                     "is installed in this Python environment and readable by this user.") from None

c = get_config()  # noqa: F821  (provided by nbgrader when it loads this file)


def named(item) -> str:
    """A class by its dotted name, as nbconvert takes it in a pipeline: the configuration then holds only strings,
    which formgrader can serialize (it logs "Formgrader config is not serializable" for a class)."""
    return item if isinstance(item, str) else f"{item.__module__}.{item.__qualname__}"


def stock(converter, trait: str, swap: dict) -> list[str]:
    """nbgrader's default pipeline `converter.trait`, each class in `swap` replaced by its list of classes, named."""
    return [named(new) for old in converter.class_traits()[trait].default() for new in swap.get(old, [old])]


# Release: stubs that name their task.
c.GenerateAssignment.preprocessors = stock(GenerateAssignment, "preprocessors", {ClearSolutions: [TaskStubs]})

# Autograde: the kit's assignment checked before any student's folder is touched (a refusal is one line and
# deletes nothing); locked cells put back (and edits noted); the sandbox grades the kit's notebooks as a whole;
# each check's points read into the gradebook, then taken out of the cell (formgrader shows the gradebook's).
c.Autograde.exporter_class = "autograder.frontends.nbgrader.preflight.KitPreflight"
c.Autograde.sanitize_preprocessors = stock(Autograde, "sanitize_preprocessors",
                                           {OverwriteCells: [TellingOverwriteCells]})
c.Autograde.autograde_preprocessors = stock(Autograde, "autograde_preprocessors", {
    Execute: ["autograder.frontends.nbgrader.bridge.SandboxedExecute"],
    SaveAutoGrades: [SaveAutoGrades, WithoutScoreOutputs],
})

# Where nothing can isolate student code (no working bubblewrap, not root), the kit refuses to grade. A course
# (or the hub, in its nbgrader_config.py) may choose to grade anyway; every result then records it:
# c.KitSandbox.when_unisolated = "unsafe"

# Feedback: the kit's page, drawn by nbgrader's feedback exporter from the gradebook as it stands (late penalty,
# overrides, written answers), again before release_feedback hands pages out; other assignments keep nbgrader's.
c.GenerateFeedback.exporter_class = "autograder.frontends.nbgrader.feedback.KitFeedbackPage"
c.ExchangeFactory.release_feedback = "autograder.frontends.nbgrader.feedback.KitReleaseFeedback"
# Formgrader's view of a kit notebook opens with the score the student's page shows (after the late penalty).
c.HTMLExporter.preprocessors = ["autograder.frontends.nbgrader.feedback.FormgraderStanding"]

# Export: nbgrader's grades.csv (a row per assignment and student), the kit's assignments' numbers from the
# gradebook as the feedback page gives them, and how late each kit submission was; grades_per_check.csv beside it.
c.ExportApp.plugin_class = "autograder.frontends.nbgrader.export.PerCheckExport"
