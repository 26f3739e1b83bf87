"""Checks are pure: each returns its outcomes, with the facts their messages state and the numbers they rest on, and
writes nothing into the evidence it reads; the runner gathers them in the rubric's order. So the order the checks
run in changes nothing in a result, on forwards whose messages state facts, carry details or fail on the sweep."""

import copy
import dataclasses
import pickle
import random

import numpy as np
import pytest
import torch

from autograder.course import kit
from autograder.course.notebook import read_cells, student_code
from autograder.engine.diagnosis import first_step
from autograder.engine.questions.cells import load_cells
from autograder.engine.questions.plan import Plan
from autograder.engine.questions.probes import Probing, run_probe
from autograder.engine.rubric import RUBRIC
from autograder.grading import evaluation
from autograder.sandbox.inside.protocol import encode_observation
from catalog.build import submission
from catalog.wrong_forwards import WRONG
from tiers import quick_sample

pytestmark = pytest.mark.quick  # in `make test-quick`: this wing's fast tier

NAMES = (
    "returns_first_half",  # facts of a half that never reaches the output
    "dropout_always_on",  # the dropout check's fact, and several checks losing points
    "dropout_twice_on_attention",  # the train run's own facts, said by the dropout check
    "detached_branch",  # a gradient cause, kept in the gradient check's details
    "hard_coded_dropout_rate",  # the sweep's facts
)
FORWARDS = {"solution": None, **{w.name: w.forward for w in WRONG if w.name in NAMES}}


def _plain(value):
    """A value with its arrays as lists and its dataclasses as dicts, so that two results compare with ==."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()] if value.ndim else value.item()
    if isinstance(value, torch.Tensor):
        return _plain(value.detach().numpy())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {key: _plain(v) for key, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@pytest.fixture(scope="module")
def answers(seed, tmp_path_factory):
    """The child's answers (as the sandbox would send them) of each forward, asked once."""
    plan = Plan.draw(seed)
    public, errors = load_cells(kit.KIT.public_code())
    assert not errors
    found = {}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for name, forward in FORWARDS.items():
            path = tmp_path_factory.mktemp("forwards") / f"{name}.py"
            path.write_text(submission(forward=forward))
            namespace, errors = load_cells(student_code(read_cells(path)))
            assert not errors, errors
            probing = Probing(namespace, public, plan)
            found[name] = {"observations": {p: encode_observation(run_probe(p, probing)) for p in evaluation.ALL_PROBES}}
    finally:
        torch.set_num_threads(threads)
    return plan, found


def _result(raw: dict, plan, order) -> dict:
    found = evaluation.evaluate(copy.deepcopy(raw), plan)
    return _plain({field.name: getattr(found, field.name) for field in dataclasses.fields(found)})


@pytest.mark.parametrize("name", quick_sample(sorted(FORWARDS), every=6))
def test_the_order_the_checks_run_in_changes_no_result(answers, monkeypatch, seed, name):
    plan, raws = answers
    stated = evaluation.CHECKS
    assert [module.NAME for module in stated] == list(RUBRIC)  # the order results are gathered in
    expected = _result(raws[name], plan, stated)
    orders = [tuple(reversed(stated)), tuple(random.Random(seed).sample(stated, len(stated)))]
    for order in orders:
        monkeypatch.setattr(evaluation, "CHECKS", order)
        assert _result(raws[name], plan, order) == expected, [m.NAME for m in order]
    said = {key for check in expected["checks"] for key in check["details"]}
    assert "profile" in said, said  # the gradient check's own numbers
    if name == "detached_branch":  # the cut path the gradient check found, kept in its own details
        assert "gradient cause eval" in said, said
    elif name != "solution":  # and the facts the wrong forwards' messages state
        assert expected["facts"], name


def _fields(evidence) -> bytes:
    """What the evidence holds as data (its caches aside), as bytes; the grader's components by their weights."""
    held = {f.name: getattr(evidence, f.name) for f in dataclasses.fields(evidence) if f.name not in ("flows", "replays")}
    held["parts"] = {name: part.state_dict() for name, part in held["parts"].items()}
    return pickle.dumps(held)


@pytest.mark.parametrize("name", sorted(FORWARDS))
def test_a_check_writes_nothing_into_the_evidence(answers, monkeypatch, name):
    plan, raws = answers
    seen = []

    def watched(module):
        def evaluate(evidence):  # what goes wrong here is recorded: the runner takes a check's exception as its own
            try:
                before, keys = _fields(evidence), set(vars(evidence))
            except Exception as error:
                seen.append((module.NAME, repr(error)))
                raise
            outcomes = module.evaluate(evidence)
            added = set(vars(evidence)) - keys
            # only caches of what the evidence computes from what it holds (per_instance, cached_property)
            cached = all(key.startswith("_cache_") or key in ("sweep", "weights") for key in added)
            seen.append((module.NAME, _fields(evidence) == before and cached))
            return outcomes

        return type(module.__name__, (), {"NAME": module.NAME, "evaluate": staticmethod(evaluate)})

    monkeypatch.setattr(evaluation, "CHECKS", tuple(watched(module) for module in evaluation.CHECKS))
    evaluation.evaluate(copy.deepcopy(raws[name]), plan)
    assert seen == [(name, True) for name in RUBRIC]
    assert not hasattr(evaluation.Evidence, "facts") and "facts" not in {f.name for f in dataclasses.fields(evaluation.Evidence)}


@pytest.mark.parametrize("name", sorted(FORWARDS))
def test_the_train_run_is_read_once_for_the_diagnosis_and_every_check(answers, monkeypatch, name):
    """The diagnosis, the gradient check and the dropout check read one reading of the train run against Pre-LN."""
    plan, raws = answers
    read = []
    init = first_step.Reading.__init__

    def counted(reading, flow, parts, mode, *args, **kwargs):
        read.append(mode)
        init(reading, flow, parts, mode, *args, **kwargs)

    monkeypatch.setattr(first_step.Reading, "__init__", counted)
    evaluation.evaluate(copy.deepcopy(raws[name]), plan)
    assert read.count("train") == (0 if name == "solution" else 1), read  # the walk it replaced: up to 3 times


@pytest.mark.parametrize(
    "message, shown",
    [
        ("the feed-forward network received a value", "The feed-forward network received a value"),
        ("in train mode, no call of drop_shortcut", "In train mode, no call of drop_shortcut"),
        ("norm2 received a value that is not h", "norm2 received a value that is not h"),
        ("drop_shortcut received a value", "drop_shortcut received a value"),
        ("ff(norm2(h)) is not what came back", "ff(norm2(h)) is not what came back"),
        ("x + att(norm1(x)) is not returned", "x + att(norm1(x)) is not returned"),
        ("Your block's output differs", "Your block's output differs"),
        ("", ""),
    ],
)
def test_a_failed_part_says_a_sentence_and_leaves_names_from_code_as_written(message, shown):
    from autograder.engine.checks.outcomes import fail, failed

    assert fail(message).message == shown
    assert failed(fail("x"), message).message == shown
