"""Pre-LN's equations between boundary values (`engine.ledger`, `steps.EQUATIONS`), on runs the fuzzer's oracle
records itself (`catalog/oracle.py`: its own block, weights and hooks) and the grader's reading names.

The generators know the truth by construction: a right forward (Pre-LN in every style, the fuzzer's forwards with
only value-keeping rewrites) breaks no equation; and since the equations chain x to y through the grader's own
components (norm1.in = x, att.in = norm1.out, norm2.in = x + att.out, ff.in = norm2.out, y = norm2.in + ff.out in
eval mode), a forward whose eval output is not Pre-LN's cannot hold them all: one fails, or one cannot be read. A
part paid by an equation is then paid only for values that are Pre-LN's at that step.

The shortcut additions and the LayerNorm in front of each branch are paid by their equations (`checks.half_part`):
a forward wrong at one step keeps the points of the steps whose equations hold.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from autograder.engine import fits, ledger
from autograder.engine.steps import EQUATIONS, HALVES
from catalog.build import submission
from catalog.fuzz import draw
from catalog.generate import equivalents, mutants
from catalog.oracle import DROP_P, Run, _close
from recorded import TOL, read
from tiers import quick_sample


def outcomes(forward: str, mode: str = "eval") -> tuple[dict, bool | None]:
    """The equations' outcomes on the oracle's run of `forward` in `mode`, read as the grader reads a child's
    answer (calls, passes over a component's own layers, then `analyse`), and whether that run's output is
    Pre-LN's (in train mode under the masks of the forward's own dropout calls; None where the oracle finds none)."""
    run, flow, y = read(forward, mode)
    pre_ln = run.pre[mode].get("pre_ln")
    found = ledger.evaluate(ledger.boundaries(flow, DROP_P), mode, TOL)
    return found, None if pre_ln is None else _close(y, pre_ln)


SHOWN = {
    "eval": [step for step, (left, _) in EQUATIONS.items() if not left.startswith("drop")],  # a dropout shows nothing
    "train": list(EQUATIONS),
}


def _holds_all(found: dict, mode: str = "eval") -> bool:
    """Every equation the mode shows holds, and none fails (in eval mode a dropout that acted fails its step)."""
    return all(found[step] == ledger.HOLDS for step in SHOWN[mode]) and ledger.FAILS not in found.values()


@pytest.mark.quick
@pytest.mark.parametrize("mode", ["eval", "train"])
@pytest.mark.parametrize("case", equivalents(), ids=lambda case: case.name)
def test_pre_ln_in_every_style_breaks_no_equation(case, mode):
    found, same = outcomes(case.forward, mode)
    assert same is not False and ledger.FAILS not in found.values(), found


MUTANTS = mutants()


@pytest.mark.parametrize("mode", ["eval", "train"])
@pytest.mark.parametrize("case", quick_sample(MUTANTS, every=8), ids=lambda case: case.name)
def test_a_single_step_mutant_whose_output_differs_holds_not_every_equation(case, mode):
    """In train mode the output is set against Pre-LN under the masks the mutant's own dropout calls drew."""
    found, same = outcomes(case.forward, mode)
    assert same is not False or not _holds_all(found, mode), (case.edit.text, found)


SUM_STEPS = {HALVES["att"].saved, HALVES["att"].sum, HALVES["ff"].saved, HALVES["ff"].sum}  # a shortcut or a sum


SUM_MUTANTS = [mutant for mutant in MUTANTS if mutant.edit.step in SUM_STEPS]


@pytest.mark.parametrize("case", quick_sample(SUM_MUTANTS, every=4), ids=lambda case: case.name)
def test_a_mutant_of_a_shortcut_or_a_sum_never_holds_both_sums_at_the_output(case):
    """Both sums read at the output (y = x + both branches) pay both additions: no edit of a shortcut or a sum whose
    output differs from Pre-LN's holds it."""
    found, same = outcomes(case.forward)
    assert same or found[ledger.SUMS] != ledger.HOLDS, (case.edit.text, found)


