"""What a sandboxed child does with one job, on the questions' side: load the student's cells, then answer
each probe, reporting every step as it happens.

The sandbox runs this module by name (the parent names it when it starts a server) and knows nothing of the
questions themselves: it calls `ready` once in the pristine server and `run_job` in each child, and reads
`PROBES` and `FORWARD_PROBES` to follow and restart children.
"""

from __future__ import annotations

from .cells import load_cells
from .plan import Plan
from .probes import FORWARD_PROBES, PROBES, Probing, run_probe

GRADED_NAMES = ("TransformerBlock", "magnitude_by_formula", "magnitude_by_autograd", "classify_factor")
__all__ = ["FORWARD_PROBES", "PROBES", "ready", "run_job"]


def ready(kit_code: list, warm_up: bool = True) -> dict:
    """The public kit's definitions from its (label, code) cells, with every probe run once on them (`warm_up`:
    for a server with many jobs ahead; one job pays torch's lazy loading once either way)."""
    kit, errors = load_cells([(f"kit {label}", code) for label, code in kit_code])
    if errors:
        raise RuntimeError(f"the kit's own code failed to load: {errors[0]}")
    if warm_up:
        _warm_up(kit)
    return kit


# The probes that run autograd's engine (a backward pass). The warm-up leaves them out: on a machine with a GPU the
# engine's first run starts a thread per GPU, asking CUDA for the count, and from then on torch refuses every
# backward pass in a forked child ("Unable to handle autograd's threading in combination with fork-based
# multiprocessing") and CUDA cannot start there: every child of the server would lose its gradient checks,
# and could not grade on the GPU at all. A child's first backward pass starts the engine in the child instead.
BACKWARD_PROBES = ("eval", "train", "sweep", "profile", "derivative")


def _warm_up(kit: dict) -> None:
    """Run every probe that needs no backward pass once on a public arrangement, so lazy loading happens here,
    once, not in every child (see BACKWARD_PROBES)."""

    class WarmUpBlock(kit["TransformerBlock"]):
        def forward(self, x):
            return self.drop_shortcut(self.ff(self.norm2(self.drop_shortcut(self.att(self.norm1(x))))))

    names = {
        "TransformerBlock": WarmUpBlock,
        "magnitude_by_formula": lambda f, n: [f] * n,
        "magnitude_by_autograd": lambda f, n: [f] * n,
        "classify_factor": lambda f: "stable",
    }
    probing = Probing(names, kit, Plan.draw(0), sources=[])
    for name in PROBES:
        if name not in BACKWARD_PROBES:
            run_probe(name, probing)


def run_job(kit: dict, job: dict, report) -> None:
    """Load the cells, then run each probe, handing every step to `report` as it happens (the sandbox encodes
    each observation, and refuses what it cannot read).

    `job["skipped"]` lists [index, error] of cells an earlier child could not get through (it crashed or ran
    out of time in them): they are not run again, and count as cells that raised `error`.
    """
    report({"event": "loading"})
    skipped = {index: error for index, error in job.get("skipped", [])}
    namespace, errors = load_cells([])
    for index, (label, code) in enumerate(job["cells"]):
        if index in skipped:
            errors.append({"cell": label, **skipped[index]})
            continue
        report({"event": "cell", "index": index})
        errors += load_cells([(label, code)], namespace)[1]
    report({"event": "loaded", "cell_errors": errors[:20], "defined": [name for name in GRADED_NAMES if name in namespace]})
    probing = Probing(namespace, kit, Plan.from_dict(job["plan"]), [code for _, code in job["cells"]])
    for name in job["probes"]:
        report({"event": "start", "probe": name})
        observation = run_probe(name, probing)
        report({"event": "result", "probe": name, "observation": observation})
    report({"event": "done"})
