"""Probes: run the student's definitions on seeded inputs and report what happened, as data.

A probe never judges. The parent runs the same probes on the reference solution and compares. Every
probe derives its weights and inputs from the plan's seed, so the same plan gives the same numbers on
both sides.
"""
from __future__ import annotations

import random
import traceback
from dataclasses import dataclass, field

import torch

from .parts import PART_NAMES, graded_block
from .recording import Recorder

GRADING_CFG = {"vocab_size": 101, "context_length": 8, "emb_dim": 32, "n_heads": 4, "n_layers": 2,
               "drop_rate": 0.1, "qkv_bias": False}
PROFILE_DEPTH = 24
PROFILE_SEED = 0          # the deep-stack check is calibrated on this exact seed (benchmarks/calibrate_profile.py)
DROP_P = 0.5


class ProbeFailure(Exception):
    """The student's code returned something a probe cannot use (wrong type, wrong shape...)."""


@dataclass
class Plan:
    seed: int
    device: str = "cpu"
    cfg: dict = field(default_factory=lambda: dict(GRADING_CFG))


class Probing:
    """What every probe needs: the student's names, the public kit, the plan."""

    def __init__(self, student: dict, kit: dict, plan: Plan):
        self.student, self.kit, self.plan = student, kit, plan
        self.notes: list[str] = []

    def definition(self, name: str):
        if name not in self.student:
            raise ProbeFailure(f"{name} is not defined: keep the name from the notebook")
        return self.student[name]

    def block(self, **part_options):
        cls = self.definition("TransformerBlock")
        return graded_block(cls, self.kit, self.plan.cfg, self.plan.seed, self.notes, **part_options).to(self.plan.device)

    def randn(self, shape, salt: int, dtype=torch.float32):
        generator = torch.Generator().manual_seed(self.plan.seed * 1000 + salt)
        return torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype=dtype, device=self.plan.device)

    def x(self, dtype=torch.float32):
        cfg = self.plan.cfg
        return 1.5 * self.randn((3, cfg["context_length"], cfg["emb_dim"]), salt=1, dtype=dtype) + 0.3


def tensor_out(value, like=None):
    if not isinstance(value, torch.Tensor):
        raise ProbeFailure(f"forward returned {type(value).__name__}, not a tensor")
    if like is not None and tuple(value.shape) != tuple(like.shape):
        raise ProbeFailure(f"forward returned shape {tuple(value.shape)}, expected {tuple(like.shape)}")
    return value


def _recorded_run(p: Probing, block, x):
    recorder = Recorder()
    for name in PART_NAMES:
        recorder.wrap(getattr(block, name), name)
    recorder.block_input = given = x.clone()   # a copy: writing into its input must not alter what we report
    with recorder.mode():
        y = tensor_out(block(given), x)
    calls = [{"name": c.name, "input": c.input, "output": c.output} for c in recorder.calls]
    return {"x": x, "y": y, "calls": calls, "events": recorder.events}


# --- the probes --------------------------------------------------------------------------------------

def probe_eval(p):
    """Eval mode, real components: the output and every component call with its input."""
    result = _recorded_run(p, p.block(drop_p=DROP_P).eval(), p.x())
    return {**result, "notes": list(p.notes)}


def probe_trace(p):
    """Train mode with a marking dropout, in float64: a trace whose every value can be told apart."""
    try:
        return {**_recorded_run(p, p.block(drop_p=DROP_P, marking=True).double().train(), p.x(torch.float64)),
                "dtype": "float64"}
    except Exception:
        return {**_recorded_run(p, p.block(drop_p=DROP_P, marking=True).train(), p.x()), "dtype": "float32"}


def probe_shortcut_zero(p):
    """Attention and feed-forward zeroed (biases too): a Pre-LN block must return its input."""
    x = p.x()
    return {"x": x, "y": tensor_out(p.block(drop_p=DROP_P, zero=("att", "ff")).eval()(x.clone()), x)}


def probe_train(p):
    """Train mode with real dropout, the global seed fixed just before the call."""
    block, x = p.block(drop_p=DROP_P).train(), p.x()
    torch.manual_seed(p.plan.seed + 11)
    return {"y": tensor_out(block(x.clone()), x)}


def probe_train_p1(p):
    """Train mode with p = 1.0: dropout removes each branch completely."""
    block, x = p.block(drop_p=1.0).train(), p.x()
    return {"x": x, "y": tensor_out(block(x.clone()), x)}


