"""A failure of the grader itself is the grader's: it shows as such to the instructor (results, stderr, the
class's grades.csv), costs the student no point silently, and never stops the other checks or students."""

import csv
import json

import pytest

import graded
from autograder.engine.checks import prenorm
from autograder.engine.rubric import RUBRIC, TOTAL_POINTS
from autograder.frontends.classgrade import grade_class
from autograder.frontends.gradescope.results import results_json
from autograder.grading import evaluation
from autograder.grading.options import GradingOptions
from catalog.build import submission
from tiers import quick_sample

pytestmark = pytest.mark.quick  # in `make test-quick`: this wing's fast tier


@pytest.fixture
def broken_check(monkeypatch):
    def crash(evidence):
        raise ValueError("an observation of a shape the check never expected")

    monkeypatch.setattr(prenorm, "evaluate", crash)


def test_a_check_that_crashes_is_a_grader_error_not_a_lost_point(broken_check, seed, capsys):
    result = graded.grade_fresh(submission(), seed)  # the checks run in the grader's process, sandbox or not
    checks = {c.check: c for c in result.checks}
    crashed = checks["forward_prenorm"]
    assert crashed.grader_error and "ValueError" in crashed.grader_error
    assert all("grader itself failed" in s.message for s in crashed.subtests)
    assert all(checks[name].passed for name in RUBRIC if name != "forward_prenorm")  # the rest still graded
    assert result.score == TOTAL_POINTS - RUBRIC["forward_prenorm"].points
    data = results_json(result)
    assert data["extra_data"]["grader_errors"] and "forward_prenorm" in data["extra_data"]["grader_errors"][0]
    assert next(t for t in data["tests"] if t["tags"] == ["forward_prenorm"])["extra_data"]["grader_error"]
    assert "grader error" in capsys.readouterr().err


def test_a_grader_failure_of_a_whole_submission_is_a_result(monkeypatch, seed):
    monkeypatch.setattr(evaluation, "evaluate", lambda *a, **k: 1 / 0)
    result = graded.grade_fresh(submission(), seed)
    assert result.score == 0 and result.grader_errors and "ZeroDivisionError" in result.grader_errors[0]
    assert all("grader itself failed" in c.message for c in result.checks)


@pytest.mark.slow
def test_grade_class_lists_grader_errors_per_student(broken_check, tmp_path):
    root = tmp_path / "class"
    root.mkdir()
    (root / "ana.py").write_text(submission())
    rows = grade_class(root, tmp_path / "out", options=GradingOptions(seed=5), workers=1, progress=False)
    assert "forward_prenorm" in rows[0]["grader_errors"]
    with open(tmp_path / "out" / "grades.csv") as handle:
        table = list(csv.DictReader(handle))
    assert "ValueError" in table[0]["grader_errors"]
    assert json.loads((tmp_path / "out" / "ana" / "results.json").read_text())["extra_data"]["grader_errors"]


@pytest.mark.parametrize("probe", quick_sample(["train", "eval_other", "respond", "robust_double", "profile"], every=2))
def test_an_answer_the_grader_cannot_read_costs_only_the_parts_that_need_it(probe):
    """The solution's own answers, with one of them replaced by an encoder failure (what an answer the grader's
    encoder chokes on becomes): the parts resting on it are grader errors, no other part and never Task 2 loses."""
    from autograder.course import kit
    from autograder.engine.questions.cells import load_cells
    from autograder.engine.questions.plan import Plan
    from autograder.engine.questions.probes import Probing, run_probe
    from autograder.grading.evaluation import ALL_PROBES, evaluate
    from autograder.sandbox.inside.protocol import encode_observation

    namespace, errors = load_cells(kit.KIT.reference_code())
    assert not errors
    plan = Plan.draw(4321)
    public, _ = load_cells(kit.KIT.public_code())
    probing = Probing(namespace, public, plan)
    raw = {"observations": {p: encode_observation(run_probe(p, probing)) for p in ALL_PROBES}}
    raw["observations"][probe] = {
        "ok": False,
        "error": {"type": "EncoderError", "where": None, "message": "the grader could not encode this answer"},
    }
    found = evaluate(raw, plan)
    lost = [(c.check, s.name) for c in found.checks for s in c.subtests if not s.passed]
    assert all("grader itself failed" in s.message for c in found.checks for s in c.subtests if not s.passed)
    assert all(check != "compounding" for check, _ in lost)
    assert any(probe in error for error in found.grader_errors)
    if probe in ("train", "robust_double", "profile"):
        assert lost, "an answer a part needs was missing, yet every part passed"


def test_a_reference_that_fails_in_the_background_is_a_grader_failure_of_the_result(monkeypatch, tmp_path, capsys):
    """`grade` computes the reference's answers while the child answers; when they cannot be computed, the result
    says so as the grader's failure, and nothing is printed as a traceback from the thread that tried first."""
    from autograder.grading import reference
    from autograder.grading.single import grade_one

    tried = []

    def broken(*args):
        tried.append(args)
        raise RuntimeError("the reference solution failed to load: a broken source")

    monkeypatch.setattr(reference, "_reference", broken)
    path = tmp_path / "submission.py"
    path.write_text(submission())
    result = grade_one(path, options=GradingOptions(seed=5, device="cpu"))
    assert result.score == 0 and result.grader_errors and "a broken source" in result.grader_errors[0]
    assert all("grader itself failed" in c.message for c in result.checks)
    assert len(tried) == 2  # in the background, then where the answers are needed: that one is reported
    assert "Traceback" not in capsys.readouterr().err


def test_the_reference_is_computed_once_however_many_threads_ask(monkeypatch):
    import threading
    import time

    from autograder.grading import reference

    calls = []

    def slow(seed, device, assignment):
        calls.append(seed)
        time.sleep(0.2)
        return ("answers", seed)

    cached = reference.functools.lru_cache(maxsize=16)(slow)
    monkeypatch.setattr(reference, "_reference", cached)
    seen = []
    askers = [threading.Thread(target=lambda: seen.append(reference.reference(3, "cpu", None))) for _ in range(4)]
    with reference.reference_meanwhile(3, "cpu", None):
        for thread in askers:
            thread.start()
        for thread in askers:
            thread.join()
    assert calls == [3] and seen == [("answers", 3)] * 4
