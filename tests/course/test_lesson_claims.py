"""Every quantitative sentence of the lesson, checked on the very data its figure shows: the solved notebook run once,
as a student runs it, in a kernel, top to bottom (the `solved_run` fixture), training experiment included. Each test
first finds its sentence in the lesson, then checks the numbers, so a change to the code that makes a sentence false
fails here and names the sentence."""

import inspect
import math
import os
import random
import re
import sys
import textwrap
import warnings

import matplotlib
import numpy as np
import pytest
import torch

from autograder.course import build, kit, training_spread
from autograder.course.sample_class import FORWARDS
from autograder.grading.reference import reference_namespace

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the off-screen backend)

slow = pytest.mark.slow  # the tests on the notebook's measurements share one run of it (about a minute)


def run_lesson(forward: str | None = None, skip=("training_setup", "training_experiment"), edits=()) -> dict:
    """The namespace of the solved notebook, run in this process with Task 1 answered by `forward` (None: the
    solution): every code cell but the graded ones, the visible tests and `skip`, each (cell, old, new) of `edits`
    made first."""
    threads, show = torch.get_num_threads(), plt.show
    plt.show = lambda *args, **kwargs: None
    namespace = {"__name__": "__main__"}
    sys.path.insert(0, str(kit.SOURCE_NOTEBOOK.parent))  # lesson_figures.py, which draws the figures
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for cell in kit.KIT.cells():
                if cell.kind != "code" or cell.is_hidden_check or cell.is_visible_test or cell.grade_id in skip:
                    continue
                source = kit.strip_solution_markers(cell.source)
                for grade_id, before, after in edits:
                    if grade_id == cell.grade_id:
                        assert before in source, (grade_id, before)
                        source = source.replace(before, after)
                if cell.grade_id == "task1_forward" and forward is not None:
                    source = source.split("    def forward(self, x):")[0] + forward
                exec(compile(source, f"<{cell.grade_id}>", "exec"), namespace)
    finally:
        sys.path.remove(str(kit.SOURCE_NOTEBOOK.parent))
        plt.show = show
        plt.close("all")
        torch.set_num_threads(threads)  # the experiments use one thread; leave the test process as it was
    return namespace


@pytest.fixture(scope="module")
def lesson(solved_run):
    return solved_run.data


def says(grade_id: str, *phrases: str) -> None:
    """The lesson's cell `grade_id` still makes these statements (whitespace and line breaks ignored)."""
    text = " ".join(next(c.source for c in kit.KIT.cells() if c.grade_id == grade_id).split())
    for phrase in phrases:
        assert " ".join(phrase.split()) in text, f"{grade_id} no longer says {phrase!r}: update this test with it"


def within(values, low, high) -> None:
    values = np.asarray(values, dtype=float)
    assert low <= values.min() and values.max() <= high, f"{values.min():.4g}..{values.max():.4g} not in [{low}, {high}]"


def block_factors(profile):
    return [profile[k] / profile[k + 1] for k in range(len(profile) - 1)]


def growths(lesson, gain, name):
    """Gradient at block 1 over gradient at block 24, one per seed."""
    return [profile[0] / profile[-1] for profile in lesson["profiles"][gain][name]]


def factors(lesson, gain, name):
    return [f for profile in lesson["profiles"][gain][name] for f in block_factors(profile)]


def moving_average(values, width=10):
    return [float(np.mean(values[max(0, i - width + 1) : i + 1])) for i in range(len(values))]


# --- the block and Task 2 ------------------------------------------------------------------------------


def test_one_full_size_block_has_7_1_million_parameters_nearly_all_in_attention_and_feed_forward():
    says("block_count", "about 7.1 million parameters", "all but 3,072 of them")
    ns = reference_namespace()
    block = ns["TransformerBlock"](ns["GPT_CONFIG_124M"])
    count = lambda module: sum(p.numel() for p in module.parameters())  # noqa: E731
    assert round(count(block) / 1e6, 1) == 7.1
    assert count(block.norm1) + count(block.norm2) == 3072 == count(block) - count(block.att) - count(block.ff)


def test_the_parts_are_as_described():
    says(
        "parts_intro",
        "with `eps = 1e-5` added",
        "They start at 1 and 0",
        "a linear map from `emb_dim` to `4 * emb_dim`, GELU, and a linear map back to `emb_dim`",
    )
    ns = reference_namespace()
    norm = ns["LayerNorm"](32)
    assert norm.eps == 1e-5 and bool((norm.scale == 1).all()) and bool((norm.shift == 0).all())
    first, _, last = ns["FeedForward"](ns["GPT_CONFIG_TINY"]).layers
    assert (first.in_features, first.out_features, last.out_features) == (32, 128, 32)
    says("depth_intro", "With `gain = 1.0` that is PyTorch's own default range")
    linear = torch.nn.Linear(32, 8)
    assert float(linear.weight.abs().max()) <= 1 / 32**0.5 and float(linear.bias.abs().max()) <= 1 / 32**0.5


