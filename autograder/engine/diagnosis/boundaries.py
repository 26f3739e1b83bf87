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

from dataclasses import dataclass, field

import numpy as np
import torch

from autograder.engine.facts import Changes, Dropout, Gave, Partial, Ran, Received, Shortcut, Sum, Unknown
from autograder.engine.reading.placement import tidy

DROPS = ("drop_shortcut", "dropout")
NORMS = ("norm1", "norm2", "layer_norm")
VALUE = {"x": "x", "n1": "norm1(x)", "a": "att(norm1(x))", "h": "h", "n2": "norm2(h)", "f": "ff(norm2(h))"}
HALVES = {  # the two sums: what each half is made of, and the steps its values break (see `steps`)
    "att": {"shortcut": "x", "left out": 2, "sum": 5, "replaced": 1, "drop": 4, "branch": 3,
            "inner": "att(norm1(x))"},
    "ff": {"shortcut": "h", "left out": 7, "sum": 10, "replaced": 6, "drop": 9, "branch": 8, "inner": "ff(norm2(h))"},
}


def locate(value: np.ndarray, reference: np.ndarray, tol: float) -> np.ndarray | None:
    """Where in `reference` (flat) each element of `value` sits, when `value` is a piece or a rearrangement of it
    (every element equal, within tolerance, to a distinct element of `reference`); None when it is not."""
    v, r = np.asarray(value, dtype=np.float64).reshape(-1), np.asarray(reference, dtype=np.float64).reshape(-1)
    if v.size == 0 or v.size > r.size or not np.all(np.isfinite(v)) or not np.all(np.isfinite(r)):
        return None
    order = np.argsort(r, kind="stable")
    ordered = r[order]
    right = np.clip(np.searchsorted(ordered, v), 0, r.size - 1)
    left = np.clip(right - 1, 0, r.size - 1)
    pick = np.where(np.abs(ordered[left] - v) <= np.abs(ordered[right] - v), left, right)
    positions = order[pick]
    if np.any(np.abs(r[positions] - v) > tol * max(float(np.max(np.abs(r))), 1.0)):
        return None
    if np.unique(positions).size != positions.size:
        return None
    return positions.reshape(np.shape(value))


def locate_padded(value: np.ndarray, reference: np.ndarray, tol: float) -> np.ndarray | None:
    """`locate`, allowing zeros that are no element of `reference` (padding): their positions are -1."""
    found = locate(value, reference, tol)
    if found is not None:
        return found
    v = np.asarray(value, dtype=np.float64)
    pads = v == 0
    if not pads.any() or pads.all():
        return None
    inner = locate(v[~pads], reference, tol)
    if inner is None:
        return None
    positions = np.full(v.shape, -1, dtype=np.int64)
    positions[~pads] = inner
    return positions


def whole_tokens(positions: np.ndarray, features: int) -> bool:
    """Do `positions` (flat block positions, -1 for padding) move whole token vectors, each in its own order? A
    LayerNorm, attention and the feed-forward network act on token vectors: a rearrangement of a value that keeps
    them whole (tokens reordered, chunked, transposed, padded) hands a component the same vectors, one that moves
    elements within or across them (sorted, flipped features) does not."""
    flat = np.asarray(positions).reshape(-1)
    if flat.size % features:
        return False
    rows = flat.reshape(-1, features)
    pads = (rows < 0).all(axis=1)
    kept = rows[~pads]
    if np.any(kept < 0):
        return False
    return bool(np.all(kept[:, 0] % features == 0) and np.all(np.diff(kept, axis=1) == 1))


def close(a, b, tol: float) -> bool:
    a, b = np.asarray(a, dtype=np.float64).reshape(-1), np.asarray(b, dtype=np.float64).reshape(-1)
    return a.shape == b.shape and bool(np.all(np.isfinite(a))) and \
        bool(np.linalg.norm(a - b) <= tol * max(float(np.linalg.norm(b)), 1.0))


def express(value: np.ndarray, vectors: dict, tol: float) -> dict | None:
    """`value` as an exact sum of `vectors` ({name: flat array}), coefficients tidied; None when it is none."""
    names = [k for k, vec in vectors.items() if vec is not None and np.any(vec)]
    v = np.asarray(value, dtype=np.float64).reshape(-1)
    if not names or not np.all(np.isfinite(v)):
        return None
    matrix = np.stack([vectors[k] for k in names], axis=1)
    coefficients, *_ = np.linalg.lstsq(matrix, v, rcond=None)
    if np.linalg.norm(matrix @ coefficients - v) > tol * max(float(np.linalg.norm(v)), 1.0):
        return None
    return {k: tidy(float(c)) for k, c in zip(names, coefficients)}


