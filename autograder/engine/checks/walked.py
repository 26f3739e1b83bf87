"""The train run read against Pre-LN once per submission (`diagnosis.first_step.Reading`): the gradient check reads
the masks its dropouts drew, the dropout check where it first differs."""

from __future__ import annotations

import numpy as np

from autograder.engine.diagnosis.first_step import Reading
from autograder.engine.reading.replays import per_instance
from autograder.engine.tolerance import tolerance


@per_instance
def train_reading(evidence) -> Reading | None:
    """The train run's reading, cached on `evidence`; None without a train run."""
    flow = evidence.flows.get("train")
    return None if flow is None else Reading(flow, evidence.parts, "train", tolerance(evidence.device), evidence.drop_p)


def masks(reading: Reading) -> dict | None:
    """The masks the train run's own dropouts drew ("d1", "d2": each element's ratio to Pre-LN's value before the
    dropout), where the run holds Pre-LN's values under them: one dropout call took attention's output and one the
    feed-forward network's, as drop_shortcut drops, and what the block returned is x plus both as they gave them.
    None where it does not."""
    r = reading
    x, a, d1, d2 = r.chain["x"], r.chain["a"], r.values.get("drop1.out"), r.values.get("drop2.out")
    if r.mode != "train" or d1 is None or d2 is None or not r.dropout_of(d1, a, kept=True):
        return None  # each branch's dropout is one call the ledger read whole
    h = x + d1
    f = r.run("ff", r.run("norm2", h))
    if not r.close(r.values["drop2.in"], f) or not r.dropout_of(d2, f, kept=True) or not r.close(r.values["y"], h + d2):
        return None
    return {"d1": d1 / np.where(a == 0, 1.0, a), "d2": d2 / np.where(f == 0, 1.0, f)}
