"""nbgrader's own tests of the commands the kit's plugins touch (autograde, generate_assignment, generate_feedback,
export, validate, release_feedback), shipped inside the installed nbgrader, pass with the kit's configuration
loaded for every course they make: the kit's plugins leave every assignment that is not the kit's as stock
nbgrader leaves it.

The kit's `assignments/nbgrader_config.py`, unchanged, is put in a Jupyter configuration folder named by
JUPYTER_CONFIG_PATH, where a hub puts its hub-wide configuration: every nbgrader command of every test loads it
before the test's own course configuration. A small pytest plugin in the same run records which of the kit's
modules were imported, so that a run where the configuration did not take effect cannot pass.

nbgrader's tests start a kernel for almost every notebook they grade: 24 minutes of wall time (4.4 of CPU) on 2
cores shared with other test runs, so it runs in a tier of its own, `make test-nbgrader` (docs/development.md):
pyproject.toml leaves its mark out of every other run.
"""

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import nbgrader
import pytest

from autograder.course import kit

pytestmark = pytest.mark.nbgrader_upstream

MODULES = [
    "test_nbgrader_autograde",
    "test_nbgrader_generate_assignment",
    "test_nbgrader_generate_feedback",
    "test_nbgrader_export",
    "test_nbgrader_validate",
    "test_nbgrader_releasefeedback",
]
# nbgrader's tests of these commands that do not pass here even without the kit's configuration, and why: none
# (116 pass without it). The two below nbgrader itself skips everywhere ("takes too long", "a LOT of memory").
NOT_HERE: dict[str, str] = {}
SKIPPED_BY_NBGRADER = {"TestNbGraderAutograde.test_many_students", "TestNbGraderAutograde.test_infinite_loop_with_output"}
PASSING = 116  # of nbgrader 0.9.6's tests in MODULES
USED = {  # a module of the kit each command imports only through the course configuration
    "autograder.frontends.nbgrader.plugins": "the configuration itself (release and sanitizing plugins)",
    "autograder.frontends.nbgrader.preflight": "Autograde.exporter_class",
    "autograder.frontends.nbgrader.bridge": "Autograde.autograde_preprocessors (SandboxedExecute)",
    "autograder.frontends.nbgrader.feedback": "GenerateFeedback.exporter_class, ExchangeFactory.release_feedback",
    "autograder.frontends.nbgrader.export": "ExportApp.plugin_class",
}
WITNESS = '''
import json, os, sys


def pytest_sessionfinish(session):
    with open(os.environ["KIT_WITNESS"], "w") as handle:
        json.dump(sorted(name for name in sys.modules if name.startswith("autograder.")), handle)
'''


def test_nbgraders_own_tests_pass_with_the_kits_configuration(tmp_path):
    assert nbgrader.__version__ == "0.9.6", "the counts below are nbgrader 0.9.6's"
    hub = tmp_path / "etc-jupyter"
    hub.mkdir()
    shutil.copy(kit.COURSE_DIR / "nbgrader_config.py", hub / "nbgrader_config.py")
    (tmp_path / "kit_witness.py").write_text(WITNESS)
    env = {
        **os.environ,
        "JUPYTER_CONFIG_PATH": str(hub),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "user-jupyter"),  # nobody's own configuration
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",  # nbgrader runs `alembic`
        "PYTHONPATH": str(tmp_path),
        "KIT_WITNESS": str(tmp_path / "witness.json"),
    }
    deselect = [f"--deselect=nbgrader/tests/apps/{name.replace('.', '.py::', 1)}" for name in NOT_HERE]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "kit_witness", "-q", "-rfEs",
         f"--junitxml={tmp_path / 'report.xml'}", *deselect,
         "--pyargs", *[f"nbgrader.tests.apps.{module}" for module in MODULES]],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    cases = ElementTree.parse(tmp_path / "report.xml").getroot().iter("testcase")
    outcome = {}
    for case in cases:
        name = f"{case.get('classname').rsplit('.', 1)[-1]}.{case.get('name')}"
        found = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        outcome[name] = found[0] if found else "passed"
    failed = {name: state for name, state in outcome.items() if state in ("failure", "error")}
    assert not failed, f"{failed}\n{done.stdout[-6000:]}"
    assert {name for name, state in outcome.items() if state == "skipped"} == SKIPPED_BY_NBGRADER
    assert sum(state == "passed" for state in outcome.values()) == PASSING - len(NOT_HERE), done.stdout[-3000:]
    imported = set(json.loads((tmp_path / "witness.json").read_text()))
    assert {name: why for name, why in USED.items() if name not in imported} == {}  # the configuration took effect
    assert done.returncode == 0, done.stdout[-3000:]