def test_a_silenced_post_ln_block_returns_its_input_normalized_twice():
    says("answer_zero_branches", "the Post-LN block returns `norm2(norm1(x))`")
    ns = reference_namespace()
    block = ns["PostLNBlock"](ns["GPT_CONFIG_TINY"]).eval()
    with torch.no_grad():
        for param in [*block.att.parameters(), *block.ff.parameters()]:
            param.zero_()
        x = 3 * torch.randn(2, 5, 32) + 1
        assert torch.allclose(block(x), block.norm2(block.norm1(x)), atol=1e-6)
        assert not torch.allclose(block(x), x, atol=0.1)


def test_the_compounding_examples():
    ns = reference_namespace()
    formula, autograd, classify = ns["magnitude_by_formula"], ns["magnitude_by_autograd"], ns["classify_factor"]
    says("gradients_answer", "$2^{10} = 1024$", r"$0.5^{10} = 1/1024 \approx 0.001$", "a thousand times larger")
    assert formula(2, 10)[-1] == 1024 == autograd(lambda y: 2 * y, 10)[-1]
    assert formula(0.5, 10)[-1] == 1 / 1024 and round(1 / 1024, 3) == 0.001
    says(
        "task2_intro",
        "`magnitude_by_formula(-2, 3)` is `[2.0, 4.0, 8.0]`",
        '`-2` is `"exploding"`, `-0.5` is `"vanishing"` and `-1` is `"stable"`, just like `2`, `0.5` and `1`',
        "With `layer = lambda y: factor * y` you get the formula's list again",
    )
    assert formula(-2, 3) == [2.0, 4.0, 8.0] == autograd(lambda y: -2 * y, 3)
    assert all(np.allclose(autograd(lambda y, f=f: f * y, 7), formula(f, 7), rtol=1e-14, atol=0) for f in (1.5, -0.75, 0.3))
    assert [classify(f) for f in (-2, -0.5, -1, 2, 0.5, 1)] == ["exploding", "vanishing", "stable"] * 2


@slow
def test_a_chain_of_sines_vanishes_ever_more_slowly(lesson):
    says(
        "compounding_reading",
        r"$\cos(1) \approx 0.54$",
        "about 0.89 at layer 10",
        "after 10 layers 7.9 % of it is left, where ten factors of 0.54 would leave 0.2 %",
    )
    chain = lesson["sin_chain"]
    layer_factors = [chain[0]] + block_factors(chain[::-1])[::-1]  # chain[k] / chain[k - 1]
    assert round(chain[0], 2) == 0.54 == round(math.cos(1), 2)
    assert all(a < b < 1 for a, b in zip(layer_factors, layer_factors[1:]))  # creeping up towards 1
    assert round(layer_factors[-1], 2) == 0.89
    assert round(100 * chain[-1], 1) == 7.9 and round(100 * 0.54**10, 1) == 0.2


# --- deep stacks at initialization ----------------------------------------------------------------------


@slow
def test_the_depth_experiment_settings_are_the_ones_stated(lesson):
    says(
        "depth_intro",
        "the default `gain = 1.3`, which the grader uses, makes every weight 30 % larger",
        "With `gain = 1.0` that is PyTorch's own default range",
    )
    assert inspect.signature(reference_namespace()["make_stack"]).parameters["gain"].default == 1.3
    says(
        "depth_settings",
        "stacks 24 blocks of `GPT_CONFIG_TINY` (width 32, 4 heads)",
        "twenty weight seeds (0 to 19)",
        "at gain 1.0 and at gain 1.3",
        "one input of 2 sequences of 8 tokens",
        "the median over the twenty seeds",
    )
    cfg = lesson["GPT_CONFIG_TINY"]
    assert (cfg["emb_dim"], cfg["n_heads"]) == (32, 4)
    assert lesson["DEPTH"] == 24 and list(lesson["SEEDS"]) == list(range(20)) and lesson["GAINS"] == (1.0, 1.3)
    assert tuple(lesson["depth_input"].shape) == (2, 8, 32)
    assert all(len(p) == 24 for runs in lesson["profiles"][1.0].values() for p in runs)


# What depth_reading says of every seed: checked on the notebook's twenty seeds and on fresh ones.


def _no_shortcuts_vanish(lesson):
    assert np.median(growths(lesson, 1.0, "no shortcuts")) < 0.3  # on most seeds less than 30 % is left


def _no_normalization_explodes(lesson):
    every = factors(lesson, 1.0, "no normalization") + factors(lesson, 1.3, "no normalization")
    assert np.mean(np.array(every) > 1) > 0.9  # nearly every factor above 1
    assert min(growths(lesson, 1.0, "no normalization")) > 2 and min(growths(lesson, 1.3, "no normalization")) > 10