def fewest(value: np.ndarray, vectors: dict, tol: float, most: int = 3) -> dict | None:
    """`value` as an exact sum of as few of `vectors` as will do (at most `most`), coefficients tidied; None."""
    from itertools import combinations
    names = [k for k, v in vectors.items() if v is not None and np.any(v)]
    for size in range(1, most + 1):
        for chosen in combinations(names, size):
            terms = express(value, {k: vectors[k] for k in chosen}, tol)
            if terms is not None and all(terms.values()):
                return terms
    return None


def masked(value: np.ndarray, of: np.ndarray, scale: float, tol: float) -> bool:
    """Is `value` a dropout of `of`: each element either zero or `scale` times the other, some of them zero?"""
    value, of = np.asarray(value, dtype=np.float64).reshape(-1), np.asarray(of, dtype=np.float64).reshape(-1)
    if value.shape != of.shape:
        return False
    size = max(float(np.max(np.abs(of))), 1.0) * tol
    zero, kept = np.abs(value) <= size, np.abs(value - scale * of) <= size * max(scale, 1.0)
    return bool(np.all(zero | kept)) and bool(np.any(zero & (np.abs(of) > size)))


@dataclass
class Seen:
    """What one component's recorded calls show at a boundary of Pre-LN."""
    calls: list                   # the component's recorded calls
    positions: list               # per call, where its input sits in Pre-LN's value (None: it is no piece of it)
    covers: bool                  # the calls that sit there cover the whole value
    outputs: np.ndarray | None    # their outputs in block positions, when they cover it
    total: int = 0                # the value's size

    def off(self, used=None):
        """The call that does not sit on Pre-LN's value (None: every one does): with `used` (a test of whether a
        call's output goes anywhere), the first such call whose output does, else the last one (a call whose result
        is thrown away is no account of the block's work)."""
        off = [c for c, p in zip(self.calls, self.positions) if p is None]
        if not off:
            return None
        if used is not None:
            return next((c for c in off if used(c)), off[-1])
        return off[0]

    @property
    def on(self) -> list:
        return [c for c, p in zip(self.calls, self.positions) if p is not None]

    def partial(self, mode: str, component: str, value: str) -> Partial | None:
        """Every call sits on pieces of the value, and together they miss some of it."""
        if not self.calls or self.off() is not None:
            return None
        covered = len({int(i) for p in self.positions for i in p.reshape(-1) if i >= 0})
        return Partial(mode, component, value, covered, self.total)


@dataclass
class Found:
    """A boundary where the student's values differ: its place in Pre-LN's order, the step (None: the values
    cannot tell which), and the facts that show it."""
    boundary: int
    step: int | None
    facts: list = field(default_factory=list)
    expected: str = ""            # Pre-LN's value there, in the lesson's notation
    gloss: str = ""               # what the facts mean for the lesson's step (no fact of its own)


