"""Points: every check, every part of it, in one readable place, and why each part pays.

The keys are the check names used everywhere: the hidden-check cells of the notebook (`check_<name>`), the
Gradescope test names, the columns of grades.csv. The course owns its points: each check is worth what its
`check_<name>` cell gives in the course's source notebook, and the parts below share those points in
proportion to their weights (`CheckSpec.parts_for`). What is written here are the relative weights and the
defaults, which the kit's own notebook uses (a test keeps them equal).

Why a part pays (the rule an instructor can defend):

* Every point needs agreement with something the grader computed itself, on inputs, weights and seeds the
  grader drew: the reference solution's answers, or the grader's own replay of the program the student's
  recorded values show, with its own components. Nothing the student's code reports is believed on its own,
  and a property only the student's code could report (which device a tensor sat on, whether the caller's
  tensor changed, whether autograd was switched off) earns nothing: see the rubric-evidence list of docs/grading.md.
* Matching is enough: a run whose values and gradients agree with Pre-LN's earns every part read from it,
  however the forward is written.
* A part pays only when the block did the work the part is about. The two additions and the two norm
  placements are read from the student's own values, half by half, so a block that gets one half right earns
  that half's parts. Parts whose property a do-nothing block has for free (silent branches give back the
  input, no extra normalization, dropout is off in eval mode, gradients, the deep stack, the four robustness
  parts) pay only when what the block returns depends on x through attention and through the feed-forward
  network, each with real weight (at least 5% of Pre-LN's, measured by the grader's replay). Identity, a
  copy, zeros, a constant, branches run on something that is not x, decoy calls and near-identity blocks earn
  no forward point.
* One mistake costs points in the check that names it, plus direct consequences whose messages say so (a
  wrong output also fails "output matches a Pre-LN block"; a missing shortcut also makes the deep stack
  lose its gradient). A check that crashes is a grader error, reported to the instructor, never a lost point.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CheckSpec:
    title: str
    parts: dict[str, float]  # sub-test name -> points
    visibility: str = "after_published"

    @property
    def points(self) -> float:
        """The default: what the check is worth when a course keeps the kit's points."""
        return sum(self.parts.values())

    def parts_for(self, points: float | None = None) -> dict[str, float]:
        """Each part's points when the check is worth `points` (the course's cell; None: the default). The
        parts keep their relative weights, rounded to 4 decimals, and add up to exactly `points`."""
        if points is None:
            return dict(self.parts)
        weight = sum(self.parts.values())
        names = list(self.parts)
        shares = {name: round(points * (self.parts[name] / weight if weight else 1 / len(names)), 4) for name in names[:-1]}
        shares[names[-1]] = round(points - sum(shares.values()), 4)
        return shares


RUBRIC: dict[str, CheckSpec] = {
    "forward_order": CheckSpec("Operation order (Pre-LN)", {"output matches a Pre-LN block": 4}, visibility="visible"),
    "forward_shortcuts": CheckSpec(
        "Both shortcut additions",
        {"shortcut around attention": 1, "shortcut around the feed-forward network": 1, "silent branches give back the input": 1},
    ),
    "forward_prenorm": CheckSpec(
        "Pre-LN placement of norm1 and norm2",
        {"norm1 feeds attention": 1, "norm2 feeds the feed-forward network": 1, "no extra normalization": 1},
    ),
    "forward_dropout": CheckSpec(
        "Dropout placement",
        {"dropout on attention's output": 1, "dropout on the feed-forward output": 1, "dropout is off in eval mode": 1},
    ),
    "forward_gradients": CheckSpec(
        "Gradient behaviour",
        {
            "the block input's gradient (eval mode)": 1,
            "every component's gradients (eval mode)": 1,
            "gradients flow through every path (train mode)": 1,
            "24-block stack keeps a Pre-LN profile": 1,
        },
    ),
    "forward_robustness": CheckSpec(
        "Robustness",
        {
            "batch of one, short context": 1,
            "a batch of five sequences": 1,
            "float64 after .double()": 1,
            "the same output on every call, input left unchanged (eval mode)": 1,
        },
    ),
    "compounding": CheckSpec(
        "Task 2: gradient compounding",
        {"magnitude_by_formula": 1, "magnitude_by_autograd": 1, "classify_factor": 1},
        visibility="visible",
    ),
}

TOTAL_POINTS = sum(spec.points for spec in RUBRIC.values())

# Written answers: markdown cells (`answer_<name>`) graded by hand in formgrader, not by the kit; their points are
# not part of TOTAL_POINTS. The defaults of the kit's own notebook (a test keeps them equal); a course's source
# may give them other points, or add answers of its own.
WRITTEN: dict[str, float] = {"answer_zero_branches": 2, "answer_last_block": 2, "answer_mlp_level": 2}
