"""The engine's pure parts, in milliseconds: the steps table, the facts, and the value primitives the reading of a
run uses (where one value sits in another, a value as a sum of others). What the reading names from them is
tests/engine/test_first_step.py's."""

from __future__ import annotations


import numpy as np
import pytest

from autograder.engine.diagnosis.location import locate
from autograder.engine.reading.placement import express
from autograder.engine.facts import KINDS, Dropout, Gave, Ran, Received, Sum, Unknown
from autograder.engine.replayed import Moved
from autograder.engine.unmet import Unmet
from autograder.engine.questions.parts import make_parts
from autograder.engine.questions.plan import GRADING_CFG
from autograder.engine.steps import BY_NUMBER, EDGES, STEPS, step_text
from autograder.grading.reference import reference_namespace

pytestmark = pytest.mark.quick
P = 0.5


@pytest.fixture(scope="module")
def parts():
    found = make_parts(reference_namespace(), GRADING_CFG, 321, drop_p=P)
    for part in found.values():
        part.eval()
    return found


# --- the steps table -------------------------------------------------------------------------------------


def test_the_steps_table_numbers_ten_steps_and_every_edge_belongs_to_one_of_them():
    assert [s.number for s in STEPS] == list(range(1, 11))
    assert set(EDGES.values()) <= set(BY_NUMBER)
    assert step_text(4) == "Step 4 of 10 (apply drop_shortcut to attention's output)"


def test_every_fact_kind_renders_and_travels_as_data():
    facts = [
        Ran("eval", "norm2", 0),
        Received("eval", "att", 2, "norm1(x)", False, 3),
        Sum("eval", None, None, (("x", 1.0), ("att(norm1(x))", 0.5))),
        Unknown("eval", "norm2", 1, "h"),
        Moved("eval", "att", "shortcut", "norm2", 1, True),
        Dropout("train", "dropout", 1, True, 1.25, 2),
        Gave("train", "att", "norm1(x)", "att(norm1(x))", False),
        Unmet("eval", "5", True),
    ]
    texts = [f.text() for f in facts]
    assert texts[0] == "norm2 never ran"
    assert texts[1] == "attention (call 2 of 3) received a value that is not norm1(x)"
    assert texts[2] == "your forward returned x + 0.5*att(norm1(x))"
    assert "p = 0.2" in texts[5]
    assert texts[6].startswith("attention received norm1(x)") and texts[6].endswith("is not att(norm1(x))")
    for fact in facts:
        data = fact.to_dict()
        assert data["kind"] in KINDS and KINDS[data["kind"]](**{k: v for k, v in data.items() if k != "kind"}) == fact


# --- the value primitives ----------------------------------------------------------------------------------


def test_locate_finds_pieces_and_rearrangements_and_nothing_else():
    rng = np.random.default_rng(0)
    whole = rng.normal(size=(3, 8, 32))
    assert np.array_equal(whole.reshape(-1)[locate(whole[:, ::-1], whole, 1e-6)], whole[:, ::-1])
    assert locate(whole[1].T, whole, 1e-6) is not None
    assert locate(whole[0] * 2, whole, 1e-6) is None
    assert locate(np.concatenate([whole[0], whole[0]]), whole, 1e-6) is None  # one element twice
    assert locate(np.tanh(whole), whole, 1e-6) is None


def test_express_says_what_a_value_is_made_of_or_nothing():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=200), rng.normal(size=200)
    assert express(a + 0.5 * b, {"a": a, "b": b}, 1e-8) == {"a": 1.0, "b": 0.5}
    assert express(np.tanh(a), {"a": a, "b": b}, 1e-8) is None
