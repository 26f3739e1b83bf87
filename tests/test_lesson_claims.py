"""Every quantitative sentence of the lesson, checked on the very data its figure shows: the notebook's own cells,
solved, run top to bottom (figures drawn off-screen). Each test first finds its sentence in the lesson, then
checks the numbers, so a change to the code that makes a sentence false fails here and names the sentence."""
import inspect
import re
import textwrap
import warnings

import matplotlib
import numpy as np
import pytest
import torch

from autograder import kit
from autograder.sample_class import FORWARDS

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the off-screen backend)


def run_lesson(forward: str | None = None) -> dict:
    """The namespace of the solved notebook after every code cell but the graded ones and the visible tests has run;
    with `forward`, Task 1 answered by that method instead of the solution."""
    threads, show = torch.get_num_threads(), plt.show
    plt.show = lambda *args, **kwargs: None
    namespace = {"__name__": "__main__"}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for cell in kit.KIT.cells():
                if cell.kind != "code" or (cell.grade_id or "").startswith(("check_", "test_")):
                    continue
                source = kit.strip_solution_markers(cell.source)
                if forward and cell.grade_id == "task1_forward":
                    source = source.split("    def forward(self, x):")[0] + forward
                exec(compile(source, f"<{cell.grade_id}>", "exec"), namespace)
    finally:
        plt.show = show
        plt.close("all")
        torch.set_num_threads(threads)          # the experiments use one thread; leave the test process as it was
    return namespace


@pytest.fixture(scope="module")
def lesson():
    return run_lesson()


def says(grade_id: str, *phrases: str) -> None:
    """The lesson's cell `grade_id` still makes these statements (whitespace and line breaks ignored)."""
    text = " ".join(next(c.source for c in kit.KIT.cells() if c.grade_id == grade_id).split())
    for phrase in phrases:
        assert " ".join(phrase.split()) in text, f"{grade_id} no longer says {phrase!r}: update this test with it"


def within(values, low, high) -> None:
    values = np.asarray(values, dtype=float)
    assert low <= values.min() and values.max() <= high, f"{values.min():.4g}..{values.max():.4g} not in [{low}, {high}]"


def growths(lesson, gain, name):
    """Gradient at block 1 over gradient at block 24, one per seed."""
    return [profile[0] / profile[-1] for profile in lesson["profiles"][gain][name]]


def factors(lesson, gain, name):
    return [f for profile in lesson["profiles"][gain][name] for f in lesson["block_factors"](profile)]


def test_one_full_size_block_has_7_1_million_parameters_nearly_all_in_attention_and_feed_forward(lesson):
    says("block_count", "about 7.1 million parameters", "all but 3,072 of them")
    block = lesson["TransformerBlock"](lesson["GPT_CONFIG_124M"])
    count = lambda module: sum(p.numel() for p in module.parameters())  # noqa: E731
    assert round(count(block) / 1e6, 1) == 7.1
    assert count(block.norm1) + count(block.norm2) == 3072 == count(block) - count(block.att) - count(block.ff)


def test_the_compounding_examples(lesson):
    says("gradients_intro", "$2^{10} = 1024$", r"$0.5^{10} = 1/1024 \approx 0.001$")
    assert lesson["magnitude_by_formula"](2, 10)[-1] == 1024 == lesson["magnitude_by_autograd"](lambda y: 2 * y, 10)[-1]
    assert lesson["magnitude_by_formula"](0.5, 10)[-1] == 1 / 1024 and round(1 / 1024, 3) == 0.001
    says("task2_intro", "`magnitude_by_formula(-2, 3)` is `[2.0, 4.0, 8.0]`",
         '`-2` is `"exploding"`, `-0.5` is `"vanishing"` and `-1` is `"stable"`, just like `2`, `0.5` and `1`')
    assert lesson["magnitude_by_formula"](-2, 3) == [2.0, 4.0, 8.0] == lesson["magnitude_by_autograd"](lambda y: -2 * y, 3)
    assert [lesson["classify_factor"](f) for f in (-2, -0.5, -1, 2, 0.5, 1)] == ["exploding", "vanishing", "stable"] * 2


