"""Where a forward first differs from Pre-LN, read from values at the component boundaries.

The grader computes Pre-LN on the student's own input with its own components (`steps` names the values). Each of
Pre-LN's component calls is a boundary: attention receives norm1(x), the first dropout receives att(norm1(x)) (in
train mode), norm2 receives h, the feed-forward network receives norm2(h), the second dropout the feed-forward
output, and the block returns y. Walking them in Pre-LN's order, the grader asks of the student's recorded calls of
that component, by their values and never by their place in the run: did they receive Pre-LN's value there (whole,
in pieces or rearranged), and did they give Pre-LN's value back? The first boundary where they did not is where the
forward diverges. Which step that is follows from the values around it, by the rules of `steps` (a LayerNorm
skipped, a component applied twice, a shortcut left out, scaled or replaced, a branch scaled or changed on its way
into its sum); where the values cannot tell two steps apart, no step is named and only the facts are said. Every
fact is evaluated on recorded values (`facts`).

In train mode the values after a dropout are Pre-LN's under the masks the student's own dropout calls drew: the
dropout call that received att(norm1(x)) gives the first branch, and so on.
"""

from __future__ import annotations

import numpy as np

from autograder.engine.facts import Gave, Ran, Received, Shortcut, Sum, Unknown
from .moves import shortcut_intact
from .sums import Sums, grader_change
from .location import locate
from autograder.engine.steps import HALVES, NUMBER, OUTPUT, handed
from .values import DROPS, NORMS, VALUE, Found, Seen, close, express, normalized


