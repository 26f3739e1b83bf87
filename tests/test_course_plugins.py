"""The kit's nbgrader plugins, piece by piece (fast): which assignments are the kit's, the course configuration's
pipelines, what a check cell says, and which students grade-class takes from a course's submitted/ folder."""
import shutil

import nbformat
from traitlets.config import Config, PyFileConfigLoader

from autograder import kit
from autograder.classgrade import discover
from autograder.nbgrader_plugins import (FeedbackWithoutHiddenTests, TaskStubs, TellingOverwriteCells, kit_source)
from autograder.results import CheckResult, SubmissionResult, SubTest
from nbgrader_course import ORDINARY, make_course


def test_kit_assignments_are_recognised_by_their_source_not_their_name(tmp_path):
    course = make_course(tmp_path / "course")
    shutil.copytree(course / "source" / kit.KIT.name, course / "source" / "week5")
    (course / "source" / "week5" / kit.KIT.notebook_name).rename(course / "source" / "week5" / "block.ipynb")
    config = Config()
    config.CourseDirectory.root = str(course)
    plugin = TellingOverwriteCells(config=config)
    found = lambda assignment, notebook: kit_source(plugin, {"nbgrader": {"assignment": assignment,
                                                                           "notebook": notebook}})
    assert found(kit.KIT.name, kit.KIT.notebook_id) == (course / "source" / kit.KIT.name / kit.KIT.notebook_name)
    assert found("week5", "block") is not None
    assert found(ORDINARY, ORDINARY) is None
    assert found("no_such_assignment", "x") is None


def _course_config() -> Config:
    return PyFileConfigLoader("nbgrader_config.py", path=str(kit.COURSE_DIR)).load_config()


def test_the_course_pipelines_are_nbgraders_with_one_class_swapped():
    from nbgrader.converters import Autograde, GenerateAssignment, GenerateFeedback
    config = _course_config()

    def swapped(converter, trait, configured):
        stock = converter.class_traits()[trait].default()
        names = [c if isinstance(c, str) else f"{c.__module__}.{c.__name__}" for c in configured]
        return [(f"{s.__module__}.{s.__name__}", n) for s, n in zip(stock, names) if f"{s.__module__}.{s.__name__}" != n]

    assert swapped(GenerateAssignment, "preprocessors", config.GenerateAssignment.preprocessors) == [
        ("nbgrader.preprocessors.clearsolutions.ClearSolutions", "autograder.nbgrader_plugins.TaskStubs")]
    assert swapped(Autograde, "sanitize_preprocessors", config.Autograde.sanitize_preprocessors) == [
        ("nbgrader.preprocessors.overwritecells.OverwriteCells", "autograder.nbgrader_plugins.TellingOverwriteCells")]
    assert swapped(Autograde, "autograde_preprocessors", config.Autograde.autograde_preprocessors) == [
        ("nbgrader.preprocessors.execute.Execute", "autograder.nbgrader_bridge.SandboxedExecute")]
    feedback = config.GenerateFeedback.preprocessors
    assert feedback[1] is FeedbackWithoutHiddenTests and [feedback[0], *feedback[2:]] == \
        GenerateFeedback.class_traits()["preprocessors"].default()
    assert "course_id" not in config.CourseDirectory          # a hub-wide course id stays in force
    assert "template_file" in config.GenerateFeedback.HTMLExporter and "HTMLExporter" not in config  # formgrader keeps its own


