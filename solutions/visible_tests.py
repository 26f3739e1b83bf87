"""The visible tests of the layernorm notebook. Each test cell of the notebook calls one function of this file.

You do not need to read this file to do the assignment: a failing test says which idea it is about. Read it
when you want to know exactly what a test does. A test runs several small checks and reports every check that
fails, not just the first. The graded checks ask the same kinds of questions with fresh random weights and
inputs, so matching the fixed numbers here is not enough on its own.

The file reads from the top down:
1. the index: which test each cell of the notebook calls, and which checks that test runs;
2. the checks, Task 1's and then Task 2's: each is a function named for what it asks, and its message says
   what a failure means;
3. the machinery the checks use (making blocks with fixed weights, summarizing an output in three numbers,
   running the checks and listing the failures). You need not read it to understand a check.

Keep this file next to the notebook (and do not edit it: the graders use their own copy of the checks).
"""
import contextlib
import math
import os
import textwrap

import torch
import torch.nn as nn


# --- 1. The index: which test runs which checks -------------------------------------------------------------

# Task 1's test cells call a test with your class and the notebook's small configuration, for example
# test_block_shape(TransformerBlock, GPT_CONFIG_TINY). The test runs these checks, in this order.
TASK1_TESTS = {
    "test_block_shape": ("output_is_a_tensor_of_the_input_shape", "works_for_one_short_sequence",
                         "works_under_no_grad", "keeps_float64", "stays_on_the_input_device"),
    "test_zero_branches": ("silenced_branches_give_back_the_input", "silenced_branches_pass_the_gradient_back"),
    "test_input_unchanged": ("forward_leaves_its_input_unchanged",),
    "test_norm_placement": ("norm1_acts_only_through_attention", "norm2_acts_only_through_feed_forward"),
    "test_dropout": ("dropout_is_off_in_eval_mode", "full_dropout_silences_both_branches",
                     "train_output_matches_the_reference"),
    "test_reference_numbers": ("eval_output_matches_the_reference", "input_gradient_matches_the_reference",
                               "every_part_receives_a_gradient"),
}

# Task 2's test cell calls test_compounding(magnitude_by_formula, magnitude_by_autograd, classify_factor).
TASK2_TESTS = {
    "test_compounding": ("formula_lists_one_magnitude_per_layer", "formula_shrinks_for_half",
                         "formula_uses_the_size_of_a_negative_factor",
                         "autograd_matches_the_formula_for_a_constant_factor",
                         "autograd_follows_a_factor_that_changes", "classify_looks_at_the_size_of_the_factor"),
}

# The graded cells at the end of the notebook: the visible part of each runs the checks of its topic (Validate
# then tells you whether they pass). They are called like the tests, for example
# check_forward_order(TransformerBlock, GPT_CONFIG_TINY). Together they run every check of the tests above, so
# while nbgrader's Validate runs the notebook the test cells leave the work to them (see validating below).
GRADED_TASK1 = {
    "check_forward_order": ("output_is_a_tensor_of_the_input_shape", "eval_output_matches_the_reference"),
    "check_forward_shortcuts": ("silenced_branches_give_back_the_input", "silenced_branches_pass_the_gradient_back"),
    "check_forward_prenorm": ("norm1_acts_only_through_attention", "norm2_acts_only_through_feed_forward"),
    "check_forward_dropout": ("dropout_is_off_in_eval_mode", "full_dropout_silences_both_branches",
                              "train_output_matches_the_reference"),
    "check_forward_gradients": ("input_gradient_matches_the_reference", "every_part_receives_a_gradient"),
    "check_forward_robustness": ("works_for_one_short_sequence", "keeps_float64", "forward_leaves_its_input_unchanged",
                                 "works_under_no_grad", "stays_on_the_input_device"),
}
GRADED_TASK2 = {"check_compounding": TASK2_TESTS["test_compounding"]}

# Fingerprints (sum, norm, projection) of a correct Pre-LN block on the fixed examples of the checks below. The
# course's build computes them by running its own correct block through those same examples.
EVAL_NUMBERS = [21.01647, 28.956913, 16.206602]               # eval-mode output
GRAD_NUMBERS = [60.04602, 28.493485, -62.128482]              # gradient at the block input
TRAIN_NUMBERS = [29.133897, 30.469468, 26.112352]             # training-mode output, drop_rate 0.5
DOUBLE_NUMBERS = [21.0164687783, 28.9569130176, 16.2066013848]    # eval-mode output in float64
EXACT = 1e-10      # Task 2: how close magnitudes must be, relative (the graded check uses the same)


# --- 2. Task 1: the checks ----------------------------------------------------------------------------------

def output_is_a_tensor_of_the_input_shape(blocks):
    x = blocks.example_input()
    y = blocks.fresh().eval()(x)
    assert isinstance(y, torch.Tensor), f"forward must return one tensor, got {type(y).__name__}"
    assert y.shape == x.shape, (f"a block keeps the shape (batch, tokens, emb_dim): expected {tuple(x.shape)}, "
                                f"got {tuple(y.shape)}")


