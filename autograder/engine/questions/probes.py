"""Probes: run the student's definitions on the grader's questions and report what happened, as data.

The trusted parent draws a `Plan` (`plan`). A probe only answers the plan's questions and never judges. The
parent runs the same probes on the reference and decides every point itself, so nothing a probe reports is
believed on its own.
"""

from __future__ import annotations

from dataclasses import fields

import torch

from . import chains as chains_
from .cells import ProbeFailure, describe_error, reset_torch_state, seed_random, tensor_out
from .parts import PART_NAMES, build_block, graded_block, load_parts, part_params, on_device
from .plan import BATCH, BIG_BATCH, FRESH, RESPONDING, SHORT, Plan
from .moving import change, hold, moved_runs, output_layer, token_changed
from .recording import MAX_CALLS, RESPONSE_CALLS, Recorder
from .measured import probe_derivative, probe_same_function
from .stack import deep_profile
from .sweep import probe_sweep


class Probing:
    """What every probe needs: the student's names, the public kit, the plan."""

    def __init__(self, student: dict, kit: dict, plan: Plan, sources: list[str] | None = None):
        self.student, self.kit, self.plan = student, kit, plan
        self.sources = sources  # the student's code, when known (for the device check's screening)
        self.notes: list[str] = []

    def definition(self, name: str):
        if name not in self.student:
            raise ProbeFailure(f"{name} is not defined: keep the name from the notebook")
        return self.student[name]

    def block(self, **part_options):
        cls = self.definition("TransformerBlock")
        block = graded_block(cls, self.kit, self.plan.cfg, self.plan.weights, self.notes, drop_p=self.plan.drop_p, **part_options)
        return on_device(block, self.plan.device)

    def randn(self, shape, seed: int, dtype=torch.float32):
        generator = torch.Generator().manual_seed(int(seed))
        return torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype=dtype, device=self.plan.device)

    def x(self, dtype=torch.float32):
        cfg = self.plan.cfg
        return 1.5 * self.randn((BATCH, cfg["context_length"], cfg["emb_dim"]), self.plan.inputs, dtype) + 0.3

    def fresh(self, which: str, dtype=torch.float32):
        """The input of a later question (see FRESH): like x, of its own shape, from its own seed."""
        cfg = self.plan.cfg
        tokens, emb = cfg["context_length"], cfg["emb_dim"]
        shape = {"small": (1, tokens - SHORT, emb), "batch": (BIG_BATCH, tokens, emb)}.get(which, (BATCH, tokens, emb))
        return 1.5 * self.randn(shape, self.plan.fresh[FRESH.index(which)], dtype) + 0.3

    def call(self, block, x, rng: int | None = None):
        """One call of the student's forward with torch's global seed fixed first (dropout is then repeatable)."""
        seed_random(self.plan.rng[0] if rng is None else rng, self.plan.device)
        return tensor_out(block(x), x)


def _recorded_run(
    p: Probing,
    train: bool,
    x=None,
    gradients: bool = True,
    changed: str | None = None,
    limit: int = MAX_CALLS,
    held: dict | None = None,
) -> dict:
    """One forward in the given mode, recorded, then (`gradients`) the gradient of the plan's read-out loss.
    `x`: another input than the plan's; `changed`: a component whose outputs are changed (see `moving.change`); `held`:
    components whose outputs are held at given values (see `moving.hold`)."""
    block, x = p.block().train(train), (p.x() if x is None else x)
    leaf = x.clone().requires_grad_(True)
    recorder = Recorder(limit=limit, gradients=gradients)
    if changed is not None:
        change(output_layer(block, changed), p.plan.respond + 1000 * RESPONDING.index(changed))
    for name, value in (held or {}).items():
        hold(getattr(block, name), value)
    for name in PART_NAMES:
        recorder.wrap(getattr(block, name), name)
    recorder.block_input = given = leaf.clone()  # a copy: writing into its input must not alter the leaf
    with recorder.mode():
        y = p.call(block, given)
    counts = dict(recorder.counts)
    if not gradients:
        return {"y": y.detach(), "calls": _as_data(recorder.calls, False), "counts": counts, "layers": recorder.layers}
    result = {"y": y.detach(), "notes": list(p.notes), "counts": counts, "layers": recorder.layers}
    try:
        if y.requires_grad:
            (y * p.randn(y.shape, p.plan.readout)).sum().backward()
        result["x_grad"] = leaf.grad
        result["param_grads"] = {name: param.grad for name, param in part_params(block).items()}
    except Exception as error:
        result["grad_error"] = describe_error(error)
    result["calls"] = _as_data(recorder.calls, "grad_error" not in result)  # with the gradients the backward pass kept
    result["events"] = recorder.events
    return result