def _pre_ln_factors_near_1_compound(lesson):
    within(factors(lesson, 1.0, "Pre-LN (your block)"), 0.85, 1.4)
    assert np.mean(np.abs(np.array(factors(lesson, 1.0, "Pre-LN (your block)")) - 1) < 0.1) > 0.95  # nearly all
    within(growths(lesson, 1.0, "Pre-LN (your block)"), 1.2, 3.5)


def _post_ln_passes_the_gradient_back(lesson):
    within(growths(lesson, 1.0, "Post-LN"), 0.2, 3)


@slow
def test_without_shortcuts_the_gradient_vanishes(lesson):
    says(
        "depth_reading",
        "On 18 of the 20 seeds block 1 is left with less than 30 % of what block 24 receives, on 12 "
        "with less than 10 % (the median is 6 %): the gradient **vanishes**",
        "on one of the 20, block 1 receives more than block 24",
    )
    grown = np.array(growths(lesson, 1.0, "no shortcuts"))
    assert ((grown < 0.3).sum(), (grown < 0.1).sum(), (grown > 1).sum()) == (18, 12, 1)
    assert round(100 * float(np.median(grown))) == 6
    _no_shortcuts_vanish(lesson)


@slow
def test_without_normalization_the_gradient_explodes_depending_on_the_gain(lesson):
    says(
        "depth_reading",
        "nearly every factor is above 1 (99 % of them). On every seed block 1 receives more than 2 "
        "times what block 24 receives (the median is 5.7), and at gain 1.3 more than 10 times (the median is about "
        "5,800): the gradient **explodes**",
    )
    every = factors(lesson, 1.0, "no normalization") + factors(lesson, 1.3, "no normalization")
    assert round(100 * float(np.mean(np.array(every) > 1))) == 99 and min(every) < 1
    assert round(float(np.median(growths(lesson, 1.0, "no normalization"))), 1) == 5.7
    # "about": the depth experiment's input and initial weights are float32 draws, and float32 sums differ in their
    # last bits between processors' vector code paths; over 24 exploding blocks at gain 1.3 that moves the median by
    # a few per cent (5,708 on an AMD EPYC with AVX2, 5,551 on an Intel Xeon with AVX-512)
    assert abs(float(np.median(growths(lesson, 1.3, "no normalization"))) / 5800 - 1) < 0.05
    _no_normalization_explodes(lesson)


@slow
def test_pre_ln_factors_stay_near_1_and_still_compound(lesson):
    says(
        "depth_reading",
        "every factor lies between 0.85 and 1.4, and nearly all of them (99 %) within 10 % of 1",
        "compound to 1.2 to 3.5 times more gradient at block 1 than at block 24 (the median is 1.8)",
    )
    says("walkthrough", "Close to 1 is not 1, though: over many blocks such factors still compound")
    _pre_ln_factors_near_1_compound(lesson)
    near = np.abs(np.array(factors(lesson, 1.0, "Pre-LN (your block)")) - 1) < 0.1
    assert round(100 * float(np.mean(near))) == 99
    assert round(float(np.median(growths(lesson, 1.0, "Pre-LN (your block)"))), 1) == 1.8


@slow
def test_post_ln_passes_the_gradient_back_about_as_well(lesson):
    says("depth_reading", "block 1 receives 0.2 to 3 times the gradient of block 24 (the median is 0.9)")
    _post_ln_passes_the_gradient_back(lesson)
    assert round(float(np.median(growths(lesson, 1.0, "Post-LN"))), 1) == 0.9


@slow
def test_the_pre_ln_sentences_would_be_false_for_a_post_ln_task_1():
    post_ln = run_lesson(textwrap.indent(textwrap.dedent(FORWARDS["ben_post_ln"]).strip("\n"), "    "))
    with pytest.raises(AssertionError):
        _pre_ln_factors_near_1_compound(post_ln)
    with pytest.raises(AssertionError):
        _stream_reset_and_grown(post_ln)


# --- Pre-LN against Post-LN ---------------------------------------------------------------------------


@slow
def test_a_post_ln_block_standardizes_every_token(lesson):
    says(
        "postln_intro",
        "every token standardized by `norm2` (mean 0, standard deviation 1 over its features, as LayerNorm computes it)",
    )
    outputs = lesson["pre_post_outputs"]
    post = outputs["Post-LN"][0]
    within(post.std(dim=-1, unbiased=False), 0.9999, 1.0)
    within(post.mean(dim=-1).abs(), 0, 1e-5)
    assert (outputs["Pre-LN"][0].std(dim=-1, unbiased=False) - 1).abs().min() > 0.5  # the stream is not reset
    assert round(float(post.std(dim=-1, unbiased=False).min()), 4) == 1.0


