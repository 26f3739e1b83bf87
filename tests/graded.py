"""Grading in the test's own process, as the sandbox grades: for the tests of what a submission earns.

What a forward earns does not depend on the sandbox that ran it: the sandbox's child only answers the grader's
questions (`engine/questions/job.py: run_job`), and everything else happens in the grader's process. The kit's
in-process grader (`grading/inprocess.py: InProcess`) stands where a `SandboxServer` stands: it runs that very
`run_job` here and hands each answer through the sandbox's own framing before the grader's door
(`grading/submission.py: grade_file`) evaluates it. So a test graded here goes through every line of the grading
a student gets, except the isolation; tests/grading/test_parity.py grades a sample through the real sandbox in
every isolation layer and holds each result to the one made here, field by field.

Only for submissions that stay in their lane: student code here shares the test's process, so a forger of the
grader's own modules, or code that attacks the machine, is graded through the sandbox (the `server` fixture).

`grade(text, seed)` is remembered for the whole test process (an xdist worker): modules of one unit of work
(tests/conftest.py GROUPS) that grade the same source on the same seed share one grading.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

NAME = "submission.py"  # every submission graded here has this file name (a result names its file)

_graded: dict = {}
_server = None


def server():
    """The in-process grader (`grading/inprocess.py: InProcess`), one per test process."""
    global _server
    if _server is None:
        from autograder.grading.inprocess import InProcess

        _server = InProcess()
    return _server


def grade(text: str, seed: int):
    """The `SubmissionResult` of a submission whose file (`submission.py`) holds `text`, graded on `seed` in this
    process; once per (text, seed) in a test process."""
    key = (text, seed)
    if key not in _graded:
        _graded[key] = grade_fresh(text, seed)
    return _graded[key]


def grade_fresh(text: str, seed: int):
    """As `grade`, never remembered nor taken from memory: for a test that changes the grader (a check made to
    crash, say) for its own grading."""
    from autograder.grading.submission import grade_file

    with tempfile.TemporaryDirectory(prefix="graded-") as folder:
        path = Path(folder) / NAME
        path.write_text(text)
        return grade_file(path, server(), seed=seed)
