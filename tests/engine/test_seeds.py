"""The same submission, the same points, on every seed: every forward of the hand-written catalogs (wrong ones,
equivalent ones, the unseen sets, the families, the region cases, the fuzzer's regressions, Pre-LN in every style)
and 100 fuzzed ones, each graded on five seeds in this process as the sandbox grades (tests/graded.py), get the
same points on all five, part by part.

Inputs are fresh on every seed; no part's verdict may depend on the draw (docs/grading.md, "The same points on every
seed"). `KIT_STABILITY_SEEDS` and `KIT_STABILITY_FUZZED` size the run; `benchmarks/seed_stability.py` runs more seeds
and the generated corpus.
"""

from __future__ import annotations

import os

import pytest

import graded
from catalog.build import submission
from catalog.everything import catalog_forwards
from catalog.fuzz import corpus as fuzzed

# The seeds the last unseen set found a verdict moving on (11, 16, 1060841982), and two more.
SEEDS = (11, 16, 1060841982, 1, 2026)[: int(os.environ.get("KIT_STABILITY_SEEDS", "5"))]
FUZZED = int(os.environ.get("KIT_STABILITY_FUZZED", "100"))


def cases() -> list[tuple[str, dict]]:
    return catalog_forwards() + [(f"fuzzed {i}: {f.name}", {"forward": f.source}) for i, f in enumerate(fuzzed(FUZZED, seed=5))]


def points_by_part(result) -> dict:
    return {(check.check, part.name): part.points for check in result.checks for part in check.subtests}


@pytest.mark.parametrize("name, source", cases(), ids=[name for name, _ in cases()])
def test_the_same_points_on_every_seed(name, source):
    results = {seed: graded.grade(submission(**source), seed) for seed in SEEDS}
    first = points_by_part(results[SEEDS[0]])
    for seed, result in results.items():
        moved = {part: (first[part], points) for part, points in points_by_part(result).items() if points != first[part]}
        assert not moved, f"seed {seed} against seed {SEEDS[0]}: {moved}\n{result.first_divergence}"
        assert not result.grader_errors, result.grader_errors


# Found by benchmarks/seed_stability.py: one mask drawn for both halves is read as the same mask at most rates, and
# not at a rate near 0 (where independent draws agree almost everywhere too); the train-mode gradients, the
# derivative of what the forward computes under its own masks, were then checked on some seeds and not on others.
SHARED_MASK_SEEDS = (1457897381, 1243096271, 1711473846)


def test_one_mask_for_both_halves_has_its_gradients_checked_on_every_seed():
    from catalog.regions import CASES

    case = next(c for c in CASES if c.name == "one dropout mask for both halves")
    for seed in SHARED_MASK_SEEDS:
        result = graded.grade(submission(forward=case.source, init=case.init), seed)
        part = {(c.check, p.name): p for c in result.checks for p in c.subtests}
        train = part[("forward_gradients", "gradients flow through every path (train mode)")]
        assert train.points == 1, (seed, train.message)
        lost = {name for (check, name), p in part.items() if check == "forward_dropout" and p.points < 1}
        assert lost, (seed, "the shared mask kept every dropout point")
