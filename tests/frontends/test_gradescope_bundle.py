"""The Gradescope bundle: built, laid out as Gradescope does (/autograder/source, submission, results), and
run on the solution, a wrong forward and an empty submission, with results.json checked against the fields
of Gradescope's autograder specification. setup.sh is only syntax-checked (its pip install needs network)."""

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from autograder.course import kit
from autograder.engine.rubric import RUBRIC, TOTAL_POINTS, WRITTEN
from autograder.frontends.gradescope.bundle import NO_SUBMISSION, build_bundle
from catalog.build import submission
from catalog.wrong_forwards import WRONG

VISIBILITIES = {"hidden", "after_due_date", "after_published", "visible"}
SCRIPTS = ("setup.sh", "run_autograder")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return build_bundle(tmp_path_factory.mktemp("bundle") / "autograder.zip")


def _unpack(bundle: Path, source: Path) -> None:
    """As Gradescope does: unzip keeps the permission bits stored in the zip."""
    source.mkdir(parents=True)
    if shutil.which("unzip"):
        subprocess.run(["unzip", "-q", str(bundle), "-d", str(source)], check=True)
        return
    with zipfile.ZipFile(bundle) as archive:
        for info in archive.infolist():
            target = Path(archive.extract(info, source))
            if info.external_attr >> 16:
                target.chmod((info.external_attr >> 16) & 0o777)


@pytest.fixture
def gradescope(bundle, tmp_path):
    """A fresh /autograder layout in tmp; returns run(files) -> (completed process, results dict or None)."""
    root = tmp_path / "autograder"
    _unpack(bundle, root / "source")
    (root / "submission").mkdir()

    def run(files: dict[str, str | Path], env_extra: dict | None = None):
        for name, content in files.items():
            target = root / "submission" / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, Path):
                shutil.copy(content, target)
            else:
                target.write_text(content)
        env = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable, **(env_extra or {})}
        env.pop("PYTHONPATH", None)
        done = subprocess.run(
            [str(root / "source" / "run_autograder")], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600
        )
        results = root / "results" / "results.json"
        return done, (json.loads(results.read_text()) if results.is_file() else None)

    run.root = root
    return run


def _validate(results: dict, total: float = TOTAL_POINTS) -> None:
    """The fields Gradescope reads, with the types its specification gives; one test per check, one per written
    answer (awaiting the instructor), and the score line printed is the standing's."""
    assert isinstance(results["score"], (int, float)) and not isinstance(results["score"], bool)
    assert isinstance(results["execution_time"], (int, float))
    assert isinstance(results["output"], str) and results["output"]
    assert results.get("visibility", "visible") in VISIBILITIES
    assert results.get("stdout_visibility", "hidden") in VISIBILITIES
    assert isinstance(results["tests"], list)
    checks = [t for t in results["tests"] if "written" not in t["extra_data"]]
    written = [t for t in results["tests"] if "written" in t["extra_data"]]
    assert [t["tags"][0] for t in checks] == list(RUBRIC) and [t["tags"][0] for t in written] == list(WRITTEN)
    for test in results["tests"]:
        assert isinstance(test["name"], str) and test["name"]
        for key in ("score", "max_score"):
            assert isinstance(test[key], (int, float)) and not isinstance(test[key], bool), test
        assert 0 <= test["score"] <= test["max_score"]
        assert isinstance(test["output"], str)
        assert test["visibility"] in VISIBILITIES
    for test in checks:
        assert test["status"] in {"passed", "failed"}
        assert (test["status"] == "passed") == (test["score"] == test["max_score"])
    assert all(t["score"] == 0 and t["output"] == "awaiting your instructor" and "status" not in t for t in written)
    assert sum(t["max_score"] for t in checks) == pytest.approx(total)
    assert results["score"] == pytest.approx(sum(t["score"] for t in results["tests"]))
    full = total + sum(WRITTEN.values())
    assert results["output"].startswith(f"Score: {results['score']:g} / {full:g} (")
    hidden_until_published = {t["tags"][0] for t in checks if t["visibility"] == "after_published"}
    assert hidden_until_published == {name for name, spec in RUBRIC.items() if spec.visibility == "after_published"}
    json.dumps(results, allow_nan=False)  # Gradescope's parser takes no NaN or Infinity


