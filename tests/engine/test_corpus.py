"""The generated corpus (catalog/generate.py) and the hand-written families (catalog/families.py).

* Every single-step mutant of Pre-LN loses points and names the step its edit breaks, read from its values alone
  (the edit is the generator's truth, never the grader's: the grader sees only the run). Every fact it states is
  true on the oracle's own run of the mutant (catalog/oracle.py), or left unevaluated there.
* Pre-LN in every style gets full marks with nothing to explain.
* The families follow their rule: right forwards full marks, do-nothing forwards no forward point, decoys on
  Post-LN exactly Post-LN's score, near misses and other wrong forwards their step and phrase; and no fact the
  grader states of any of them is false on the oracle's run (test_catalog holds its wrong forwards to the same).

The engine's verdict is a function of the child's answers, not of the isolation layer that carried them: every
case is graded once, in this process as the sandbox grades (tests/graded.py), and held to its rule there;
tests/grading/test_parity.py holds every isolation layer to the results graded so.
"""

import re

import pytest

import graded
from autograder.engine.rubric import RUBRIC, TOTAL_POINTS
from catalog.build import submission
from catalog.families import AS_POST_LN, FAMILIES, FULL, NOTHING
from catalog.generate import equivalents, mutants, styled_mutants
from catalog.oracle import false_facts
from catalog.hostile import POST_LN

FORWARD_CHECKS = [name for name in RUBRIC if name != "compounding"]


def _checked(result):
    assert not result.grader_errors, result.grader_errors
    for check in result.checks:  # every lost part says why, in words of its own
        assert all(part.message.strip() for part in check.subtests if not part.passed)
    return result


@pytest.fixture(scope="module")
def in_process(seed):
    """Grade a forward in this process (once per forward and seed in a test process: tests/graded.py)."""
    return lambda forward: _checked(graded.grade(submission(forward=forward), seed))


def _names_step(result, step: int) -> bool:
    return result.diverged is not None and result.diverged.step == step and result.first_divergence is not None


# Mutants whose step the values cannot tell: a shortcut replaced by its own half's branch as dropped gives twice that
# branch, which is also the shortcut left out and the branch doubled (a step later); a branch replaced by its own
# half's shortcut gives twice the shortcut, which is also the branch left out (its half's first step) and the sum
# doubled. They name no step (never a wrong one), and state only true facts; one that comes to name its step leaves
# this list.
UNNAMED = {
    "m089_replace", "m151_replace", "m089_replace_per_token_ff", "m151_replace_transposed_ff",
    "m098_replace", "m164_replace", "m098_replace_per_token_ff", "m164_replace_transposed_ff",
}  # fmt: skip


def _assert_mutant(result, case):
    assert result.score < TOTAL_POINTS, f"{case.edit.text}: full marks"
    if case.name in UNNAMED:
        assert result.diverged is not None and result.diverged.step is None, (case.name, result.first_divergence)
    else:
        assert _names_step(result, case.edit.step), (case.edit.text, result.first_divergence)
    false = false_facts(case.forward, result.facts)
    assert not false, (case.edit.text, false)


@pytest.mark.parametrize("case", mutants(), ids=lambda c: c.name)
def test_a_mutant_loses_points_and_names_the_step_its_edit_breaks(in_process, case):
    _assert_mutant(in_process(case.forward), case)


@pytest.mark.parametrize("case", styled_mutants(), ids=lambda c: c.name)
def test_a_mutant_written_in_another_style_is_read_the_same(in_process, case):
    _assert_mutant(in_process(case.forward), case)


def test_the_unnamed_mutants_are_mutants():
    assert UNNAMED <= {case.name for case in (*mutants(), *styled_mutants())}


