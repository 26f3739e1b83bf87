"""A server for one submission (`grade`, Gradescope) skips the warm-up that runs every question once before the
first job: its child then loads what torch loads lazily itself, under the child's confinement. Whatever it
grades, in every isolation layer, it must give the very result a warmed server gives, part by part and fact by
fact, and every child after the first as well."""

from pathlib import Path

import pytest

from autograder.course import kit
from autograder.engine.rubric import TOTAL_POINTS
from autograder.grading.submission import grade_file
from autograder.sandbox.parent.client import SandboxServer
from layers import LAYERS, layer_available

pytestmark = pytest.mark.slow
SAMPLES = ("ada_correct", "ben_post_ln", "dev_dropout_on_sum")


def _verdict(result) -> dict:
    """Everything a result says (not how it was run: no layer or time)."""
    return {key: value for key, value in result.to_dict().items() if key not in ("isolation", "execution_time")}


@pytest.mark.parametrize("layer", list(LAYERS))
def test_a_server_that_skips_its_warm_up_grades_as_a_warmed_one(layer, seed):
    why = layer_available(layer)
    if why:
        pytest.skip(f"layer '{layer}' not available: {why}")
    paths = [kit.ROOT / "assignments" / "sample_class" / name / kit.KIT.name / kit.KIT.notebook_name for name in SAMPLES]
    verdicts = {}
    for warm in (False, True):
        with SandboxServer(**LAYERS[layer], warm_up=warm) as server:
            results = [grade_file(Path(p), server, seed=seed) for p in paths]
            verdicts[warm] = [(r.score, _verdict(r)) for r in results]
            assert server.layers, "the server said which layers it set up"
    cold, warmed = verdicts[False], verdicts[True]
    assert warmed[0][0] == TOTAL_POINTS and all(score < TOTAL_POINTS for score, _ in warmed[1:])
    for name, (_, one), (_, other) in zip(SAMPLES, cold, warmed):
        assert not one["grader_errors"], (name, one["grader_errors"])
        assert one == other, name
