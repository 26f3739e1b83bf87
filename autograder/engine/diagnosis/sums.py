"""The second half of the walk and the sums (`Sums`): what norm2 and the feed-forward network received, each
sum's shortcut and branch, and what the block returned; and how a value moved when the grader changed a
component's output (`grader_change`)."""

from __future__ import annotations

import numpy as np

from autograder.engine.facts import Dropped, Ran, Received, Sum
from autograder.engine.ledger import boundaries
from autograder.engine.replayed import Changes
from autograder.engine.reading.placement import tidy
from .dropouts import Dropouts
from .moves import moved_step
from .location import locate
from autograder.engine.steps import BRANCH_LEFT_OUT, HALVES, NUMBER, OUTPUT, handed
from .values import DROPS, NORMS, SUMS, Found, Seen, close, express, masked


class Sums(Dropouts):
    """The walk from norm2 on, and the sums of both halves."""

    def _second_start(self, norm2: Seen, h: np.ndarray, d1: np.ndarray, att: Seen) -> Found:
        """norm2 did not receive h. What the feed-forward network received, and the second shortcut (what the block
        returned, less the feed-forward branch), tell whether h itself was wrong (the first half's steps) or only what
        followed it (the second shortcut, or norm2)."""
        second = second_shortcut(self)
        ffs = self.calls_of("ff")
        skipped = next((c for c in ffs if locate(c.input, h, self.near) is not None), None)
        if not norm2.calls and not ffs and not self.counts.get("norm2") and not self.counts.get("ff"):
            facts = [Ran(self.mode, "norm2", 0), Ran(self.mode, "ff", 0)]  # no second half: what came back?
            scaled = express(self.y, {"h": h}, self.tol)
            if scaled is not None and scaled["h"]:  # h alone: the half left out; h + h, say: the second sum's own step
                step = BRANCH_LEFT_OUT[("d2", "y")] if scaled["h"] == 1.0 else OUTPUT
                return Found(NUMBER["h"], step, facts + [Sum(self.mode, None, None, (("h", scaled["h"]),))], "norm2(h)")
            return Found(NUMBER["h"], self._sum_step(self.y, d1, "att", None, facts, att), facts, "h")
        if skipped is not None:  # the feed-forward network received h itself: norm2 was skipped
            facts = [x for x in [self._ran("norm2")] if x] if not norm2.calls else [self.received(norm2.off(self.used), "h")]
            return Found(NUMBER["h"], NUMBER["n2"], facts + [self.received(skipped, "h", True)], "norm2(h)")
        if not norm2.calls:  # norm2 never ran; or it ran unrecorded (in nested vmaps), where norm2 and ff look alike
            facts = [x for x in [self._ran("norm2")] if x] + ([self.received(ffs[0], "n2")] if ffs else [])
            known = (right := second is not None and close(second, h, self.tol)) and not self.counts.get("norm2")
            if right and len(ffs) == 1 and (step := self._unrecorded_norm(ffs[0], "norm2", self.values["norm2(h)"])):
                return Found(NUMBER["h"], step, facts + self.said(ffs[0], "n2"), "norm2(h)")  # the first sum is h
            if known and len(ffs) == 1 and self.sits(ffs[0].input, self.values["norm1(x)"]):  # `steps.handed`
                return Found(NUMBER["h"], handed("ff", "n1"), facts + self.said(ffs[0], "n2"), "norm2(h)")
            at_out = second is not None and not close(second, h, self.tol)
            moved = (self.moved, self.mode, "att", None, self.shape, self.tol)
            step, told = (NUMBER["n2"], []) if known else moved_step(*moved, at_out=at_out)
            return Found(NUMBER["h"], step, facts + told, "norm2(h)")
        partial = norm2.partial(self.mode, "norm2", "h")
        if partial is not None:
            return Found(NUMBER["h"], NUMBER["n2"], [partial], "h")
        call = norm2.off(self.used)
        facts = [self.received(call, "h")]
        v = self.placed(call)
        if (
            v is None
            and second is not None
            and not close(second, h, self.tol)
            and self.seen(("ff",), self.component("norm2", second)).covers
        ):
            # norm2 saw the student's first sum only in pieces (padded, chunked), and the second half is Pre-LN's on
            # the value the block returns less the feed-forward branch: that value is the first sum, and its rules
            # name the step (said with no sum of its own: norm2's calls received it only in pieces)
            return Found(NUMBER["h"], self._sum_step(second, d1, "att", call, [], att), facts, "h")
        after = self.output_of(call.input, None)
        if after is not None and locate(after.input, h, self.near) is not None:  # something was done to h first
            facts.append(Sum(self.mode, call.name, call.number, ((f"{after.name}#{after.number}", 1.0),), call.total))
            return Found(
                NUMBER["h"],
                NUMBER["s2"] if second is not None and v is not None and close(second, v, self.tol) else NUMBER["n2"],
                facts,
                "h",
            )
        if second is not None and close(second, h, self.tol):
            return Found(NUMBER["h"], NUMBER["n2"], facts + self.said(call, "h"), "h")
        if v is None:  # norm2 received another shape (h padded, say): how its input sees the sum's terms
            step, told = moved_step(self.moved, self.mode, "att", call, self.shape, self.tol)
            return Found(NUMBER["h"], step, facts + told, "h")
        dropped = self.mode == "train" and (
            masked(v - d1, self.x, self.keep, self.tol) or masked(v - self.x, d1, self.keep, self.tol)
        )
        if (
            second is not None
            and not close(second, v, self.tol)
            and not dropped
            and express(v, {"x": self.x, "branch": d1}, self.tol) is None
        ):
            step, told = moved_step(self.moved, self.mode, "att", call, self.shape, self.tol)  # norm2's input and
            return Found(NUMBER["h"], step, facts + told, "h")  # the second shortcut differ, both from h
        return Found(NUMBER["h"], self._sum_step(v, d1, "att", call, facts, att), facts, "h")

    def _sum_step(self, total: np.ndarray, branch: np.ndarray, half: str, call, facts: list, before: Seen) -> int | None:
        """The step a wrong sum of Pre-LN's (x + branch, or h + branch) breaks, from its values: a branch left out
        or scaled, a shortcut left out or scaled, a shortcut that is another value, the branch's component applied
        again, an extra term, a dropout on the shortcut or a second one on the branch; else the grader's change of
        the branch component's output tells a shortcut replaced (the sum moved by exactly that change) from a
        branch changed on its way in."""
        rule, half_steps = SUMS[half], HALVES[half]
        shortcut = self.values[rule["shortcut"]]
        branch_name = f"drop_shortcut({rule['inner']})" if self.mode == "train" else rule["inner"]
        where = (call.name if call is not None else None, getattr(call, "number", None), getattr(call, "total", None))

        def said(*parts: dict) -> None:
            terms: dict = {}
            for part in parts:
                for k, c in part.items():
                    terms[k] = tidy(terms.get(k, 0.0) + c)
            facts.append(Sum(self.mode, where[0], where[1], tuple((k, c) for k, c in terms.items() if c), where[2]))

        terms = express(total - shortcut, {branch_name: branch}, self.tol)
        if terms is not None:  # the branch left out or scaled
            said({rule["shortcut"]: 1.0}, terms)
            response = self.responses.get(half) if self.mode == "eval" else None
            if terms[branch_name] == 0 and response is not None and close(response["y"], self.y, self.tol):
                # said only where the grader's change of the branch's output left the block's output as it was
                self.gloss = (
                    f"{'the attention' if half == 'att' else 'the feed-forward'} branch is missing from that sum, "
                    "so the whole "
                    + ("attention half (norm1, att)" if half == "att" else "feed-forward half (norm2, ff)")
                    + " does not reach the output"
                )
            return half_steps.norm if terms[branch_name] == 0 else half_steps.sum
        terms = express(total - branch, {rule["shortcut"]: shortcut}, self.tol)
        if terms is not None:  # the shortcut left out or scaled
            said(terms, {branch_name: 1.0})
            return half_steps.sum
        terms = express(total, {rule["shortcut"]: shortcut, branch_name: branch}, self.tol)
        if terms is not None and terms[rule["shortcut"]]:  # both scaled (the sum halved), or the branch replaced by
            # the shortcut (h + h): the sum's own step
            said(terms)
            return half_steps.sum
        if masked(total - shortcut, branch, self.keep, self.tol):  # a second dropout on the branch (in eval
            return half_steps.drop  # mode: one that drops there too)
        if self.mode == "train" and masked(total - branch, shortcut, self.keep, self.tol):  # a dropout on the shortcut
            return half_steps.sum
        known = {k: v for k, v in {**self.values, **self.outputs()}.items() if k != rule["shortcut"]}
        for name, value in known.items():  # the shortcut is another value
            if close(total - branch, value, self.tol) and not close(value, shortcut, self.tol):
                said({name: 1.0}, {branch_name: 1.0})  # one term twice where both name one value (eval: a + a)
                return half_steps.saved
        again = self.output_of(total - shortcut, (half,), besides=before.on)
        if again is not None:  # the branch component applied again
            said({rule["shortcut"]: 1.0, f"{again.name}#{again.number}": 1.0})
            return half_steps.branch
        terms = express(total - shortcut - branch, known, self.tol)
        if terms is not None and len([c for c in terms.values() if c]) <= 2:  # an extra term in the sum
            said({rule["shortcut"]: 1.0, branch_name: 1.0}, terms)
            return half_steps.sum
        if self.mode == "train" and shortcut_where_dropped(total, branch, shortcut, self.values.get(rule["inner"]), self.tol):
            facts.append(Dropped(self.mode, where[0], where[1], rule["shortcut"], where[2]))
            return half_steps.sum
        step, told = moved_step(self.moved, self.mode, half, call, self.shape, self.tol)
        if step is not None:
            facts.extend(told)
            return step
        change = grader_change(self, half, "out" if call is None else call)
        if change is None:
            return None
        facts.append(change)
        # exactly: the branch reaches the sum as it is, so the other term, the shortcut, was replaced. Otherwise the
        # branch was changed on its way in, or the sum after it was made, or both it and the shortcut: the values
        # cannot tell which, and no step is named.
        return half_steps.saved if change.exactly else None

    def _feed_forward(self, ff: Seen, h: np.ndarray, n2: np.ndarray, norm2: Seen) -> Found:
        """The feed-forward network did not receive norm2(h): the step `steps.handed` names for what it received
        (norm2's for h or another earlier value, norm2 applied again or to another value; its own for norm1(x),
        norm2(h) normalized again, or a value the grader cannot name)."""
        expected = "norm2(h)"
        if not ff.calls:
            ran = self._ran("ff")
            if ran is None and (returned := returned_over(self, h, n2)) is not None:
                return returned
            return Found(NUMBER["f"], NUMBER["f"] if ran else None, [ran] if ran else [], expected)
        partial = ff.partial(self.mode, "ff", expected)
        if partial is not None:
            return Found(NUMBER["f"], NUMBER["f"], [partial], expected)
        call = ff.off(self.used)
        if self.counts.get("ff", 0) > 1 and not any(self.used(c) for c in ff.calls):
            return Found(NUMBER["f"], None, [self.received(call, "n2")], expected)
        facts = [self.received(call, "n2")]
        if self.sits(call.input, h):
            return Found(NUMBER["f"], NUMBER["n2"], facts + [self.received(call, "h", True)], expected)
        source = self.output_of(call.input, NORMS)
        if source is not None:  # norm1(x), or norm2(h) normalized again by another normalization
            facts.append(Sum(self.mode, call.name, call.number, ((f"{source.name}#{source.number}", 1.0),), call.total))
            name = source.name if getattr(source, "variant", None) is None else None
            edge = (name == "norm1" and self.sits(source.input, self.x)) or (name != "norm2" and self.sits(source.input, n2))
            return Found(NUMBER["f"], handed("ff", None) if edge else NUMBER["n2"], facts, expected)
        earlier = {"x": self.x, "a": self.values.get("att(norm1(x))"), "d1": h - self.x}
        node = next((node for node, value in earlier.items() if value is not None and self.sits(call.input, value)), None)
        return Found(NUMBER["f"], handed("ff", node), facts + self.said(call, "n2"), expected)

    def _output_step(self, h: np.ndarray, d2: np.ndarray, ff: Seen, facts: list) -> int | None:
        """What the block returned is not h + its branch: an operation after the sum (the output's step), else the
        second sum's own rules."""
        after = self.output_of(self.y, None)
        if (
            after is not None
            and tuple(after.input.shape) == tuple(self.shape)
            and close(after.input.reshape(-1), h + d2, self.tol)
        ):
            facts.append(Sum(self.mode, None, None, ((f"{after.name}#{after.number}", 1.0),)))
            facts.append(Received(self.mode, after.name, after.number, "h + drop_shortcut(ff(norm2(h)))", True, after.total))
            return OUTPUT
        scaled = express(self.y, {"sum": h + d2}, self.tol)
        if scaled is not None and scaled["sum"] != 1.0:  # the sum, scaled (or zeroed) on its way out
            branch = "drop_shortcut(ff(norm2(h)))" if self.mode == "train" else "ff(norm2(h))"
            facts.append(Sum(self.mode, None, None, (("h", scaled["sum"]), (branch, scaled["sum"])) if scaled["sum"] else ()))
            return OUTPUT
        return self._sum_step(self.y, d2, "ff", None, facts, ff)