@slow
def test_the_pre_post_experiment_settings_are_the_ones_stated(lesson):
    says("prepost_intro", "on stacks of 1, 2, 4, 8, 16 and 32 blocks", "gain 1.0, seeds 0 to 19")
    assert lesson["STACK_DEPTHS"] == (1, 2, 4, 8, 16, 32)
    assert lesson["post_over_pre"].shape == (20, 6)
    assert lesson["STACK_GAIN"] == 1.0


def _stream_reset_and_grown(lesson):
    post = [size for sizes, _ in lesson["pre_post"]["Post-LN"][32] for size in sizes]
    within(post, 0.995, 1.005)
    pre = [sizes for sizes, _ in lesson["pre_post"]["Pre-LN (your block)"][32]]
    within([sizes[0] for sizes in pre], 0.9, 1.2)
    within([sizes[-1] for sizes in pre], 1.4, 3)


def _post_ln_gets_more_at_the_last_block(lesson):
    ratio = lesson["post_over_pre"]  # [seed, depth]
    within(ratio[:, 0], 0.9, 1.1)
    within(ratio[:, -1], 1.2, 4)
    medians = np.median(ratio, axis=0)
    assert medians[-1] > medians[2] > medians[0], medians


@slow
def test_post_ln_resets_the_stream_and_pre_ln_lets_it_grow(lesson):
    says(
        "prepost_reading",
        "in Post-LN it is 1.00 after every block",
        "grows with depth, from about 1.04 after block 1 to about 2.2 after block 32 (on every seed between 0.9 and "
        "1.2, and between 1.4 and 3)",
    )
    says("answer_last_block", "it grows with depth (to about 2 after 32 blocks here)")
    _stream_reset_and_grown(lesson)
    pre = [sizes for sizes, _ in lesson["pre_post"]["Pre-LN (your block)"][32]]
    assert round(float(np.median([sizes[0] for sizes in pre])), 2) == 1.04
    assert round(float(np.median([sizes[-1] for sizes in pre])), 1) == 2.2


@slow
def test_post_ln_gives_the_last_block_more_gradient_the_deeper_the_stack(lesson):
    says(
        "prepost_reading",
        "with a single block both arrangements give the same value to within 10 %",
        "The median ratio of Post-LN's gradient to Pre-LN's grows with every doubling of depth",
        "at 32 blocks Post-LN's last block receives 1.2 to 4 times as much as Pre-LN's (the median is 2.0)",
        "a gap of about 2 at 32 blocks of width 32",
    )
    _post_ln_gets_more_at_the_last_block(lesson)
    medians = np.median(lesson["post_over_pre"], axis=0)
    assert np.all(np.diff(medians) > 0), medians
    assert round(float(medians[-1]), 1) == 2.0


@slow
def test_the_bound_is_set_beside_the_measurement(lesson):
    says(
        "prepost_reading",
        r"$\sqrt{L}$, would be $\sqrt{32} \approx 5.7$ at 32 blocks, where this notebook measures "
        "about 2",
    )
    says(
        "answer_last_block",
        "for its second feed-forward weight matrix, the one measured here, about twice as large at 32 blocks here",
        "differ by a factor √L, about 5.7 at 32 blocks",
    )
    says("prepost_experiment", "stack[-1].ff.layers[2].weight.grad.norm()")  # the matrix the answer names
    assert round(math.sqrt(32), 1) == 5.7 and lesson["STACK_DEPTHS"][-1] == 32
    assert round(float(np.median(lesson["post_over_pre"][:, -1]))) == 2


@slow
def test_post_ln_s_last_block_gradient_drifts_up_a_little_with_depth(lesson):
    says("answer_last_block", "its median over the 20 seeds is 8 % larger at 32 blocks than at 1")
    medians = np.median(lesson["last_gradients"]["Post-LN"], axis=0)  # [depth], depths 1 to 32
    assert lesson["STACK_DEPTHS"][0] == 1 and round(100 * (medians[-1] / medians[0] - 1)) == 8, medians


def _fresh_seeds(variable: str, count: int) -> list[int]:
    """Seeds nobody chose, drawn anew in every run of the tests (outside the ones the notebook shows) and printed;
    `variable`=a,b,c repeats a run."""
    given = os.environ.get(variable)
    seeds = [int(s) for s in given.split(",")] if given else random.Random().sample(range(1000, 2**31), count)
    print(f"fresh seeds: {seeds} ({variable}={','.join(map(str, seeds))} repeats them)")
    return seeds


