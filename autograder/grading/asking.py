"""The child's answers as the checks read them: each read strictly when a verdict first needs it, and a question
that only some verdicts need asked then, in a job of its own (`questions.probes.WHEN_NEEDED`).

The parent asks the sandbox the questions every verdict reads (`ASKED_FIRST`) in one job. A block that matches
Pre-LN is judged on those alone; one that differs is asked the diagnosis's questions (`respond`, `moved`), and one
whose forward the grader can neither match nor replay the questions it judges such a block by (`token`,
`derivative`, `same_function`), each group when the first of it is read. Every probe starts from the same state
(`run_probe`), so a question asked later gets the answer it would have got in the first job.
"""

from __future__ import annotations

from autograder.engine.questions.probes import ASKED_FIRST, FORWARD_PROBES, PROBES, WHEN_NEEDED
from autograder.engine.reading.answers import read_answer
from autograder.sandbox.inside.watch import SKIPPED

UNREPLAYABLE = WHEN_NEEDED[1]  # the questions a block the grader can neither match nor replay is judged by
GRADER_MARK = "the grader could not read its own question's answer"


class Answers(dict):
    """The child's answers by probe, each read strictly (`read_answer`) when a verdict first needs it. A probe of
    `WHEN_NEEDED` that the reply does not hold is asked then, with the rest of its group, in a job of its own
    (`ask(probes)` gives that job's observations); without `ask`, or where an earlier call of the forward ran out of
    time (the sandbox then skips every later call), it is answered as the sandbox answers a probe it did not run. A
    group the verdicts will read (`expect`) is asked in the same job as the first group asked after it is known.
    `shapes`: what each answer's values must be (`grading.reference.expected_shapes`)."""

    def __init__(self, observations: dict, shapes, ask, errors: list):
        super().__init__()
        self.observations, self.shapes, self.ask, self.errors = dict(observations), shapes, ask, errors
        self.expected: tuple = ()  # a group a later verdict will read: asked with the next group asked
        for probe in PROBES:  # the replied ones first, in the order of the questions
            if probe in ASKED_FIRST or probe in self.observations:
                self[probe]

    def get(self, probe: str, default=None):
        return self[probe] if probe in PROBES else default

    def __missing__(self, probe: str) -> dict:
        if probe not in self.observations:
            self.observations.update(self._asked(next((g for g in WHEN_NEEDED if probe in g), ())))
        answer = read_answer(probe, self.observations.get(probe), self.shapes)
        if not answer["ok"] and answer["error"].get("type") in ("GraderError", "EncoderError"):
            # the grader's own encoder (in the sandbox) or reader failed on this answer: the parts that need it are
            # the grader's errors
            self.errors.append(f"answer to '{probe}': {answer['error']['message']}")
            answer = {"ok": False, "error": {"type": "GraderError", "where": None, "message": f"{GRADER_MARK} ('{probe}')"}}
        self[probe] = answer
        return answer

    def expect(self, group: tuple) -> None:
        """`group` will be read (the flows show it): where another group is asked first, ask it in the same job."""
        self.expected = group

    def _asked(self, group: tuple) -> dict:
        """The observations of one group's job, one for each probe of it (None: that job did not answer it); the
        group is asked once, whatever it answers."""
        if not group or self.ask is None:  # a question of the first job, or no one to ask: unanswered
            return dict.fromkeys(group)
        if any(not self[p]["ok"] and self[p]["error"].get("type") in ("Timeout", "Skipped") for p in FORWARD_PROBES if p in self):
            return dict.fromkeys(group, SKIPPED)
        group = (*group, *(p for p in self.expected if p not in group and p not in self.observations))
        replied = self.ask([probe for probe in PROBES if probe in group])
        return {probe: replied.get(probe) if isinstance(replied, dict) else None for probe in group}
