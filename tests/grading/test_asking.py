"""The questions only some verdicts need (`questions.probes.WHEN_NEEDED`), asked when a verdict first reads one
(`grading.asking.Answers`).

* Asked later or all at once, the same grade: every forward drawn from the fuzzer's vocabulary, right or wrong,
  graded as the kit grades it (the first job, then a job per group a verdict needs) equals its grading by a server
  that answers every question in the first job, field by field; and the comparison fails where the late answers are
  lost.
* Asked only when needed: a forward that matches Pre-LN is asked the first job's questions alone; one that differs
  is asked the diagnosis's group too; one the grader can neither match nor replay the group it is judged by as well.
* Asked together where the runs foretell it: a block the grader cannot replay gets both groups in one job.
* Never asked after a forward ran out of time: the sandbox skips every later call of a forward then, and a late
  question is answered as skipped without a job.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import graded
from autograder.engine.questions.plan import Plan
from autograder.engine.questions.probes import ASKED_FIRST, PROBES, WHEN_NEEDED
from autograder.grading.asking import Answers
from autograder.grading.inprocess import InProcess
from autograder.grading.reference import expected_shapes, trusted_parts
from autograder.grading.submission import grade_file
from catalog.build import submission
from catalog.fuzz import draw

pytestmark = pytest.mark.quick
DIAGNOSIS, UNREPLAYABLE = WHEN_NEEDED
BOTH = tuple(probe for probe in PROBES if probe in DIAGNOSIS + UNREPLAYABLE)  # one job, where the flows foretell both
SEED = 7


class Asked(InProcess):
    """The in-process server, keeping the questions of every job it is given."""

    def __init__(self, every: bool = False, lose_late: bool = False):
        super().__init__()
        self.jobs: list[tuple] = []
        self.every, self.lose_late = every, lose_late

    def grade(self, cells, plan, probes):
        self.jobs.append(tuple(probes))
        if self.lose_late and len(self.jobs) > 1:
            return {"observations": {}, "loaded": None, "cleanup": []}
        return super().grade(cells, plan, list(PROBES) if self.every else probes)


def _graded(text: str, server: Asked, tmp_path, seed: int = SEED) -> dict:
    path = tmp_path / graded.NAME
    path.write_text(text)
    result = grade_file(path, server, seed=seed).to_dict()
    result.pop("execution_time")
    return result


@pytest.mark.slow  # the quick tier runs the others
@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), wrong=st.integers(0, 2))
def test_asked_later_or_all_at_once_the_same_grade(tmp_path_factory, seed, wrong):
    forward = draw(random.Random(seed), wrong=wrong)
    text, folder = submission(forward.source), tmp_path_factory.mktemp("asked")
    later, at_once = Asked(), Asked(every=True)
    assert _graded(text, later, folder) == _graded(text, at_once, folder), forward.source
    assert at_once.jobs == [ASKED_FIRST] and later.jobs[0] == ASKED_FIRST


def test_the_comparison_fails_where_the_late_answers_are_lost(tmp_path):
    """A forward whose verdicts need both groups: losing what the later jobs answer changes its grade."""
    text = submission(
        forward="def forward(self, x):\n    return x + torch.relu(self.ff(self.norm2(x + self.att(self.norm1(x)))))\n"
    )
    kept, lost = Asked(), Asked(lose_late=True)
    assert _graded(text, kept, tmp_path) != _graded(text, lost, tmp_path)
    assert kept.jobs == [ASKED_FIRST, BOTH]


@pytest.mark.parametrize(
    "forward, asked",
    [
        (
            "def forward(self, x):\n    h = x + self.drop_shortcut(self.att(self.norm1(x)))\n"
            "    return h + self.drop_shortcut(self.ff(self.norm2(h)))\n",
            [ASKED_FIRST],
        ),
        (
            "def forward(self, x):\n    h = x + self.drop_shortcut(self.att(self.norm1(x)))\n"
            "    return h + self.drop_shortcut(self.ff(self.norm2(x)))\n",
            [ASKED_FIRST, DIAGNOSIS],
        ),
        (
            "def forward(self, x):\n    h = x + self.drop_shortcut(self.att(self.norm1(x)))\n"
            "    return h + torch.tanh(self.drop_shortcut(self.ff(self.norm2(h))))\n",
            [ASKED_FIRST, BOTH],
        ),
    ],
    ids=["pre-ln", "ff on x (replayable)", "tanh on a branch (not replayable)"],
)
def test_a_question_is_asked_only_where_a_verdict_reads_it(tmp_path, forward, asked):
    server = Asked()
    result = _graded(submission(forward=forward), server, tmp_path)
    assert server.jobs == asked, (server.jobs, result["first_divergence"])


def _answers(observations: dict, asked: list) -> Answers:
    plan = Plan.draw(SEED)
    return Answers(observations, expected_shapes(plan, trusted_parts(graded.server().assignment, plan)), asked.append, [])


def test_a_late_question_is_asked_once_with_what_the_runs_foretell_and_skipped_after_a_timeout():
    timeout = {"ok": False, "error": {"type": "Timeout", "message": "your code did not finish within 3 s"}}
    asked: list = []
    answers = _answers({"sweep": timeout}, asked)
    for probe in (*DIAGNOSIS, *UNREPLAYABLE):
        assert answers[probe]["error"]["type"] == "Skipped", answers[probe]
    assert asked == []
    answered = _answers({}, asked)
    assert answered["derivative"]["ok"] is False and asked == [[p for p in PROBES if p in UNREPLAYABLE]]
    answered["token"], answered["same_function"]  # the rest of its group: no other job
    assert len(asked) == 1
    foretold: list = []
    answers = _answers({}, foretold)
    answers.expect(UNREPLAYABLE)  # the runs show a block the grader cannot replay
    answers["moved"], answers["derivative"], answers["respond"]
    assert foretold == [list(BOTH)]