def works_for_one_short_sequence(blocks):
    x = blocks.example_input(shape=(1, 3))
    y = blocks.fresh().eval()(x)
    assert y.shape == x.shape, (f"for a batch of one sequence of 3 tokens expected shape {tuple(x.shape)}, "
                                f"got {tuple(y.shape)}")


def works_under_no_grad(blocks):
    x = blocks.example_input()
    with torch.no_grad():
        y = blocks.fresh().eval()(x)
    assert y.shape == x.shape, f"under torch.no_grad() expected shape {tuple(x.shape)}, got {tuple(y.shape)}"


def keeps_float64(blocks):
    block, x = blocks.fresh(seed=1).double().eval(), blocks.example_input(seed=2).double()
    try:
        y = block(x)
    except NotImplementedError:
        raise
    except Exception as error:
        raise AssertionError("the block fails after .double(): part of the computation turns float64 values into "
                             f"float32 ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})"
                             ) from None
    assert y.dtype == torch.float64, (f"after .double() the block should compute in float64, got {y.dtype}: part of "
                                      "the computation made new tensors in the default float32")
    got = fingerprint(y, digits=10)
    if same_numbers(got, DOUBLE_NUMBERS, tolerance=1e-4):      # otherwise the eval-mode check explains what is off
        assert same_numbers(got, DOUBLE_NUMBERS, tolerance=1e-9), (
            "in float64 the output agrees with a correct block's to about 7 digits only, not to 9 or more: part of "
            "the computation runs in float32")


def stays_on_the_input_device(blocks):
    block, x = blocks.fresh().eval(), blocks.example_input()
    with watch_devices() as watch:
        block(x)
    assert not watch.noted, (
        f"inside forward, {', '.join(sorted(set(watch.noted)))} put values on the CPU whatever device the input lives "
        "on: fine on a laptop, an error on a GPU; every tensor the block uses should follow the input's device")


def silenced_branches_give_back_the_input(blocks):
    block, x = silenced(blocks.fresh()).eval(), blocks.example_input()
    y = block(x.clone())
    if not torch.allclose(y, x, atol=1e-5):
        named = shortcut_path_message(block, x, y, "with attention and feed-forward silenced")
        assert named is None, named
        raise AssertionError(
            "with attention and feed-forward silenced, a Pre-LN block must return its input unchanged: each half adds "
            "a zero branch to the value it started from, and no LayerNorm sits on the shortcut path "
            f"(largest difference {(y - x).abs().max().item():.3g})")


def silenced_branches_pass_the_gradient_back(blocks):
    x = blocks.example_input().requires_grad_(True)
    upstream = blocks.example_input(seed=1)
    y = silenced(blocks.fresh()).eval()(x.clone())
    (y * upstream).sum().backward()
    assert x.grad is not None, "no gradient reached the block input: the shortcuts are not part of the autograd graph"
    assert torch.allclose(x.grad, upstream, atol=1e-5), (
        "with silenced branches the gradient reaching the block input must equal the gradient arriving at its "
        "output: the two shortcuts carry it back unchanged (is a shortcut scaled, normalized, or cut from the "
        "autograd graph?)")


def forward_leaves_its_input_unchanged(blocks):
    for mode in ("eval", "train"):
        block, x = blocks.fresh(), blocks.example_input()
        before = x.clone()
        getattr(block, mode)()(x)
        assert torch.equal(x, before), (f"in {mode} mode your forward wrote into its input tensor, so the caller's "
                                        "x changed: an in-place update on the input; compute new tensors instead")


def _output_reacts_to(blocks, norm_name, silenced_part=None):
    """Does the output change when `norm_name` gets other scale and shift values (with `silenced_part`, "att" or
    "ff", silenced first)?"""
    x, outputs = blocks.example_input(), []
    for change in (0.0, 0.7):
        block = blocks.fresh().eval()
        with torch.no_grad():
            if silenced_part:
                for param in getattr(block, silenced_part).parameters():
                    param.zero_()
            norm = getattr(block, norm_name)
            norm.scale.add_(change)
            norm.shift.sub_(change)
        outputs.append(block(x.clone()))
    return not torch.allclose(outputs[0], outputs[1], atol=1e-6)


def norm1_acts_only_through_attention(blocks):
    assert _output_reacts_to(blocks, "norm1"), (
        "norm1's scale and shift do not affect the output: norm1 is not used with its own parameters, but a Pre-LN "
        "block normalizes attention's input with it")
    assert not _output_reacts_to(blocks, "norm1", silenced_part="att"), (
        "with attention silenced, norm1's scale and shift still change the output: norm1 acts somewhere other than on "
        "attention's input, where a Pre-LN block uses it")


def norm2_acts_only_through_feed_forward(blocks):
    assert _output_reacts_to(blocks, "norm2"), (
        "norm2's scale and shift do not affect the output: norm2 is not used with its own parameters, but a Pre-LN "
        "block normalizes the feed-forward input with it")
    assert not _output_reacts_to(blocks, "norm2", silenced_part="ff"), (
        "with the feed-forward network silenced, norm2's scale and shift still change the output: norm2 acts "
        "somewhere other than on the feed-forward input, where a Pre-LN block uses it")


