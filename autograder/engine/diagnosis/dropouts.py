"""The dropouts of the walk (`Dropouts`): in train mode a dropout with drop_shortcut's p receives each branch
output and gives it under its own mask, or the forward drops it by hand (seen in values); in eval mode nothing is
dropped."""

from __future__ import annotations

import numpy as np

from autograder.engine.facts import Dropout, Ran, Sum, Unreceived
from .recording import Recording
from autograder.engine.steps import NUMBER
from .values import DROPS, VALUE, Found, Seen, scale_of, close, masked


class Dropouts(Recording):
    """The walk's dropout boundaries (one on each branch) and its test of a component applied once more."""

    def _again(self, value: np.ndarray, component: str, seen: Seen):
        """A call of `component` other than those that sat on Pre-LN's value, whose output `value` is: the
        component applied once more (to its own output, say)."""
        return self.output_of(value, (component,), besides=seen.on)

    def _dropout(self, boundary: int, branch: np.ndarray, name: str, before: Seen):
        """The dropout on a branch output: in train mode a dropout with drop_shortcut's p must receive it (and its
        output is Pre-LN's branch under the student's own mask); in eval mode nothing may be dropped."""
        drops = self.seen(DROPS, branch)
        acted = [c for c, p in zip(drops.calls, drops.positions) if p is not None and not close(c.output, c.input, self.tol)]
        value, component = VALUE[name], "att" if name == "a" else "ff"
        if self.mode == "eval":
            if acted:
                call = acted[0]
                return Found(
                    boundary,
                    boundary,
                    [self.received(call, name, True), Dropout(self.mode, call.name, call.number, True, None, call.total)],
                    value,
                ), branch
            return None, branch
        if not drops.covers:
            by_hand = self._dropped_by_hand(branch, name)
            if by_hand is not None:
                return None, by_hand
            if not any(self.counts.get(d) for d in DROPS):
                return Found(boundary, boundary, [Ran(self.mode, "drop_shortcut", 0)], value), None
            if not drops.calls:
                return Found(boundary, boundary, [], value), None
            partial = drops.partial(self.mode, drops.calls[0].name, value) if drops.calls else None

            def other(c) -> bool:  # the other half's dropout, on its own branch, is no account of this one
                found = self.located(c, self.values["att(norm1(x))"]) if name == "f" else self.output_of(c.input, ("ff",))
                return found is not None

            call = drops.off(self.used, besides=other)
            if partial is not None or call is None:  # no dropout call of this branch: said so, of them all
                return Found(boundary, boundary, [partial or Unreceived(self.mode, DROPS, value)], value), None
            facts = [self.received(call, name, False)]
            again = self._again(call.input, component, before)
            if again is not None:
                facts.append(Sum(self.mode, call.name, call.number, ((f"{again.name}#{again.number}", 1.0),), call.total))
                return Found(boundary, NUMBER[name], facts, value), None  # the branch's component, again
            return Found(boundary, boundary, facts, value), None
        ratio = scale_of(drops.outputs, branch)
        if ratio is not None and abs(ratio - self.keep) > 1e-3 * max(self.keep, 1.0):
            call = acted[0] if acted else drops.calls[0]
            return Found(
                boundary,
                boundary,
                [self.received(call, name, True), Dropout(self.mode, call.name, call.number, True, ratio, call.total)],
                value,
            ), None
        return None, drops.outputs

    def _dropped_by_hand(self, branch: np.ndarray, name: str) -> np.ndarray | None:
        """A dropout the forward wrote itself, seen in values where no dropout call received the branch: what the
        branch's sum received (norm2's input, less x; or what the block returned, less h) is the branch with some
        values zeroed and the others scaled by 1 / (1 - p), as many zeroed as a dropout with drop_shortcut's p
        zeroes (within five standard deviations). None where the values show no such dropout."""
        if name == "a":
            norm2 = self.calls_of("norm2")
            if len(norm2) == 1 and self.placed(norm2[0]) is not None:
                added = self.placed(norm2[0]) - self.x
            else:
                added = self._first_branch_from_output(branch)
                if added is None:
                    return None
        else:
            added = self.y - self.values["h"]
        if not masked(added, branch, self.keep, self.tol):
            return None
        live = np.abs(branch) > 1e-9 * max(float(np.max(np.abs(branch))), 1.0)
        count, zeroed = int(live.sum()), int((live & (np.abs(added) <= self.tol * np.abs(branch).max())).sum())
        spread = 5 * np.sqrt(count * self.drop_p * (1 - self.drop_p))
        return added if abs(zeroed - count * self.drop_p) <= spread else None

    def _first_branch_from_output(self, branch: np.ndarray) -> np.ndarray | None:
        """Where norm2's input cannot be placed (it ran on a rearranged h), the first dropped branch read from what
        the block returned: y - x is, element by element, one of 0, s*a, s*f and s*(a + f), with f the
        feed-forward output the block recorded and s = 1 / (1 - p). None where some element is none of them."""
        ffs = self.calls_of("ff")
        if len(ffs) != 1 or tuple(ffs[0].output.shape) != tuple(self.shape):
            return None
        f, rest, s = ffs[0].output.reshape(-1), self.y - self.x, self.keep
        size = self.tol * max(float(np.max(np.abs(rest))), 1.0)
        choices = np.stack([np.zeros_like(rest), s * branch, s * f, s * (branch + f)])
        fits = np.abs(choices - rest) <= size * max(s, 1.0)
        if not fits.any(axis=0).all():
            return None
        keeps_a = fits[1] | fits[3]
        if np.any(keeps_a & (fits[0] | fits[2])):  # an element both readings explain: cannot tell
            return None
        return np.where(keeps_a, s * branch, 0.0)