@pytest.mark.quick
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), wrong=st.integers(0, 3), open_only=st.sampled_from([True, None, False]))
@example(seed=10681, wrong=3, open_only=False)  # two negations of the feed-forward branch undo each other
def test_a_fuzzed_forward_breaks_an_equation_exactly_when_its_values_are_not_pre_ln(seed, wrong, open_only):
    """Right: no equation fails. Wrong with another eval output: not every equation holds. (A wrong forward whose
    eval output is Pre-LN's, its change shown in train mode or in gradients only, may hold them all.)"""
    forward = draw(random.Random(seed), wrong=wrong, open_only=open_only if wrong else None)
    for mode in ("eval", "train"):
        found, same = outcomes(forward.source, mode)
        if forward.right:
            assert same is not False and ledger.FAILS not in found.values(), (forward.name, mode, found)
        else:
            assert same is not False or not _holds_all(found, mode), (forward.name, mode, found)
    found, _ = outcomes(forward.source)
    # one change alone: two may undo each other (a branch negated on its way out of the dropout and again into the sum)
    summed = [c for c in forward.changes if c.shows == "both" and set(c.steps) & SUM_STEPS and len(forward.changes) == 1]
    assert not summed or found[ledger.SUMS] != ledger.HOLDS, (forward.name, found)


def fitted(forward: str) -> list:
    """Every sum the ledger writes (`fits.fit`) for a boundary whose equation fails on the oracle's eval runs of
    `forward` (two, as the grader reads two), with the oracle's verdict on it on the first (True, False, or None where
    it cannot evaluate it)."""
    (run, flow, _), (_, other, _) = read(forward), read(forward, seed=1)
    found = ledger.combined([ledger.evaluate(ledger.boundaries(f), "eval", TOL) for f in (flow, other)])
    failing = {left for step, (left, _) in ledger.ALL.items() if found[step] == ledger.FAILS}
    named = fits.named_outputs(found)
    facts = [fits.fit([flow, other], left, TOL, named) for left in fits.HANDED if left in failing]
    return [(fact, run.check(fact.to_dict())) for fact in facts if fact is not None]


@pytest.mark.quick
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), wrong=st.integers(1, 3), open_only=st.sampled_from([True, None, False]))
def test_what_the_ledger_writes_of_a_failing_equation_is_true_on_the_oracles_run(seed, wrong, open_only):
    forward = draw(random.Random(seed), wrong=wrong, open_only=open_only)
    assert all(verdict is not False for _, verdict in fitted(forward.source)), (forward.name, fitted(forward.source))


@pytest.mark.parametrize("case", quick_sample(SUM_MUTANTS, every=4), ids=lambda case: case.name)
def test_what_the_ledger_writes_of_a_mutant_of_a_sum_is_true(case):
    assert all(verdict is not False for _, verdict in fitted(case.forward)), (case.edit.text, fitted(case.forward))


@pytest.mark.parametrize(
    "forward, said",
    [
        ("h = x + self.drop_shortcut(self.att(self.norm1(x)))\n    return h + self.drop_shortcut(self.ff(x - self.norm2(h)))",
         ["the feed-forward network received x - norm2(h)"]),
        ("h = x + self.drop_shortcut(self.att(self.norm1(x)))\n    return 2 * h + self.drop_shortcut(self.ff(self.norm2(h)))",
         ["your forward returned 2*h + ff(norm2(h))"]),
        ("h = self.drop_shortcut(self.att(self.norm1(x)))\n    return h + self.drop_shortcut(self.ff(self.norm2(h)))",
         ["norm2 received att(norm1(x))", "your forward returned att(norm1(x)) + the output of the feed-forward network"]),
        ("h = x + self.drop_shortcut(self.att(self.norm1(x)))\n    return h + self.drop_shortcut(self.ff(self.norm2(h).tanh()))",
         []),  # no sum of earlier values: nothing is said
    ],
)  # fmt: skip
def test_the_ledger_writes_what_a_component_received_where_its_equation_fails(forward, said):
    """Both ways: a fit is said where the received value is a sum of earlier outputs, and it is the true one."""
    found = fitted("def forward(self, x):\n    " + forward)
    assert [fact.text() for fact, _ in found] == said and all(verdict is True for _, verdict in found), found


FIRST, SECOND = HALVES["att"], HALVES["ff"]


