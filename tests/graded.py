"""Grading in the test's own process, as the sandbox grades: for the tests of what a submission earns.

What a forward earns does not depend on the sandbox that ran it: the sandbox's child only answers the grader's
questions (`engine/questions/job.py: run_job`), and everything else happens in the grader's process. `InProcess`
stands where a `SandboxServer` stands: its `grade` runs that very `run_job` here, with one torch thread as the
sandbox's server sets, and hands each answer through the sandbox's own framing and bookkeeping (`protocol.frame`,
`watch.Run.follow`: encoded, sent as JSON, bounded, loaded cells and their errors) before the real parent
(`grading/submission.py: grade_file`, the grader's door) evaluates it. So a test graded here goes through every
line of the grading a student gets, except the isolation; tests/grading/test_parity.py grades a sample through
the real sandbox in every isolation layer and holds each result to the one made here, field by field.

Only for submissions that stay in their lane: student code here shares the test's process, so a forger of the
grader's own modules, or code that attacks the machine, is graded through the sandbox (the `server` fixture).

`grade(text, seed)` is remembered for the whole test process (an xdist worker): modules of one unit of work
(tests/conftest.py GROUPS) that grade the same source on the same seed share one grading.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
from dataclasses import asdict
from pathlib import Path

NAME = "submission.py"  # every submission graded here has this file name (a result names its file)
ISOLATION = "none: graded in the test's own process"

_graded: dict = {}


class InProcess:
    """A `SandboxServer` for `grade_file`, with the child's job run in this process."""

    isolation = ISOLATION

    def __init__(self):
        from autograder.course import kit

        self.assignment = kit.KIT
        self._kit = None

    def grade(self, cells: list, plan: dict, probes: list) -> dict:
        import torch

        from autograder.engine.questions import job
        from autograder.sandbox.inside.protocol import MAX_ANSWER_BYTES, FrameReader, encoded_answer, frame
        from autograder.sandbox.inside.watch import Run
        from autograder.sandbox.parent.policy import Limits

        if self._kit is None:
            self._kit = job.ready(self.assignment.public_code(), warm_up=False)
        run = Run(asdict(Limits()), lambda: 0.0, {}, bytearray(), -1, job.PROBES)
        reader, sent = FrameReader(), [0]

        def report(event: dict) -> None:  # as `child.Reporter` sends it and the supervisor's `Run` reads it
            if "observation" in event:
                event = {**event, "observation": encoded_answer(event["observation"])}
            data = frame(event)
            sent[0] += len(data)
            for item in reader.feed(data):
                run.follow(item)

        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # as the sandbox's server runs every child
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                job.run_job(self._kit, {"cells": cells, "plan": plan, "probes": probes}, report)
        finally:
            torch.set_num_threads(threads)
        missing = [probe for probe in probes if probe not in run.observations]
        assert run.done and not missing, f"the job ended without answering {missing}"
        # past this, the sandbox stops reading a child's answers (`Run.take`): such a submission is graded there
        assert sent[0] <= MAX_ANSWER_BYTES, f"answers of {sent[0]} bytes: over what the sandbox reads of a job"
        return {"observations": run.observations, "loaded": run.loaded, "cleanup": []}


_server: InProcess | None = None


def server() -> InProcess:
    global _server
    if _server is None:
        _server = InProcess()
    return _server


def grade(text: str, seed: int):
    """The `SubmissionResult` of a submission whose file (`submission.py`) holds `text`, graded on `seed` in this
    process; once per (text, seed) in a test process."""
    key = (text, seed)
    if key not in _graded:
        from autograder.grading.submission import grade_file

        with tempfile.TemporaryDirectory(prefix="graded-") as folder:
            path = Path(folder) / NAME
            path.write_text(text)
            _graded[key] = grade_file(path, server(), seed=seed)
    return _graded[key]


def grade_fresh(text: str, seed: int):
    """As `grade`, never remembered nor taken from memory: for a test that changes the grader (a check made to
    crash, say) for its own grading."""
    from autograder.grading.submission import grade_file

    with tempfile.TemporaryDirectory(prefix="graded-") as folder:
        path = Path(folder) / NAME
        path.write_text(text)
        return grade_file(path, server(), seed=seed)