@slow
def test_what_the_initialization_experiments_say_of_every_seed_holds_on_fresh_seeds():
    """The sentences of depth_reading, prepost_reading and mlp_reading that speak of every seed (or of most seeds, as
    a median), on five and three seeds drawn fresh instead of the notebook's: the same checks as above."""
    depth_seeds, mlp_seeds = _fresh_seeds("LESSON_DEPTH_SEEDS", 5), _fresh_seeds("LESSON_MLP_SEEDS", 3)
    fresh = run_lesson(
        skip=("training_setup", "training_experiment", "demo_count"),
        edits=(
            ("depth_experiment", "DEPTH, SEEDS, GAINS = 24, range(20),", f"DEPTH, SEEDS, GAINS = 24, {depth_seeds},"),
            ("mlp_experiment", "MLP_DEPTH, MLP_SEEDS = 16, 20, range(10)", f"MLP_DEPTH, MLP_SEEDS = 16, 20, {mlp_seeds}"),
        ),
    )
    assert list(fresh["SEEDS"]) == depth_seeds and list(fresh["MLP_SEEDS"]) == mlp_seeds
    for claim in (
        _no_shortcuts_vanish,
        _no_normalization_explodes,
        _pre_ln_factors_near_1_compound,
        _post_ln_passes_the_gradient_back,
        _stream_reset_and_grown,
        _post_ln_gets_more_at_the_last_block,
        _plain_networks,
    ):
        claim(fresh)
    seed_1420, _ = fresh["mlp_weight_gradients"](list(fresh["MLP_KINDS"])[1], 1420)  # the seed mlp_reading names
    assert round(max(seed_1420) / min(seed_1420), 1) == 5.1


# --- training ----------------------------------------------------------------------------------------------


def _final(losses):
    return float(np.mean(losses[-20:]))


SPREAD = training_spread.read()  # the training experiment on the table's seeds (a correct block)
SETTINGS = ("Pre-LN, 12 blocks", "Post-LN, 12 blocks", "Post-LN, 12 blocks, warm-up", "Pre-LN, 2 blocks", "Post-LN, 2 blocks")


def _letter_entropy() -> float:
    text = (kit.SOURCE_NOTEBOOK.parent / build.LESSON_TEXT).read_text(encoding="utf-8")
    counts = np.array([text.count(c) for c in sorted(set(text))], dtype=float)
    frequencies = counts / counts.sum()
    return float(-(frequencies * np.log(frequencies)).sum())


def _table_runs(seed: int) -> dict[str, list[float]]:
    index = SPREAD["seeds"].index(seed)
    return {label: SPREAD["losses"][label][index] for label in SETTINGS}


def post_ln_stalls(post: list[float], entropy: float) -> list[str]:
    """What training_reading says of deep Post-LN without warm-up on each seed of the table, and of most others
    ("usual, not certain"): the sentences that fail on one run."""
    failed = []
    averaged = np.array(moving_average(post))
    if not (np.abs(averaged[:50] - entropy).min() < 0.1 and abs(np.mean(post[49:]) - entropy) <= 0.1):
        failed.append("Post-LN comes down to the line within 50 steps, and from step 50 on its mean is within 0.1 of it")
    if abs(_final(post) - entropy) > 0.15:
        failed.append(f"Post-LN's last 20 steps within 0.15 of the line (ends at {_final(post):.3f})")
    return failed


def claims_of_every_seed(runs: dict[str, list[float]], entropy: float) -> list[str]:
    """What training_reading says of every seed, checked on the five runs of one seed: the sentences that fail."""
    failed = []
    pre, post, warmed = (runs[label] for label in SETTINGS[:3])
    if not (np.mean(pre[100:]) < np.mean(pre[50:100]) and 2.5 <= _final(pre) <= 2.8):
        failed.append(f"Pre-LN's loss keeps falling, to between 2.5 and 2.8 (ends at {_final(pre):.3f})")
    failed += post_ln_stalls(post, entropy)
    if not _final(pre) < _final(warmed) <= entropy + 0.1:
        failed.append(f"with the warm-up, above Pre-LN and at worst stalled at the line ({_final(warmed):.3f})")
    two = [_final(runs[label]) for label in SETTINGS[3:]]
    if abs(two[0] - two[1]) > 0.06 or not all(2.5 <= value <= 2.8 for value in two):
        failed.append(f"2 blocks: within 0.06 of each other, both between 2.5 and 2.8 ({two})")
    return failed


READING_OF_EVERY_SEED = (
    "On each of the 32 seeds, Pre-LN's loss keeps falling (its mean over steps 101 to 150 is below its mean over "
    "steps 51 to 100), to between 2.5 and 2.8 after 150 steps",
    "Post-LN's comes down to the dashed line within the first 50 steps and stays near it from then on: from step 50 on "
    "its mean is within 0.1 of the line on every seed",
    "The mean of each run's last 20 steps is within 0.15 of the line",
    "on the other 3 it stalls at the line as it does without warm-up. On every seed it ends above Pre-LN's loss on the same seed",
    "on each seed Pre-LN and Post-LN read the same batches (the windows depend on the seed alone) and end within 0.06 "
    "of each other, all between 2.5 and 2.8",
)