def dropout_is_off_in_eval_mode(blocks):
    block, x = blocks.fresh().eval(), blocks.example_input()
    torch.manual_seed(1)
    first = block(x.clone())
    torch.manual_seed(2)
    second = block(x.clone())
    assert torch.equal(first, second), ("in eval mode two calls gave different outputs: after block.eval() "
                                        "dropout must be switched off")


def full_dropout_silences_both_branches(blocks):
    block, x = blocks.fresh().train(), blocks.example_input()
    block.drop_shortcut.p = 1.0                      # training mode, every entry dropped
    y = block(x.clone())
    if not torch.allclose(y, x, atol=1e-5):
        named = shortcut_path_message(block, x, y, "in training mode with drop probability 1")
        assert named is None, named
        raise AssertionError(
            "in training mode with drop probability 1 the block must return its input: dropout should remove what "
            "each half adds and leave the value that half started from alone "
            f"(largest difference {(y - x).abs().max().item():.3g})")


def _eval_output_is_right(blocks):
    return same_numbers(fingerprint(blocks.fresh(seed=1).eval()(blocks.example_input(seed=2))), EVAL_NUMBERS)


def train_output_matches_the_reference(blocks):
    block = blocks.fresh(seed=1, drop_rate=0.5).train()
    with repeatable_dropout(seed=3):
        got = fingerprint(block(blocks.example_input(seed=2)))
    if same_numbers(got, TRAIN_NUMBERS):
        return
    if _eval_output_is_right(blocks):
        raise AssertionError(
            f"in training mode the output differs from a correct Pre-LN block's on a fixed example "
            f"({numbers_text(TRAIN_NUMBERS, got)}), while the eval-mode output is right: so the difference is "
            "dropout's. "
            "Which values does dropout act on? (Each branch's output, before it is added.)")
    raise AssertionError(
        f"in training mode the output differs from a correct Pre-LN block's on a fixed example "
        f"({numbers_text(TRAIN_NUMBERS, got)}); the eval-mode output differs too (see "
        "eval_output_matches_the_reference), so fix that first: dropout may well be right")


def eval_output_matches_the_reference(blocks):
    block, x = blocks.fresh(seed=1).eval(), blocks.example_input(seed=2)
    y = block(x)
    got = fingerprint(y)
    if same_numbers(got, EVAL_NUMBERS):
        return
    if _feed_forward_half_alone(block, x, y):
        raise AssertionError(
            f"in eval mode your block returned the feed-forward half's output alone, ff(norm2(h)) "
            f"({numbers_text(EVAL_NUMBERS, got)}): the second addition is missing, so that half replaced its value h "
            "instead of adding to it. Each half returns the value it started from plus its branch")
    raise AssertionError(
        f"in eval mode the output differs from a correct Pre-LN block's ({numbers_text(EVAL_NUMBERS, got)}); "
        "compare your block with the two formulas: what does each LayerNorm receive, and what is each addition "
        "added to?")


def _feed_forward_half_alone(block, x, y):
    """Is `y` the second half's branch without its shortcut, ff(norm2(h)) with h = x + att(norm1(x))?"""
    with torch.no_grad():
        h = x + block.att(block.norm1(x))
        branch = block.ff(block.norm2(h))
    return branch.shape == y.shape and torch.allclose(y.detach(), branch, rtol=1e-4, atol=1e-4)


def input_gradient_matches_the_reference(blocks):
    x = blocks.example_input(seed=2).requires_grad_(True)
    y = blocks.fresh(seed=1).eval()(x.clone())
    (y * blocks.example_input(seed=3)).sum().backward()
    assert x.grad is not None, "no gradient reached the block input: the output is cut from the autograd graph"
    got = fingerprint(x.grad)
    if same_numbers(got, GRAD_NUMBERS):
        return
    if _eval_output_is_right(blocks):
        raise AssertionError(
            f"the gradient at the block input differs from a correct Pre-LN block's ({numbers_text(GRAD_NUMBERS, got)}) "
            "while the output is right: part of the computation is hidden from autograd (a detach, .data, or a "
            "value computed under torch.no_grad())")
    raise AssertionError(
        f"the gradient at the block input differs from a correct Pre-LN block's ({numbers_text(GRAD_NUMBERS, got)}); "
        "the eval-mode output differs too (see eval_output_matches_the_reference), so fix that first")


def every_part_receives_a_gradient(blocks):
    for mode in ("eval", "train"):
        block = getattr(blocks.fresh(seed=1), mode)()
        with repeatable_dropout(seed=3):
            (block(blocks.example_input(seed=2)) * blocks.example_input(seed=3)).sum().backward()
        starved = [name for name in ("norm1", "att", "norm2", "ff")
                   if any(p.grad is None or not p.grad.abs().sum() > 0 for p in getattr(block, name).parameters())]
        assert not starved, (f"in {mode} mode no gradient reached {', '.join(starved)}, so training could not change "
                             "those weights: every part must reach the output through autograd")


# --- 2. Task 2: the checks ----------------------------------------------------------------------------------

