"""Calibrate the deep-stack gradient check (checks/gradients.py: MIN_BLOCK_FACTOR, MAX_GROWTH).

Builds 24-block stacks exactly as the grader does (the notebook's `make_stack` and `gradient_profile`, the
kit's components with neutral LayerNorms, the same read-out loss) for many seeds, for a Pre-LN block and
for the Post-LN, no-shortcut and no-normalization arrangements, and prints per arrangement the range of
the two statistics the check uses:

  min factor  the most any one block shrinks the gradient on its way back (Pre-LN: about 1 or more)
  growth      how much larger the gradient is at the first block than at the last

then whether the thresholds separate every seed, with the margin. The grader itself uses PROFILE_SEED.

    .venv/bin/python benchmarks/calibrate_profile.py [--seeds 30]
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from autograder.checks.gradients import MAX_GROWTH, MIN_BLOCK_FACTOR, profile_verdict  # noqa: E402
from autograder.grading import reference_namespace  # noqa: E402
from autograder.harness.parts import graded_block  # noqa: E402
from autograder.harness.probes import GRADING_CFG, PROFILE_DEPTH, PROFILE_SEED  # noqa: E402


def arrangements(ns: dict) -> dict:
    return {"Pre-LN": ns["TransformerBlock"], "Post-LN": ns["PostLNBlock"], "no shortcuts": ns["NoShortcutBlock"],
            "no normalization": "no-norm"}


def profile(ns: dict, block, seed: int) -> list[float]:
    """The grader's measurement (probes.probe_profile) for one arrangement and one seed."""
    cfg = GRADING_CFG

    def factory():
        if block == "no-norm":
            return ns["without_norms"](graded_block(ns["TransformerBlock"], ns, cfg, seed, random_norms=False, draw=False))
        return graded_block(block, ns, cfg, seed, random_norms=False, draw=False)

    stack = ns["make_stack"](factory, PROFILE_DEPTH, seed=seed)
    x = torch.randn(2, cfg["context_length"], cfg["emb_dim"], generator=torch.Generator().manual_seed(seed + 1))
    return ns["gradient_profile"](stack, x, seed=seed)


def statistics(values: list[float]) -> tuple[float, float]:
    factors = [a / b for a, b in zip(values[:-1], values[1:])]
    return min(factors), values[0] / values[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=30)
    seeds = sorted({PROFILE_SEED, *range(parser.parse_args().seeds)})
    ns = reference_namespace()
    ok = True
    print(f"thresholds: min factor >= {MIN_BLOCK_FACTOR:.3f}, growth <= {MAX_GROWTH:.1f}; seeds {seeds[0]}..{seeds[-1]}")
    for name, block in arrangements(ns).items():
        stats = [statistics(profile(ns, block, seed)) for seed in seeds]
        verdicts = [profile_verdict(profile(ns, block, seed))[0] for seed in seeds[:5]] if name == "Pre-LN" else []
        factors, growths = [s[0] for s in stats], [s[1] for s in stats]
        passes = [f >= MIN_BLOCK_FACTOR and g <= MAX_GROWTH for f, g in stats]
        expected = name == "Pre-LN"
        separated = all(p == expected for p in passes) and all(v == expected for v in verdicts)
        ok &= separated
        margin = (math.log10(min(factors) / MIN_BLOCK_FACTOR) if expected
                  else max(math.log10(MIN_BLOCK_FACTOR / f) if f < MIN_BLOCK_FACTOR else math.log10(g / MAX_GROWTH)
                           for f, g in stats[:1]))
        print(f"{name:17s} min factor {min(factors):.3f}..{max(factors):.3f}  growth {min(growths):9.3g}..{max(growths):9.3g}"
              f"  {'passes' if expected else 'fails'} on every seed: {'yes' if separated else 'NO'}"
              f"  (log10 margin at seed {seeds[0]}: {margin:+.2f})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