class Walk(Sums):
    """One recorded run set against Pre-LN, boundary by boundary (see the module docstring)."""

    # --- the walk ----------------------------------------------------------------------------------------
    def first(self) -> Found | None:
        """The first boundary where this run differs from Pre-LN (None: it does not, in its values)."""
        found = self._first()
        if found is not None and found.step is not None:
            found = self._shortcut_first(found)
        if found is not None and self.gloss:
            found.gloss = self.gloss
        return found

    def _shortcut_first(self, found: Found) -> Found:
        """The step that saves a half's shortcut comes before the half's other steps, but shows only at the half's
        sum. A divergence seen at a half's LayerNorm or branch is the first only where that sum's shortcut is right:
        the grader's change of the branch component's output moves the sum by exactly that change (the branch reaches
        it as it is), and the sum less that branch is x (h). A shortcut that is not makes the saving step the first;
        where the values cannot tell, no step is named."""
        att, ff = HALVES["att"], HALVES["ff"]
        first = found.step in (att.norm, att.branch)
        if not (first or found.step in (ff.norm, ff.branch)):  # a dropout step: the dropout itself changes what the sum holds
            return found
        half = "att" if first else "ff"
        branches = self.calls_of(half)
        sums = self.calls_of("norm2") if first else []
        if self.mode == "eval" and shortcut_intact(self.moved, half, sums[0] if len(sums) == 1 else None, self.shape, self.tol):
            return found  # the half's shortcut reaches its sum's consumer as it is (the `moved` question)
        if (
            len(branches) != 1
            or tuple(branches[0].output.shape) != tuple(self.shape)
            or self.mode != "eval"
            or (first and (len(sums) != 1 or self.placed(sums[0]) is None))
        ):
            return found
        total = self.placed(sums[0]) if first else self.y
        change = grader_change(self, half, sums[0] if first else "out")
        if change is None:
            return found
        shortcut = total - branches[0].output.reshape(-1)
        expected = self.x if first else (self.values.get("h") if "h" in self.values else None)
        if expected is None:
            return found
        if not change.exactly:
            return Found(found.boundary, None, found.facts + [change], found.expected)
        if close(shortcut, expected, self.tol):
            return found
        if express(shortcut, {"shortcut": expected}, self.tol) is not None:
            return found  # the shortcut scaled: that breaks the half's sum, later than this step
        return Found(
            found.boundary,
            att.saved if first else ff.saved,
            found.facts + [change, Shortcut(self.mode, half, False)],
            found.expected,
        )

    def _first(self) -> Found | None:
        n1 = self.values["norm1(x)"] = self.component("norm1", self.x)
        a = self.values["att(norm1(x))"] = self.component("att", n1)
        att = self.seen(("att",), n1)
        if not att.covers and not self._handed_on(a, self.x + a):
            return self._attention(att, n1)
        if att.covers and not close(att.outputs, a, self.tol):
            return Found(NUMBER["a"], NUMBER["a"], [Gave(self.mode, "att", VALUE["n1"], VALUE["a"], False)], "att(norm1(x))")
        found, d1 = self._dropout(NUMBER["d1"], a, "a", att)
        if found is not None:
            return found
        h = self.values["h"] = self.x + d1
        norm2 = self.seen(("norm2",), h)
        n2 = self.values["norm2(h)"] = self.component("norm2", h)
        ff = self.seen(("ff",), n2)
        if not norm2.covers and (norm2.calls or not ff.covers):  # norm2 unrecorded (run inside nested vmaps, say)
            # though the feed-forward network received norm2(h): the walk goes on
            return self._second_start(norm2, h, d1, att)
        f = self.values["ff(norm2(h))"] = self.component("ff", n2)
        if not ff.covers and not self._handed_on(f, None, h + f):
            return self._feed_forward(ff, h, n2, norm2)
        if ff.covers and not close(ff.outputs, f, self.tol):
            return Found(NUMBER["f"], NUMBER["f"], [Gave(self.mode, "ff", VALUE["n2"], VALUE["f"], False)], "ff(norm2(h))")
        found, d2 = self._dropout(NUMBER["d2"], f, "f", ff)
        if found is not None:
            return found
        if close(self.y, h + d2, self.tol):
            self.masks = {"d1": d1 / np.where(a == 0, 1.0, a), "d2": d2 / np.where(f == 0, 1.0, f)}
            return None
        facts = [Unknown(self.mode, None, None, "h + drop_shortcut(ff(norm2(h)))")]
        step = self._output_step(h, d2, ff, facts)
        return Found(OUTPUT, step, facts if len(facts) == 1 else facts[1:], "h + drop_shortcut(ff(norm2(h)))")

    def _unrecorded_norm(self, call, norm: str, value: np.ndarray) -> int | None:
        """The step, when the component that follows `norm` (ran unrecorded) received a value that is not Pre-LN's
        `value` there: the edge into that component when it received `value` scaled (so `norm` gave `value`); `norm`'s
        own step when it received a value normalized token by token (`norm` normalized another value, or
        normalized otherwise); None when the values cannot tell."""
        flat, half = self.placed(call), HALVES["att" if norm == "norm1" else "ff"]
        if flat is None:
            return None
        scaled = express(flat, {"value": value}, self.tol)
        if scaled is not None and scaled["value"] not in (0.0, 1.0):
            return half.branch
        return half.norm if normalized(flat, self.shape[-1], self.parts[norm]) else None

    def _handed_on(self, branch: np.ndarray, sum_in_eval: np.ndarray | None, out_in_eval=None) -> bool:
        """Pre-LN's branch value reached its consumer though no recorded call of the branch's component gave it
        (the component's own layers called one by one, say): in train mode a dropout received it whole; in eval
        mode norm2 received `sum_in_eval`, or the block returned `out_in_eval`."""
        if self.mode == "train":
            return self.seen(DROPS, branch).covers
        if sum_in_eval is not None:
            return self.seen(("norm2",), sum_in_eval).covers
        return out_in_eval is not None and close(self.y, out_in_eval, self.tol)

    def _ran(self, component: str) -> Ran | None:
        """`component` never ran, as a fact, where no call of it was made at all (None: some call was, perhaps
        one the grader could not record)."""
        return Ran(self.mode, component, 0) if not self.counts.get(component) else None

    def _input_replaced(self, norm1) -> bool:
        """Did the forward replace x itself before using it: is the value norm1 received also the shortcut of the
        first sum (norm2's input less attention's branch as the forward computed it)?"""
        start, norm2 = self.placed(norm1), self.calls_of("norm2")
        atts = self.calls_of("att")
        if start is not None and self.mode == "eval" and not close(start, self.x, self.tol):
            n1 = self.component("norm1", start)  # the block is Pre-LN on what norm1 received
            h = start + self.component("att", n1)
            if close(self.y, h + self.component("ff", self.component("norm2", h)), self.tol):
                return True
        if (
            start is None
            or len(norm2) != 1
            or len(atts) != 1
            or self.placed(norm2[0]) is None
            or tuple(atts[0].output.shape) != tuple(self.shape)
        ):
            return False
        branch = atts[0].output.reshape(-1)
        if self.mode == "train":
            drop = next(
                (
                    c
                    for c in self.calls_of(*DROPS)
                    if tuple(c.input.shape) == tuple(self.shape) and close(c.input, branch, self.tol)
                ),
                None,
            )
            if drop is None:
                return False
            branch = drop.output.reshape(-1)
        return close(self.placed(norm2[0]) - branch, start, self.tol) and not close(start, self.x, self.tol)

    def _attention(self, att: Seen, n1: np.ndarray) -> Found:
        """Attention did not receive norm1(x): norm1's step when x was not normalized by norm1 (left as it is,
        another normalization, norm1 on something else), else attention's (norm1(x) normalized again: `steps.handed`)."""
        expected = "norm1(x)"
        norm1 = self.seen(("norm1",), self.x)
        if not att.calls:
            ran = self._ran("att")
            if ran is None:  # it ran where the grader could not record it (inside nested vmaps, say)
                return Found(NUMBER["a"], None, [], expected)
            went_on = self.seen(DROPS, n1).covers if self.mode == "train" else self.seen(("norm2",), self.x + n1).covers
            if norm1.covers or went_on:  # norm1(x) was made, and went on without attention
                return Found(NUMBER["a"], NUMBER["a"], [ran], expected)
            unseen = self.counts.get("norm1", 0) > len(self.calls_of("norm1"))
            return Found(NUMBER["a"], None if unseen else NUMBER["n1"], [ran], expected)
        partial = att.partial(self.mode, "att", expected)
        if partial is not None:
            return Found(NUMBER["a"], NUMBER["a"], [partial], expected)
        call = att.off(self.used)
        if self.counts.get("att", 0) > 1 and not any(self.used(c) for c in att.calls):
            return Found(NUMBER["a"], None, [self.received(call, "n1")], expected)  # no account of attention's work
        facts = [self.received(call, "n1")]
        if locate(call.input, self.x, self.near) is not None:
            return Found(NUMBER["a"], NUMBER["n1"], facts + [self.received(call, "x", True)], expected)
        source = self.output_of(call.input, NORMS)
        if source is not None:
            facts.append(Sum(self.mode, call.name, call.number, ((f"{source.name}#{source.number}", 1.0),), call.total))
            if source.name != "norm1" or getattr(source, "variant", None) is not None:
                again = self.sits(source.input, n1)  # norm1(x) normalized again
                return Found(NUMBER["a"], handed("att", None) if again else NUMBER["n1"], facts, expected)
            if locate(source.input, self.x, self.near) is None:
                facts.append(Received(self.mode, "norm1", source.number, "x", False, source.total))
                if self._input_replaced(source):
                    self.gloss = (
                        "what norm1 received is also what the first sum adds attention's branch to: x "
                        "itself was changed before the block used it"
                    )
                    return Found(NUMBER["a"], NUMBER["s1"], facts, expected)
                return Found(NUMBER["a"], NUMBER["n1"], facts, expected)
        if not norm1.covers:
            recorded = len(self.calls_of("norm1"))
            if self.counts.get("norm1", 0) > recorded:  # norm1 ran where the grader could not record it
                return Found(NUMBER["a"], self._unrecorded_norm(call, "norm1", n1), facts + self.said(call, "n1"), expected)
            what = [Ran(self.mode, "norm1", 0)] if not recorded else [Received(self.mode, "norm1", None, "x", False, None)]
            return Found(NUMBER["a"], NUMBER["n1"], facts + what, expected)
        return Found(NUMBER["a"], NUMBER["a"], facts + self.said(call, "n1"), expected)