def formula_lists_one_magnitude_per_layer(task2):
    values = as_floats(task2.formula(2, 10), "magnitude_by_formula(2, 10)")
    assert len(values) == 10, (f"magnitude_by_formula(2, 10) should list 10 magnitudes (after layers 1 to 10), "
                               f"got {len(values)}")
    assert values[0] == 2 and values[-1] == 1024, (f"after layer k the magnitude is abs(factor) ** k: expected 2.0 "
                                                   f"first and 1024.0 last, got {values[0]} and {values[-1]}")


def formula_shrinks_for_half(task2):
    last = as_floats(task2.formula(0.5, 10), "magnitude_by_formula(0.5, 10)")[-1]
    assert math.isclose(last, 1 / 1024, rel_tol=EXACT), f"ten factors of 0.5 leave 1/1024 = {1 / 1024}, got {last}"


def formula_uses_the_size_of_a_negative_factor(task2):
    values = as_floats(task2.formula(-2, 3), "magnitude_by_formula(-2, 3)")
    assert values == [2.0, 4.0, 8.0], (
        f"a negative factor flips the sign at every layer, but the magnitude is abs(factor) ** k: "
        f"magnitude_by_formula(-2, 3) should be [2.0, 4.0, 8.0], got {values}")


def _measured(task2, layer, n, shown):
    try:
        return as_floats(task2.autograd(layer, n), f"magnitude_by_autograd({shown}, {n})")
    except TypeError as error:
        if "'function'" in str(error) or "'builtin_function_or_method'" in str(error):
            raise AssertionError(f"magnitude_by_autograd({shown}, {n}) raised TypeError: {error}. Its first argument "
                                 "is the layer itself, a function of a tensor: apply it with y = layer(y)") from None
        raise


def autograd_matches_the_formula_for_a_constant_factor(task2):
    for factor, n in ((2, 10), (-0.5, 4), (1.1, 10)):
        values = _measured(task2, lambda y, factor=factor: factor * y, n, f"lambda y: {factor} * y")
        expected = [abs(float(factor)) ** k for k in range(1, n + 1)]
        if _exactly(values, expected, rel=1e-5):
            assert _exactly(values, expected), (
                f"magnitude_by_autograd(lambda y: {factor} * y, {n}) is close but not exact: compute in float64 "
                "(float32 keeps only about 7 digits)")
        assert _exactly(values, expected), (
            f"magnitude_by_autograd(lambda y: {factor} * y, {n}) should be {expected}, got {values}: a layer that "
            "multiplies by a constant factor gives the formula's magnitudes")


# Layers whose factor changes from layer to layer, each with its value and slope written out by hand here.
CHANGING_LAYERS = {
    "torch.sin": (torch.sin, lambda y: (math.sin(y), math.cos(y))),
    "lambda y: 0.9 * y + 0.2 * torch.erf(1.5 * y) + 2e-6 * torch.sin(30000 * y)": (
        lambda y: 0.9 * y + 0.2 * torch.erf(1.5 * y) + 2e-6 * torch.sin(30000 * y),
        lambda y: (0.9 * y + 0.2 * math.erf(1.5 * y) + 2e-6 * math.sin(30000 * y),
                   0.9 + 0.2 * 1.5 * 2 / math.sqrt(math.pi) * math.exp(-(1.5 * y) ** 2) + 2e-6 * 30000 * math.cos(30000 * y))),
}


def chain_by_hand(value_and_slope, n):
    """The magnitudes |d y_k / d x| of a chain started at x = 1.0 (chain rule), and its values |y_k|."""
    y, gradient, gradient_sizes, chain_sizes = 1.0, 1.0, [], []
    for _ in range(n):
        value, slope = value_and_slope(y)
        gradient, y = gradient * slope, value
        gradient_sizes.append(abs(gradient))
        chain_sizes.append(abs(y))
    return gradient_sizes, chain_sizes


def autograd_follows_a_factor_that_changes(task2):
    for shown, (layer, value_and_slope) in CHANGING_LAYERS.items():
        n = 6
        values = _measured(task2, layer, n, shown)
        expected, chain_values = chain_by_hand(value_and_slope, n)
        call = f"magnitude_by_autograd({shown}, {n})"
        assert len(values) == n, f"{call} should list {n} magnitudes, got {len(values)}"
        if _exactly(values, chain_values, rel=1e-6):
            raise AssertionError(f"{call} gave the chain's values |y|, not its gradient: after each layer record the "
                                 "size of the gradient of y with respect to the starting x")
        fixed = [expected[0] ** k for k in range(1, n + 1)]
        if _exactly(values, fixed, rel=1e-6):
            raise AssertionError(f"{call} multiplied the first layer's factor ({expected[0]:.6g}) again and again, but "
                                 "this layer's factor changes with the value it receives: measure the gradient "
                                 "through the whole chain")
        local = [expected[0]] + [after / before for before, after in zip(expected, expected[1:])]
        if _exactly(values, local, rel=1e-6):
            raise AssertionError(f"{call} gave each layer's own factor, but the magnitude after layer k is the product "
                                 "of the factors of layers 1 to k: the gradient of the current y with respect to x")
        if not _exactly(values[:1], expected[:1]) and _exactly(values[:1], expected[:1], rel=1e-5):   # precision
            raise AssertionError(f"{call} is close but not exact: let autograd differentiate in float64 (float32, or "
                                 "an estimate of the slope from nearby values, keeps only about 6 or 7 digits)")
        assert _exactly(values, expected), f"{call} should be {expected}, got {values}"