@pytest.mark.quick
@pytest.mark.parametrize(
    "forward, mode, expected",
    [
        # the first shortcut left out: its sum fails, the dropout's own equation holds
        ("h = self.drop_shortcut(self.att(self.norm1(x)))\n    return h + self.drop_shortcut(self.ff(self.norm2(h)))", "train",
         {FIRST.sum: ledger.FAILS, ledger.ONCE["att"]: ledger.HOLDS, ledger.ADDED["att"]: ledger.FAILS}),
        # attention's output dropped twice: the first dropout is found on it, and what it gave is dropped again
        ("h = x + self.drop_shortcut(self.drop_shortcut(self.att(self.norm1(x))))\n"
         "    return h + self.drop_shortcut(self.ff(self.norm2(h)))", "train",
         {FIRST.drop: ledger.HOLDS, ledger.ONCE["att"]: ledger.FAILS, ledger.ONCE["ff"]: ledger.HOLDS}),
        # a dropout on the shortcut too: the branch's own dropout holds its equations, the sum is not Pre-LN's
        ("h = self.drop_shortcut(x) + self.drop_shortcut(self.att(self.norm1(x)))\n"
         "    return h + self.drop_shortcut(self.ff(self.norm2(h)))", "train",
         {ledger.ONCE["att"]: ledger.HOLDS, FIRST.sum: ledger.FAILS}),
        # a dropout left on in eval mode: its own step fails there, and the sum holds what it gave
        ("h = x + torch.nn.functional.dropout(self.att(self.norm1(x)), 0.5, True)\n"
         "    return h + self.drop_shortcut(self.ff(self.norm2(h)))", "eval",
         {FIRST.drop: ledger.FAILS, FIRST.sum: ledger.HOLDS, ledger.ADDED["att"]: ledger.HOLDS}),
        # norm1 run on h for the feed-forward network too: norm1 is read where it feeds attention
        ("h = x + self.drop_shortcut(self.att(self.norm1(x)))\n    return h + self.drop_shortcut(self.ff(self.norm1(h)))", "eval",
         {FIRST.norm: ledger.HOLDS, FIRST.branch: ledger.HOLDS, ledger.ADDED["att"]: ledger.HOLDS}),
        # attention run where the feed-forward network runs too: attention is read where norm1's output went
        ("h = x + self.drop_shortcut(self.att(self.norm1(x)))\n"
         "    return h + self.drop_shortcut(self.att(self.norm2(h)))", "train",
         {FIRST.branch: ledger.HOLDS, ledger.ADDED["att"]: ledger.HOLDS, ledger.ONCE["att"]: ledger.HOLDS,
          SECOND.branch: ledger.UNKNOWN}),
        # attention applied twice in a row: the first call is attention's, the second a call on its output alone
        ("h = x + self.drop_shortcut(self.att(self.att(self.norm1(x))))\n"
         "    return h + self.drop_shortcut(self.ff(self.norm2(h)))", "eval",
         {FIRST.branch: ledger.HOLDS, ledger.ADDED["att"]: ledger.HOLDS}),
        # attention's output normalized again before its dropout: a call on the branch alone, then added to x
        ("h = x + self.drop_shortcut(self.norm1(self.att(self.norm1(x))))\n"
         "    return h + self.drop_shortcut(self.ff(self.norm2(h)))", "eval",
         {ledger.ADDED["att"]: ledger.HOLDS, FIRST.branch: ledger.HOLDS, FIRST.sum: ledger.FAILS}),
        # the first sum clamped on its way into norm2: where the branch went is unknown, both sums still show at the output
        ("h = x + self.drop_shortcut(self.att(self.norm1(x)))\n"
         "    return h + self.drop_shortcut(self.ff(self.norm2(h.clamp(-0.3, 0.3))))", "eval",
         {ledger.ADDED["att"]: ledger.UNKNOWN, ledger.SUMS: ledger.HOLDS}),
        # a LayerNorm on the shortcut path: the second half starts from norm1(h), not from the first half's sum
        ("h = x + self.drop_shortcut(self.att(self.norm1(x)))\n    n = self.norm1(h)\n"
         "    return n + self.drop_shortcut(self.ff(self.norm2(n)))", "eval",
         {"path x": ledger.HOLDS, "path h": ledger.FAILS, "path y": ledger.HOLDS, ledger.ADDED["ff"]: ledger.HOLDS}),
        # the feed-forward network applied twice in a row: a call on the branch alone, the path runs straight
        ("h = x + self.drop_shortcut(self.att(self.norm1(x)))\n"
         "    return h + self.drop_shortcut(self.ff(self.ff(self.norm2(h))))", "eval",
         {"path x": ledger.HOLDS, "path h": ledger.HOLDS, "path y": ledger.HOLDS, SECOND.branch: ledger.HOLDS}),
        # the attention branch halved on its way into the sum
        ("h = x + 0.5 * self.drop_shortcut(self.att(self.norm1(x)))\n    return h + self.drop_shortcut(self.ff(self.norm2(h)))",
         "eval", {ledger.ADDED["att"]: ledger.FAILS, ledger.ADDED["ff"]: ledger.HOLDS}),
        # Post-LN: the first branch is added to what attention received (x); the second half starts from norm1's output
        ("x = self.norm1(x + self.drop_shortcut(self.att(x)))\n    return self.norm2(x + self.drop_shortcut(self.ff(x)))",
         "eval", {ledger.ADDED["att"]: ledger.HOLDS, ledger.ADDED["ff"]: ledger.FAILS}),
        # an extra LayerNorm in front of the feed-forward network: the branch is still added to h, which was normalized
        ("h = x + self.drop_shortcut(self.att(self.norm1(x)))\n"
         "    return h + self.drop_shortcut(self.ff(self.norm2(self.norm1(h))))",
         "eval", {ledger.ADDED["ff"]: ledger.HOLDS, SECOND.branch: ledger.HOLDS}),
        # norm2 on a rearranged value that is no sum, flipped back: the reading can only assume the order of what norm2
        # received, so the feed-forward network's values sit right against norm2's and not against x or y (a fuzzed forward)
        ("h = x + self.drop_shortcut(self.att(self.norm1(x)))\n"
         "    return h + self.drop_shortcut(self.ff(self.norm2(torch.relu(h).flip(1)).flip(1)))",
         "eval", {FIRST.sum: ledger.FAILS, SECOND.branch: ledger.HOLDS, ledger.SUMS: ledger.UNKNOWN, SECOND.sum: ledger.UNKNOWN}),
        # the feed-forward network handed the first sum itself (no norm2): in train mode attention's dropout is still
        # the branch as added, though the sum it went into is what the other branch received
        ("h = x + self.drop_shortcut(self.att(self.norm1(x)))\n    return self.norm2(h + self.drop_shortcut(self.ff(h)))",
         "train", {ledger.ADDED["att"]: ledger.HOLDS, FIRST.drop: ledger.HOLDS}),
    ],
)  # fmt: skip
def test_each_half_s_own_parts_read_their_own_values(forward, mode, expected):
    """The dropout part's equation (what the dropout gave is dropped no more) and the addition part's (the
    branch, as dropped, added unscaled to the value its half started from, wherever that sum went), beside Pre-LN's:
    a mistake at one step leaves the other parts' equations as they are, both ways."""
    found, _ = outcomes("def forward(self, x):\n    " + forward, mode)
    assert {key: found[key] for key in expected} == expected, found