def test_the_training_settings_are_the_ones_stated():
    says(
        "training_intro",
        "The model below reads 16 characters of text",
        "its Markdown above this section, without code or answers, shipped next to the notebook as `lesson_text.txt`",
        "a character embedding and a position embedding of width 32",
        "`GPT_CONFIG_TINY` (4 heads, no dropout)",
        "12 blocks, and 2 blocks for comparison",
        "Adam with learning rate 0.006 (PyTorch's defaults otherwise), 150 steps",
        "a batch of 16 windows of 17 characters",
        "grows linearly from 0.00006 to 0.006 over the first 100 steps",
        "**seed** 0: a seed fixes the initial weights and the windows drawn",
        "by the same code with a correct block, on the 32 seeds 0 to 31: every run's losses are in `training_spread.json`",
        "a moving average over 10 steps",
        "shades the range from the lowest to the highest of the 32 seeds",
        "the mean loss of each run's last 20 steps",
    )
    lesson = training_spread.lesson_training()
    setup = next(c.source for c in kit.KIT.cells() if c.grade_id == "training_setup")
    assert "torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)" in setup  # nothing else changed
    cfg = lesson["TRAIN_CFG"]
    assert (cfg["context_length"], cfg["emb_dim"], cfg["n_heads"], cfg["drop_rate"]) == (16, 32, 4, 0.0)
    assert (
        lesson["TRAIN_STEPS"],
        lesson["BATCH_SIZE"],
        lesson["LEARNING_RATE"],
        lesson["WARMUP_STEPS"],
        lesson["TRAIN_SEED"],
    ) == (150, 16, 0.006, 100, 0) and math.isclose(0.006 / 100, 0.00006)
    assert tuple(lesson["TRAINING_SETTINGS"]) == SETTINGS
    source = next(c.source for c in kit.KIT.cells() if c.grade_id == "training_experiment")
    for label, (block, depth, warmup) in zip(
        SETTINGS,
        [
            ("TransformerBlock", 12, "0"),
            ("PostLNBlock", 12, "0"),
            ("PostLNBlock", 12, "WARMUP_STEPS"),
            ("TransformerBlock", 2, "0"),
            ("PostLNBlock", 2, "0"),
        ],
    ):
        assert f'"{label}": ({block}, {depth}, {warmup}),' in source, label
    assert "train_characters(block_class, depth, TRAIN_SEED, warmup)" in source
    assert SPREAD["seeds"] == list(range(32)) == list(training_spread.SEEDS)
    assert set(SPREAD["losses"]) == set(SETTINGS) and all(
        len(runs) == 32 and all(len(run) == 150 for run in runs) for runs in SPREAD["losses"].values()
    )
    figures = (kit.SOURCE_NOTEBOOK.parent / "lesson_figures.py").read_text(encoding="utf-8")
    assert "def moving_average(values, width=10):" in figures and "moving_average(run)" in figures


@slow
def test_the_notebooks_run_on_seed_0_is_the_tables(lesson):
    """The table was made by the notebook's code as it is now: the solved notebook's runs on seed 0 are the table's,
    step by step over the first 20 steps (a change to the code or to the lesson's text changes every batch, and so
    the first steps). Later steps are not compared: float32 sums differ in their last bits between processors, and
    150 steps of training make that visible (a final loss 0.07 off the table's on an Intel Xeon with AVX-512, whose
    table was made on an AMD EPYC with AVX2). What the lesson says of every seed holds of the notebook's own run."""
    assert set(lesson["training_losses"]) == set(SETTINGS)
    for label, run in lesson["training_losses"].items():
        table = _table_runs(0)[label]
        assert len(run) == 150 and np.abs(np.array(run[:20]) - table[:20]).max() < 0.005, label
        assert lesson["final_losses"][label] == round(_final(run), 2)
    assert claims_of_every_seed(lesson["training_losses"], _letter_entropy()) == []


@slow
def test_the_dashed_line_is_the_entropy_of_the_texts_letter_frequencies(lesson):
    text = (kit.SOURCE_NOTEBOOK.parent / build.LESSON_TEXT).read_text(encoding="utf-8")
    assert text == build.lesson_text() == lesson["LESSON_TEXT"]
    assert math.isclose(_letter_entropy(), lesson["LETTER_ENTROPY"], rel_tol=1e-9)
    says("training_reading", f"within 0.15 of the line's {_letter_entropy():.2f} nats")


def test_what_the_lesson_says_of_every_seed_holds_on_every_seed_of_the_table():
    says("training_reading", *READING_OF_EVERY_SEED)
    says("gradients_intro", "The training experiment near the end of this notebook shows a deep model that stalls")
    entropy = _letter_entropy()
    failures = {seed: claims_of_every_seed(_table_runs(seed), entropy) for seed in SPREAD["seeds"]}
    assert not any(failures.values()), {seed: failed for seed, failed in failures.items() if failed}


