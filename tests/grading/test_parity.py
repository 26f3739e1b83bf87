"""Every isolation layer grades as the grader's own process does: the tests of what a submission earns grade in
process (tests/graded.py), and this module holds that to the real sandbox.

A sample of submissions, chosen so that together they pass and fail every part of the rubric (a test computes that
from their results, so the sample cannot stop covering a part unnoticed), is graded through the real sandbox in
each layer of tests/layers.py (bubblewrap, namespaces, permissions alone, and bubblewrap started by an instructor
who is not root, as on a hub), and every result must equal the one graded in process, written out as JSON (what
results.json keeps): every field, every part, fact, note and number, except

* `execution_time`: the wall-clock seconds the grading took, which no two runs share;
* `isolation`: the words naming the isolation the result was graded under, which is what differs by design.

A change that makes one layer grade differently (an answer lost or changed on its way out of the child, a
remark only one layer makes, a limit that bites in one layer only) fails here. What each layer must close is
tested by the sandbox's own tests (sandbox/test_kinds.py and the modules beside it).
"""

from __future__ import annotations

import json

import pytest

import graded
from autograder.engine.rubric import RUBRIC
from catalog.build import submission
from catalog.equivalent_forwards import EQUIVALENT
from catalog.generate import equivalents
from catalog.task2_variants import WRONG as WRONG_TASK2
from catalog.wrong_forwards import HINTED, TRIVIAL, WRONG
from layers import EVERY_LAYER, HUB, HubServer, grade, layer_available, sandbox_server

EXCLUDED = ("execution_time", "isolation")  # see the module's docstring
HUB_LOGIN = "parity"  # a hub instructor of this module's own: the kernel tests watch u19-hub's processes

_forward = {w.name: w.forward for w in WRONG}
_task2 = {name: text for name, _, _, text in WRONG_TASK2}

# name -> the submission's text: right ones in three styles, one with a remark, one whose answers record a call per
# token; one mistake of each family of the forward (order, shortcuts, norms, dropout, gradients, robustness), three
# of them with a mistake of Task 2 as well; a block that does no work at all; and a cell that raises.
SAMPLE = {
    "the solution": submission(),
    "Pre-LN written otherwise": submission(forward=EQUIVALENT[sorted(EQUIVALENT)[0]]),
    "Pre-LN that would leave its device": submission(forward=HINTED["cpu_inside_forward"][0]),
    "Pre-LN, the feed-forward network token by token": submission(
        forward=next(case for case in equivalents() if case.name == "pre_ln_per_token_ff").forward
    ),
    "Post-LN; a formula that sums": submission(forward=_forward["post_ln"], task2=_task2["formula_sums"]),
    "no first shortcut; autograd one layer short": submission(
        forward=_forward["missing_first_shortcut"], task2=_task2["autograd_one_layer_short"]
    ),
    "no second shortcut; 1 counts as vanishing": submission(
        forward=_forward["missing_second_shortcut"], task2=_task2["one_counts_as_vanishing"]
    ),
    "a final extra norm": submission(forward=_forward["extra_final_norm"]),
    "dropout always on": submission(forward=_forward["dropout_always_on"]),
    "dropout on the first half only": submission(forward=_forward["dropout_only_first_half"]),
    "a branch detached in train mode only": submission(forward=_forward["detached_branch_in_train_mode_only"]),
    "the input of norm1 detached": submission(forward=_forward["detached_input_of_norm1"]),
    "a float32 cast inside": submission(forward=_forward["float32_cast_inside"]),
    "writes into its input": submission(forward=_forward["inplace_on_input"]),
    "does no work; a cell that raises": submission(
        forward=TRIVIAL["identity"], extra="# %% a cell of the student's own\nraise ValueError('a cell that fails')\n"
    ),
}


def _written(result) -> str:
    """The result as results.json-like JSON, without the EXCLUDED fields."""
    kept = {key: value for key, value in result.to_dict().items() if key not in EXCLUDED}
    return json.dumps(kept, sort_keys=True, default=float)


def _differences(ours, theirs, where: str = "result") -> list[str]:
    """Where two JSON values differ (paths), the first few."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        found = [f"{where}.{key}: only one has it" for key in sorted(set(ours) ^ set(theirs))]
        for key in sorted(set(ours) & set(theirs)):
            found += _differences(ours[key], theirs[key], f"{where}.{key}")
        return found[:5]
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        return [d for i, (a, b) in enumerate(zip(ours, theirs)) for d in _differences(a, b, f"{where}[{i}]")][:5]
    return (
        []
        if json.dumps(ours) == json.dumps(theirs)
        else [f"{where}: {json.dumps(ours)[:200]} here, {json.dumps(theirs)[:200]} there"]
    )


@pytest.fixture(scope="module")
def in_process(seed) -> dict:
    return {name: graded.grade(text, seed) for name, text in SAMPLE.items()}


def test_the_sample_passes_and_fails_every_part_of_the_rubric(in_process):
    outcomes = {(check, part): set() for check, spec in RUBRIC.items() for part in spec.parts}
    for result in in_process.values():
        assert not result.grader_errors, result.grader_errors
        for check in result.checks:
            for part in check.subtests:
                outcomes[(check.check, part.name)].add(part.passed)
    lacking = {part: sorted({True, False} - seen) for part, seen in outcomes.items() if seen != {True, False}}
    assert not lacking, f"no submission of the sample gets these verdicts: {lacking}"
    raised = in_process["does no work; a cell that raises"].notes
    assert any("raised ValueError: a cell that fails" in note for note in raised), raised
    from autograder.course import kit

    assert f"grades a sample of {len(SAMPLE)} submissions" in " ".join(kit.documentation("development.md").split())


@pytest.mark.parametrize("layer", EVERY_LAYER)
def test_a_layer_grades_the_sample_as_the_grader_s_own_process_does(layer, in_process, seed, tmp_path):
    why = layer_available(layer)
    if why:
        pytest.skip(f"layer '{layer}' not available: {why}")
    path = tmp_path / graded.NAME
    differing = {}
    with HubServer(login=HUB_LOGIN) if layer == HUB else sandbox_server(layer) as server:
        for name, text in SAMPLE.items():
            path.write_text(text)
            ours, theirs = in_process[name], grade(server, path, seed)
            assert theirs.isolation == server.isolation != ours.isolation  # each result says where it was graded
            if _written(theirs) != _written(ours):
                differing[name] = _differences(json.loads(_written(ours)), json.loads(_written(theirs)))
    assert not differing, f"graded otherwise in layer '{layer}' than in process: {differing}"