def classify_looks_at_the_size_of_the_factor(task2):
    expected = {2: "exploding", 0.5: "vanishing", 1: "stable", -2: "exploding", -0.5: "vanishing", -1: "stable",
                1.001: "exploding", 0.999: "vanishing"}
    wrong = [f"classify_factor({f}) gave {task2.classify(f)!r}, expected {e!r}" for f, e in expected.items()
             if str(task2.classify(f)).strip().lower() != e]
    assert not wrong, "; ".join(wrong) + ". Only the size of the factor counts: above 1 explodes, below 1 vanishes"


# --- 3. The machinery: running checks ------------------------------------------------------------------------

def run_checks(checks, subject, point_to_trace=False):
    """Run every check on `subject`; if any fail, raise one AssertionError that lists them all. With
    `point_to_trace` (Task 1's tests), the first failure of a run ends by pointing to trace_calls."""
    failures = []
    for check in checks:
        try:
            check(subject)
        except NotImplementedError:
            raise                                    # an unfinished task: its own message says which
        except AssertionError as error:
            failures.append(f"{check.__name__}: {error}")
        except Exception as error:
            failures.append(f"{check.__name__}: {type(error).__name__}: {error}")
    if failures:
        lines = [line for failure in failures
                 for line in textwrap.wrap(failure, 80, initial_indent="- ", subsequent_indent="  ",
                                           break_on_hyphens=False)]
        if point_to_trace and not POINTED["to_trace"]:
            POINTED["to_trace"] = True
            lines += textwrap.wrap(LOOK, 80, break_on_hyphens=False)
        raise ChecksFailed(f"{len(failures)} of {len(checks)} checks failed:\n" + "\n".join(lines))


LOOK = ("To find the first wrong step, run trace_calls(TransformerBlock, GPT_CONFIG_TINY) (section \"Finding the "
        "first wrong step\"): it prints a correct Pre-LN block's steps beside yours and marks the first value that "
        "differs.")
POINTED = {"to_trace": False}   # LOOK is said once per run (one run of run_tests.py, one notebook kernel)


class ChecksFailed(AssertionError):
    """Failing checks, shown as their message alone: Jupyter (and so nbgrader's Validate) prints no traceback."""

    def _render_traceback_(self):
        return [f"{type(self).__name__}: {self}"]


# --- 3. The machinery: Task 1's blocks, inputs and fingerprints ---------------------------------------------

class Blocks:
    """Makes blocks of your TransformerBlock class for the Task 1 checks."""

    def __init__(self, block_class, cfg):
        self.block_class, self.cfg = block_class, cfg

    def fresh(self, seed=0, **cfg_changes):
        """A block whose attention, feed-forward network and both LayerNorms hold random values drawn from `seed`
        (LayerNorm scale and shift too, so norm1 and norm2 differ from each other)."""
        block = self.block_class({**self.cfg, **cfg_changes})
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for part in (block.att, block.ff, block.norm1, block.norm2):
                for name, param in part.named_parameters():
                    fresh = torch.rand(param.shape, generator=generator, dtype=torch.float64) * 2 - 1
                    if param.dim() == 2:
                        fresh = fresh / param.shape[1] ** 0.5    # a weight matrix: PyTorch's default range
                    elif name == "scale":
                        fresh = 1 + 0.5 * fresh                   # LayerNorm scale around 1
                    else:
                        fresh = 0.5 * fresh                       # biases and LayerNorm shift around 0
                    param.copy_(fresh.to(param.dtype))
        return block

    def example_input(self, seed=0, shape=(2, 6)):
        """A fixed input whose tokens are far from standardized (mean 0.3, standard deviation 1.5). It is drawn in
        float64, which gives the same values on every processor, and then made float32."""
        generator = torch.Generator().manual_seed(seed)
        values = torch.randn((*shape, self.cfg["emb_dim"]), generator=generator, dtype=torch.float64)
        return (1.5 * values + 0.3).float()


def silenced(block):
    """The same block with every weight and bias of attention and feed-forward set to 0."""
    with torch.no_grad():
        for param in [*block.att.parameters(), *block.ff.parameters()]:
            param.zero_()
    return block