def test_bundle_layout(bundle, tmp_path):
    with zipfile.ZipFile(bundle) as archive:
        infos = {info.filename: info for info in archive.infolist()}
    names = set(infos)
    for script in SCRIPTS:
        assert script in names, f"{script} must be at the zip's root"
        assert (infos[script].external_attr >> 16) & 0o111 == 0o111, f"{script} is not executable in the zip"
    source_notebook = kit.SOURCE_NOTEBOOK.relative_to(kit.ROOT).as_posix()
    assert {
        "requirements.txt",
        "pyproject.toml",
        source_notebook,
        "autograder/__init__.py",
        "autograder/sandbox/inside/server.py",
        "autograder/frontends/gradescope/bundle.py",
        "assignment.txt",
    } <= names
    with zipfile.ZipFile(bundle) as archive:
        assert archive.read("assignment.txt").decode() == source_notebook
    assert [n for n in names if n.endswith(".ipynb")] == [source_notebook]
    for forbidden in ("student_template/", "tests/", "solutions/", "assignments/sample_class/", ".venv/"):
        assert not [n for n in names if n.startswith(forbidden)], forbidden
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".egg-info"))]
    assert not [n for n in names if n.endswith("/")], "no directory entries needed"

    root = tmp_path / "autograder"
    _unpack(bundle, root / "source")
    for script in SCRIPTS:
        path = root / "source" / script
        assert path.stat().st_mode & stat.S_IXUSR, f"{script} lost its executable bit when unzipped"
        assert path.read_text().startswith("#!/usr/bin/env bash\n")
        subprocess.run(["bash", "-n", str(path)], check=True)
    # the unpacked folder is the kit's root: the grader finds its source notebook there
    found = subprocess.run(
        [sys.executable, "-c", "import autograder.course.kit as k; print(k.ROOT); print(k.SOURCE_NOTEBOOK.is_file())"],
        cwd=root / "source",
        env={**os.environ, "PYTHONPATH": str(root / "source")},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert found == [str(root / "source"), "True"]


def test_bundle_is_reproducible(bundle, tmp_path):
    assert build_bundle(tmp_path / "again.zip").read_bytes() == bundle.read_bytes()


def test_cli_writes_the_bundle(tmp_path):
    from click.testing import CliRunner

    from autograder.frontends.cli import main

    out = tmp_path / "gs.zip"
    result = CliRunner().invoke(main, ["gradescope-bundle", str(out)])
    assert result.exit_code == 0, result.output
    assert zipfile.is_zipfile(out) and {"setup.sh", "run_autograder"} <= set(zipfile.ZipFile(out).namelist())


@pytest.mark.slow  # a real grading through the bundle's own scripts
def test_solution_gets_full_marks(gradescope):
    done, results = gradescope({kit.KIT.notebook_name: kit.SOLUTIONS_DIR / kit.KIT.notebook_name})
    assert done.returncode == 0, done.stdout + done.stderr
    assert results is not None, done.stdout + done.stderr
    _validate(results)
    assert results["score"] == TOTAL_POINTS, [(t["name"], t["output"]) for t in results["tests"] if t["score"] < t["max_score"]]
    assert all(t["status"] == "passed" for t in results["tests"] if "written" not in t["extra_data"])
    assert results["output"].splitlines()[0] in done.stdout  # what it prints is what results.json says
    assert results["extra_data"]["submission"] == kit.KIT.notebook_name


@pytest.mark.slow  # a real grading through the bundle's own scripts
def test_wrong_forward_loses_points(gradescope):
    wrong = next(w for w in WRONG if w.name == "post_ln")
    # a .py in a sub-folder, under another name: still found and graded
    done, results = gradescope({"work/my_block.py": submission(forward=wrong.forward)})
    assert done.returncode == 0, done.stdout + done.stderr
    _validate(results)
    assert results["score"] < TOTAL_POINTS
    by_check = {t["tags"][0]: t for t in results["tests"]}
    assert by_check[wrong.check]["status"] == "failed"
    assert wrong.phrase in by_check[wrong.check]["output"] + results["output"]
    assert by_check["compounding"]["status"] == "passed"
    assert results["extra_data"]["submission"] == "my_block.py"


@pytest.mark.slow  # a real grading through the bundle's own scripts
def test_empty_submission_scores_zero_with_a_message(gradescope):
    done, results = gradescope({"README.txt": "I forgot to attach my notebook"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert results is not None, done.stdout + done.stderr
    _validate(results)
    assert results["score"] == 0
    assert NO_SUBMISSION in results["output"]
    assert all(
        t["status"] == "failed" and NO_SUBMISSION in t["output"] for t in results["tests"] if "written" not in t["extra_data"]
    )


@pytest.fixture(scope="module")
def course_bundle(tmp_path_factory):
    """A course's renamed copy of the assignment, with points of its own, bundled by the command line."""
    import nbformat
    from click.testing import CliRunner

    from autograder.frontends.cli import main

    course = tmp_path_factory.mktemp("course") / "course"
    source = nbformat.read(kit.SOURCE_NOTEBOOK, as_version=4)
    for cell in source.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "check_forward_order":
            cell.metadata.nbgrader.points = 10
    (course / "source" / "transformer_hw").mkdir(parents=True)
    nbformat.write(source, course / "source" / "transformer_hw" / "block.ipynb")
    shutil.copy(kit.COURSE_DIR / "nbgrader_config.py", course / "nbgrader_config.py")
    out = course.parent / "course-autograder.zip"
    made = CliRunner().invoke(main, ["gradescope-bundle", str(out), "--course", str(course), "--assignment", "transformer_hw"])
    assert made.exit_code == 0, made.output
    assert "block.ipynb" in made.output and "30 points of checks" in made.output
    return out


def test_a_course_bundle_holds_the_courses_copy(course_bundle):
    with zipfile.ZipFile(course_bundle) as archive:
        names = set(archive.namelist())
        assert archive.read("assignment.txt").decode() == "assignments/source/transformer_hw/block.ipynb"
    assert "assignments/source/transformer_hw/block.ipynb" in names


@pytest.mark.slow  # a real grading through the bundle's own scripts
def test_a_course_bundle_grades_with_the_courses_points(course_bundle, tmp_path):
    root = tmp_path / "autograder"
    _unpack(course_bundle, root / "source")
    (root / "submission").mkdir()
    shutil.copy(kit.SOLUTIONS_DIR / kit.KIT.notebook_name, root / "submission" / "block.ipynb")
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [str(root / "source" / "run_autograder")], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    results = json.loads((root / "results" / "results.json").read_text())
    _validate(results, total=TOTAL_POINTS + 6)
    assert results["score"] == TOTAL_POINTS + 6, done.stdout + done.stderr
    assert {t["tags"][0]: t["max_score"] for t in results["tests"]}["forward_order"] == 10
    (root / "submission" / "block.ipynb").unlink()
    subprocess.run([str(root / "source" / "run_autograder")], env=env, cwd=tmp_path, capture_output=True, timeout=600)
    assert "upload your completed block.ipynb" in json.loads((root / "results" / "results.json").read_text())["output"]


def _hunting_template(root: Path) -> str:
    """A blank template that hunts for the solution in Gradescope's layout and, if it finds any, copies it."""
    from catalog.hostile import cell, template

    return template(
        cell(f"""
        import glob, json, os
        _found = []
        for _path in (glob.glob({str(root)!r} + "/**/*.ipynb", recursive=True) +
                      glob.glob({str(root)!r} + "/**/*.py", recursive=True)):
            try:
                with open(_path) as _handle:
                    _text = _handle.read()
            except OSError:
                continue
            if "BEGIN SOLUTION" in _text or "x = x + shortcut" in _text:
                _found.append(_path)
        if _found:
            def _copied(self, x):
                x = x + self.drop_shortcut(self.att(self.norm1(x)))
                return x + self.drop_shortcut(self.ff(self.norm2(x)))
            TransformerBlock.forward = _copied
            print("read", _found[:2])
        """)
    )


@pytest.mark.slow  # a real grading through the bundle's own scripts, without bubblewrap
@pytest.mark.skipif(os.geteuid() != 0, reason="Gradescope grades as root; a sandbox user of its own needs root")
@pytest.mark.parametrize(
    "namespaces, landlock",
    [("auto", "auto"), ("off", "auto"), ("off", "off")],
    ids=["namespaces", "permissions and Landlock", "permissions only"],
)
def test_a_solution_hunting_template_scores_zero_without_bubblewrap(gradescope, tmp_path, namespaces, landlock):
    """Laid out as on Gradescope, where bubblewrap often cannot start (and a Docker container may refuse
    namespaces, and Landlock, too): the source notebook with the solution lies in /autograder/source, yet a
    template that goes looking for it finds nothing it can read. With neither namespaces nor Landlock the kit
    grades there all the same (the container holds one submission: run_autograder says so with --alone), and
    the result names that layer."""
    nobwrap = tmp_path / "nobwrap"
    nobwrap.mkdir()
    (nobwrap / "bwrap").write_text("#!/bin/sh\nexit 1\n")
    (nobwrap / "bwrap").chmod(0o755)
    done, results = gradescope(
        {"hunt.py": _hunting_template(gradescope.root)},
        {
            "PATH": f"{nobwrap}{os.pathsep}{os.environ['PATH']}",
            "AUTOGRADER_NAMESPACES": namespaces,
            "AUTOGRADER_LANDLOCK": landlock,
        },
    )
    assert done.returncode == 0, done.stdout + done.stderr
    _validate(results)
    assert results["extra_data"]["submission"] == "hunt.py"  # graded, not refused as unreadable
    assert results["score"] == 0, [(t["name"], t["output"][:120]) for t in results["tests"] if t["score"]]
    assert "Task 1: write TransformerBlock.forward" in results["tests"][0]["output"]
    assert "bubblewrap" not in results["extra_data"]["isolation"]
    assert ("namespaces" in results["extra_data"]["isolation"]) == (namespaces == "auto")
    alone = results["extra_data"]["isolation"].startswith("permissions only, on a machine that holds this one submission")
    assert alone == (namespaces == landlock == "off") and not results["extra_data"]["isolation"].startswith("UNSAFE")


def test_results_json_is_strict_json_even_for_diverging_values(tmp_path):
    import dataclasses

    from autograder.frontends.gradescope.results import write_results
    from autograder.grading.submission import unreadable

    result = dataclasses.replace(
        unreadable("submission.py", "diverged", seed=1, device="cpu"), profile={"student": [float("nan"), float("inf"), 1.0]}
    )
    write_results(result, tmp_path / "results.json")

    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")

    json.loads((tmp_path / "results.json").read_text(), parse_constant=refuse)