def returned_over(walk, h: np.ndarray, n2: np.ndarray) -> Found | None:
    """Where the feed-forward network ran unrecorded (inside nested vmaps, say) and what the block returned is
    not Pre-LN's: in eval mode, a return of h and ff(norm2(h)), the latter with a coefficient other than 0, has the
    feed-forward network's own value in it, so the network received norm2(h) and the second sum broke (its last
    step); None where the values cannot tell."""
    f = walk.component("ff", n2)
    terms = express(walk.y, {"h": h, "ff(norm2(h))": f}, walk.tol) if walk.mode == "eval" else None
    if terms is None or not terms["ff(norm2(h))"]:
        return None
    facts = [Sum(walk.mode, None, None, tuple((k, c) for k, c in terms.items() if c))]
    return Found(OUTPUT, OUTPUT, facts, "h + drop_shortcut(ff(norm2(h)))")


def shortcut_where_dropped(total, branch, shortcut, value, tol: float) -> bool:
    """In train mode, where the student's own dropout zeroed the branch (Pre-LN's `value` there, before the dropout)
    the sum holds nothing of it: is the sum there the shortcut itself (and elsewhere not shortcut plus branch)? Then
    the shortcut is right and the branch was changed on its way into the sum."""
    if value is None:
        return False
    size = max(float(np.max(np.abs(value))), 1.0) * tol
    dropped = (np.abs(branch) == 0) & (np.abs(value) > size)
    return bool(
        dropped.sum() >= 8
        and (~dropped).any()
        and close(total[dropped], shortcut[dropped], tol)
        and not close(total[~dropped], (shortcut + branch)[~dropped], tol)
    )