def fingerprint(tensor, digits=6, seed=99):
    """Three numbers that summarize a tensor: its sum, its norm and its dot product with a fixed random tensor."""
    values = tensor.detach().to(torch.float64)
    probe = torch.randn(values.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return [round(v, digits) for v in (values.sum().item(), values.norm().item(), (values * probe).sum().item())]


def numbers_text(expected, got):
    """The fingerprints of a comparison, said with what the three numbers are."""
    return (f"expected (sum, norm, dot product with a fixed random tensor) {expected}, got {got}")


def same_numbers(got, expected, tolerance=1e-4):
    """Equal to about 4 significant digits, relative to the largest expected number."""
    scale = max(abs(v) for v in expected)
    return len(got) == len(expected) and all(abs(g - e) <= tolerance * scale for g, e in zip(got, expected))


def normalized_copy(block, x, y):
    """When `y` is `x` passed through the block's own LayerNorms (norm1, norm2, or one after the other), say
    which: then a LayerNorm sits on the path the shortcut carries `x` along. None otherwise."""
    with torch.no_grad():
        n1, n2 = block.norm1(x), block.norm2(x)
        candidates = {"norm1": n1, "norm2": n2, "norm1 and then norm2": block.norm2(n1),
                      "norm2 and then norm1": block.norm1(n2)}
    for name, value in candidates.items():
        if value.shape == y.shape and torch.allclose(y, value, atol=1e-4):
            return name
    return None


def shortcut_path_message(block, x, y, situation):
    name = normalized_copy(block, x, y)
    if name is None:
        return None
    return (f"{situation}, your block returned its input passed through {name}, not the input itself: a LayerNorm "
            "sits on the shortcut path (the value a shortcut carries, or the sum it is added to, is normalized). In "
            "Pre-LN the LayerNorms only feed attention and the feed-forward network")


def holds_tensor(value):
    """Is there a tensor in `value`, or in the lists, tuples and dicts it holds?"""
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, (list, tuple)):
        return any(holds_tensor(item) for item in value)
    if isinstance(value, dict):
        return any(holds_tensor(item) for item in value.values())
    return False


class watch_devices(torch.overrides.TorchFunctionMode):
    """Notes every call, inside this context, that sends a tensor to a fixed device (`.cpu()`, `.cuda()`,
    `.numpy()`) or builds a tensor of several values from plain numbers (which lands on the CPU whatever device the
    block's input lives on). Both work on a CPU-only laptop and fail on a GPU."""

    def __init__(self):
        super().__init__()
        self.noted = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        name = getattr(func, "__name__", str(func))
        if name in ("cpu", "cuda", "numpy"):
            self.noted.append(f".{name}()")
        elif (isinstance(result, torch.Tensor) and result.dim() > 0 and "device" not in kwargs
              and not holds_tensor((args, kwargs))):
            self.noted.append(f"torch.{name}(...) without a device")
        return result


@contextlib.contextmanager
def repeatable_dropout(seed):
    """Dropout that draws its masks from its own seeded generator, so training-mode results are the same on
    every computer (PyTorch's own dropout masks can differ between processors)."""
    generator = torch.Generator().manual_seed(seed)
    original = nn.functional.dropout

    def dropout(input, p=0.5, training=True, inplace=False):
        if not training or p == 0:
            return input
        keep = torch.rand(input.shape, generator=generator, dtype=torch.float64) >= p   # the same on every processor
        return input * keep.to(device=input.device, dtype=input.dtype) / (1 - p)

    nn.functional.dropout = dropout
    try:
        yield
    finally:
        nn.functional.dropout = original


# --- 3. The machinery: Task 2's functions and answers --------------------------------------------------------

class Task2:
    """Your three Task 2 functions, for the checks."""

    def __init__(self, magnitude_by_formula, magnitude_by_autograd, classify_factor):
        self.formula, self.autograd, self.classify = magnitude_by_formula, magnitude_by_autograd, classify_factor


def as_floats(value, call):
    """What Task 2's "list of floats" accepts, exactly as the grader reads it: a list or tuple of real numbers
    (Python or NumPy numbers, or one-element tensors and arrays), or a NumPy array or torch tensor of real numbers
    (flattened). Booleans, text, complex numbers and other containers are refused."""
    accepted = "a list of floats is a list or tuple of numbers, or a NumPy array or torch tensor of numbers"
    if isinstance(value, torch.Tensor):
        assert not value.is_complex() and value.dtype != torch.bool, (
            f"{call} returned a tensor of {str(value.dtype).removeprefix('torch.')}: {accepted}")
        return [float(v) for v in value.detach().cpu().reshape(-1).tolist()]
    if type(value).__module__ == "numpy" and hasattr(value, "dtype") and hasattr(value, "reshape"):
        assert value.dtype.kind in "iuf", f"{call} returned an array of {value.dtype}: {accepted}"
        return [float(v) for v in value.reshape(-1).tolist()]
    assert isinstance(value, (list, tuple)), f"{call} returned {type(value).__name__}: {accepted}"
    return [_real_number(item, call, accepted) for item in value]


def _real_number(value, call, accepted):
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_complex() and value.dtype != torch.bool:
        return float(value.item())
    kind = getattr(getattr(value, "dtype", None), "kind", None)
    if type(value).__module__ == "numpy" and kind in ("i", "u", "f") and getattr(value, "size", 1) == 1:
        return float(value.item())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise AssertionError(f"{call} returned a list holding {type(value).__name__}: {accepted}")


def _exactly(values, expected, rel=EXACT):
    return len(values) == len(expected) and all(math.isclose(v, e, rel_tol=rel) for v, e in zip(values, expected))


# --- 3. The machinery: the tests, made from the index at the top ---------------------------------------------

def validating():
    """Is nbgrader's Validate running the notebook? (It sets NBGRADER_EXECUTION.) Validate reports only the graded
    cells, which run these same checks, so the test cells then leave the work to them and Validate stays quick."""
    return os.environ.get("NBGRADER_EXECUTION") == "validate"