def _as_data(calls: list, gradients: bool) -> list[dict]:
    """Each recorded `Call` as data; its gradients only from a backward pass that ran to the end."""
    kept = [field.name for field in fields(calls[0])] if calls else []
    return [{name: getattr(c, name) for name in kept if gradients or not name.startswith("grad_")} for c in calls]


# --- the probes --------------------------------------------------------------------------------------


def probe_eval(p):
    """Eval mode: the output, every component call with its input and output, and the gradients."""
    return _recorded_run(p, train=False)


def probe_train(p):
    """Train mode with real dropout, torch's seed fixed before the call: the same record as `eval`."""
    return _recorded_run(p, train=True)


def probe_eval_other(p):
    """Eval mode on a fresh input, recorded: the grader reads the same program from it as from the first eval run
    only if its numbers are the program's own (a coefficient computed from the values, a / a.std(), changes)."""
    return _recorded_run(p, train=False, x=p.fresh("other"), gradients=False)


def probe_token(p):
    """Eval mode on the recorded run's input with one token of each sequence given other content (`token_changed`),
    recorded: a branch whose recorded inputs stay the same does not depend on each token's content."""
    return _recorded_run(p, train=False, x=token_changed(p.x(), p.plan.respond + 101), gradients=False)


def probe_respond(p):
    """Eval mode on the recorded run's input, once for each of norm1, att, norm2 and ff with every output of that
    component changed by a seeded amount: which values move, and by how much, shows how the block uses it."""
    return {name: _recorded_run(p, train=False, gradients=False, changed=name, limit=RESPONSE_CALLS) for name in RESPONDING}


def probe_moved(p):
    """Eval mode with attention's and the feed-forward network's outputs held at values of the grader's, as they
    are and with one value moved (`moving`): whether a sum's consumer sees its shortcut, its branch or only the sum
    shows how each half's terms reach it."""
    return {
        name: _recorded_run(p, train=False, x=given, gradients=False, limit=RESPONSE_CALLS, held=held)
        for name, given, held in moved_runs(p.plan, p.x())
    }


def probe_eval_seeds(p):
    """Eval mode, a fresh input, called twice on the very same tensor under two more global seeds: with dropout
    off and the input left as it was, both outputs are the block's output for that input. A forward that writes
    into its input (x += ...) hands the second call another input, which shows in the second output."""
    block, x = p.block().eval(), p.fresh("repeat")
    first = p.call(block, x, p.plan.rng[1]).detach().clone()  # a copy: the output may be the input itself
    return {"y_a": first, "y_b": p.call(block, x, p.plan.rng[2]).detach().clone()}


def probe_profile(p):
    """Per-block gradient norms of a deep stack of the student's blocks (the notebook's own measurement)."""
    cls, kit, cfg = p.definition("TransformerBlock"), p.kit, p.plan.cfg

    def student_block(parts: dict):
        block = build_block(cls, cfg)
        load_parts(block, parts)  # into the student's own modules, wherever its __init__ keeps them
        return block

    return {"profile": deep_profile(student_block, kit, p.plan)}


def probe_robust_small(p):
    """A batch of one with fewer tokens than context_length (a fresh input)."""
    return {"y": p.call(p.block().eval(), p.fresh("small"))}


def probe_robust_batch(p):
    """A batch of five sequences (a fresh input)."""
    return {"y": p.call(p.block().eval(), p.fresh("batch"))}


def probe_robust_double(p):
    """float64 after block.double(), on a fresh float64 input: the answer must carry float64's precision."""
    block, x = p.block().double().eval(), p.fresh("double", torch.float64)
    y = p.call(block, x)
    return {"y": y, "dtype": str(y.dtype).removeprefix("torch.")}


