"""Grading one submission on a sandbox server of its own (the command line's `grade`, Gradescope's autograder).

The server starts first: it imports torch on its own while this process imports the grader. The reference's
answers are computed here, in a thread, while this process imports the rest of the grader and the server's child
answers the questions; evaluating the answers waits for them. Nothing here imports torch before the server has
started. The server skips its warm-up (running every question once, for a class's many children): its one child
pays torch's lazy loading once instead.
"""

from __future__ import annotations

from pathlib import Path

from autograder.engine.results import SubmissionResult
from autograder.sandbox.parent.pool import ServerPool
from .options import GradingOptions


def grade_one(submission: Path, *, options: GradingOptions) -> SubmissionResult:
    """Grade `submission` (a notebook or a .py file); its own folder and `options.private` are hidden from it.

    Refuses before anything runs where nothing can isolate it (`IsolationUnavailable`, unless `options.unsafe`)
    and where the device is not there (`DeviceUnavailable`). Otherwise never raises for the submission or the
    grader: a failure of the grader is a result that names it. The result is returned once the submission and
    everything it started have ended."""
    submission = Path(submission)
    with ServerPool(limits=options.limits, unsafe=options.unsafe, isolation=options.isolation, warm_up=False) as servers:
        servers.launch(options.assignment, private=(submission.resolve().parent, *options.private))
        options = options.resolved()  # imports torch
        from .reference import reference_meanwhile

        try:
            with reference_meanwhile(options.seed, options.device, options.assignment):  # as the child answers
                from .submission import grade_file  # the rest of the grader, imported as the reference computes

                servers.wait_until_ready()
                with servers.lend() as server:
                    return grade_file(submission, server, seed=options.seed, device=options.device)
        except Exception as error:  # never a traceback for a submission: the grader's failure is a result
            from .submission import grader_failure

            return grader_failure(submission.name, error, options.seed, options.device, assignment=options.assignment)