def test_the_spread_of_the_table_is_as_stated():
    says(
        "training_reading",
        "(from 2.59 to 2.75; median 2.68)",
        "though on 3 of the 32 seeds the plotted curve spikes more than 0.2 above the line for a few steps",
        "With the warm-up, Post-LN gets below the line on 29 of the 32 "
        "seeds, to between 2.78 and 3.18 (median 2.88); on the other 3 it stalls at the line",
        "a warm-up rescues deep Post-LN on most seeds, in part, and not on all of them",
    )
    says("training_reading", "and a warm-up rescues it, here in part and on most seeds within 150 steps")
    entropy = _letter_entropy()
    pre = [_final(run) for run in SPREAD["losses"]["Pre-LN, 12 blocks"]]
    assert (round(min(pre), 2), round(max(pre), 2), round(float(np.median(pre)), 2)) == (2.59, 2.75, 2.68)
    spikes = [np.abs(np.array(moving_average(run)[49:]) - entropy).max() for run in SPREAD["losses"]["Post-LN, 12 blocks"]]
    assert sum(spike > 0.2 for spike in spikes) == 3
    assert all(
        max(moving_average(run)[49:]) - entropy > 0.2
        for run, spike in zip(SPREAD["losses"]["Post-LN, 12 blocks"], spikes)
        if spike > 0.2
    )  # above the line
    warmed = sorted(_final(run) for run in SPREAD["losses"]["Post-LN, 12 blocks, warm-up"])
    below = [value for value in warmed if value < entropy]
    assert len(below) == 29 and (round(below[0], 2), round(below[-1], 2)) == (2.78, 3.18)
    assert round(float(np.median(below)), 2) == 2.88
    assert all(abs(value - entropy) <= 0.1 for value in warmed[29:])  # the other 3: stalled at the line


FRESH_SEEDS = 3  # trained in each run of the tests: about 20 s of CPU each on two slow cores


@slow
def test_what_the_lesson_says_of_every_seed_holds_on_fresh_seeds():
    """Seeds nobody chose (outside the table): every sentence training_reading says of every seed, on each; that deep
    Post-LN stalls without warm-up, which the lesson calls usual and not certain, on most of them (a run in which it
    escapes came once in about 25 fresh seeds: two of three is then missed about once in 200 test runs)."""
    seeds = _fresh_seeds("LESSON_TRAINING_SEEDS", FRESH_SEEDS)
    trained = training_spread.train(seeds)
    entropy = _letter_entropy()
    runs = {seed: {label: trained[label][seed] for label in SETTINGS} for seed in seeds}
    stalled = {seed: post_ln_stalls(run[SETTINGS[1]], entropy) for seed, run in runs.items()}
    failures = {seed: [s for s in claims_of_every_seed(run, entropy) if s not in stalled[seed]] for seed, run in runs.items()}
    assert not any(failures.values()), {seed: failed for seed, failed in failures.items() if failed}
    assert sum(not failed for failed in stalled.values()) > len(seeds) / 2, stalled


@slow
def test_deep_post_ln_now_and_then_gets_below_the_line_without_warm_up():
    says(
        "training_reading",
        "Seeds outside the table show that this is usual, not certain: now and then deep Post-LN gets below the line "
        "without a warm-up too (on seed 1594473549 its last 20 steps average 2.99)",
    )
    lesson = training_spread.lesson_training()
    block, depth, warmup = lesson["TRAINING_SETTINGS"][SETTINGS[1]]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the notebook trains (training_spread.train)
    try:
        run = lesson["train_characters"](block, depth, 1594473549, warmup)
    finally:
        torch.set_num_threads(threads)
    # 2.990 on an AMD EPYC with AVX2, 2.985 on an Intel Xeon with AVX-512
    assert abs(_final(run) - 2.99) < 0.02 and _final(run) < _letter_entropy() - 0.15
    assert post_ln_stalls(run, _letter_entropy())  # what the lesson says of the table's seeds fails here


# --- the plain network ----------------------------------------------------------------------------------


def _plain_networks(lesson, shortcuts_flat=6):
    """`shortcuts_flat`: how far the shortcuts network's largest layer gradient may be from its smallest (6 on any
    seed, 4 on the table's ten)."""
    plain, shortcuts, normalized = (lesson["mlp_gradients"][kind] for kind in lesson["MLP_KINDS"])
    within([g[0] / g[-1] for g in plain], 1e-12, 1e-8)
    for runs, low, high, flat in ((shortcuts, 10, 50_000, shortcuts_flat), (normalized, 0.5, 4, 4)):
        within(runs, low, high)
        within([max(g) / min(g) for g in runs], 1, flat)
    plain, shortcuts, normalized = (lesson["mlp_output_sizes"][kind] for kind in lesson["MLP_KINDS"])
    within(shortcuts, 10, 100)  # the values themselves, never rounded
    within(normalized, 2.5, 3.5)
    within(plain, 0.03, 0.12)


