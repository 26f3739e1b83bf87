"""nbgrader's way in, fenced (`autograder.frontends.nbgrader.intake`): whatever a submitted file holds, nbgrader
goes on with a notebook its own schema and preprocessors take (nbgrader metadata whole or none, every string
writable), with the kit's notes, or with the released notebook marked unreadable; the kit's metadata in a
submitted file never survives."""

import json

import nbformat
import pytest
from hypothesis import HealthCheck, example, given, settings

from autograder.course import kit
from autograder.frontends.nbgrader.intake import marked, read_submitted
from autograder.frontends.nbgrader.plugins import KIT_KEY
from catalog.malformed import READ, SHAPES
from catalog.mutations import mutated

pytestmark = pytest.mark.quick  # in `make test-quick`: this wing's fast tier

RELEASE = kit.TEMPLATE_DIR / kit.KIT.notebook_name


def assert_nbgrader_takes(notebook) -> None:
    nbformat.validate(notebook)
    nbformat.writes(notebook).encode("utf-8")
    for cell in notebook.cells:
        nbgrader = cell.get("metadata", {}).get("nbgrader")
        if nbgrader is not None:
            assert isinstance(nbgrader, dict) and isinstance(nbgrader.get("grade_id", ""), str)
            if nbgrader.get("grade") or nbgrader.get("solution") or nbgrader.get("locked"):
                assert isinstance(nbgrader.get("grade_id"), str), nbgrader
        assert KIT_KEY not in cell.get("metadata", {})


@pytest.mark.slow  # the quick tier runs the others
@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
@given(case=mutated())
@example(
    case=(
        "a key nbformat knows, of another shape",
        b'{"cells": [], "metadata": {"kernelspec": null}, "nbformat": 4, "nbformat_minor": 5}',
    )
)
@example(
    case=(
        "a locked cell without a grade_id",
        json.dumps(
            {
                "cells": [
                    {
                        "cell_type": "code",
                        "metadata": {
                            "nbgrader": {"grade": False, "locked": True, "solution": False, "schema_version": 3, "g2rade_id": "x"}
                        },
                        "source": "1",
                        "outputs": [],
                        "execution_count": None,
                    }
                ],
                "metadata": {},
                "nbformat": 4,
                "nbformat_minor": 5,
            }
        ).encode(),
    )
)
def test_nbgrader_goes_on_with_a_notebook_it_takes_whatever_was_submitted(tmp_path_factory, case):
    done, data = case
    path = tmp_path_factory.mktemp("intake") / kit.KIT.notebook_name
    path.write_bytes(data)
    intake = read_submitted(path, RELEASE)
    assert_nbgrader_takes(intake.notebook)
    assert (intake.unreadable is None) or intake.unreadable.startswith("Your notebook could not be read"), done
    assert KIT_KEY not in intake.notebook.metadata


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_odd_shape_goes_on_marked(tmp_path, name):
    path = tmp_path / kit.KIT.notebook_name
    path.write_bytes(SHAPES[name].data)
    notebook = marked(read_submitted(path, RELEASE))
    assert_nbgrader_takes(notebook)
    record = notebook.metadata[KIT_KEY]
    if SHAPES[name].outcome == READ:
        assert "unreadable" not in record and SHAPES[name].phrase in " ".join(record["reading"])
    else:
        assert SHAPES[name].phrase in record["unreadable"] and len(notebook.cells) == len(
            nbformat.read(RELEASE, as_version=4).cells
        )


def test_the_kit_s_metadata_in_a_submitted_file_is_dropped(tmp_path):
    notebook = json.loads((kit.SOLUTIONS_DIR / kit.KIT.notebook_name).read_text())
    notebook["metadata"][KIT_KEY] = {"unreadable": "forged", "result": {"score": 24}}
    notebook["cells"][53]["metadata"][KIT_KEY] = {"remark": "forged remark"}
    path = tmp_path / kit.KIT.notebook_name
    path.write_text(json.dumps(notebook))
    intake = read_submitted(path, RELEASE)
    assert intake.unreadable is None and "forged" not in nbformat.writes(intake.notebook)
    assert marked(intake).metadata[KIT_KEY] == {"reading": []}


def test_a_tag_written_twice_is_read_once_and_nbgrader_takes_the_notebook(tmp_path):
    """Found by the property above (a cell tagged ['experiment', 'experiment']): nbformat's schema takes no
    repeated tag, so the intake reads each tag once and says so."""
    notebook = json.loads((kit.SOLUTIONS_DIR / kit.KIT.notebook_name).read_text())
    code = next(c for c in notebook["cells"] if c["cell_type"] == "code")
    code["metadata"]["tags"] = ["experiment", "experiment", "other", "experiment"]
    path = tmp_path / kit.KIT.notebook_name
    path.write_text(json.dumps(notebook))
    intake = read_submitted(path, RELEASE)
    assert_nbgrader_takes(intake.notebook)
    tags = [c.metadata.get("tags") for c in intake.notebook.cells if c.cell_type == "code"][0]
    assert tags == ["experiment", "other"]
    assert any("more than once" in note for note in intake.notes), intake.notes


def test_a_metadata_key_of_a_shape_nbformat_refuses_goes_and_the_rest_stays(tmp_path):
    notebook = json.loads((kit.SOLUTIONS_DIR / kit.KIT.notebook_name).read_text())
    notebook["metadata"].update(kernelspec=None, course="layernorm")
    code = next(c for c in notebook["cells"] if c["cell_type"] == "code")
    code["metadata"].update(collapsed="yes", jupyter=5, note="kept")
    path = tmp_path / kit.KIT.notebook_name
    path.write_text(json.dumps(notebook))
    intake = read_submitted(path, RELEASE)
    assert_nbgrader_takes(intake.notebook)
    assert dict(intake.notebook.metadata) == {"course": "layernorm"}
    kept = next(c for c in intake.notebook.cells if c.cell_type == "code").metadata
    assert kept["note"] == "kept" and "collapsed" not in kept and "jupyter" not in kept
    assert kept["nbgrader"] == code["metadata"]["nbgrader"]
