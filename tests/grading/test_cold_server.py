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


def test_the_warm_up_never_runs_autograd_s_engine(monkeypatch):
    """On a machine with a GPU, autograd's engine starts a thread per GPU on its first backward pass (asking CUDA
    for the count), and torch then refuses every backward pass in a forked child and CUDA cannot start there: a
    server that ran one before forking lost every child's gradient checks, and could not grade on the GPU at all
    (seen on an H200). So the warm-up runs only the questions that need no backward pass. Both ways: the engine's
    entry point is watched, and a backward pass through it is seen."""
    import torch

    from autograder.engine.questions import job
    from autograder.engine.questions.probes import PROBES

    runs = []
    engine = torch.autograd._engine_run_backward
    monkeypatch.setattr(torch.autograd, "_engine_run_backward", lambda *a, **k: runs.append(a) or engine(*a, **k))
    job.ready(kit.KIT.public_code(), warm_up=True)
    assert runs == []
    assert set(job.BACKWARD_PROBES) < set(PROBES)  # the warm-up still runs the others
    leaf = torch.ones(2, requires_grad=True)
    (2 * leaf).sum().backward()
    assert len(runs) == 1 and leaf.grad.tolist() == [2.0, 2.0]