def _task1_test(name, checks, graded=False):
    def test(TransformerBlock, cfg):
        if graded or not validating():
            run_checks(checks, Blocks(TransformerBlock, cfg), point_to_trace=True)
    return _named(test, name, checks)


def _task2_test(name, checks, graded=False):
    def test(magnitude_by_formula, magnitude_by_autograd, classify_factor):
        if graded or not validating():
            run_checks(checks, Task2(magnitude_by_formula, magnitude_by_autograd, classify_factor))
    return _named(test, name, checks)


def _named(test, name, checks):
    """The test, with the checks it runs in `test.checks` and in its help text."""
    test.__doc__ = f"{name}: runs the checks " + ", ".join(check.__name__ for check in checks) + "."
    test.checks = checks
    return test


def _define_tests():
    """Make each test and graded check of the index a function of this file, as the notebook imports it."""
    for index, make, graded in ((TASK1_TESTS, _task1_test, False), (TASK2_TESTS, _task2_test, False),
                                (GRADED_TASK1, _task1_test, True), (GRADED_TASK2, _task2_test, True)):
        for name, check_names in index.items():
            globals()[name] = make(name, tuple(globals()[check] for check in check_names), graded=graded)


_define_tests()


# --- 4. trace_calls: your block's steps beside a correct block's, on the same example ------------------------

# A correct Pre-LN block on trace_calls' fixed example (the weights of Blocks.fresh(seed=1), the input
# Blocks.example_input(seed=2), eval mode, so dropout is off): each part it calls, in calling order, and last what its
# forward returns; the step of the notebook's ten steps that hands each row its value; and the fingerprint of each
# value. The course's build computes the parts and the fingerprints by running its own correct block.
TRACE_PARTS = ['norm1', 'att', 'drop_shortcut', 'norm2', 'ff', 'drop_shortcut', 'returned']
TRACE_STEPS = [2, 3, 4, 7, 8, 9, 10]
TRACE_NUMBERS = [[27.821264, 27.51114, 7.964103],
                 [5.5734, 21.47592, -1.561636],
                 [-4.540474, 6.801954, 5.464241],
                 [23.280791, 28.390064, 13.428345],
                 [29.697032, 21.010611, 5.42703],
                 [-2.264322, 8.43067, 2.778257],
                 [21.01647, 28.956913, 16.206602]]
RETURNED = "returned"


def trace_calls(block_class, cfg):
    """Print each part a block of `block_class` calls, in calling order, with the value that part receives, beside
    a correct Pre-LN block's rows for the same weights and input, and mark the first row that differs."""
    blocks = Blocks(block_class, cfg)
    x = blocks.example_input(seed=2)
    try:
        block = blocks.fresh(seed=1).eval()
    except Exception as error:
        print(f"trace_calls could not make a block of {getattr(block_class, '__name__', block_class)!s}: "
              f"{type(error).__name__}: {error}")
        return
    rows, error = record_calls(block, x)
    reference = [(part, numbers_summary(numbers, x.numel())) for part, numbers in zip(TRACE_PARTS, TRACE_NUMBERS)]
    print(side_by_side(reference, rows, error))


def record_calls(block, x):
    """Run `block` on a copy of `x` once, without gradients, watching every part it holds. Returns the rows (part,
    summary of the value it received) in calling order, the last one ("returned", summary of what forward returned),
    and the error forward raised (None if it returned; then there is no "returned" row)."""
    names = {}
    for name, module in block.named_children():
        names.setdefault(module, name)
    rows = []

    def watch(module, inputs):
        rows.append((names[module], summary(inputs[0] if inputs else None)))

    handles = [module.register_forward_pre_hook(watch) for module in names]
    error = None
    try:
        with torch.no_grad():
            rows.append((RETURNED, summary(block(x.clone()))))
    except Exception as raised:
        error = raised
    finally:
        for handle in handles:
            handle.remove()
    return rows, error


def summary(value):
    """A value as the trace shows it: (fingerprint, mean, standard deviation) of a tensor, or words saying what else
    it is. The standard deviation is the biased one, as LayerNorm computes it."""
    if not isinstance(value, torch.Tensor):
        return f"a {type(value).__name__}, not a tensor"
    try:
        values = value.detach().to(torch.float64)
        return fingerprint(values), values.mean().item(), values.std(unbiased=False).item()
    except Exception:
        return "a tensor the trace cannot read"


def numbers_summary(numbers, count):
    """The summary of a value of `count` entries known by its fingerprint: mean and standard deviation follow from
    its sum and its norm."""
    mean = numbers[0] / count
    return numbers, mean, math.sqrt(max(numbers[1] ** 2 / count - mean ** 2, 0.0))


def same_value(a, b):
    """Two summaries of the same values, to about 5 significant digits (finer than the checks: the trace looks for
    where a value first moves, however little)."""
    return not isinstance(a, str) and not isinstance(b, str) and same_numbers(a[0], b[0], tolerance=1e-5)