def test_the_depth_experiment_settings_are_the_ones_stated(lesson):
    says("depth_intro", "the default `gain = 1.3`, which the grader uses, makes every weight 30 % larger",
         "With `gain = 1.0` that is PyTorch's own default range")
    assert inspect.signature(lesson["make_stack"]).parameters["gain"].default == 1.3
    says("depth_settings", "stacks 24 blocks of `GPT_CONFIG_TINY` (width 32, 4 heads)", "five weight seeds (0 to 4)",
         "at gain 1.0 and at gain 1.3", "one input of 2 sequences of 8 tokens")
    cfg = lesson["GPT_CONFIG_TINY"]
    assert (cfg["emb_dim"], cfg["n_heads"]) == (32, 4)
    assert lesson["DEPTH"] == 24 and list(lesson["SEEDS"]) == [0, 1, 2, 3, 4] and lesson["GAINS"] == (1.0, 1.3)
    assert tuple(lesson["depth_input"].shape) == (2, 8, 32)
    assert all(len(p) == 24 for runs in lesson["profiles"][1.0].values() for p in runs)


def test_without_shortcuts_the_gradient_vanishes(lesson):
    says("depth_reading", "from about 0.2 to about 1.9 at gain 1.0, and more than half of them are below 1",
         "leaves block 1 with between 0.6 % and 9 % of the gradient block 24 receives")
    f = factors(lesson, 1.0, "no shortcuts")
    within([min(f)], 0.15, 0.25)
    within([max(f)], 1.85, 1.95)
    assert np.mean(np.asarray(f) < 1) > 0.5
    within(growths(lesson, 1.0, "no shortcuts"), 0.006, 0.09)


def test_without_normalization_the_gradient_explodes_depending_on_the_gain(lesson):
    says("depth_reading", "every factor is above 1", "At gain 1.0 block 1 receives 4.8 to 6.1 times what block 24",
         "at gain 1.3, 2,700 to 46,000 times")
    assert min(factors(lesson, 1.0, "no normalization") + factors(lesson, 1.3, "no normalization")) > 1
    within(growths(lesson, 1.0, "no normalization"), 4.8, 6.1)
    within(growths(lesson, 1.3, "no normalization"), 2700, 46000)


def test_pre_ln_factors_stay_near_1_and_compound_gently(lesson):
    says("depth_reading", "every factor lies between 0.99 and 1.11 at gain 1.0 (between 0.99 and 1.27 at gain 1.3)",
         "compounds to 1.8 to 2.1 times more gradient at block 1 than at block 24 (2.8 to 3.9 times at gain 1.3)")
    within(factors(lesson, 1.0, "Pre-LN (your block)"), 0.99, 1.11)
    within(factors(lesson, 1.3, "Pre-LN (your block)"), 0.99, 1.27)
    within(growths(lesson, 1.0, "Pre-LN (your block)"), 1.8, 2.1)
    within(growths(lesson, 1.3, "Pre-LN (your block)"), 2.8, 3.9)


def test_the_pre_ln_sentences_would_be_false_for_a_post_ln_task_1():
    post_ln = run_lesson(textwrap.indent(textwrap.dedent(FORWARDS["ben_post_ln"]).strip("\n"), "    "))
    with pytest.raises(AssertionError):
        test_pre_ln_factors_stay_near_1_and_compound_gently(post_ln)
    with pytest.raises(AssertionError):
        test_post_ln_resets_the_stream_and_pre_ln_lets_it_grow(post_ln)


def test_post_ln_factors_fall_on_both_sides_of_1(lesson):
    says("depth_reading", "its factors fall on both sides of 1 (0.87 to 1.13 at gain 1.0)",
         "block 1 receives 0.7 to 1.2 times the gradient of block 24")
    f = factors(lesson, 1.0, "Post-LN")
    within(f, 0.87, 1.13)
    assert min(f) < 1 < max(f)
    within(growths(lesson, 1.0, "Post-LN"), 0.7, 1.2)


