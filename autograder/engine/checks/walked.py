"""The train run set against Pre-LN boundary by boundary (`diagnosis.boundaries.Walk`), walked once per submission:
the diagnosis, the gradient check and the dropout check all read this one walk."""

from __future__ import annotations

from autograder.engine.diagnosis.boundaries import Walk
from autograder.engine.reading.replays import per_instance


@per_instance
def train_walk(evidence) -> tuple:
    """(where the train run first differs from Pre-LN, None where it does not; the masks its dropouts drew, None
    where it differs), cached on `evidence`. (None, None) without a train run. Readers must not change the first."""
    flow = evidence.flows.get("train")
    if flow is None:
        return None, None
    walk = Walk(flow, evidence.parts, "train", evidence.drop_p)
    return walk.first(), walk.masks