def side_by_side(reference, rows, error):
    """The two traces side by side, the first row that differs marked, and what that means."""
    unfinished = isinstance(error, NotImplementedError)
    count = max(len(reference), len(rows) + (error is not None and not unfinished))
    differs = [i >= len(reference) or i >= len(rows) or reference[i][0] != rows[i][0]
               or not same_value(reference[i][1], rows[i][1]) for i in range(count)]
    first = differs.index(True) if True in differs and not unfinished else None
    returned = rows[-1][1] if rows and rows[-1][0] == RETURNED else None
    output_right = returned is not None and same_value(reference[-1][1], returned)
    decimals = _decimals(reference, rows, first)
    lines = [
        "A correct Pre-LN block and yours, with the same weights and the same input x (2 sequences of 6 tokens), in",
        "eval mode (dropout off). A row is a part called, in calling order, with the mean and standard deviation of",
        "the value it received; the last row is what forward returned. Step: the one of the ten steps (section",
        "\"Finding the first wrong step\") in which a correct block calls that part.",
        "",
        f"{'':11}{'a correct Pre-LN block':36}your block",
        f"{'row':>3} {'step':>5}  {'part':14}{'mean':>9}{'std':>9}    {'part':14}{'mean':>9}{'std':>9}",
    ]
    for i in range(count):
        places = decimals if i == first else 3
        left = f"{TRACE_STEPS[i]:>5}  " + _cell(*reference[i], places) if i < len(reference) else " " * 39
        right = _cell(*rows[i], places) if i < len(rows) else "(raised an error)" if i == len(rows) and error else ""
        mark = ("   <- differs" if output_right else "   <- first difference") if i == first else ""
        lines.append(f"{i + 1:>3} {left}    {right}".rstrip() + mark)
    lines.append("")
    if error is not None:
        said = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}".rstrip(": ")
        if unfinished:
            lines += textwrap.wrap(f"Your forward raised {said}. The left column is what a correct block does.", 100)
            return "\n".join(lines)
        lines += textwrap.wrap(f"Your forward raised {said} (after row {len(rows)}).", 100)
    lines += textwrap.wrap(_verdict(reference, rows, first, output_right), 100, break_on_hyphens=False)
    return "\n".join(lines)


def _cell(part, value, decimals):
    if isinstance(value, str):
        return f"{part:14}{value}"
    _, mean, std = value
    return f"{part:14}{mean:>+{decimals + 6}.{decimals}f}{std:>{decimals + 6}.{decimals}f}"


def _decimals(reference, rows, first):
    """3 decimals, or more for the marked row where 3 show the same part's two values as equal though they differ."""
    if first is None or first >= len(reference) or first >= len(rows):
        return 3
    (want, a), (got, b) = reference[first], rows[first]
    if want != got or isinstance(a, str) or isinstance(b, str):
        return 3
    for decimals in range(3, 8):
        if f"{a[1]:.{decimals}f} {a[2]:.{decimals}f}" != f"{b[1]:.{decimals}f} {b[2]:.{decimals}f}":
            return decimals
    return 3


def _verdict(reference, rows, first, output_right):
    if first is None:
        return ("Every row agrees: on this input, in eval mode, your block does what a correct Pre-LN block does. "
                "If a test still fails, its message says what else differs (training mode, gradients, float64 or "
                "the device).")
    row = first + 1
    above = ("" if first == 0 else "Row 1 agrees. " if first == 1 else "Rows 1 and 2 agree. " if first == 2
             else f"Rows 1 to {first} agree. ")
    if output_right:
        return (f"{above}Your block returns what a correct block returns here, but its calls differ from row {row} "
                "on. A correct forward written another way does that (a LayerNorm or dropout computed by hand, "
                "say), and so does a mistake that shows only in training mode, where dropout is on, or in the "
                f"gradients. If a test fails, start at row {row}.")
    if first >= len(rows):
        return f"{above}Row {row} is the first that differs: there a correct block calls {reference[first][0]}."
    if first >= len(reference):
        return f"{above}Row {row} is the first that differs: a correct block has returned before it."
    (want, expected), (got, value) = reference[first], rows[first]
    if want != got:
        did = "returned" if got == RETURNED else f"called {got}"
        does = "returns" if want == RETURNED else f"calls {want}"
        return f"{above}Row {row} is the first that differs: there a correct block {does} and yours {did}."
    decimals = _decimals(reference, rows, first)
    what = "what your block returned" if got == RETURNED else f"the value your block handed to {got}"
    if isinstance(value, str) or isinstance(expected, str):
        told = f"{what} is {value}"
    elif _cell(got, value, decimals) == _cell(want, expected, decimals):
        told = (f"{what} has the mean and standard deviation of a correct block's, but its entries differ (their "
                f"fingerprints: {numbers_text(expected[0], value[0]).removeprefix('expected ')})")
    else:
        told = (f"{what} has mean {value[1]:+.{decimals}f} and standard deviation {value[2]:.{decimals}f}, where a "
                f"correct block's has mean {expected[1]:+.{decimals}f} and standard deviation "
                f"{expected[2]:.{decimals}f}")
    return (f"{above}Row {row} is the first that differs: {told}. The parts above it received what a correct "
            "block gives them, so look at how your forward makes this row's value from theirs. Saving a "
            "shortcut and adding it back are not calls to parts, so they never show as rows.")