@slow
def test_the_plain_network_experiment(lesson):
    says("mlp_intro", "20 fully connected layers of width 16", "ten seeds (0 to 9)")
    assert (lesson["MLP_WIDTH"], lesson["MLP_DEPTH"], list(lesson["MLP_SEEDS"])) == (16, 20, list(range(10)))
    says(
        "mlp_reading",
        "layer 1's weight gradient is between $10^{-12}$ and $10^{-8}$ times layer 20's",
        "within each of these seeds, the largest layer gradient is at most 4 times the smallest; other seeds rarely "
        "go past 4 and stay below 6: seed 1420 reaches 5.1), but every weight gradient lies between 10 and 50,000 "
        "(the median is about 1,300)",
        "just as flat (at most 4 times), and every weight gradient lies between 0.5 and 4 (the median is 1.5)",
    )
    says("question_mlp_level", "around $10^3$", "stays near 1", "the experiment prints how large the output of each version is")
    _plain_networks(lesson, shortcuts_flat=4)  # these ten seeds
    shortcuts, normalized = (np.median(lesson["mlp_gradients"][kind]) for kind in list(lesson["MLP_KINDS"])[1:])
    assert round(float(shortcuts), -2) == 1300 and round(float(normalized), 1) == 1.5


@slow
def test_the_plain_networks_outputs_differ_as_much(lesson, solved_run):
    says(
        "mlp_reading",
        "its root mean square is between 10 and 100 with shortcuts alone (the median is about 33), "
        "about 3 (2.5 to 3.5) with a LayerNorm in each branch, and 0.03 to 0.12 in the plain network",
    )
    _plain_networks(lesson)
    assert round(float(np.median(lesson["mlp_output_sizes"][list(lesson["MLP_KINDS"])[1]]))) == 33
    printed = next(
        o["text"]
        for c in solved_run.cells
        if c.metadata["nbgrader"]["grade_id"] == "mlp_experiment"
        for o in c.outputs
        if o.get("name") == "stdout"
    )
    assert "size of the output (root mean square)" in printed and len(re.findall(r"'[\d.]+'", printed)) == 30


# --- the rest -------------------------------------------------------------------------------------------


def test_the_introduction_lists_every_section_in_the_order_the_notebook_has_them():
    """Each item of the introduction's list names the cell it is about; those cells come in the list's order, and no
    sentence calls an experiment the last or the one at the end unless it is."""
    order = [c.grade_id for c in kit.KIT.cells()]
    items = re.findall(
        r"^(\d+)\. (.+(?:\n   .+)*)", next(c.source for c in kit.KIT.cells() if c.grade_id == "intro"), re.MULTILINE
    )
    about = {
        "guess": "predict",
        "`TransformerBlock.__init__`": "block_intro",
        "forward pass": "task1_forward",
        "side by side": "diagram",
        "(**Task 2**)": "task2_compounding",
        "language model": "training_experiment",
        "plain fully connected network": "mlp_experiment",
    }
    named = [next(cell for phrase, cell in about.items() if phrase in text) for _, text in items]
    assert [int(n) for n, _ in items] == list(range(1, len(about) + 1)) and len(set(named)) == len(about), items
    assert [order.index(cell) for cell in named] == sorted(order.index(cell) for cell in named), named
    experiments = [c for c in order if c.endswith("_experiment")]
    text = " ".join(" ".join(c.source.split()) for c in kit.KIT.cells())
    if experiments[-1] != "training_experiment":
        assert not re.search(r"last experiment|experiment at the end", text), "the training is not the last experiment"


def test_the_lesson_lists_the_graders_ten_steps_in_order():
    from autograder.engine.steps import STEPS

    text = next(c.source for c in kit.KIT.cells() if c.grade_id == "debugging")
    listed = {int(n): step.replace("`", "").rstrip(";.") for n, step in re.findall(r"^(\d+)\. (.+)$", text, re.MULTILINE)}
    assert listed == {step.number: step.text for step in STEPS}


def test_the_grader_stacks_24_blocks_at_the_default_gain():
    from autograder.engine.questions.plan import PROFILE_DEPTH

    says("depth_reading", "The grader's deep-stack check builds 24 of *your* blocks at gain 1.3")
    assert PROFILE_DEPTH == 24


def test_the_counts_of_graded_cells_and_written_answers():
    says("intro", "three short written answers")
    says("grading_intro", "The seven cells below are graded automatically", "three written answers")
    says("block_intro", "The six test cells under the task cell")
    cells = kit.KIT.cells()
    assert sum(c.is_hidden_check for c in cells) == 7
    assert sum((c.grade_id or "").startswith("answer_") for c in cells) == 3
    index = [c.grade_id for c in cells].index("task1_forward")
    assert [c.is_visible_test for c in cells[index + 1 : index + 7]] == [True] * 6