def second_shortcut(walk) -> np.ndarray | None:
    """What the block returned less the feed-forward branch (in train mode the output of the dropout that received
    it, where one did; else the feed-forward output), where the grader can place that branch; None where it cannot.
    A feed-forward output (or its dropout's) the run shows whole and once at the block's positions
    (`ledger.boundaries`: computed on a transposed tensor, or sample by sample) is placed so."""
    ffs = walk.calls_of("ff")
    if len(ffs) != 1 or tuple(ffs[0].output.shape) != tuple(walk.shape):
        shown = boundaries(walk.flow, walk.drop_p)
        placed = shown.get("drop2.out", shown.get("ff.out"))
        if "drop2.out" not in shown and walk.mode == "train" and placed is not None and walk.seen(DROPS, placed).on:
            return None  # a dropout received it, but not drop_shortcut with its p
        return None if placed is None else walk.y - placed
    branch = ffs[0].output.reshape(-1)
    if walk.mode == "train":
        drop = next(
            (
                c
                for c in walk.calls_of(*DROPS)
                if tuple(c.input.shape) == tuple(walk.shape) and locate(c.input, branch, walk.near) is not None
            ),
            None,
        )
        branch = branch if drop is None else drop.output.reshape(-1)  # no dropout on it: the output as it is
    return walk.y - branch


def grader_change(walk, component: str, where) -> Changes | None:
    """Did the value at `where` (a call's input, or "out": what the block returned) change by exactly the change
    the grader made to `component`'s output, in the eval run with that output changed?"""
    response = walk.responses.get(component)
    if response is None or walk.mode != "eval":
        return None
    before = [c for c in walk.calls if c.name == component]
    after = [c for c in response["calls"] if c["name"] == component]
    if len(before) != len(after) or not before or any(tuple(b.output.shape) != tuple(walk.shape) for b in before):
        return None
    delta = sum(np.asarray(a["output"], dtype=np.float64).reshape(-1) - b.output.reshape(-1) for a, b in zip(after, before))
    if where == "out":
        moved = np.asarray(response["y"], dtype=np.float64).reshape(-1) - walk.y
    else:
        twin = [c for c in response["calls"] if c["name"] == where.name]
        if len(twin) < where.number or tuple(np.shape(twin[where.number - 1]["input"])) != tuple(walk.shape):
            return None
        moved = np.asarray(twin[where.number - 1]["input"], dtype=np.float64).reshape(-1) - where.input.reshape(-1)
    if not np.any(delta):
        return None
    return Changes(walk.mode, component, None if where == "out" else where.name, close(moved, delta, walk.tol))
