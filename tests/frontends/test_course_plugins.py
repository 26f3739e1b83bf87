"""The kit's nbgrader plugins, piece by piece (fast): which assignments are the kit's, the course configuration's
pipelines, what a check cell says, the points a course gives, and which students grade-class takes from a
course's submitted/ folder."""

import json
import re
import shutil

import nbformat
import pytest
from traitlets.config import Config, PyFileConfigLoader

from autograder.course import kit
from autograder.engine.results import CheckResult, SubmissionResult, SubTest
from autograder.frontends.discovery import discover
from autograder.frontends.nbgrader.plugins import KIT_KEY, TaskStubs, TellingOverwriteCells, WithoutScoreOutputs, kit_source
from nbgrader_course import ORDINARY, make_course

pytestmark = pytest.mark.quick  # in `make test-quick`: this wing's fast tier


def test_kit_assignments_are_recognised_by_their_source_not_their_name(tmp_path):
    course = make_course(tmp_path / "course")
    shutil.copytree(course / "source" / kit.KIT.name, course / "source" / "week5")
    (course / "source" / "week5" / kit.KIT.notebook_name).rename(course / "source" / "week5" / "block.ipynb")
    config = Config()
    config.CourseDirectory.root = str(course)
    plugin = TellingOverwriteCells(config=config)
    found = lambda assignment, notebook: kit_source(plugin, {"nbgrader": {"assignment": assignment, "notebook": notebook}})
    assert found(kit.KIT.name, kit.KIT.notebook_id) == (course / "source" / kit.KIT.name / kit.KIT.notebook_name)
    assert found("week5", "block") is not None
    assert found(ORDINARY, ORDINARY) is None
    assert found("no_such_assignment", "x") is None


def _course_config() -> Config:
    return PyFileConfigLoader("nbgrader_config.py", path=str(kit.COURSE_DIR)).load_config()


def test_the_course_pipelines_are_nbgraders_with_the_kits_classes_swapped_in():
    from nbgrader.converters import Autograde, GenerateAssignment

    config = _course_config()

    def name(c):
        return c if isinstance(c, str) else f"{c.__module__}.{c.__name__}"

    def changes(converter, trait, configured):
        stock = [name(c) for c in converter.class_traits()[trait].default()]
        return [(s, c) for s, c in zip(stock + [None] * len(configured), [name(c) for c in configured]) if s != c]

    assert changes(GenerateAssignment, "preprocessors", config.GenerateAssignment.preprocessors) == [
        ("nbgrader.preprocessors.clearsolutions.ClearSolutions", "autograder.frontends.nbgrader.plugins.TaskStubs")
    ]
    assert changes(Autograde, "sanitize_preprocessors", config.Autograde.sanitize_preprocessors) == [
        ("nbgrader.preprocessors.overwritecells.OverwriteCells", "autograder.frontends.nbgrader.plugins.TellingOverwriteCells")
    ]
    autograde = [name(c) for c in config.Autograde.autograde_preprocessors]
    stock = [name(c) for c in Autograde.class_traits()["autograde_preprocessors"].default()]
    saved = stock.index("nbgrader.preprocessors.saveautogrades.SaveAutoGrades")
    assert (
        autograde
        == [
            ("autograder.frontends.nbgrader.bridge.SandboxedExecute" if c.endswith(".Execute") else c) for c in stock[: saved + 1]
        ]
        + ["autograder.frontends.nbgrader.plugins.WithoutScoreOutputs"]
        + stock[saved + 1 :]
    )
    assert "preprocessors" not in config.GenerateFeedback  # nbgrader's own
    assert config.HTMLExporter.preprocessors == ["autograder.frontends.nbgrader.feedback.FormgraderStanding"]
    assert config.GenerateFeedback.exporter_class == "autograder.frontends.nbgrader.feedback.KitFeedbackPage"
    assert config.Autograde.exporter_class == "autograder.frontends.nbgrader.preflight.KitPreflight"
    assert config.ExchangeFactory.release_feedback == "autograder.frontends.nbgrader.feedback.KitReleaseFeedback"
    assert "course_id" not in config.CourseDirectory  # a hub-wide course id stays in force
    assert "KitSandbox" not in config  # refusing where nothing isolates is the default


