"""The kit installs into an environment that already holds Jupyter, nbgrader and torch, as a hub image does (made
here of the students' environment, tests/student_env.py, with nbgrader added: torch and Jupyter installed once):
pyproject.toml gives compatible ranges, so pip changes nothing that is there but what the ranges bound (SQLAlchemy
below 2, whose SAWarnings nbgrader 0.9 sets off, and alembic with it; jsonschema below 4.25, whose import costs every
command seconds), and the kit is then importable there
(requirements.txt is the pinned set the demo and CI use). The whole pipeline on the newest releases within the
ranges, printing no SAWarning, is the hub test's (tests/frontends/test_exchange.py): its environment is installed
from the ranges alone, as the set-up of docs/deployment.md does, and every command of the course loop runs in it."""

import re
import subprocess
from pathlib import Path

import pytest

import student_env
from autograder.course import kit

pytestmark = pytest.mark.slow

# what pyproject.toml keeps below releases that misbehave with nbgrader 0.9 (SQLAlchemy, alembic) or cost every
# command seconds (jsonschema)
BOUNDED = {"sqlalchemy", "alembic", "jsonschema"}
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


def test_the_kit_installs_beside_newer_jupyter_and_nbgrader(student_folder, tmp_path):
    """The hub image: a copy of the session's student environment (docs/students.md's lines: torch's CPU wheel
    pinned, Jupyter), with the newest nbgrader and Jupyter added as an image's maker adds them."""
    python = student_env.copy_environment(student_folder[0], tmp_path / "hub-image")
    # no bytecode compiled ahead: root runs this environment, and writes it for the modules it imports (compiling all
    # of torch ahead was three quarters of its install here, 36 s against 10 s)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile"]
    subprocess.run([*pip, "--upgrade", "nbgrader", "jupyter"], check=True, timeout=1200)
    before = _freeze(python)
    assert _version(before["torch"]) == _version(PINS["torch"])  # the CPU wheel, as pinned
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

    imported = subprocess.run(  # from the environment (the kit's checkout through its editable install), not the folder
        [str(python), "-c", "import autograder.frontends.nbgrader.plugins as p, nbgrader, torch; print(p.__file__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert imported.returncode == 0 and imported.stdout.startswith(str(kit.ROOT)), imported.stderr