def probe_eval_seeds(p):
    """Eval mode under two different global seeds: dropout must be off."""
    block, x = p.block(drop_p=DROP_P).eval(), p.x()
    outputs = []
    for salt in (21, 22):
        torch.manual_seed(p.plan.seed + salt)
        outputs.append(tensor_out(block(x.clone()), x))
    return {"y_a": outputs[0], "y_b": outputs[1]}


def _part_params(block):
    return {f"{name}.{pname}": param for name in PART_NAMES for pname, param in getattr(block, name).named_parameters()}


def probe_grads(p):
    """Gradients of a fixed read-out loss, and a finite-difference check of the forward's own gradient."""
    block, x = p.block(drop_p=DROP_P).eval(), p.x().requires_grad_(True)
    y = tensor_out(block(x.clone()), x)     # a non-leaf copy: an in-place write is judged elsewhere
    readout = p.randn(y.shape, salt=3)
    (y * readout).sum().backward()
    grads = {name: param.grad for name, param in _part_params(block).items()}
    result = {"x_grad": x.grad, "param_grads": grads}
    try:
        result.update(_directional_derivatives(p))
    except Exception as error:
        result["directional_error"] = f"{type(error).__name__}: {error}"
    return result


def _directional_derivatives(p, eps: float = 1e-6):
    """d(loss) along one random direction of input and parameters: by autograd, and by central differences."""
    block = p.block(drop_p=DROP_P).double().eval()
    params = _part_params(block)
    x = p.x(torch.float64)
    v = p.randn(x.shape, salt=4, dtype=torch.float64)
    directions = {name: p.randn(param.shape, salt=5 + i, dtype=torch.float64) for i, (name, param) in enumerate(params.items())}

    def loss(inp):
        out = tensor_out(block(inp), inp)
        return (out * p.randn(out.shape, salt=3, dtype=torch.float64)).sum()

    x_leaf = x.clone().requires_grad_(True)
    loss(x_leaf.clone()).backward()
    auto = (x_leaf.grad * v).sum().item() if x_leaf.grad is not None else 0.0
    auto += sum((param.grad * directions[name]).sum().item() for name, param in params.items() if param.grad is not None)
    with torch.no_grad():
        values = []
        for sign in (1.0, -1.0):
            for name, param in params.items():
                param.add_(sign * eps * directions[name])
            values.append(loss(x + sign * eps * v).item())
            for name, param in params.items():
                param.sub_(sign * eps * directions[name])
    return {"directional_autograd": auto, "directional_numeric": (values[0] - values[1]) / (2 * eps)}


def probe_inplace(p):
    """The block input after the call, and how often it was written to."""
    block, x = p.block(drop_p=DROP_P).eval(), p.x()
    version = x._version
    tensor_out(block(x), x)
    return {"x_after": x, "version_delta": x._version - version}


def probe_profile(p):
    """Per-block gradient norms of a deep stack of the student's blocks (the notebook's measurement)."""
    cls, kit, cfg = p.definition("TransformerBlock"), p.kit, p.plan.cfg
    stack = kit["make_stack"](lambda: graded_block(cls, kit, cfg, PROFILE_SEED, random_norms=False, draw=False),
                              PROFILE_DEPTH, seed=PROFILE_SEED).to(p.plan.device)
    generator = torch.Generator().manual_seed(PROFILE_SEED + 1)
    x = torch.randn(2, cfg["context_length"], cfg["emb_dim"], generator=generator).to(p.plan.device)
    tensor_out(stack[0](x.clone()), x)
    profile = kit["gradient_profile"](stack, x, seed=PROFILE_SEED)
    return {"profile": [float(v) for v in profile][:PROFILE_DEPTH]}


def probe_robust_small(p):
    """A batch of one with fewer tokens than context_length."""
    x = p.x()[:1, : p.plan.cfg["context_length"] - 3].clone()
    return {"y": tensor_out(p.block(drop_p=DROP_P).eval()(x), x)}


def probe_robust_nograd(p):
    block, x = p.block(drop_p=DROP_P).eval(), p.x()
    with torch.no_grad():
        return {"y": tensor_out(block(x.clone()), x)}


def probe_robust_double(p):
    block, x = p.block(drop_p=DROP_P).double().eval(), p.x(torch.float64)
    y = tensor_out(block(x), x)
    return {"y": y, "dtype": str(y.dtype).removeprefix("torch.")}


def probe_robust_meta(p):
    """On the meta device: any move to a real device inside forward fails here, even without a GPU."""
    block, x = p.block(drop_p=DROP_P).eval().to("meta"), p.x().to("meta")
    y = tensor_out(block(x), x)
    return {"device": y.device.type, "shape": list(y.shape), "dtype": str(y.dtype).removeprefix("torch.")}