def test_the_ledger_reads_eval_and_train_runs_alone():
    with pytest.raises(ValueError):
        ledger.evaluate({}, "profile", TOL)


def test_outcomes_over_several_runs_hold_only_where_every_run_holds():
    runs = [{5: ledger.HOLDS, 10: ledger.HOLDS, 3: ledger.UNKNOWN}, {5: ledger.HOLDS, 10: ledger.FAILS, 3: ledger.HOLDS}]
    assert ledger.combined(runs) == {5: ledger.HOLDS, 10: ledger.FAILS, 3: ledger.UNKNOWN}
    assert ledger.combined([]) == {}


def _parts(result, check: str) -> dict:
    return {s.name: s.passed for c in result.checks if c.check == check for s in c.subtests}


@pytest.mark.quick
def test_a_step_wrong_elsewhere_keeps_the_points_of_the_steps_whose_equations_hold(grade_here):
    """The feed-forward network handed -norm2(h) (step 8 wrong): both additions hold their equations (norm2
    receives x + attention's output, the block returns that + the feed-forward output), and the shortcut path runs
    straight; only norm2's part in front of the branch is lost among these. norm2 handed softplus(h) (its own step
    wrong): h is not seen at norm2, and both additions show at the output (x + both branches). The first shortcut
    clamped (step 1 wrong): the second addition still holds its equation."""
    negated = grade_here(
        submission(
            forward="""
            def forward(self, x):
                h = x + self.drop_shortcut(self.att(self.norm1(x)))
                return h + self.drop_shortcut(self.ff(-self.norm2(h)))
            """
        )
    )
    assert all(_parts(negated, "forward_shortcuts").values()), _parts(negated, "forward_shortcuts")
    prenorm = _parts(negated, "forward_prenorm")
    assert prenorm["norm1 feeds attention"] and not prenorm["norm2 feeds the feed-forward network"]
    clamped = grade_here(
        submission(
            forward="""
            def forward(self, x):
                h = x.clamp(-0.3, 0.3) + self.drop_shortcut(self.att(self.norm1(x)))
                return h + self.drop_shortcut(self.ff(self.norm2(h)))
            """
        )
    )
    softplus = grade_here(
        submission(
            forward="""
            def forward(self, x):
                h = x + self.drop_shortcut(self.att(self.norm1(x)))
                return h + self.drop_shortcut(self.ff(self.norm2(torch.nn.functional.softplus(h))))
            """
        )
    )
    both = _parts(softplus, "forward_shortcuts")
    assert both["shortcut around attention"] and both["shortcut around the feed-forward network"], both
    shortcuts = _parts(clamped, "forward_shortcuts")
    assert shortcuts == {
        "shortcut around attention": False,
        "shortcut around the feed-forward network": True,
        "silent branches give back the input": False,
    }, shortcuts


