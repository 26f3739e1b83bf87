"""The kit installs into an environment that already holds Jupyter, nbgrader and torch, as a hub image does:
pyproject.toml gives compatible ranges, so pip changes nothing that is there but what the ranges bound (SQLAlchemy
below 2, whose SAWarnings nbgrader 0.9 sets off, and alembic with it), and the whole pipeline runs on the newest
releases within them, printing no SAWarning (requirements.txt is the pinned set the demo and CI use). The hub test
(test_exchange.py) installs from the ranges alone, as the set-up of docs/deployment.md does."""

import csv
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.course import kit
from autograder.engine.rubric import TOTAL_POINTS, WRITTEN
from nbgrader_course import Shell, make_course, sample_submission

pytestmark = pytest.mark.slow

BOUNDED = {"sqlalchemy", "alembic"}  # what pyproject.toml keeps below releases that misbehave with nbgrader 0.9
PINS = dict(re.findall(r"^([\w-]+)==([\w.+]+)$", (kit.ROOT / "requirements.txt").read_text(), re.MULTILINE))


def _version(text: str) -> tuple:
    return tuple(int(part) for part in re.findall(r"\d+", text.split("+")[0])[:3])


def _freeze(python: Path) -> dict[str, str]:
    listed = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {name.lower().replace("_", "-"): version for name, version in re.findall(r"^([^=\s]+)==(\S+)$", listed, re.M)}


def test_the_kit_installs_beside_newer_jupyter_and_nbgrader_and_grades(tmp_path):
    env = tmp_path / "hub-image"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    python = env / "bin" / "python"
    # no bytecode compiled ahead: root runs this environment, and writes it for the modules it imports (compiling all
    # of torch ahead was three quarters of its install here, 36 s against 10 s)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile"]
    # the hub image: torch's CPU wheel (pinned: an unpinned torch is the CUDA build), the newest Jupyter and nbgrader
    subprocess.run([*pip, f"torch=={PINS['torch']}", "nbgrader", "jupyter"], check=True, timeout=1200)
    before = _freeze(python)
    newer = [
        name
        for name in ("sqlalchemy", "alembic", "ipykernel", "notebook", "jupyterlab")
        if name in before and name in PINS and _version(before[name]) > _version(PINS[name])
    ]
    assert newer, "the image should hold releases newer than the kit's pins, or this test shows nothing"
    subprocess.run([*pip, "-e", str(kit.ROOT)], check=True, timeout=1200)  # docs/deployment.md's line
    after = _freeze(python)
    changed = {name: (version, after.get(name)) for name, version in before.items() if after.get(name) != version}
    assert set(changed) <= BOUNDED, f"installing the kit changed what the image had: {changed}"
    assert _version(after["sqlalchemy"]) < (2,) and _version(after["alembic"]) < (1, 20), changed
    assert "layernorm-kit-autograder" in after

    course = make_course(tmp_path / "course", ordinary=False)
    shell = Shell({"AUTOGRADER_SEED": "3"}, python=python)
    shell("nbgrader", "generate_assignment", kit.KIT.name, cwd=course)
    for student in ("ada_correct", "ben_post_ln"):
        path = course / "submitted" / student / kit.KIT.name / kit.KIT.notebook_name
        path.parent.mkdir(parents=True)
        nbformat.write(sample_submission(student), path)
    said = [
        shell("nbgrader", command, *args, cwd=course)
        for command, *args in (("autograde", kit.KIT.name), ("generate_feedback", kit.KIT.name), ("export",))
    ]
    assert not [p.stderr for p in said if "SAWarning" in p.stderr + p.stdout or "Traceback" in p.stderr]
    with open(course / "grades.csv", newline="") as handle:
        exported = {row["student_id"]: float(row["score"]) for row in csv.DictReader(handle) if row["assignment"] == kit.KIT.name}
    total = TOTAL_POINTS + sum(WRITTEN.values())
    assert exported["ada_correct"] == TOTAL_POINTS and 0 < exported["ben_post_ln"] < TOTAL_POINTS
    for student, score in exported.items():
        page = (course / "feedback" / student / kit.KIT.name / f"{kit.KIT.notebook_id}.html").read_text()
        assert f'<span id="score">{score:g} / {total:g}</span>' in page
    graded = shell(
        "python",
        "-m",
        "autograder",
        "grade-class",
        "submitted",
        "--out",
        str(tmp_path / "out"),
        "--course",
        ".",
        "--seed",
        "3",
        cwd=course,
    )
    assert "mean score" in graded.stdout
    assert Path(tmp_path / "out" / "report.html").is_file()