def test_kit_plugins_leave_other_assignments_alone(tmp_path):
    course = make_course(tmp_path / "course")
    config = Config()
    config.CourseDirectory.root = str(course)
    ordinary = nbformat.read(course / "source" / ORDINARY / f"{ORDINARY}.ipynb", as_version=4)
    ordinary.cells[2].outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": "1"}, execution_count=1)]
    resources = {"nbgrader": {"assignment": ORDINARY, "notebook": ORDINARY}}
    before = nbformat.writes(ordinary)
    WithoutScoreOutputs(config=config).preprocess(ordinary, resources)
    assert nbformat.writes(ordinary) == before  # a partial-credit number nbgrader shows as is
    stubs = TaskStubs(config=config)
    stubs.preprocess(ordinary, resources)
    assert "NotImplementedError()" in ordinary.cells[1].source and "Task" not in ordinary.cells[1].source


def _result(message: str, passed: bool) -> SubmissionResult:
    check = CheckResult(
        "forward_order",
        "Operation order (Pre-LN)",
        (SubTest("output matches a Pre-LN block", 4.0 if passed else 0.0, 4.0, passed, message),),
        message,
    )
    return SubmissionResult(
        "layernorm.ipynb",
        (check,),
        7,
        "cpu",
        "test",
        0.1,
        first_divergence=None if passed else "Step 2 of 10 (normalize with norm1): " + "x " * 200,
    )


def test_a_check_cell_wraps_long_lines_and_names_no_points():
    from autograder.frontends.nbgrader.annotate import WIDTH, annotate, check_text

    long = "Your block's output differs from a Pre-LN block's. " * 10
    result = _result(long, False)
    failed = check_text(result.checks[0], result)
    assert max(len(line) for line in failed.splitlines()) <= WIDTH
    assert " ".join(failed.split()).count("Your block's output differs") == 10 and "Step 2 of 10" in failed
    assert not re.search(r"\d+(\.\d+)? ?/ ?4|worth|points?\b", failed)
    result = _result("All parts passed.", True)
    passed = check_text(result.checks[0], result)
    assert "[x] output matches a Pre-LN block" in passed and "4 / 4" not in passed
    # in the notebook: the findings as HTML and text, the points only as the number nbgrader reads, which goes
    # once read; the whole result in the notebook's metadata, with the version of the source graded against
    notebook = nbformat.read(kit.SOURCE_NOTEBOOK, as_version=4)
    annotate(notebook, result)
    (cell,) = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "check_forward_order"]
    assert [o.output_type for o in cell.outputs] == ["display_data", "execute_result"]
    assert "output matches a Pre-LN block" in cell.outputs[0].data["text/html"]
    assert cell.outputs[1].data["text/plain"] == "4"
    WithoutScoreOutputs().preprocess(notebook, {})
    assert [o.output_type for o in cell.outputs] == ["display_data"]
    assert notebook.metadata[KIT_KEY]["source"] == kit.KIT.key
    assert notebook.metadata[KIT_KEY]["result"]["checks"][0]["subtests"][0]["points"] == 4.0


def test_grade_class_takes_from_a_course_only_the_students_who_submitted_this_assignment(tmp_path):
    submitted = tmp_path / "submitted"
    for student, assignment in (("ada", kit.KIT.name), ("dee", ORDINARY), ("eve", kit.KIT.name)):
        (submitted / student / assignment).mkdir(parents=True)
        (submitted / student / assignment / f"{assignment}.ipynb").write_text("{}")
    assert [s.student for s in discover(submitted)] == ["ada", "eve"]
    plain = tmp_path / "plain"
    (plain / "dee").mkdir(parents=True)
    (plain / "dee" / "hw.ipynb").write_text("{}")
    assert [s.student for s in discover(plain)] == ["dee"]  # outside nbgrader's layout: any notebook


