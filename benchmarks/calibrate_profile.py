"""Calibrate the deep-stack gradient check (checks/gradients.py: SEVERE_FACTOR, MILD_FACTOR, MAX_GROWTH).

Builds 24-block stacks exactly as the grader does (`engine.questions.stack.deep_profile`: the notebook's `make_stack`
and `gradient_profile`, the kit's components with neutral LayerNorms, the same read-out loss) for the plans
of many run seeds, for a Pre-LN block and for the Post-LN, no-shortcut and no-normalization arrangements, and
prints per arrangement the range of the two statistics the check uses:

  min factor  the most any one block shrinks the gradient on its way back
  2nd factor  the second smallest factor (Pre-LN: about 1 or more; Post-LN and the others: below)
  growth      how much larger the gradient is at the first block than at the last

then whether the thresholds separate every seed, with the margin. Calibration uses run seeds 1..N (default
200); the test suite checks the thresholds on other seeds, held back from this calibration.

    .venv/bin/python benchmarks/calibrate_profile.py [--seeds 200]
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autograder.engine.checks.gradients import MAX_GROWTH, MILD_FACTOR, SEVERE_FACTOR, profile_verdict  # noqa: E402
from autograder.engine.questions.parts import build_block, load_parts  # noqa: E402
from autograder.engine.questions.plan import GRADING_CFG, Plan
from autograder.engine.questions.stack import deep_profile  # noqa: E402
from autograder.grading.reference import reference_namespace  # noqa: E402

CALIBRATION_SEEDS = range(1, 201)


def arrangements(ns: dict) -> dict:
    return {
        "Pre-LN": ns["TransformerBlock"],
        "Post-LN": ns["PostLNBlock"],
        "no shortcuts": ns["NoShortcutBlock"],
        "no normalization": "no-norm",
    }


def profile(ns: dict, block, seed: int) -> list[float]:
    """The grader's measurement (probes.probe_profile) for one arrangement, on a stack drawn from `seed` (a grade
    measures the stack of `plan.PROFILE_SEED`; the thresholds must hold on every stack)."""

    def make(parts: dict):
        made = build_block(ns["TransformerBlock"] if block == "no-norm" else block, GRADING_CFG)
        load_parts(made, parts)
        return ns["without_norms"](made) if block == "no-norm" else made

    return deep_profile(make, ns, replace(Plan.draw(seed), profile_seed=seed))


def statistics(values: list[float]) -> tuple[float, float, float]:
    factors = sorted(a / b for a, b in zip(values[:-1], values[1:]))
    return factors[0], factors[1], values[0] / values[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=len(CALIBRATION_SEEDS))
    seeds = list(range(1, parser.parse_args().seeds + 1))
    ns = reference_namespace()
    ok = True
    print(
        f"thresholds: min factor >= {SEVERE_FACTOR:.3f}, 2nd factor >= {MILD_FACTOR:.3f}, growth <= {MAX_GROWTH:.1f}; "
        f"run seeds {seeds[0]}..{seeds[-1]}"
    )
    for name, block in arrangements(ns).items():
        profiles = [profile(ns, block, seed) for seed in seeds]
        stats = [statistics(p) for p in profiles]
        expected = name == "Pre-LN"
        separated = all(profile_verdict(p)[0] == expected for p in profiles)
        ok &= separated
        factors, seconds, growths = ([s[i] for s in stats] for i in range(3))
        margins = [
            max(math.log10(SEVERE_FACTOR / f), math.log10(MILD_FACTOR / f2), math.log10(g / MAX_GROWTH)) for f, f2, g in stats
        ]
        margin = min(-m for m in margins) if expected else min(margins)
        print(
            f"{name:17s} min {min(factors):.3f}..{max(factors):.3f}  2nd {min(seconds):.3f}..{max(seconds):.3f}  "
            f"growth {min(growths):9.3g}..{max(growths):9.3g}  {'passes' if expected else 'fails'} on every seed: "
            f"{'yes' if separated else 'NO'}  (smallest log10 margin: {margin:+.3f})"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