@pytest.mark.parametrize("case", equivalents(), ids=lambda c: c.name)
def test_pre_ln_in_any_style_gets_full_marks(in_process, case):
    result = in_process(case.forward)
    assert result.score == TOTAL_POINTS, {c.check: c.message for c in result.checks if not c.passed}
    assert result.first_divergence is None


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_family_follows_its_rule(in_process, name):
    forward, expected = FAMILIES[name]
    result = in_process(forward)
    checks = {c.check: c for c in result.checks}
    lost = {c.check: c.message for c in result.checks if not c.passed}
    if expected == FULL:
        assert result.score == TOTAL_POINTS and result.first_divergence is None, lost
    elif expected == NOTHING:
        assert {n: checks[n].points for n in FORWARD_CHECKS} == {n: 0 for n in FORWARD_CHECKS}
    elif expected == AS_POST_LN:
        assert result.score == in_process(POST_LN).score, lost
    else:
        assert expected.check in lost and set(lost) <= set(expected.lost), lost
        assert _names_step(result, expected.step), (result.first_divergence, result.facts, result.notes, lost)
        assert expected.phrase in result.first_divergence + " ".join(lost.values()), (result.first_divergence, lost)
    assert not false_facts(forward, result.facts), false_facts(forward, result.facts)  # every fact true, in every family


def test_the_readme_states_the_corpus_as_generated():
    from autograder.course import kit

    text = " ".join(kit.documentation().split())
    counts = {
        "mutants": len(mutants()),
        "styled": len(styled_mutants()),
        "equivalents": len(equivalents()),
        "families": len(FAMILIES),
    }
    for what, count in counts.items():
        assert re.search(rf"\b{count} {what.replace('styled', 'mutants written in other styles')}\b", text), (what, count)
    from catalog.forged_evidence import FORGED

    assert f"holds {len(FORGED)} such forgers" in text


def test_the_readme_counts_the_steps_named_for_wrong_forwards_written_by_hand(in_process):
    from autograder.course import kit
    from catalog.unseen_wrong import UNSEEN_WRONG
    from catalog.wrong_forwards import WRONG

    forwards = (
        [w.forward for w in WRONG]
        + [forward for _, forward, _ in UNSEEN_WRONG]
        + [forward for forward, expected in FAMILIES.values() if expected not in (FULL, NOTHING)]
    )
    results = [in_process(forward) for forward in forwards]
    diverging = [r.checks[0].details["divergence"] for r in results if r.checks[0].details.get("divergence")]
    named = [d for d in diverging if d["step"] is not None]
    assert len(named) >= 0.9 * len(diverging)
    text = " ".join(kit.documentation().split())
    claim = (
        f"Of the {len(forwards)} forwards written by hand as wrong (catalogs and families), {len(diverging)} "
        f"diverge from Pre-LN in a value, and {len(named)} of those {len(diverging)} get a step named"
    )
    assert claim in text, claim


@pytest.mark.parametrize("factor, works", [(0.01, False), (0.3, True)])
def test_a_branch_counts_from_a_twentieth_of_pre_ln_s_weight(in_process, factor, works):
    """The 5% of docs/grading.md: branches scaled by 0.01 do no real work (no gated part pays), by 0.3 they do."""
    from autograder.course import kit
    from autograder.engine.checks import REAL_WEIGHT

    assert REAL_WEIGHT == 0.05 and "at least 5% of what it is in a Pre-LN block" in " ".join(kit.documentation().split())
    forward = f"""
        def forward(self, x):
            h = x + {factor} * self.drop_shortcut(self.att(self.norm1(x)))
            return h + {factor} * self.drop_shortcut(self.ff(self.norm2(h)))
        """
    result = in_process(forward)
    gated = next(s for c in result.checks for s in c.subtests if s.name == "dropout is off in eval mode")
    assert gated.passed == works, gated.message
    shortcut = next(s for c in result.checks for s in c.subtests if s.name == "shortcut around attention")
    assert not shortcut.passed and f"norm2 received x + {factor:g}*att(norm1(x))" in shortcut.message, shortcut.message