# --- Task 2 --------------------------------------------------------------------------------------------


def float_list(value, limit: int) -> list[float]:
    """What Task 2's "list of floats" accepts, as the visible tests read it too (visible_tests.as_floats): a list or
    tuple of real numbers (Python, NumPy or one-element tensors and arrays), or a NumPy array or torch tensor of
    real numbers, flattened. Booleans, text, complex numbers and other containers are refused. At most `limit`
    values are kept (the parent reads no more)."""
    if isinstance(value, torch.Tensor):
        if value.is_complex() or value.dtype == torch.bool:
            raise ProbeFailure(f"returned a tensor of {str(value.dtype).removeprefix('torch.')}, not of real numbers")
        return [float(v) for v in value.detach().cpu().reshape(-1)[:limit].tolist()]
    if type(value).__module__ == "numpy" and hasattr(value, "dtype") and hasattr(value, "reshape"):
        if value.dtype.kind not in "iuf":
            raise ProbeFailure(f"returned an array of {value.dtype}, not of real numbers")
        return [float(v) for v in value.reshape(-1)[:limit].tolist()]
    if not isinstance(value, (list, tuple)):
        raise ProbeFailure(f"returned {type(value).__name__}, expected a list of numbers")
    return [_real_number(v) for v in list(value)[:limit]]


def _real_number(value) -> float:
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_complex() and value.dtype != torch.bool:
        return float(value.item())
    kind = getattr(getattr(value, "dtype", None), "kind", None)
    if type(value).__module__ == "numpy" and kind in ("i", "u", "f") and getattr(value, "size", 1) == 1:
        return float(value.item())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise ProbeFailure(f"returned a list holding {type(value).__name__}, expected numbers")


def _attempt(function):
    try:
        return {"value": function()}
    except Exception as error:
        return {"error": describe_error(error)}


def probe_compounding(p):
    """Task 2 on the plan's cases: the formula on factors, autograd on layers (chains.py), the classification.
    Every value is checked by the parent against its own computation: nothing here is believed."""
    formula, autograd, classify = (p.definition(n) for n in ("magnitude_by_formula", "magnitude_by_autograd", "classify_factor"))
    return {
        "formula": [_attempt(lambda: float_list(formula(factor, n), n + 2)) for factor, n in p.plan.chains],
        "autograd": [_attempt(lambda: float_list(autograd(chains_.torch_layer(spec), n), n + 2)) for spec, n in p.plan.layers],
        "classify": [_attempt(lambda: str(classify(f))[:40]) for f in p.plan.factors],
    }


PROBES = {
    "compounding": probe_compounding,
    "eval": probe_eval,
    "train": probe_train,
    "eval_seeds": probe_eval_seeds,
    "eval_other": probe_eval_other,
    "token": probe_token,
    "respond": probe_respond,
    "moved": probe_moved,
    "robust_small": probe_robust_small,
    "robust_batch": probe_robust_batch,
    "robust_double": probe_robust_double,
    "sweep": probe_sweep,
    "profile": probe_profile,
    "derivative": probe_derivative,
    "same_function": probe_same_function,
}
FORWARD_PROBES = tuple(name for name in PROBES if name != "compounding")
# Questions whose answers only some verdicts read, asked by the parent when one does (`grading.asking.Answers`),
# each group in a job of its own: `respond` and `moved` only for a block that differs from Pre-LN (the diagnosis, and
# the work its branches do); `token`, `derivative` and `same_function` only for a block whose forward the grader can
# neither match nor replay. Every probe starts from the same state (`run_probe`: torch's state reset, every seed the
# plan's), so where a question is asked changes nothing of its answer for a block that keeps no state between calls.
WHEN_NEEDED = (("respond", "moved"), ("token", "derivative", "same_function"))
ASKED_FIRST = tuple(name for name in PROBES if not any(name in group for group in WHEN_NEEDED))


def run_probe(name: str, p: Probing) -> dict:
    reset_torch_state()
    try:
        return {"ok": True, **PROBES[name](p)}
    except BaseException as error:  # student code may raise anything, SystemExit and KeyboardInterrupt included
        return {"ok": False, "error": describe_error(error)}
