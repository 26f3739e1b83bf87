"""The input-space generator (`catalog/regions.py`): forwards right everywhere, or wrong only on a region of the
space of valid inputs, graded in this process as the sandbox grades (tests/graded.py) and held to what their generator knows:

- a right one (its components reached through attributes, plain lists and dicts, aliases, closures,
  `get_submodule`, `_modules` or a kept bound method) earns full marks and the grader names no input;
- a wrong one loses points;
- every input the grader names as one where the block differs lies in the forward's region;
- no grader error.

The quick tier grades six of a fixed slice of 12; the full run all 12 and `KIT_REGION_FORWARDS` (200 by default)
from a fixed seed, and the regression cases written as students write them.
"""

from __future__ import annotations

import os

import pytest

import graded
from autograder.engine.rubric import TOTAL_POINTS
from catalog.build import submission
from catalog.regions import CASES, GRADING_SEED, Forward, corpus
from tiers import quick_sample

FORWARDS = int(os.environ.get("KIT_REGION_FORWARDS", "200"))


def grade(forward: Forward, seed: int = GRADING_SEED):
    # a forward that is no Python loses points for that alone, and would hold nothing about its region
    compile(forward.source, forward.name, "exec")
    return graded.grade(submission(forward=forward.source, init=forward.init), seed)


def problems(forward: Forward, result) -> list[str]:
    found = []
    if result.grader_errors:
        found.append(f"grader errors: {result.grader_errors}")
    named = [fact for fact in result.facts if fact["kind"] == "differs"]
    if forward.right:
        if result.score < TOTAL_POINTS:
            found.append(
                f"a right forward scored {result.score:g}: {[(c.check, c.message) for c in result.checks if not c.passed]}"
            )
        if named:
            found.append(f"an input named for a right forward: {named[0]['where']}")
    elif result.score >= TOTAL_POINTS:
        found.append("a wrong forward earned full marks")
    for fact in named:
        if not forward.in_region(dict(fact["input"])):
            found.append(f"named an input outside the forward's region: {fact['where']}")
    return found


def _show(forward: Forward, result, found: list) -> str:
    lost = [(s.name, s.message) for c in result.checks for s in c.subtests if not s.passed]
    return f"{forward.name}\n{forward.source}\nscore {result.score:g}; lost {lost}\n" + "\n".join(f"  - {p}" for p in found)


@pytest.mark.parametrize("forward", CASES, ids=lambda f: f.name)
def test_a_case_written_as_students_write_it(forward):
    result = grade(forward)
    found = problems(forward, result)
    assert not found, _show(forward, result, found)


@pytest.mark.quick
@pytest.mark.parametrize("index", quick_sample(range(12), every=2))  # the quick tier: six of them
def test_a_fixed_slice(index):
    forward = corpus(12, seed=2027)[index]
    result = grade(forward)
    found = problems(forward, result)
    assert not found, _show(forward, result, found)


def test_the_generated_forwards():
    """`FORWARDS` forwards from one seed: half right, the others wrong on a region, at some rates, or through a
    component the grader cannot reach."""
    forwards = corpus(FORWARDS, seed=1)
    failures, wrong_named = [], 0
    for forward in forwards:
        result = grade(forward)
        found = problems(forward, result)
        wrong_named += not forward.right and any(f["kind"] == "differs" for f in result.facts)
        if found:
            failures.append(_show(forward, result, found))
    right = sum(f.right for f in forwards)
    print(f"\nregions: {len(forwards)} forwards ({right} right); {wrong_named} wrong ones with the input named")
    assert not failures, "\n\n".join(failures[:5]) + f"\n({len(failures)} forwards in all)"