@pytest.mark.quick
def test_a_branch_called_through_its_own_layers_keeps_the_parts_its_equations_pay(grade_here):
    """The feed-forward network handed -norm2(h), called whole or layer by layer (the child counts each layer's
    call as a run of it, and reads the pass as one call): the same parts either way, the equations of the sums read
    on both eval-mode runs (the grader's input and the other one)."""
    whole = """
        def forward(self, x):
            h = x + self.drop_shortcut(self.att(self.norm1(x)))
            return h + self.drop_shortcut(self.ff(-self.norm2(h)))
        """
    layered = whole.replace("self.ff(-self.norm2(h))", "self.ff.layers[2](self.ff.layers[1](self.ff.layers[0](-self.norm2(h))))")
    plain, written = grade_here(submission(forward=whole)), grade_here(submission(forward=layered))
    assert _parts(written, "forward_shortcuts") == _parts(plain, "forward_shortcuts")
    assert all(_parts(written, "forward_shortcuts").values()), _parts(written, "forward_shortcuts")


@pytest.mark.quick
@pytest.mark.parametrize("scale, passed", [("1.0001", False), ("1.0", True)])
def test_a_shortcut_scaled_a_little_loses_its_own_part_with_the_sum_the_block_returned(grade_here, scale, passed):
    """Where an equation of each of a part's alternatives fails and the ledger says why, the part fails, whatever
    the half reading would pay (it compares sums at the wider tolerance of a replay): the second shortcut scaled by
    1.0001 fails Pre-LN's sum, both sums at the output and the half's own, and the fact is true on the oracle's run."""
    forward = f"""
        def forward(self, x):
            x = x + self.drop_shortcut(self.att(self.norm1(x)))
            return {scale} * x + self.drop_shortcut(self.ff(self.norm2(x)))
        """
    result = grade_here(submission(forward=forward))
    part = next(s for c in result.checks for s in c.subtests if s.name == "shortcut around the feed-forward network")
    assert part.passed == passed and _parts(result, "forward_shortcuts")["shortcut around attention"], part.message
    if not passed:
        assert part.message.startswith("Your forward returned 1.0001*h + ff(norm2(h))"), part.message
        sums = [fact for fact in result.facts if fact["kind"] == "sum" and fact["component"] is None]
        assert sums and all(Run(forward).check(fact) is True for fact in sums), sums


@pytest.mark.quick
@pytest.mark.parametrize(
    "handed, said, kind",
    [
        ("-self.norm2(h)", "the feed-forward network received -norm2(h); Pre-LN hands the feed-forward network norm2(h)", "sum"),
        ("self.norm2(h).tanh()", "the feed-forward network received a value that is not norm2(h) and that the grader cannot "
         "write as a sum of the block input and the outputs of the components before it", "unknown"),
    ],
)  # fmt: skip
def test_a_part_whose_equation_fails_says_why_as_a_fact_the_oracle_holds_true(grade_here, handed, said, kind):
    """What the feed-forward network received, where its equation fails: a sum of earlier values where the ledger can
    write one, else that it is not Pre-LN's value there; either way a typed fact of the part, true on the oracle's run."""
    forward = f"""
        def forward(self, x):
            h = x + self.drop_shortcut(self.att(self.norm1(x)))
            return h + self.drop_shortcut(self.ff({handed}))
        """
    result = grade_here(submission(forward=forward))
    part = next(s for c in result.checks for s in c.subtests if s.name == "norm2 feeds the feed-forward network")
    assert not part.passed and part.message.lower().startswith(said.lower()), part.message
    facts = [fact for fact in result.facts if fact["kind"] == kind and fact["component"] == "ff"]
    run = Run(forward)
    assert facts and all(run.check(fact) is True for fact in facts), facts
