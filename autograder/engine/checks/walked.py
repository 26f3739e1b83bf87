"""The train run read against Pre-LN once per submission (`diagnosis.first_step.Reading`): the gradient check reads
the masks its dropouts drew, the dropout check where it first differs."""

from __future__ import annotations

from autograder.engine.diagnosis.first_step import Reading
from autograder.engine.reading.replays import per_instance
from autograder.engine.tolerance import tolerance


@per_instance
def train_reading(evidence) -> Reading | None:
    """The train run's reading, cached on `evidence`; None without a train run."""
    flow = evidence.flows.get("train")
    return None if flow is None else Reading(flow, evidence.parts, "train", tolerance(evidence.device), evidence.drop_p)
