"""A student's set-up, exactly as docs/students.md writes it: a fresh virtual environment made by its lines, in a
folder that holds only what students receive (the release). Made once per test session (the `student_folder`
fixture): tests/course/test_student_setup.py runs `run_tests.py` in it, and tests/frontends/test_install.py makes a
hub image of a copy of its environment (Jupyter and torch are there; nbgrader is added), so that torch and Jupyter
are installed once."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from autograder.course import kit

OPTIONAL = "pip install nbgrader"  # docs/students.md says this line is only for Validate; run_tests.py must not need it
ENV = "layernorm-env"  # the environment's folder, as the lines name it


def student_lines() -> list[str]:
    """The shell lines of the student set-up (docs/students.md), comments removed, the optional nbgrader line left
    out."""
    block = re.search(r"```bash\n(.*?)```", kit.documentation("students.md"), re.S).group(1)
    lines = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    lines = [line for line in lines if line]
    assert any(line.startswith(OPTIONAL) for line in lines), "docs/students.md no longer says how to get Validate"
    assert "only for Jupyter's Validate button; run_tests.py does not need it" in block
    assert any(line.startswith(f"python3 -m venv {ENV}") for line in lines), lines
    return [line for line in lines if not line.startswith(OPTIONAL)]


def make(folder: Path) -> tuple[Path, dict]:
    """The release's files in `folder` and the environment made there by the lines of docs/students.md; gives the
    folder and the environment the student's shell has (nothing of this test process's environment)."""
    shutil.copytree(kit.TEMPLATE_DIR, folder)
    assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in kit.TEMPLATE_DIR.iterdir())
    script = "set -e\n" + "\n".join(student_lines()) + "\npython -c 'import torch, numpy, matplotlib'\n"
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if "/.venv/" not in p + "/")
    # pip compiles no bytecode ahead ("0" is pip's spelling of --no-compile in its environment): the student's
    # Python writes it for the modules it imports, on the first run (compiling all of torch ahead was three quarters
    # of its install here, 36 s against 10 s); what is installed is the same
    env["PIP_NO_COMPILE"] = "0"
    made = subprocess.run(["bash", "-c", script], cwd=folder, env=env, capture_output=True, text=True, timeout=1800)
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    return folder, env


def copy_environment(folder: Path, target: Path) -> Path:
    """A copy of the student's environment at `target`, made of hard links (no data copied; pip replaces files, never
    writes into them), its commands pointed at the copy's Python. Gives the copy's Python."""
    source = folder / ENV
    if subprocess.run(["cp", "-al", str(source), str(target)], capture_output=True).returncode != 0:
        shutil.rmtree(target, ignore_errors=True)
        subprocess.run(["cp", "-a", str(source), str(target)], check=True)
    shebang = f"#!{source}/bin/".encode()
    for script in (target / "bin").iterdir():
        if script.is_symlink() or not script.is_file():
            continue
        text = script.read_bytes()
        if text.startswith(shebang):
            mode = script.stat().st_mode
            script.unlink()  # a hard link to the student's: replaced, never written
            script.write_bytes(f"#!{target}/bin/".encode() + text[len(shebang) :])
            script.chmod(mode)
    return target / "bin" / "python"
