"""Survey the plain-network experiment of the notebook on many seeds, print what holds of them, and keep the table.

    .venv/bin/python benchmarks/plain_network_survey.py [--seeds 10000] [--jobs 2]

The notebook builds its 20-layer networks on ten seeds (0 to 9). What its prose says of other seeds, and the
bounds its fresh-seed test holds every seed to, are measured here, by the notebook's own `mlp_weight_gradients`
(the source's `mlp_experiment` cell, run with no experiment), on seeds 0..N-1: about 25 ms a seed on one core.
It prints, for every quantity the lesson speaks of, its range over the seeds and whether it stays within the
fresh-seed test's bounds, then the seeds on which the shortcuts network is least flat, and writes
`plain_network_survey.json` beside this file: the shortcuts network's flatness (its largest layer gradient over its
smallest) on every seed, and each quantity's extremes with their seeds.
tests/course/test_lesson_claims.py checks the lesson's sentences against that table and recomputes a sample of it.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import statistics
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from autograder.course import kit  # noqa: E402

TABLE = Path(__file__).resolve().parent / "plain_network_survey.json"
CELLS = ("setup", "provided_parts", "mlp_experiment")

# What the lesson's fresh-seed test holds every seed to (tests/course/test_lesson_claims.py): each quantity within its
# bounds. The shortcuts network's flatness is not among them: the lesson says it stays within FLAT times on all but a
# few seeds (on those, one layer's gradient falls far below the rest, which stay within FLAT times of each other).
BOUNDS = {
    "plain: layer 1's gradient over layer 20's": (1e-12, 1e-8),
    "shortcuts: largest layer gradient": (50, 100_000),
    "shortcuts: largest over second smallest": (1, 4),
    "shortcuts + LayerNorm: smallest layer gradient": (0.5, 6),
    "shortcuts + LayerNorm: largest layer gradient": (0.5, 6),
    "shortcuts + LayerNorm: largest over smallest": (1, 5),
    "plain: output size": (0.02, 0.2),
    "shortcuts: output size": (5, 200),
    "shortcuts + LayerNorm: output size": (2, 4),
}
FLAT = 4


@functools.cache
def lesson_mlp(source: Path = kit.SOURCE_NOTEBOOK) -> dict:
    """The namespace of the notebook's plain-network code (no experiment run): MLP_KINDS, mlp_weight_gradients."""
    cells = {c.grade_id: c for c in kit.Assignment(source).cells()}
    namespace = {"__name__": "__main__"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for grade_id in CELLS:
            exec(compile(kit.strip_solution_markers(cells[grade_id].source), f"<{grade_id}>", "exec"), namespace)
            namespace["RUN_EXPERIMENTS"] = False
    return namespace


def quantities(plain: list[float], shortcuts: list[float], normed: list[float], outputs: list[float]) -> dict[str, float]:
    """What the lesson and its fresh-seed test speak of, from one seed's weight gradients (layer 1 first) of the three
    networks and the sizes of their outputs (plain, shortcuts, shortcuts + LayerNorm)."""
    ordered = sorted(shortcuts)
    return {
        "plain: layer 1's gradient over layer 20's": plain[0] / plain[-1],
        "shortcuts: smallest layer gradient": ordered[0],
        "shortcuts: largest layer gradient": ordered[-1],
        "shortcuts: largest over smallest": ordered[-1] / ordered[0],
        "shortcuts: largest over second smallest": ordered[-1] / ordered[1],
        "shortcuts + LayerNorm: smallest layer gradient": min(normed),
        "shortcuts + LayerNorm: largest layer gradient": max(normed),
        "shortcuts + LayerNorm: largest over smallest": max(normed) / min(normed),
        "plain: output size": outputs[0],
        "shortcuts: output size": outputs[1],
        "shortcuts + LayerNorm: output size": outputs[2],
    }


def measure(seed: int) -> dict[str, float]:
    """The quantities on one seed, by the notebook's own `mlp_weight_gradients`."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: one thread each, and one order of summation
    try:
        lesson = lesson_mlp()
        runs = [lesson["mlp_weight_gradients"](kind, seed) for kind in lesson["MLP_KINDS"]]
    finally:
        torch.set_num_threads(threads)
    return quantities(*(gradients for gradients, _ in runs), [size for _, size in runs])


def outside(extremes: dict) -> dict[str, list]:
    """Each bound of BOUNDS that the survey's smallest or largest value breaks: [value, seed] of each break."""
    return {
        name: [ends[end] for end in ("min", "max") if not low <= ends[end][0] <= high]
        for name, (low, high) in BOUNDS.items()
        if not low <= (ends := extremes[name])["min"][0] <= ends["max"][0] <= high
    }


def significant(value: float, digits: int = 4) -> float:
    return float(f"{value:.{digits}g}")


def table(values: dict[int, dict[str, float]]) -> dict:
    import torch

    seeds = sorted(values)
    extremes = {}
    for name in values[seeds[0]]:
        low, high = min(seeds, key=lambda s: values[s][name]), max(seeds, key=lambda s: values[s][name])
        extremes[name] = {"min": [significant(values[low][name]), low], "max": [significant(values[high][name]), high]}
    return {
        "about": "The notebook's plain-network experiment on seeds 0..N-1 (its mlp_weight_gradients): the shortcuts "
        "network's largest layer gradient over its smallest, by seed; for the seeds where that is more than 4, its "
        "largest over its second smallest; each quantity's smallest and largest value with its seed. Regenerated by "
        "benchmarks/plain_network_survey.py.",
        "seeds": [seeds[0], seeds[-1]],
        "torch": torch.__version__,
        "flatness": [significant(values[s]["shortcuts: largest over smallest"]) for s in seeds],
        "beyond_flat": {
            str(s): significant(values[s]["shortcuts: largest over second smallest"])
            for s in seeds
            if values[s]["shortcuts: largest over smallest"] > FLAT
        },
        "extremes": extremes,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=1)
    arguments = parser.parse_args()
    started = time.monotonic()
    with ProcessPoolExecutor(arguments.jobs) as pool:
        values = dict(zip(range(arguments.seeds), pool.map(measure, range(arguments.seeds), chunksize=100)))
    result = table(values)
    text = json.dumps(result, indent=1)  # a list of numbers on one line
    text = re.sub(r"\[\s+([-\d.e+,\s]+?)\s+\]", lambda found: "[" + re.sub(r"\s+", "", found.group(1)) + "]", text)
    TABLE.write_text(text + "\n", encoding="utf-8")
    print(f"{arguments.seeds} seeds in {time.monotonic() - started:.0f} s ({arguments.jobs} job(s)); written to {TABLE.name}")
    for name, ends in result["extremes"].items():
        median = statistics.median(row[name] for row in values.values())
        (low, at_low), (high, at_high) = ends["min"], ends["max"]
        print(f"  {name:48s} {low:.4g} (seed {at_low}) .. {high:.4g} (seed {at_high}), median {median:.4g}")
    broken = outside(result["extremes"])
    for name, (low, high) in BOUNDS.items():
        said = ", ".join(f"{value:.4g} on seed {seed}" for value, seed in broken.get(name, [])) or "every seed within"
        print(f"  fresh-seed bound [{low:g}, {high:g}] of {name}: {said}")
    beyond = result["beyond_flat"]
    print(
        f"  shortcuts network flatter than {FLAT} times on {arguments.seeds - len(beyond)} of {arguments.seeds} seeds; "
        f"the others (seed: largest over smallest, largest over second smallest): "
        + ", ".join(f"{s}: {values[int(s)]['shortcuts: largest over smallest']:.3g}, {v:.3g}" for s, v in beyond.items())
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