def compounding_cases(seed: int):
    rng = random.Random(seed)
    chains = [(2.0, 10), (0.5, 10), (1.0, 6), (round(rng.uniform(1.05, 1.6), 3), rng.randint(5, 14)),
              (round(rng.uniform(0.3, 0.95), 3), rng.randint(5, 14)), (0.9, 1)]
    factors = [1.0, 0.999, 1.001, 2.0, 0.5, 0.0, round(rng.uniform(0.1, 0.99), 3), round(rng.uniform(1.01, 3.0), 3)]
    return chains, factors


def _numbers(value, limit: int = 1000):
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().reshape(-1).tolist()
    if not isinstance(value, (list, tuple)):
        raise ProbeFailure(f"returned {type(value).__name__}, expected a list of numbers")
    return [float(v.item() if isinstance(v, torch.Tensor) else v) for v in list(value)[:limit]]


def _attempt(function):
    try:
        return {"value": function()}
    except Exception as error:
        return {"error": describe_error(error)}


def probe_compounding(p):
    chains, factors = compounding_cases(p.plan.seed)
    formula, autograd, classify = (p.definition(n) for n in ("magnitude_by_formula", "magnitude_by_autograd", "classify_factor"))
    return {
        "chains": [{"factor": f, "n": n,
                    "formula": _attempt(lambda: _numbers(formula(f, n))),
                    "autograd": _attempt(lambda: _numbers(autograd(f, n)))} for f, n in chains],
        "classify": [{"factor": f, **_attempt(lambda: str(classify(f))[:40])} for f in factors],
    }


PROBES = {
    "compounding": probe_compounding,
    "eval": probe_eval,
    "trace": probe_trace,
    "shortcut_zero": probe_shortcut_zero,
    "train": probe_train,
    "train_p1": probe_train_p1,
    "eval_seeds": probe_eval_seeds,
    "grads": probe_grads,
    "inplace": probe_inplace,
    "robust_small": probe_robust_small,
    "robust_nograd": probe_robust_nograd,
    "robust_double": probe_robust_double,
    "robust_meta": probe_robust_meta,
    "profile": probe_profile,
}
FORWARD_PROBES = tuple(name for name in PROBES if name != "compounding")


def full_precision_float32() -> None:
    """No TF32 (nor bf16) for float32 work, whichever of torch's two APIs switched it on: CUDA matmuls in
    TF32 keep 10 mantissa bits, far outside the comparison tolerances. The new API's settings go back to
    their defaults ('none': inherit) first, then the legacy flags go off: torch raises when the two disagree."""
    backends = torch.backends
    for knob in (backends, backends.cuda.matmul, backends.cudnn, getattr(backends.cudnn, "conv", None),
                 getattr(backends.cudnn, "rnn", None), backends.mkldnn, getattr(backends.mkldnn, "matmul", None),
                 getattr(backends.mkldnn, "conv", None), getattr(backends.mkldnn, "rnn", None)):
        if knob is not None and hasattr(knob, "fp32_precision"):       # torch >= 2.9
            knob.fp32_precision = "none"
    backends.cuda.matmul.allow_tf32 = False
    backends.cudnn.allow_tf32 = False


def reset_torch_state() -> None:
    """Undo global changes student code may have made (default dtype/device, grad mode, TF32)."""
    torch.set_default_dtype(torch.float32)
    torch.set_grad_enabled(True)
    full_precision_float32()
    try:
        torch.set_default_device(None)
    except Exception:
        pass


def describe_error(error: BaseException) -> dict:
    """Type, message and the innermost line of student code involved (cells are compiled as `<cell N>`)."""
    where = None
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        if frame.filename.startswith("<cell"):
            line = (frame.line or "").strip()
            where = f"{frame.filename.strip('<>')}, line {frame.lineno}" + (f": {line}" if line else "")
            break
    message = str(error)
    if isinstance(error, MemoryError) and not message:
        message = "out of memory: the grader's memory limit was reached"
    return {"type": type(error).__name__, "message": message[:400] + ("..." if len(message) > 400 else ""), "where": where}


def run_probe(name: str, p: Probing) -> dict:
    reset_torch_state()
    try:
        return {"ok": True, **PROBES[name](p)}
    except BaseException as error:  # student code may raise anything, SystemExit and KeyboardInterrupt included
        return {"ok": False, "error": describe_error(error)}
