"""The generated corpus (catalog/generate.py) and the hand-written families (catalog/families.py).

* Every single-step mutant of Pre-LN loses points, names the step its edit breaks, and names as its cause
  that very edit, or one that gives the same programs in both modes: a cause is never a guess.
* Pre-LN in every style gets full marks with nothing to explain.
* The families follow their rule: right forwards full marks, do-nothing forwards no forward point, decoys on
  Post-LN exactly Post-LN's score, near misses and other wrong forwards their step and phrase.

The engine's verdict is a function of the child's answers, not of the isolation layer that carried them: every
case is graded once, in this process (`grading/inprocess.py`, one thread as the sandbox's child runs), and held
to its rule there; a fixed sample of every family (`_layer_sample`) is graded again through the real sandbox in
every isolation layer this machine has (the layers of test_hostile.py), one server per layer, and must get the
very same result, part by part and fact by fact. The layers themselves are tested by the sandbox's own tests.
"""

import re

import pytest
import torch

from autograder.course.notebook import read_cells
from autograder.engine.diagnosis.edits import single_edits
from autograder.engine.rubric import RUBRIC, TOTAL_POINTS
from autograder.grading.inprocess import grade_cells_in_process
from autograder.grading.submission import grade_file
from catalog.build import submission
from catalog.families import AS_POST_LN, FAMILIES, FULL, NOTHING
from catalog.generate import DROP_P, DROP_PS, FACTORS, VARIANTS, program_key, equivalents, mutants, styled_mutants
from catalog.hostile import POST_LN

FORWARD_CHECKS = [name for name in RUBRIC if name != "compounding"]
PER_FAMILY = 10  # cases of each family graded again in every isolation layer


def _spread(items: list, count: int = PER_FAMILY) -> list:
    """`count` items spread evenly over `items`, always the same ones."""
    step = max(1, len(items) // count)
    return items[::step][:count]


def _layer_sample() -> list[tuple[str, str]]:
    """(name, forward) of the cases graded in every layer: ten of each family of the corpus, and Post-LN."""
    cases = [(c.name, c.forward) for family in (mutants(), styled_mutants(), equivalents()) for c in _spread(list(family))]
    cases += [(name, FAMILIES[name][0]) for name in _spread(sorted(FAMILIES))]
    return cases + [("post_ln", POST_LN)]


@pytest.fixture(scope="module")
def causes() -> dict:
    """Programs (eval, train) -> every (step, text) of an edit that gives them."""
    found: dict = {}
    for edit in single_edits(factors=FACTORS, variants=VARIANTS, drop_ps=DROP_PS):
        found.setdefault(program_key(edit.program(DROP_P)), set()).add((edit.step, edit.text))
    return found


def _checked(result):
    assert not result.grader_errors, result.grader_errors
    for check in result.checks:  # every lost part says why, in words of its own
        assert all(part.message.strip() for part in check.subtests if not part.passed)
    return result


@pytest.fixture(scope="module")
def in_process(seed, tmp_path_factory):
    """Grade a forward in this process, once per forward for the whole module."""
    graded: dict = {}
    folder = tmp_path_factory.mktemp("in_process")

    def grade(forward: str):
        if forward not in graded:
            path = folder / f"submission_{len(graded)}.py"
            path.write_text(submission(forward=forward))
            threads = torch.get_num_threads()
            torch.set_num_threads(1)  # as the sandbox's child grades
            try:
                graded[forward] = _checked(grade_cells_in_process(read_cells(path), seed))
            finally:
                torch.set_num_threads(threads)
        return graded[forward]

    return grade


def _verdict(result) -> dict:
    """Everything a result says of the forward (not how it was run: no file name, layer or time)."""
    return {key: value for key, value in result.to_dict().items() if key not in ("submission", "isolation", "execution_time")}


def _names_step(result, step: int) -> bool:
    return result.diverged is not None and result.diverged.step == step and result.first_divergence is not None


def _assert_mutant(result, case, causes):
    assert result.score < TOTAL_POINTS, f"{case.edit.text}: full marks"
    assert _names_step(result, case.edit.step), (case.edit.text, result.first_divergence)
    assert result.diverged.cause is not None, f"{case.edit.text}: no verified cause ({result.first_divergence})"
    found = result.checks[0].details["divergence"]  # the cause's words, for the instructor
    assert (result.diverged.step, found["message"]) in causes[case.key], (case.edit.text, found)


@pytest.mark.parametrize("case", mutants(), ids=lambda c: c.name)
def test_a_mutant_loses_points_and_names_its_own_edit(in_process, case, causes):
    _assert_mutant(in_process(case.forward), case, causes)


@pytest.mark.parametrize("case", styled_mutants(), ids=lambda c: c.name)
def test_a_mutant_written_in_another_style_is_read_the_same(in_process, case, causes):
    _assert_mutant(in_process(case.forward), case, causes)


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


def test_the_readme_counts_the_causes_named_for_wrong_forwards_written_by_hand(in_process):
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
    named = [d for d in diverging if d["cause"]]
    assert len(named) >= 0.9 * len(diverging)
    text = " ".join(kit.documentation().split())
    claim = (
        f"Of the {len(forwards)} forwards written by hand as wrong (catalogs and families), {len(diverging)} "
        f"diverge from Pre-LN in a value, and {len(named)} of those {len(diverging)} get a verified cause"
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
    assert not shortcut.passed and f"coefficient {factor:g}" in shortcut.message


@pytest.mark.parametrize("name, forward", _layer_sample(), ids=[name for name, _ in _layer_sample()])
def test_a_sample_of_every_family_is_graded_alike_in_every_layer(layer_server, in_process, name, forward, seed, tmp_path):
    path = tmp_path / "submission.py"
    path.write_text(submission(forward=forward))
    assert _verdict(_checked(grade_file(path, layer_server, seed=seed))) == _verdict(in_process(forward))


def test_the_layer_sample_holds_every_family():
    names = [name for name, _ in _layer_sample()]
    assert len(names) == len(set(names)) == 4 * PER_FAMILY + 1
    for family in (mutants(), styled_mutants(), equivalents()):
        assert sum(name in {c.name for c in family} for name in names) == min(PER_FAMILY, len(family))
