"""`recording.student_line` names the innermost line of student code on the stack, as the traceback module reads
the same stack: cells loaded by `load_cells` calling through the grader's own frames, in any nesting."""

from __future__ import annotations

import traceback

from hypothesis import given, settings, strategies as st

from autograder.engine.questions.cells import load_cells
from autograder.engine.questions.recording import student_line


def _traceback_says():
    """The oracle: the stack as the traceback module extracts it, its innermost frame of a cell."""
    for frame in reversed(traceback.extract_stack()):
        if frame.filename.startswith("<cell"):
            line = (frame.line or "").strip()
            return f"{frame.filename.strip('<>')}, line {frame.lineno}" + (f": {line}" if line else "")
    return None


def _grader_frame(then):
    return then()


@settings(max_examples=60, deadline=None)
@given(chain=st.lists(st.tuples(st.booleans(), st.integers(0, 3)), min_size=0, max_size=4), indent=st.integers(0, 3))
def test_the_line_named_is_the_innermost_cell_line_the_traceback_module_reads(chain, indent):
    """`chain`: from the outside in, a cell (True) or a frame of the grader (False), each cell's call after a
    number of blank or comment lines; the innermost frame asks both readers."""
    seen = {}

    def ask():
        seen["grader"], seen["traceback"] = student_line(), _traceback_says()

    call = ask
    for depth, (is_cell, padding) in enumerate(reversed(chain)):
        if is_cell:
            code = "\n" * padding + "# the student's comment\n" * (padding % 2) + f"def step():\n{' ' * (indent + 1)}then()\n"
            namespace, errors = load_cells([(f"cell {depth}", code)], {"then": call, "__builtins__": __builtins__})
            assert not errors
            call = namespace["step"]
        else:
            call = (lambda inner: lambda: _grader_frame(inner))(call)
    call()
    assert seen["grader"] == seen["traceback"]
    assert (seen["grader"] is None) == (not any(is_cell for is_cell, _ in chain))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16), over=st.integers(0, 1), nested=st.booleans())
def test_a_component_called_through_one_vmap_is_recorded_with_every_example_stacked(seed, over, nested):
    """The oracle: the same component called on each example by hand, the results stacked. Through one vmap, over
    any dimension, the call is recorded with the examples in order along the first; inside a vmap in a vmap it is
    counted and left unrecorded (its numbers exist only per example)."""
    import torch

    from autograder.engine.questions.recording import Recorder

    torch.manual_seed(seed)
    layer, x = torch.nn.LayerNorm(8), torch.randn(3, 5, 8)
    recorder = Recorder()
    recorder.wrap(layer, "norm1")
    examples = torch.movedim(x, over, 0)  # over the batch or the tokens; the last dimension holds the features
    if nested:
        torch.vmap(torch.vmap(layer), in_dims=over)(x)
    else:
        torch.vmap(layer, in_dims=over)(x)
    assert recorder.counts["norm1"] == 1
    if nested:
        assert recorder.calls == [] and recorder.unrecorded == 1
        return
    (call,) = recorder.calls
    expected_out = torch.stack([torch.nn.functional.layer_norm(e, (8,), layer.weight, layer.bias) for e in examples])
    assert torch.equal(call.input, examples)
    assert torch.allclose(call.output, expected_out, atol=1e-6)
