import os
import random

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture(scope="session")
def server():
    """One warmed sandbox server for the whole test session."""
    from autograder.sandbox import SandboxServer

    with SandboxServer() as sandbox:
        yield sandbox


@pytest.fixture(scope="session")
def seed():
    """A random grading seed per test session (printed on failure), as in real grading runs."""
    value = int(os.environ.get("GRADER_TEST_SEED") or random.randrange(1, 2**31))
    print(f"grading seed for this session: {value} (set GRADER_TEST_SEED to repeat)")
    return value


@pytest.fixture
def grade_source(server, seed, tmp_path):
    """Grade `.py` source text through the real sandbox; returns the SubmissionResult."""
    from autograder.grading import grade_file

    def grade(text: str, name: str = "submission.py", seed: int = seed):
        path = tmp_path / name
        path.write_text(text)
        return grade_file(path, server, seed=seed)

    return grade