def test_kit_plugins_leave_other_assignments_alone(tmp_path):
    course = make_course(tmp_path / "course")
    config = Config()
    config.CourseDirectory.root = str(course)
    ordinary = nbformat.read(course / "source" / ORDINARY / f"{ORDINARY}.ipynb", as_version=4)
    ordinary.cells[2].outputs = [nbformat.v4.new_output("error", ename="AssertionError", evalue="",
                                                        traceback=["line 1", "line 2"])]
    resources = {"nbgrader": {"assignment": ORDINARY, "notebook": ORDINARY}}
    before = nbformat.writes(ordinary)
    FeedbackWithoutHiddenTests(config=config).preprocess(ordinary, resources)
    assert nbformat.writes(ordinary) == before                     # hidden tests and traceback as nbgrader has them
    kit_notebook = nbformat.read(course / "source" / kit.KIT.name / kit.KIT.notebook_name, as_version=4)
    FeedbackWithoutHiddenTests(config=config).preprocess(
        kit_notebook, {"nbgrader": {"assignment": kit.KIT.name, "notebook": kit.KIT.notebook_id}})
    assert "BEGIN HIDDEN TESTS" not in nbformat.writes(kit_notebook)
    stubs = TaskStubs(config=config)
    stubs.preprocess(ordinary, resources)
    assert "NotImplementedError()" in ordinary.cells[1].source and "Task" not in ordinary.cells[1].source


def _result(message: str, passed: bool) -> SubmissionResult:
    check = CheckResult("forward_order", "Operation order (Pre-LN)",
                        (SubTest("output matches a Pre-LN block", 4.0 if passed else 0.0, 4.0, passed, message),),
                        message)
    return SubmissionResult("layernorm.ipynb", (check,), 7, "cpu", "test", 0.1,
                            first_divergence=None if passed else "Step 2 of 10 (normalize with norm1): " + "x " * 200)


def test_a_check_cell_wraps_long_lines_and_states_no_earned_points():
    from autograder.nbgrader_bridge import WIDTH, check_text
    long = "Your block's output differs from a Pre-LN block's. " * 10
    result = _result(long, False)
    failed = check_text(result.checks[0], result)
    assert max(len(line) for line in failed.splitlines()) <= WIDTH
    assert " ".join(failed.split()).count("Your block's output differs") == 10 and "Step 2 of 10" in failed
    assert "0 / 4" not in failed and "0/4" not in failed and "(worth 4 points)" in failed
    result = _result("All parts passed.", True)
    passed = check_text(result.checks[0], result)
    assert "[x] output matches a Pre-LN block" in passed and "4 / 4" not in passed


def test_grade_class_takes_from_a_course_only_the_students_who_submitted_this_assignment(tmp_path):
    submitted = tmp_path / "submitted"
    for student, assignment in (("ada", kit.KIT.name), ("dee", ORDINARY), ("eve", kit.KIT.name)):
        (submitted / student / assignment).mkdir(parents=True)
        (submitted / student / assignment / f"{assignment}.ipynb").write_text("{}")
    assert [s.student for s in discover(submitted)] == ["ada", "eve"]
    plain = tmp_path / "plain"
    (plain / "dee").mkdir(parents=True)
    (plain / "dee" / "hw.ipynb").write_text("{}")
    assert [s.student for s in discover(plain)] == ["dee"]          # outside nbgrader's layout: any notebook


def test_one_sandbox_server_serves_a_whole_autograde_command_and_one_per_formgrader_request():
    """`nbgrader autograde` runs an AutogradeApp under the NbGraderApp at the root: the executor must see it
    there and share one server across the command's notebooks; formgrader's API has no such app above it."""
    from nbgrader.apps.autogradeapp import AutogradeApp
    from nbgrader.apps.nbgraderapp import NbGraderApp
    from nbgrader.converters import Autograde
    from traitlets.config import LoggingConfigurable

    from autograder.nbgrader_bridge import SandboxedExecute, _run_by_command_line

    root = NbGraderApp()
    command = AutogradeApp(parent=root)
    assert _run_by_command_line(SandboxedExecute(parent=Autograde(parent=command)))
    formgrader_api = LoggingConfigurable()          # what formgrader's NbGraderAPI is to its converters
    assert not _run_by_command_line(SandboxedExecute(parent=Autograde(parent=formgrader_api)))