def test_one_sandbox_server_serves_a_whole_autograde_command_and_one_per_formgrader_request():
    """`nbgrader autograde` runs an AutogradeApp under the NbGraderApp at the root: the executor must see it
    there and share one server across the command's notebooks; formgrader's API has no such app above it."""
    from nbgrader.apps.autogradeapp import AutogradeApp
    from nbgrader.apps.nbgraderapp import NbGraderApp
    from nbgrader.converters import Autograde
    from traitlets.config import LoggingConfigurable

    from autograder.frontends.nbgrader.bridge import SandboxedExecute, _run_by_command_line

    root = NbGraderApp()
    command = AutogradeApp(parent=root)
    assert _run_by_command_line(SandboxedExecute(parent=Autograde(parent=command)))
    formgrader_api = LoggingConfigurable()  # what formgrader's NbGraderAPI is to its converters
    assert not _run_by_command_line(SandboxedExecute(parent=Autograde(parent=formgrader_api)))


def _manage_assignments_page(course, monkeypatch, caplog, config_text=None) -> str:
    """Formgrader's Manage Assignments page as its handler draws it, in the course folder: the configuration it
    shows (formgrader's `debug`, on by default, serializes the whole configuration for it)."""
    import logging
    from types import SimpleNamespace

    from nbgrader.server_extensions.formgrader.formgrader import FormgradeExtension
    from nbgrader.server_extensions.formgrader.handlers import ManageAssignmentsHandler

    if config_text is not None:
        (course / "nbgrader_config.py").write_text(config_text)
    monkeypatch.chdir(course)
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(course / "no-user-config"))
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", str(course / "no-hub-config"))
    formgrader = FormgradeExtension()
    formgrader.initialize([])
    assert formgrader.debug
    shown = {}
    page = SimpleNamespace(
        settings={"nbgrader_formgrader": formgrader},
        log=logging.getLogger("formgrader-test"),
        api=SimpleNamespace(course_id="dl101", exchange_root="", exchange_missing=False, timezone="UTC"),
        url_prefix="",
        base_url="/",
        render=lambda template, **values: shown.update(values) or "",
        write=lambda html: None,
    )
    get = ManageAssignmentsHandler.get
    while hasattr(get, "__wrapped__"):  # past tornado's login check and nbgrader's set-up checks
        get = get.__wrapped__
    with caplog.at_level(logging.WARNING, logger="formgrader-test"):
        get(page)
    return shown["current_config"]


def test_formgrader_shows_the_course_configuration_without_a_warning(tmp_path, monkeypatch, caplog):
    course = make_course(tmp_path / "course")
    shown = _manage_assignments_page(course, monkeypatch, caplog)
    assert "not serializable" not in caplog.text
    pipelines = json.loads(shown)
    assert "autograder.frontends.nbgrader.plugins.TaskStubs" in pipelines["GenerateAssignment"]["preprocessors"]
    assert pipelines["ExportApp"]["plugin_class"] == "autograder.frontends.nbgrader.export.PerCheckExport"
    # every name is a class nbconvert can import
    from traitlets.utils.importstring import import_item

    for trait in ("sanitize_preprocessors", "autograde_preprocessors"):
        assert all(isinstance(import_item(name), type) for name in pipelines["Autograde"][trait])


def test_formgrader_warns_where_a_configuration_holds_a_class(tmp_path, monkeypatch, caplog):
    """The check above can fail: a class in a pipeline, as the course configuration once had, is what it logs."""
    course = make_course(tmp_path / "course")
    with_a_class = (course / "nbgrader_config.py").read_text() + "\nc.GenerateAssignment.preprocessors = [TaskStubs]\n"
    _manage_assignments_page(course, monkeypatch, caplog, with_a_class)
    assert "Formgrader config is not serializable" in caplog.text
