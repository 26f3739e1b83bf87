"""No point from the child's word: forgers that patch the grader's harness in their own sandbox to report
made-up answers (catalog/forged_evidence.py) score no more than their honest selves, part by part.

Through the real sandbox (`server`): a forger patches the grader's modules where it runs, which in the test's own
process would be the grader's, not a child's. In one layer, the strongest this machine gives: what a child reports
is read by the same parent in every layer, and tests/grading/test_parity.py holds every layer's results to the
grader's own process."""

import pytest

from autograder.grading.submission import grade_file
from catalog.forged_evidence import FORGED


def _parts(result) -> dict:
    return {(c.check, s.name): s.passed for c in result.checks for s in c.subtests}


@pytest.mark.parametrize("case", FORGED, ids=lambda c: c.name)
def test_a_forger_gains_nothing_over_its_honest_self(server, case, seed, tmp_path):
    graded = {}
    for which in ("honest", "forged"):
        path = tmp_path / f"{which}.py"
        path.write_text(getattr(case, which))
        graded[which] = grade_file(path, server, seed=seed)
    honest, forged = graded["honest"], graded["forged"]
    assert not honest.grader_errors and not forged.grader_errors, (honest.grader_errors, forged.grader_errors)
    gained = [part for part, passed in _parts(forged).items() if passed and not _parts(honest)[part]]
    assert not gained, f"the forgery earned {gained}"
    assert forged.score <= honest.score
    missing = [aim for aim in case.aims if all(passed for (_, part), passed in _parts(honest).items() if part == aim)]
    assert not missing, f"the honest self already has {missing}: the forgery had nothing to gain there"
    for result in (honest, forged):  # a remark read from the code by the grader, whatever the child reports
        assert not case.note or any(case.note in n for n in result.notes), result.notes