def test_the_pre_post_experiment_settings_are_the_ones_stated(lesson):
    says("prepost_intro", "on stacks of 1, 2, 4, 8, 16 and 32 blocks", "gain 1.0, seeds 0 to 4")
    assert lesson["STACK_DEPTHS"] == (1, 2, 4, 8, 16, 32)
    assert lesson["post_over_pre"].shape == (5, 6)
    assert lesson["STACK_GAIN"] == 1.0


def test_post_ln_resets_the_stream_and_pre_ln_lets_it_grow(lesson):
    says("prepost_reading", "in Post-LN it is 1.00 after every block",
         "grows with depth, from 1.01 to 1.07 after block 1 to between 1.9 and 2.4 after block 32")
    post = [size for sizes, _ in lesson["pre_post"]["Post-LN"][32] for size in sizes]
    within(post, 0.995, 1.005)
    pre = [sizes for sizes, _ in lesson["pre_post"]["Pre-LN (your block)"][32]]
    within([sizes[0] for sizes in pre], 1.01, 1.07)
    within([sizes[-1] for sizes in pre], 1.9, 2.4)


def test_post_ln_gives_the_last_block_more_gradient_the_deeper_the_stack(lesson):
    says("prepost_reading", "with a single block both arrangements give the same value to within 3 %",
         "The median ratio of Post-LN's gradient to Pre-LN's grows with every doubling of depth",
         "at 32 blocks Post-LN's last block receives 1.5 to 2.7 times as much as Pre-LN's",
         "a gap of about 2 at 32 blocks of width 32")
    ratio = lesson["post_over_pre"]                              # [seed, depth]
    within(ratio[:, 0], 0.97, 1.03)
    medians = np.median(ratio, axis=0)
    assert np.all(np.diff(medians) > 0), medians
    within(ratio[:, -1], 1.5, 2.7)
    assert round(float(medians[-1])) == 2


def test_the_plain_network_experiment(lesson):
    says("mlp_intro", "20 fully connected layers of width 16", "three seeds (0, 1, 2)")
    assert (lesson["MLP_WIDTH"], lesson["MLP_DEPTH"], list(lesson["MLP_SEEDS"])) == (16, 20, [0, 1, 2])
    says("mlp_reading", "layer 1's weight gradient is between $10^{-11}$ and $10^{-9}$ times layer 20's",
         "the largest layer gradient is at most 2.5 times the smallest), but every weight gradient lies between 500 "
         "and 3,000", "just as flat (at most 2.5 times), and every weight gradient lies between 1 and 3")
    plain, shortcuts, normalized = (lesson["mlp_gradients"][kind] for kind in lesson["MLP_KINDS"])
    within([g[0] / g[-1] for g in plain], 1e-11, 1e-9)
    for runs, low, high in ((shortcuts, 500, 3000), (normalized, 1, 3)):
        within(runs, low, high)
        within([max(g) / min(g) for g in runs], 1, 2.5)


def test_the_lesson_lists_the_graders_ten_steps_in_order():
    from autograder.diagnosis import STEPS

    text = next(c.source for c in kit.KIT.cells() if c.grade_id == "debugging")
    listed = {int(n): step.replace("`", "").rstrip(";.") for n, step in re.findall(r"^(\d+)\. (.+)$", text, re.MULTILINE)}
    assert listed == STEPS


def test_the_grader_stacks_24_blocks_at_the_default_gain():
    from autograder.harness.probes import PROFILE_DEPTH

    says("depth_reading", "The grader's deep-stack check builds 24 of *your* blocks at gain 1.3")
    assert PROFILE_DEPTH == 24


def test_the_counts_of_graded_cells_and_written_answers():
    says("intro", "three short written answers")
    says("grading_intro", "The seven cells below are graded automatically", "three written answers")
    cells = kit.KIT.cells()
    assert sum((c.grade_id or "").startswith("check_") for c in cells) == 7
    assert sum((c.grade_id or "").startswith("answer_") for c in cells) == 3
