"""The fuzzer's oracle: every fact the grader states (`autograder.engine.facts`, as dicts) evaluated on a run of
the same forward that this module records itself.

It shares no code with the grader's reading. It builds the block from the notebook's own classes with weights of
its own (LayerNorm scales and shifts drawn too, attention without inner dropout, drop_shortcut at p 0.5, as the
grader's plan has them), records each component call with forward hooks and each functional dropout or
LayerNorm the forward called itself with a torch function mode, computes Pre-LN's values with the same
components, and answers each fact from those tensors: True, False, or None where the fact names something this
run cannot tell (a call made inside nested vmaps, whose tensors cannot leave them; a train-mode value after a dropout no
recorded call can stand for).

A fact is about values, so it holds on the grader's input if and only if it holds on this one: the forwards the
generator makes compute the same function of their input whatever the input is (no branch on values).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from autograder.engine.questions.plan import GRADING_CFG
from autograder.engine.steps import HALVES
from catalog.build import submission

DROP_P = 0.5
CFG = {**GRADING_CFG}
NAMES = ("norm1", "att", "drop_shortcut", "norm2", "ff")


def _output_layer(module):
    """The innermost layer of `module` whose output is the module's own output object, found by running it once on
    a token sequence (None: there is none, or it cannot run on one)."""
    seen = []
    hooks = [m.register_forward_hook(lambda m, a, o: seen.append((m, o))) for m in module.modules() if m is not module]
    try:
        with torch.no_grad():
            out = module(torch.randn(1, CFG["context_length"], CFG["emb_dim"]))
    except Exception:
        return None
    finally:
        for hook in hooks:
            hook.remove()
    return next((m for m, o in seen if o is out), None)


def _close(a, b, rel: float = 1e-4) -> bool:
    a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    if a.shape != b.shape or not torch.isfinite(a).all():
        return False
    return bool((a - b).norm() <= rel * max(float(b.norm()), 1.0) + 1e-6)


def _rows(t: torch.Tensor) -> torch.Tensor:
    return t.detach().double().reshape(-1, t.shape[-1])


def pieces_of(value: torch.Tensor, whole: torch.Tensor, *, elementwise: bool = False, rel: float = 1e-4) -> bool:
    """Is `value` `whole`, or made of `whole`'s token vectors (any order, some left out, zero vectors added)? With
    `elementwise`, of its elements in any order (what a dropout, which acts element by element, may be handed)."""
    if value.shape == whole.shape and _close(value, whole, rel):
        return True
    if elementwise:
        v = value.detach().double().reshape(-1)
        w = whole.detach().double().reshape(-1)
        v = v[v != 0]
        if v.numel() == 0 or v.numel() > w.numel():
            return False
        scale = max(float(w.abs().max()), 1.0)
        distance = (v[:, None] - w[None, :]).abs().min(dim=1).values
        return bool((distance <= rel * scale).all())
    if value.shape[-1] != whole.shape[-1]:
        return False
    v, w = _rows(value), _rows(whole)
    v = v[v.abs().sum(dim=1) > 0]
    if v.shape[0] == 0:
        return False
    distance = torch.cdist(v, w).min(dim=1).values
    return bool((distance <= rel * max(float(w.norm(dim=1).max()), 1.0)).all())


class _Functional(TorchFunctionMode):
    """Records dropout and layer_norm called by the forward itself (not inside a component)."""

    def __init__(self, recorder):
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = {F.dropout: "dropout", F.layer_norm: "layer_norm"}.get(func)
        if name and self.recorder.depth == 0:
            self.recorder.add(name, args[0], out)
        return out


def _examples(value):
    """`value`'s numbers: inside one vmap, every example's, the examples along the first dimension; None inside
    vmaps nested deeper than one (their numbers exist only per example)."""
    functorch = torch._C._functorch
    if not functorch.is_batchedtensor(value):
        return value
    physical = functorch.get_unwrapped(value)
    if functorch.is_batchedtensor(physical):
        return None
    return physical.movedim(functorch.maybe_get_bdim(value), 0)


class Recorder:
    def __init__(self):
        self.calls: list = []       # (name, input or None, output or None)
        self.parts: list = []       # components whose own layers the forward called directly
        self.layers: list = []      # those calls: (component, layer's place, input, output, calls before it)
        self.depth = 0

    def add(self, name, value, out):
        value, out = _examples(value), _examples(out)
        if value is None or out is None:
            self.calls.append((name, None, None))
        else:
            self.calls.append((name, value.detach().clone(), out.detach().clone()))

    def of(self, name: str) -> list:
        return [(i, o) for n, i, o in self.calls if n == name]

    def layer(self, name, index, args, out):
        """A layer of `name` called outside any component call: it ran, in part; kept to be read as passes."""
        if self.depth == 0:
            self.parts.append(name)
            if args and isinstance(args[0], torch.Tensor) and isinstance(out, torch.Tensor):
                self.layers.append((name, index, args[0].detach().clone(), out.detach().clone(), len(self.calls)))

    def read_passes(self):
        """Each pass over a component's own layers (consecutive, no component call between, until a layer comes
        again) as a call of it: its first layer's input, its last layer's output; not where it was called whole."""
        called, groups = {n for n, _, _ in self.calls}, []
        for name, index, value, out, at in self.layers:
            if name in called:
                continue
            last = groups[-1] if groups else None
            if last is None or last["name"] != name or index in last["seen"] or last["at"] != at:
                last = {"name": name, "seen": set(), "at": at, "input": value}
                groups.append(last)
            last["seen"].add(index)
            last["output"] = out
        for group in reversed(groups):
            self.calls.insert(group["at"], (group["name"], group["input"], group["output"]))


class Run:
    """One forward, built and run by the oracle in eval and train mode."""

    def __init__(self, forward: str, seed: int = 0):
        self.namespace: dict = {}
        exec(compile(submission(forward), "<fuzzed forward>", "exec"), self.namespace)
        self.block = self._block(seed)
        generator = torch.Generator().manual_seed(seed + 1)
        self.x = torch.randn(3, CFG["context_length"], CFG["emb_dim"], generator=generator)
        self.records = {mode: self._record(mode) for mode in ("eval", "train")}
        self.pre = {"eval": self._pre_ln_eval()}
        self.pre["train"] = self._pre_ln_train()

    def _block(self, seed: int):
        ns = self.namespace
        torch.manual_seed(seed)
        block = ns["TransformerBlock"]({**CFG, "drop_rate": DROP_P})
        block.att = ns["MultiHeadAttention"](d_in=CFG["emb_dim"], d_out=CFG["emb_dim"],
                                             context_length=CFG["context_length"], dropout=0.0,
                                             num_heads=CFG["n_heads"], qkv_bias=CFG["qkv_bias"])
        generator = torch.Generator().manual_seed(seed + 100)
        with torch.no_grad():
            for param in block.parameters():
                if param.dim() > 1:
                    param.copy_(torch.randn(param.shape, generator=generator) / math.sqrt(param.shape[-1]))
                else:
                    param.copy_(0.3 * torch.randn(param.shape, generator=generator))
            for norm in (block.norm1, block.norm2):
                norm.scale.copy_(0.5 + torch.rand(norm.scale.shape, generator=generator))
        return block

    def call(self, mode: str, x=None, edit=None, seed: int = 11, record: Recorder | None = None):
        """The block's output in `mode` on `x` (default the oracle's), dropout drawn from `seed`; `edit`: name ->
        function applied to that component's output."""
        self.block.train(mode == "train")
        handles, depth = [], [0]
        for name in NAMES:
            module = getattr(self.block, name)
            last = _output_layer(module) if edit and name in edit else None
            if last is not None:  # a pass over the component's own layers ends in this one: its output is edited too

                def passed(m, a, o, name=name):
                    return edit[name](o) if depth[0] == 0 else o
                handles.append(last.register_forward_hook(passed))
            for index, inner in enumerate(module.modules()):     # a component's own layers called directly
                if inner is not module and record is not None:
                    handles.append(inner.register_forward_hook(
                        lambda m, a, o, name=name, index=index: record.layer(name, index, a, o)))

            def pre(module, args, name=name):
                depth[0] += 1
                if record is not None:
                    record.depth += 1

            def post(module, args, out, name=name):
                depth[0] -= 1
                if record is not None:
                    record.depth -= 1
                    record.add(name, args[0], out)
                if edit and name in edit:
                    return edit[name](out)
                return out
            handles += [module.register_forward_pre_hook(pre), module.register_forward_hook(post)]
        torch.manual_seed(seed)
        try:
            if record is not None:
                with _Functional(record):
                    return self.block(self.x if x is None else x)
            return self.block(self.x if x is None else x)
        finally:
            for handle in handles:
                handle.remove()

    def _record(self, mode: str) -> tuple:
        record = Recorder()
        with torch.no_grad():
            y = self.call(mode, record=record)
        record.read_passes()
        return record, y.detach().clone()

    # --- Pre-LN's values ------------------------------------------------------------------------------------
    def _pre_ln_eval(self) -> dict:
        b, x = self.block, self.x
        with torch.no_grad():
            n1 = b.norm1(x)
            a = b.att(n1)
            h = x + a
            n2 = b.norm2(h)
            f = b.ff(n2)
            post_h = b.norm1(x + b.att(x))
            return {"x": x, "norm1(x)": n1, "att(norm1(x))": a, "h": h, "norm2(h)": n2, "ff(norm2(h))": f,
                    "pre_ln": h + f, "post_ln": b.norm2(post_h + b.ff(post_h)),
                    "no_shortcuts": b.ff(b.norm2(a))}

    def _drop_calls(self, mode: str) -> list:
        record, _ = self.records[mode]
        return [(i, o) for n, i, o in record.calls if n in ("drop_shortcut", "dropout") and i is not None]

    def _mask_for(self, mode: str, value: torch.Tensor):
        for i, o in self._drop_calls(mode):
            if i.shape == value.shape and _close(i, value):
                return torch.where(i == 0, torch.zeros_like(i), o / torch.where(i == 0, torch.ones_like(i), i))
        return None

    def _pre_ln_train(self) -> dict:
        """Pre-LN's train-mode values under the masks of the student's own dropout calls: the call that received
        att(norm1(x)) masks the first branch, the one that received ff(norm2(h)) (with that h) the second."""
        b, x, values = self.block, self.x, dict(self.pre["eval"])
        for name in ("h", "norm2(h)", "ff(norm2(h))", "pre_ln", "no_shortcuts"):
            values.pop(name)
        m1 = self._mask_for("train", values["att(norm1(x))"])
        if m1 is None:
            return values
        with torch.no_grad():
            h = x + values["att(norm1(x))"] * m1
            n2 = b.norm2(h)
            f = b.ff(n2)
        values.update({"h": h, "norm2(h)": n2, "ff(norm2(h))": f})
        m2 = self._mask_for("train", f)
        if m2 is not None:
            values["pre_ln"] = h + f * m2
        return values

    # --- facts ----------------------------------------------------------------------------------------------
    def value(self, mode: str, name: str):
        return self.pre[mode].get(name)

    def calls(self, mode: str, component: str) -> list:
        return self.records[mode][0].of(component)

    def output(self, mode: str):
        return self.records[mode][1]

    def check(self, fact: dict) -> bool | None:
        mode = fact.get("mode") or "eval"
        return getattr(self, f"_{fact['kind']}")(mode, fact)

    def _ran(self, mode, fact):
        if fact["component"] in self.records[mode][0].parts:
            return None if fact["count"] else False     # its layers ran: it did not "never run"
        return len(self.calls(mode, fact["component"])) == fact["count"]

    def _picked(self, mode, component, call):
        calls = self.calls(mode, component)
        chosen = calls if call is None else calls[call - 1:call]
        if not chosen or any(i is None for i, _ in chosen):
            return None
        return chosen

    def _count_ok(self, mode, fact) -> bool:
        return fact.get("calls") in (None, 0) or fact["calls"] == len(self.calls(mode, fact["component"]))

    def _matches(self, mode, component, call, value_name):
        chosen, value = self._picked(mode, component, call), self.value(mode, value_name)
        if chosen is None or value is None:
            return None
        elementwise = component in ("drop_shortcut", "dropout")
        return all(pieces_of(i, value, elementwise=elementwise) for i, _ in chosen)

    def _received(self, mode, fact):
        got = self._matches(mode, fact["component"], fact["call"], fact["value"])
        return None if got is None else (got == fact["equal"] and self._count_ok(mode, fact))

    def _unreceived(self, mode, fact):
        value = self.value(mode, fact["value"])
        calls = [i for component in fact["components"] for i, _ in self.calls(mode, component)]
        if value is None or any(i is None for i in calls):
            return None
        return not any(pieces_of(i, value, elementwise=True) for i in calls)

    def _differs(self, mode, fact):
        """A difference on an input of the grader's sweep (another configuration, size, rate or call): this run
        records the grader's main input only. The region generator (`catalog/regions.py`) evaluates these facts."""
        return None

    def _unknown(self, mode, fact):
        if fact["component"] is None:
            value = self.value(mode, "pre_ln") if fact["value"].startswith("h + ") else self.value(mode, fact["value"])
            return None if value is None else not _close(self.output(mode), value)
        got = self._matches(mode, fact["component"], fact["call"], fact["value"])
        return None if got is None else (not got and self._count_ok(mode, fact))

    def _gave(self, mode, fact):
        chosen = self._picked(mode, fact["component"], None)
        received, value = self.value(mode, fact["received"]), self.value(mode, fact["value"])
        if chosen is None or received is None or value is None:
            return None
        if not all(pieces_of(i, received) for i, _ in chosen):
            return False
        right = all(pieces_of(o, value) for _, o in chosen)      # what it gave, put back: its token vectors
        return right == fact["equal"]

    def _term(self, mode, name):
        if "#" in name:
            component, k = name.split("#")
            chosen = self._picked(mode, component, int(k))
            return None if chosen is None else chosen[0][1]
        if name == "x":
            return self.x
        return self.value(mode, name)

    def _sum(self, mode, fact):
        if fact["component"] is None:
            target = self.output(mode)
        else:
            chosen = self._picked(mode, fact["component"], fact["call"])
            if chosen is None:
                return None
            target = chosen[0][0]
        if len(fact["terms"]) == 1 and "#" in fact["terms"][0][0] and fact["terms"][0][1] == 1:
            term = self._term(mode, fact["terms"][0][0])      # one recorded output: whole, or whole tokens of it
            return None if term is None else pieces_of(target, term)
        total = torch.zeros_like(target, dtype=torch.float64)
        for name, c in fact["terms"]:
            term = self._term(mode, name)
            if term is None:
                return None
            if term.shape != target.shape:
                return False
            total = total + c * term.double()
        return _close(target, total, 1e-3)

    def _edited(self, component: str, delta: torch.Tensor, where: str | None):
        """Eval-mode output (or what `where` received first) with `component`'s output moved by `delta`."""
        record = Recorder()
        with torch.no_grad():
            y = self.call("eval", edit={component: lambda out: out + delta.reshape(out.shape) if
                                        out.numel() == delta.numel() else out + delta.mean()}, record=record)
        if where is None:
            return y
        calls = record.of(where)
        return calls[0][0] if calls and calls[0][0] is not None else None

    def _delta(self, component):
        calls = self.calls("eval", component)
        if not calls or calls[0][1] is None:
            return None
        generator = torch.Generator().manual_seed(5)
        return 0.5 * torch.randn(calls[0][1].shape, generator=generator)

    def _responds(self, mode, fact):
        delta = self._delta(fact["component"])
        if delta is None:
            return None if self.calls("eval", fact["component"]) else (fact["responds"] is False)
        changed = not _close(self._edited(fact["component"], delta, None), self.output("eval"), 1e-6)
        return changed == fact["responds"]

    def _output(self, mode, fact):
        y = self.output(mode)
        target = self.output("eval") if fact["equals"] == "eval" else self.x if fact["equals"] == "x" else \
            self.value(mode, fact["equals"])
        if target is None:
            return None
        return (y.shape == target.shape and _close(y, target)) == fact["equal"]

    def _dropout(self, mode, fact):
        chosen = self._picked(mode, fact["component"], fact["call"])
        if chosen is None:
            return None
        i, o = chosen[0]
        kept = o != 0
        dropped = bool(((i != 0) & ~kept).any())
        if dropped != fact["dropped"]:
            return False
        if fact.get("scale") is not None and kept.any():
            return _close(o[kept], fact["scale"] * i[kept], 1e-4)
        return True

    def _curved(self, mode, fact):
        """What the forward returned against Pre-LN's output, element by element: the least-squares line through the
        six elements nearest each one in Pre-LN's output predicts it to within a quarter of the spread of those six, for
        nine in ten elements (of those whose six are not all one value, at least 16), where no line through all of them
        does (to within 1e-2 of their spread)."""
        target = self.value(mode, "pre_ln")
        if target is None or self.output(mode).shape != target.shape:
            return None
        s, y = target.double().reshape(-1), self.output(mode).double().reshape(-1)
        spread = float(y.std())
        if not bool(torch.isfinite(y).all()) or spread == 0:
            return False

        def line(at, through):  # the least-squares line through the elements `through`, read at `at`
            design = torch.stack([s[through], torch.ones_like(s[through])], dim=1)
            slope, offset = torch.linalg.lstsq(design, y[through].unsqueeze(1)).solution.reshape(-1)
            return slope * s[at] + offset

        misses = []
        for i in range(s.numel()):
            near = (s - s[i]).abs().argsort()[1:7]
            width = float(y[near].max() - y[near].min())
            if width > 1e-6 * spread:
                misses.append(abs(float(line(i, near)) - float(y[i])) / width)
        everywhere = (line(torch.arange(s.numel()), torch.arange(s.numel())) - y).abs().max()
        return len(misses) >= 16 and sorted(misses)[int(0.9 * len(misses))] <= 0.25 and float(everywhere) > 1e-2 * spread

    def _backward(self, mode, fact):
        """Pre-LN written out here, on the oracle's block, with the gradient through one value (or through one use of
        it) multiplied by the fact's factor, against the forward's own gradients, the input's and every parameter's,
        for a read-out of the oracle's own; in train mode under the forward's own dropouts (unknown where the oracle
        finds no dropout call that received a branch)."""
        b, c = self.block, fact["factor"]
        masks = [1.0, 1.0]
        if mode == "train":
            m1 = self._mask_for("train", self.pre["train"]["att(norm1(x))"])
            m2 = self._mask_for("train", self.pre["train"].get("ff(norm2(h))", self.x))
            if m1 is None or m2 is None:
                return None
            masks = [m1, m2]

        def cut(v, value, user=None):
            hit = fact["value"] == value and fact["user"] in (None, user)
            return c * v + (1 - c) * v.detach() if hit else v

        def pre_ln(x):
            n1 = cut(b.norm1(cut(x, "x", "norm1.in")), "norm1.out")
            d1 = cut(cut(b.att(n1), "att.out") * masks[0], "drop1.out")
            h = cut(x, "x", "norm2.in") + d1
            f = cut(b.ff(cut(b.norm2(cut(h, "norm2.in", "norm2")), "norm2.out")), "ff.out")
            return cut(cut(h, "norm2.in", "y") + cut(f * masks[1], "drop2.out"), "y")

        readout = torch.randn(self.x.shape, generator=torch.Generator().manual_seed(9))
        found = []
        for forward in (pre_ln, lambda x: self.call(mode, x=x)):
            b.train(mode == "train")
            b.zero_grad(set_to_none=True)
            x = self.x.clone().requires_grad_(True)
            y = forward(x)
            if y.requires_grad:
                (y * readout).sum().backward()
            found.append([torch.zeros_like(t) if t.grad is None else t.grad.clone() for t in [x, *b.parameters()]])
        b.zero_grad(set_to_none=True)
        return all(_close(mine, theirs, 1e-4) for mine, theirs in zip(*found))

    def _unmet(self, mode, fact):
        """One of the ledger's equations failing, evaluated here where it is a sum of what components received and
        gave in eval mode, each called once: what attention and the feed-forward network received, what norm2 received
        and what the block returned. The rest are the ledger's own reading of where a half started and where its
        branch went, which this oracle does not restate; and a boundary the grader could not read is its own word."""
        def one(component, side):  # what the one call of `component` received (0) or gave (1)
            calls = self.calls(mode, component)
            return calls[0][side] if len(calls) == 1 and calls[0][side] is not None else None

        x, y = self.x, self.output(mode)
        sums = {  # the equation's key -> (its left side, its right side's terms)
            str(HALVES["att"].branch): (lambda: one("att", 0), lambda: [one("norm1", 1)]),
            str(HALVES["ff"].branch): (lambda: one("ff", 0), lambda: [one("norm2", 1)]),
            str(HALVES["att"].sum): (lambda: one("norm2", 0), lambda: [x, one("att", 1)]),
            str(HALVES["ff"].sum): (lambda: y, lambda: [one("norm2", 0), one("ff", 1)]),
            "both sums": (lambda: y, lambda: [x, one("att", 1), one("ff", 1)]),
        }
        if fact["equation"] not in sums or not fact["known"] or mode != "eval":
            return None
        left, terms = sums[fact["equation"]][0](), sums[fact["equation"]][1]()
        if left is None or any(term is None or term.shape != left.shape for term in terms):
            return None
        return not _close(left, sum(terms))

    def _near(self, mode, fact):
        return None         # a near miss of a LayerNorm is the grader's fit: the family catalogs check its words

    def _step(self, mode, fact):
        return None         # the step is checked against the generator's truth, not against values

    # --- the `moved` question: attention's and the feed-forward network's outputs held, one value moved ---------
    def _moved(self, mode, fact):
        generator = torch.Generator().manual_seed(17)
        held = {name: torch.randn(self.x.shape, generator=generator) for name in ("att", "ff")}
        delta = 0.5 * torch.randn(self.x.shape, generator=generator)
        runs = {"base": ({}, self.x), "x": ({}, self.x + delta), "att": ({"att": delta}, self.x),
                "ff": ({"ff": delta}, self.x)}
        read = {}
        for name, (moves, x) in runs.items():
            values = {k: v + moves.get(k, 0) for k, v in held.items()}
            edit = {k: (lambda out, v=v: v.clone() if out.shape == v.shape else out) for k, v in values.items()}
            record = Recorder()
            with torch.no_grad():
                y = self.call("eval", x=x, edit=edit, record=record)
            needed = ("att", "ff") if fact["half"] == "ff" or fact["where"] is None else ("att",)
            if any(len(record.of(k)) != 1 or record.of(k)[0][1] is None or record.of(k)[0][1].shape != self.x.shape
                   or k in record.parts for k in needed):
                return None
            if fact["where"] is None:
                read[name] = y
            else:
                calls = record.of(fact["where"])
                if len(calls) < fact["call"] or calls[fact["call"] - 1][0] is None:
                    return None
                read[name] = calls[fact["call"] - 1][0]
        shortcut, branch = {"att": ("x", "att"), "ff": ("att", "ff")}[fact["half"]]
        if fact["moved"] == "across":
            return _close(read[shortcut], read[branch], 1e-4) == fact["exactly"]
        moved = read[shortcut if fact["moved"] == "shortcut" else branch] - read["base"]
        exact = moved.shape == delta.shape and _close(moved, delta, 1e-4)
        return exact == fact["exactly"]


def false_facts(forward: str, facts) -> list:
    """The facts (result dicts) the oracle finds false on its own run of `forward`; a step is not one it evaluates,
    and a forward the grader states no other fact of is not run."""
    stated = [fact for fact in facts if fact["kind"] != "step"]
    if not stated:
        return []
    run = Run(forward)
    return [fact for fact in stated if run.check(fact) is False]

