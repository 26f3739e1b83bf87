"""The fuzzer: forwards from a vocabulary that is not the grader's (`catalog/fuzz.py`), graded in this process
as the sandbox grades (tests/graded.py), each held to what its generator knows by construction, and every fact the grader states
evaluated by an oracle that records its own run (`catalog/oracle.py`).

The properties, for every forward:
- a right one (only value-keeping rewrites) earns full marks;
- a wrong one loses points;
- the step named, if any, is one the generator allows for the run it is said of;
- every fact is true on the oracle's run (a fact the oracle cannot evaluate is counted, never passed silently);
- no grader error.

The quick tier runs six of a fixed slice of 12; the full run all 12, and grades `KIT_FUZZ_FORWARDS` (500 by
default) forwards from a fixed seed and states the rate of first steps named right; Hypothesis draws more with seeds
of its own.
"""

from __future__ import annotations

import os
import random
import re
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import graded
from autograder.engine.rubric import TOTAL_POINTS
from catalog.build import submission
from catalog.fuzz import CORPUS_SEED, GRADING_SEED, Forward, corpus, draw
from catalog.fuzz_regressions import REGRESSIONS
from catalog.oracle import Run
from tiers import quick_sample

FORWARDS = int(os.environ.get("KIT_FUZZ_FORWARDS", "500"))
# Of the forwards whose first change shows in values, how many get that step named: measured on the corpus below
# (docs/development.md, "The fuzzer"), and held here so that a regression shows.
# 96 % here, against a target of 95 %; held at 94 % because another processor's float32 sums move a few steps.
LOCATED_RATE = 0.94  # first change at boundaries the grader records
VALUED_RATE = 0.94  # every forward whose first change shows in values


def grade(forward: Forward, seed: int = GRADING_SEED):
    return graded.grade(submission(forward.source), seed)


def problems(forward: Forward, result, tally: Counter | None = None) -> list[str]:
    """Everything wrong with how the grader treated `forward` (empty: nothing)."""
    tally = Counter() if tally is None else tally
    found = []
    if getattr(result, "grader_errors", ()):
        found.append(f"grader errors: {result.grader_errors}")
    if forward.right and result.score < TOTAL_POINTS:
        lost = [f"{c.check}: {c.message}" for c in result.checks if not c.passed]
        found.append(f"a right forward scored {result.score:g}: {lost}")
    if not forward.right and result.score >= TOTAL_POINTS:
        found.append("a wrong forward earned full marks")
    step = next((fact for fact in result.facts if fact["kind"] == "step"), None)
    if step is not None and step["step"] not in forward.first_in(step["mode"]):
        found.append(
            f"step {step['step']} named ({step['mode'] or 'both runs'}); the generator allows "
            f"{sorted(forward.first_in(step['mode']))}"
        )
    if forward.shows in ("eval", "train"):
        tally["valued"] += 1
        tally["valued right"] += step is not None and step["step"] in forward.first_in(step["mode"])
        tally["located"] += forward.located
        tally["located right"] += forward.located and step is not None and step["step"] in forward.first_in(step["mode"])
    run = Run(forward.source)
    for fact in result.facts:
        verdict = run.check(fact)
        tally[f"facts {'true' if verdict else 'unevaluated' if verdict is None else 'false'}"] += 1
        if verdict is False:
            found.append(f"false fact: {fact}")
    return found


def _show(forward: Forward, result, found: list) -> str:
    return f"{forward.name}\n{forward.source}\nscore {result.score:g}; first divergence: {result.first_divergence}\n" + "\n".join(
        f"  - {p}" for p in found
    )


@pytest.mark.parametrize("forward", REGRESSIONS, ids=lambda f: f.name)
def test_regressions(forward):
    """Shrunk failures of earlier fuzzing runs, each a forward the grader once mistreated."""
    result = grade(forward)
    found = problems(forward, result)
    assert not found, _show(forward, result, found)


@pytest.mark.quick
@pytest.mark.parametrize("index", quick_sample(range(12), every=2))  # the quick tier: six of them
def test_a_fixed_slice(index):
    forward = corpus(12, seed=2026)[index]
    result = grade(forward)
    found = problems(forward, result)
    assert not found, _show(forward, result, found)


# Hypothesis's own draws, from a fixed database-free seed unless KIT_FUZZ_RANDOM is set (tests/conftest.py): CI
# repeats its run, a developer asks for fresh ones (a failure found so goes into catalog/fuzz_regressions.py).
@settings(
    max_examples=int(os.environ.get("KIT_FUZZ_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(seed=st.integers(0, 2**32 - 1), wrong=st.integers(0, 3), open_only=st.sampled_from([True, None, False]))
def test_property(seed, wrong, open_only):
    forward = draw(random.Random(seed), wrong=wrong if open_only is not False else min(wrong, 1), open_only=open_only)
    result = grade(forward)
    found = problems(forward, result)
    assert not found, _show(forward, result, found)


def test_the_corpus():
    """`FORWARDS` forwards from one seed: a quarter right, half with one to three changes from the open
    vocabulary, a quarter with one change the diagnosis has an edit for. Every property on every one, and the
    rates of first steps named right."""
    forwards = corpus(FORWARDS, seed=CORPUS_SEED)
    tally, failures = Counter(), []
    for forward in forwards:
        result = grade(forward)
        found = problems(forward, result, tally)
        if found:
            failures.append(_show(forward, result, found))
    open_count = sum(1 for f in forwards if f.open)
    print(
        f"\nfuzzer: {len(forwards)} forwards ({sum(f.right for f in forwards)} right, {open_count} with changes from "
        f"the open vocabulary); {dict(tally)}"
    )
    assert not failures, "\n\n".join(failures[:5]) + f"\n({len(failures)} forwards in all)"
    assert open_count >= len(forwards) // 2 - 1
    assert tally["facts false"] == 0
    assert tally["located right"] >= LOCATED_RATE * tally["located"], dict(tally)
    assert tally["valued right"] >= VALUED_RATE * tally["valued"], dict(tally)
    if FORWARDS == 500:
        _the_documented_counts_hold(tally)


def _the_documented_counts_hold(tally: Counter) -> None:
    """docs/development.md's sentence on the corpus: its zeros exactly, its counts to within 2 % (another processor's
    float32 sums move a few facts and steps), its rates as they round here."""
    from autograder.course import kit

    text = " ".join(kit.documentation("development.md").split())
    pattern = (
        r"none wrong at full marks, no false fact among the (\d+) it could evaluate \((\d+) more it cannot\), and the "
        r"first step named right for (\d+) of the (\d+) whose first change shows in values \((\d+)%\), (\d+) of the "
        r"(\d+) whose first change sits at boundaries the grader records \((\d+)%\)"
    )
    found = re.search(pattern, text)
    assert found, "docs/development.md no longer states the corpus's counts in the words this test reads"
    stated = dict(
        zip(
            ("facts true", "facts unevaluated", "valued right", "valued", "valued %", "located right", "located", "located %"),
            map(int, found.groups()),
        )
    )
    measured = {
        **{name: tally[name] for name in stated if not name.endswith("%")},
        "valued %": round(100 * tally["valued right"] / tally["valued"]),
        "located %": round(100 * tally["located right"] / tally["located"]),
    }
    for name, value in stated.items():
        slack = 1 if name.endswith("%") else max(2, round(0.02 * value))
        assert abs(measured[name] - value) <= slack, (name, value, measured[name])