class Walk:
    """One recorded run set against Pre-LN, boundary by boundary (see the module docstring)."""

    def __init__(self, flow, parts: dict, mode: str, drop_p: float, responses: dict | None = None):
        self.parts, self.mode, self.drop_p, self.tol = parts, mode, drop_p, flow.tol
        self.near = 10 * flow.tol       # elementwise, for telling where a value's elements sit
        self.shape, self.x = flow.x.shape, np.asarray(flow.x, dtype=np.float64).reshape(-1)
        self.y = np.asarray(flow.y, dtype=np.float64).reshape(-1)
        self.calls = [c for c in flow.calls if c.kind != "manual"]
        counts: dict = {}
        for call in self.calls:
            counts[call.name] = counts.get(call.name, 0) + 1
            call.number = counts[call.name]
        for call in self.calls:
            call.total = counts[call.name]
        reported = getattr(flow, "counts", None) or {}       # calls made inside vmap and the like are not recorded:
        self.counts = {name: max(counts.get(name, 0), reported.get(name, 0))        # they ran all the same
                       for name in {*counts, *reported}}
        self.responses = responses or {}        # component -> the eval run with its output changed (see probes)
        self.keep = 1.0 / (1.0 - drop_p) if drop_p < 1 else 0.0
        self.values: dict = {"x": self.x}       # Pre-LN's values so far, by the names facts use
        self.gloss = ""
        self.masks: dict | None = None          # a run that follows Pre-LN: the masks its dropouts drew, by node

    # --- values -------------------------------------------------------------------------------------------
    def component(self, name: str, flat: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            out = self.parts[name](torch.as_tensor(flat.reshape(self.shape), dtype=torch.float32))
        return out.numpy().astype(np.float64).reshape(-1)

    def calls_of(self, *names: str) -> list:
        """The recorded calls of these components; a near miss of a LayerNorm (another eps, say) recorded under a
        norm's name is another normalization, not that norm."""
        return [c for c in self.calls if c.name in names and getattr(c, "variant", None) is None]

    def seen(self, names: tuple, expected: np.ndarray) -> Seen:
        calls = self.calls_of(*names)
        positions, covered, outputs = [], np.zeros(expected.size, dtype=bool), np.full(expected.size, np.nan)
        for call in calls:
            where = locate_padded(call.input, expected, self.near)
            if where is not None and call.name not in DROPS and not whole_tokens(where, self.shape[-1]):
                where = None          # the same numbers, but not the same token vectors
            positions.append(where)
            if where is not None and call.output.shape == call.input.shape:
                flat, kept = where.reshape(-1), where.reshape(-1) >= 0
                covered[flat[kept]] = True
                outputs[flat[kept]] = call.output.reshape(-1)[kept]
        return Seen(calls, positions, bool(covered.all()), outputs if covered.all() else None, expected.size)

    def placed(self, call) -> np.ndarray | None:
        """A call's input in block positions, where it has the block's shape (None: it has not)."""
        return call.input.reshape(-1) if tuple(call.input.shape) == tuple(self.shape) else None

    def output_of(self, value: np.ndarray, names=None, besides=()):
        """The recorded call (of one of `names`, not one of `besides`) whose output `value` is (a piece of)."""
        for call in self.calls:
            if (names is None or call.name in names) and call not in besides and call.output.size >= np.size(value) \
                    and locate(value, call.output, self.near) is not None:
                return call
        return None

    def outputs(self) -> dict:
        """Every recorded call's output that has the block's shape and is none of Pre-LN's values so far, by the
        names facts use ("att#2"), each value once."""
        found: dict = {}
        for c in self.calls:
            value = c.output.reshape(-1)
            if tuple(c.output.shape) == tuple(self.shape) and not any(
                    close(value, known, self.tol) for known in [*self.values.values(), *found.values()]):
                found[f"{c.name}#{c.number}"] = value
        return found

    def used(self, call) -> bool:
        """Does `call`'s output go anywhere the grader can see: into a later call's input (as a piece, or added to
        x), or into what the block returned?"""
        out = call.output.reshape(-1)
        if not np.any(out):
            return False
        for later in self.calls:
            if later.index <= call.index:
                continue
            if locate_padded(later.input, out, self.near) is not None:
                return True
            flat = self.placed(later)
            if flat is not None and tuple(call.output.shape) == tuple(self.shape) and \
                    locate(flat - self.x, out, self.near) is not None:
                return True
        if tuple(call.output.shape) == tuple(self.shape):
            return any(locate(self.y - base, out, self.near) is not None for base in (0.0, self.x))
        return False

    def received(self, call, value: str, equal: bool = False):
        return Received(self.mode, call.name, call.number, VALUE.get(value, value), equal, call.total)

    def said(self, call, value: str) -> list:
        """What `call` received, as a sum of Pre-LN's values so far or of recorded outputs when it is one of few
        terms, else that the grader cannot say."""
        flat = self.placed(call)
        if flat is not None:
            terms = fewest(flat, {**self.values, **self.outputs()}, self.tol)
            if terms is not None:
                return [Sum(self.mode, call.name, call.number, tuple(terms.items()), call.total)]
        return [Unknown(self.mode, call.name, call.number, VALUE.get(value, value), call.total)]

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
        """Steps 1 and 6 (the shortcuts) come before the steps of their half, but show only at the half's sum. A
        divergence seen at steps 2-3 (7-8) is the first only where that sum's shortcut is right: the grader's change
        of the branch component's output moves the sum by exactly that change (the branch reaches it as it is), and
        the sum less that branch is x (h). A shortcut that is not is the first step (1, 6); where the values cannot
        tell, no step is named."""
        first = found.step in (2, 3)
        if not (first or found.step in (7, 8)):      # a dropout step: the dropout itself changes what the sum holds
            return found
        half = "att" if first else "ff"
        branches = self.calls_of(half)
        sums = self.calls_of("norm2") if first else []
        if len(branches) != 1 or tuple(branches[0].output.shape) != tuple(self.shape) or self.mode != "eval" or \
                (first and (len(sums) != 1 or self.placed(sums[0]) is None)):
            return found
        total = self.placed(sums[0]) if first else self.y
        change = self._change(half, sums[0] if first else "out")
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
        return Found(found.boundary, 1 if first else 6, found.facts + [change, Shortcut(self.mode, half, False)],
                     found.expected)

    def _first(self) -> Found | None:
        n1 = self.values["norm1(x)"] = self.component("norm1", self.x)
        a = self.values["att(norm1(x))"] = self.component("att", n1)
        att = self.seen(("att",), n1)
        if not att.covers and not self._handed_on(a, self.x + a):
            return self._attention(att, n1)
        if att.covers and not close(att.outputs, a, self.tol):
            return Found(3, 3, [Gave(self.mode, "att", VALUE["n1"], VALUE["a"], False)], "att(norm1(x))")
        found, d1 = self._dropout(4, a, "a", att)
        if found is not None:
            return found
        h = self.values["h"] = self.x + d1
        norm2 = self.seen(("norm2",), h)
        if not norm2.covers:
            return self._second_start(norm2, h, d1, att)
        n2 = self.values["norm2(h)"] = self.component("norm2", h)
        ff = self.seen(("ff",), n2)
        f = self.values["ff(norm2(h))"] = self.component("ff", n2)
        if not ff.covers and not self._handed_on(f, None, h + f):
            return self._feed_forward(ff, h, n2, norm2)
        if ff.covers and not close(ff.outputs, f, self.tol):
            return Found(8, 8, [Gave(self.mode, "ff", VALUE["n2"], VALUE["f"], False)], "ff(norm2(h))")
        found, d2 = self._dropout(9, f, "f", ff)
        if found is not None:
            return found
        if close(self.y, h + d2, self.tol):
            self.masks = {"d1": d1 / np.where(a == 0, 1.0, a), "d2": d2 / np.where(f == 0, 1.0, f)}
            return None
        facts = [Unknown(self.mode, None, None, "h + drop_shortcut(ff(norm2(h)))")]
        step = self._output(h, d2, ff, facts)
        return Found(10, step, facts if len(facts) == 1 else facts[1:], "h + drop_shortcut(ff(norm2(h)))")

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
            n1 = self.component("norm1", start)           # the block is Pre-LN on what norm1 received
            h = start + self.component("att", n1)
            if close(self.y, h + self.component("ff", self.component("norm2", h)), self.tol):
                return True
        if start is None or len(norm2) != 1 or len(atts) != 1 or self.placed(norm2[0]) is None or \
                tuple(atts[0].output.shape) != tuple(self.shape):
            return False
        branch = atts[0].output.reshape(-1)
        if self.mode == "train":
            drop = next((c for c in self.calls_of(*DROPS) if tuple(c.input.shape) == tuple(self.shape)
                         and close(c.input, branch, self.tol)), None)
            if drop is None:
                return False
            branch = drop.output.reshape(-1)
        return close(self.placed(norm2[0]) - branch, start, self.tol) and not close(start, self.x, self.tol)

    def _attention(self, att: Seen, n1: np.ndarray) -> Found:
        """Attention did not receive norm1(x): step 2 when x was not normalized by norm1 (left as it is, another
        normalization, norm1 on something else), else 3."""
        expected = "norm1(x)"
        norm1 = self.seen(("norm1",), self.x)
        if not att.calls:
            ran = self._ran("att")
            if ran is None:          # it ran where the grader could not record it (inside vmap, say)
                return Found(3, None, [], expected)
            handed = self.seen(DROPS, n1).covers if self.mode == "train" else self.seen(("norm2",), self.x + n1).covers
            if norm1.covers or handed:      # norm1(x) was made, and went on without attention
                return Found(3, 3, [ran], expected)
            unseen = self.counts.get("norm1", 0) > len(self.calls_of("norm1"))
            return Found(3, None if unseen else 2, [ran], expected)
        partial = att.partial(self.mode, "att", expected)
        if partial is not None:
            return Found(3, 3, [partial], expected)
        call = att.off(self.used)
        if not self.used(call) and not any(self.used(c) for c in att.calls):
            return Found(3, None, [self.received(call, "n1")], expected)     # no account of attention's work
        facts = [self.received(call, "n1")]
        if locate(call.input, self.x, self.near) is not None:
            return Found(3, 2, facts + [self.received(call, "x", True)], expected)
        source = self.output_of(call.input, NORMS)
        if source is not None:
            facts.append(Sum(self.mode, call.name, call.number, ((f"{source.name}#{source.number}", 1.0),), call.total))
            if source.name != "norm1" or getattr(source, "variant", None) is not None:
                return Found(3, 2, facts, expected)
            if locate(source.input, self.x, self.near) is None:
                facts.append(Received(self.mode, "norm1", source.number, "x", False, source.total))
                if self._input_replaced(source):
                    self.gloss = ("what norm1 received is also what the first sum adds attention's branch to: x "
                                  "itself was changed before the block used it")
                    return Found(3, 1, facts, expected)
                return Found(3, 2, facts, expected)
        if not norm1.covers:
            recorded = len(self.calls_of("norm1"))
            if self.counts.get("norm1", 0) > recorded:          # norm1 ran where the grader could not record it
                return Found(3, None, facts, expected)
            what = [Ran(self.mode, "norm1", 0)] if not recorded else [
                Received(self.mode, "norm1", None, "x", False, None)]
            return Found(3, 2, facts + what, expected)
        return Found(3, 3, facts + self.said(call, "n1"), expected)

    def _again(self, value: np.ndarray, component: str, seen: Seen):
        """A call of `component` other than those that sat on Pre-LN's value, whose output `value` is: the
        component applied once more (to its own output, say)."""
        return self.output_of(value, (component,), besides=seen.on)

    def _dropout(self, boundary: int, branch: np.ndarray, name: str, before: Seen):
        """The dropout on a branch output: in train mode a dropout with drop_shortcut's p must receive it (and its
        output is Pre-LN's branch under the student's own mask); in eval mode nothing may be dropped."""
        drops = self.seen(DROPS, branch)
        acted = [c for c, p in zip(drops.calls, drops.positions) if p is not None and not close(c.output, c.input,
                                                                                               self.tol)]
        value, component = VALUE[name], "att" if name == "a" else "ff"
        if self.mode == "eval":
            if acted:
                call = acted[0]
                return Found(boundary, boundary, [self.received(call, name, True),
                                                  Dropout(self.mode, call.name, call.number, True, None, call.total)],
                             value), branch
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
            call = drops.off(self.used)
            if partial is not None or call is None:
                return Found(boundary, boundary, [partial] if partial else [], value), None
            facts = [self.received(call, name, False)]
            again = self._again(call.input, component, before)
            if again is not None:
                facts.append(Sum(self.mode, call.name, call.number, ((f"{again.name}#{again.number}", 1.0),),
                                 call.total))
                return Found(boundary, boundary - 1, facts, value), None
            return Found(boundary, boundary, facts, value), None
        ratio = _scale(drops.outputs, branch)
        if ratio is not None and abs(ratio - self.keep) > 1e-3 * max(self.keep, 1.0):
            call = acted[0] if acted else drops.calls[0]
            return Found(boundary, boundary, [self.received(call, name, True),
                                              Dropout(self.mode, call.name, call.number, True, ratio, call.total)],
                         value), None
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
        if np.any(keeps_a & (fits[0] | fits[2])):       # an element both readings explain: cannot tell
            return None
        return np.where(keeps_a, s * branch, 0.0)

    def _second_start(self, norm2: Seen, h: np.ndarray, d1: np.ndarray, att: Seen) -> Found:
        """norm2 did not receive h. What the feed-forward network received, and the second shortcut (what the block
        returned, less the feed-forward branch), tell whether h itself was wrong (steps 1-5) or only what followed
        it (6, 7)."""
        second = self._second_shortcut()
        ffs = self.calls_of("ff")
        skipped = next((c for c in ffs if locate(c.input, h, self.near) is not None), None)
        if not norm2.calls and not ffs and not self.counts.get("norm2") and not self.counts.get("ff"):
            facts = [Ran(self.mode, "norm2", 0), Ran(self.mode, "ff", 0)]     # no second half: what came back?
            if close(self.y, h, self.tol):
                return Found(5, 7, facts + [Sum(self.mode, None, None, (("h", 1.0),))], "norm2(h)")
            return Found(5, self._sum_step(self.y, d1, "att", None, facts, att), facts, "h")
        if skipped is not None:              # the feed-forward network received h itself: norm2 was skipped
            facts = [x for x in [self._ran("norm2")] if x] if not norm2.calls else [self.received(norm2.off(self.used), "h")]
            return Found(5, 7, facts + [self.received(skipped, "h", True)], "norm2(h)")
        if not norm2.calls:
            facts = [x for x in [self._ran("norm2")] if x] + ([self.received(ffs[0], "n2")] if ffs else [])
            return Found(5, 7 if second is not None and close(second, h, self.tol) else None, facts, "norm2(h)")
        partial = norm2.partial(self.mode, "norm2", "h")
        if partial is not None:
            return Found(5, 7, [partial], "h")
        call = norm2.off(self.used)
        facts = [self.received(call, "h")]
        v = self.placed(call)
        after = self.output_of(call.input, None)
        if after is not None and locate(after.input, h, self.near) is not None:      # something was done to h first
            facts.append(Sum(self.mode, call.name, call.number, ((f"{after.name}#{after.number}", 1.0),), call.total))
            return Found(5, 6 if second is not None and v is not None and close(second, v, self.tol) else 7, facts,
                         "h")
        if second is not None and close(second, h, self.tol):
            return Found(5, 7, facts + self.said(call, "h"), "h")
        if v is None:
            return Found(5, None, facts, "h")
        dropped = self.mode == "train" and (masked(v - d1, self.x, self.keep, self.tol) or
                                            masked(v - self.x, d1, self.keep, self.tol))
        if second is not None and not close(second, v, self.tol) and not dropped and \
                express(v, {"x": self.x, "branch": d1}, self.tol) is None:
            return Found(5, None, facts, "h")      # norm2's input and the second shortcut differ, both from h
        return Found(5, self._sum_step(v, d1, "att", call, facts, att), facts, "h")

    def _sum_step(self, total: np.ndarray, branch: np.ndarray, half: str, call, facts: list,
                  before: Seen) -> int | None:
        """The step a wrong sum of Pre-LN's (x + branch, or h + branch) breaks, from its values: a branch left out
        or scaled, a shortcut left out or scaled, a shortcut that is another value, the branch's component applied
        again, an extra term, a dropout on the shortcut or a second one on the branch; else the grader's change of
        the branch component's output tells a shortcut replaced (the sum moved by exactly that change) from a
        branch changed on its way in."""
        rule = HALVES[half]
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
        if terms is not None:                                  # the branch left out or scaled
            said({rule["shortcut"]: 1.0}, terms)
            if terms[branch_name] == 0:
                self.gloss = (f"{'the attention' if half == 'att' else 'the feed-forward'} branch is missing from that sum, "
                              f"so the whole {'attention half (norm1, att)' if half == 'att' else 'feed-forward half (norm2, ff)'}"
                              " does not reach the output")
                return rule["left out"]
            return rule["sum"]
        terms = express(total - branch, {rule["shortcut"]: shortcut}, self.tol)
        if terms is not None:                                  # the shortcut left out or scaled
            said(terms, {branch_name: 1.0})
            return rule["sum"]
        if self.mode == "train":
            if masked(total - shortcut, branch, self.keep, self.tol):     # a second dropout on the branch
                return rule["drop"]
            if masked(total - branch, shortcut, self.keep, self.tol):     # a dropout on the shortcut
                return rule["sum"]
        known = {k: v for k, v in {**self.values, **self.outputs()}.items() if k != rule["shortcut"]}
        for name, value in known.items():                      # the shortcut is another value
            if close(total - branch, value, self.tol) and not close(value, shortcut, self.tol):
                said({name: 1.0, branch_name: 1.0})
                return rule["replaced"]
        again = self.output_of(total - shortcut, (half,), besides=before.on)
        if again is not None:                                  # the branch component applied again
            said({rule["shortcut"]: 1.0, f"{again.name}#{again.number}": 1.0})
            return rule["branch"]
        terms = express(total - shortcut - branch, known, self.tol)
        if terms is not None and len([c for c in terms.values() if c]) <= 2:      # an extra term in the sum
            said({rule["shortcut"]: 1.0, branch_name: 1.0}, terms)
            return rule["sum"]
        change = self._change(half, "out" if call is None else call)
        if change is None:
            return None
        facts.append(change)
        return rule["replaced"] if change.exactly else rule["sum"]

    def _change(self, component: str, where) -> Changes | None:
        """Did the value at `where` (a call's input, or "out": what the block returned) change by exactly the change
        the grader made to `component`'s output, in the eval run with that output changed?"""
        response = self.responses.get(component)
        if response is None or self.mode != "eval":
            return None
        before = [c for c in self.calls if c.name == component]
        after = [c for c in response["calls"] if c["name"] == component]
        if len(before) != len(after) or not before or any(tuple(b.output.shape) != tuple(self.shape) for b in before):
            return None
        delta = sum(np.asarray(a["output"], dtype=np.float64).reshape(-1) - b.output.reshape(-1)
                    for a, b in zip(after, before))
        if where == "out":
            moved = np.asarray(response["y"], dtype=np.float64).reshape(-1) - self.y
        else:
            twin = [c for c in response["calls"] if c["name"] == where.name]
            if len(twin) < where.number or tuple(np.shape(twin[where.number - 1]["input"])) != tuple(self.shape):
                return None
            moved = np.asarray(twin[where.number - 1]["input"], dtype=np.float64).reshape(-1) - where.input.reshape(-1)
        if not np.any(delta):
            return None
        return Changes(self.mode, component, None if where == "out" else where.name, close(moved, delta, self.tol))

    def _second_shortcut(self) -> np.ndarray | None:
        """What the block returned less the feed-forward branch (its dropout's output in train mode, the feed-forward
        output in eval mode), where the grader can place that branch; None where it cannot."""
        ffs = self.calls_of("ff")
        if len(ffs) != 1 or tuple(ffs[0].output.shape) != tuple(self.shape):
            return None
        branch = ffs[0].output.reshape(-1)
        if self.mode == "train":
            drop = next((c for c in self.calls_of(*DROPS) if tuple(c.input.shape) == tuple(self.shape)
                         and locate(c.input, branch, self.near) is not None), None)
            if drop is None:
                return None
            branch = drop.output.reshape(-1)
        return self.y - branch

    def _feed_forward(self, ff: Seen, h: np.ndarray, n2: np.ndarray, norm2: Seen) -> Found:
        """The feed-forward network did not receive norm2(h): step 7 when h was not normalized by norm2 (left as it
        is, another normalization, norm2 again), else 8."""
        expected = "norm2(h)"
        if not ff.calls:
            ran = self._ran("ff")
            return Found(8, 8 if ran else None, [ran] if ran else [], expected)
        partial = ff.partial(self.mode, "ff", expected)
        if partial is not None:
            return Found(8, 8, [partial], expected)
        call = ff.off(self.used)
        if not self.used(call) and not any(self.used(c) for c in ff.calls):
            return Found(8, None, [self.received(call, "n2")], expected)
        facts = [self.received(call, "n2")]
        if locate(call.input, h, self.near) is not None:
            return Found(8, 7, facts + [self.received(call, "h", True)], expected)
        source = self.output_of(call.input, NORMS)
        if source is not None:
            facts.append(Sum(self.mode, call.name, call.number, ((f"{source.name}#{source.number}", 1.0),), call.total))
            return Found(8, 7, facts, expected)
        return Found(8, 8, facts + self.said(call, "n2"), expected)

    def _output(self, h: np.ndarray, d2: np.ndarray, ff: Seen, facts: list) -> int | None:
        """What the block returned is not h + its branch: an operation after the sum (10), else the second sum's
        own rules."""
        after = self.output_of(self.y, None)
        if after is not None and tuple(after.input.shape) == tuple(self.shape) and \
                close(after.input.reshape(-1), h + d2, self.tol):
            facts.append(Sum(self.mode, None, None, ((f"{after.name}#{after.number}", 1.0),)))
            facts.append(Received(self.mode, after.name, after.number, "h + drop_shortcut(ff(norm2(h)))", True,
                                  after.total))
            return 10
        return self._sum_step(self.y, d2, "ff", None, facts, ff)


def _scale(outputs: np.ndarray, branch: np.ndarray) -> float | None:
    """What a dropout multiplied its kept values by (None: it kept none, or they disagree)."""
    kept = (np.abs(outputs) > 1e-12) & (np.abs(branch) > 1e-12)
    if not kept.any():
        return None
    ratios = outputs[kept] / branch[kept]
    return float(np.median(ratios))
