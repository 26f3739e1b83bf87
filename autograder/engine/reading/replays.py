"""The grader's own recomputation of a student's forward: gradients, the deep stack, other inputs, silenced
branches, and how much the output depends on the input through each branch.

A named run (`dataflow.Flow`) is a small program (`program.Program`). Run with the grader's own components
it gives the gradients the student's code *should* have produced for the function it demonstrably computed,
the profile a stack of such blocks *should* have, and its outputs on inputs the student's code was asked
about later. The child's answers must agree with these: nothing it claims is taken on trust.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import replace

import numpy as np
import torch

from autograder.engine.questions.plan import Plan
from autograder.engine.questions.probes import Probing, part_params
from autograder.engine.questions.stack import deep_profile
from .program import Program, in_mode, live, run, shape_free


def _trainable(parts: dict, train: bool) -> dict:
    parts = copy.deepcopy(parts)
    for part in parts.values():
        part.train(train)
        for param in part.parameters():
            param.requires_grad_(True)
            param.grad = None
    return parts


def param_gradients(
    program: Program, x: np.ndarray, parts: dict, readout: torch.Tensor, masks: dict | None = None, train: bool = False
) -> tuple[np.ndarray, dict]:
    """x's gradient and every component parameter's gradient of the read-out loss through `program`."""
    parts = _trainable(parts, train)
    leaf = torch.as_tensor(x, dtype=torch.float32).clone().requires_grad_(True)
    y, _ = run(program, leaf, parts, masks=masks)
    if y.requires_grad:  # a forward that returns a constant has no gradient at all
        (y * readout).sum().backward()
    grads = {
        name: (p.grad.numpy().astype(np.float64) if p.grad is not None else np.zeros(tuple(p.shape)))
        for name, p in part_params(parts).items()
    }
    x_grad = leaf.grad.numpy().astype(np.float64) if leaf.grad is not None else np.zeros(x.shape)
    return x_grad, grads


class ReplayedBlock(torch.nn.Module):
    """A block whose forward is a program, on the five components it is given (for deep stacks)."""

    def __init__(self, program: Program, parts: dict):
        super().__init__()
        self.program = program
        self.parts = torch.nn.ModuleDict(parts)

    def forward(self, x):
        return run(self.program, x, dict(self.parts))[0]


def path_weights(program: Program, x: np.ndarray, parts: dict, readout: torch.Tensor) -> dict:
    """How strongly the output depends on each token's content through attention and through the feed-forward
    network: for every token, the size of the read-out's gradient with respect to that token that disappears when
    that branch's outputs are held fixed (the response to perturbing that one token), less its mean over the token's
    features (a token's mean is one number: a branch that sees only means, the input's global mean say, does not
    depend on the token's content). Arrays of one value per token."""

    def grad(**cuts):
        leaf = torch.as_tensor(x, dtype=torch.float32).clone().requires_grad_(True)
        y, _ = run(program, leaf, parts, **cuts)
        if not y.requires_grad:
            return torch.zeros_like(leaf)
        (g,) = torch.autograd.grad((y * readout).sum(), leaf, allow_unused=True)
        return torch.zeros_like(leaf) if g is None else g

    full = grad()
    found = {}
    for name in ("att", "ff"):
        through = (full - grad(cut_outputs=(name,))).double()
        through = through - through.mean(dim=-1, keepdim=True)
        found[name] = torch.linalg.norm(through, dim=-1).reshape(-1).numpy()
    return found


def per_instance(method):
    """`functools.cache` for a method, with the cache on the instance: it goes when the instance goes (a
    class-level cache would keep every submission's evidence alive for as long as the grader runs)."""
    key = f"_cache_{method.__name__}"

    @functools.wraps(method)
    def cached(self, *args):
        memo = self.__dict__.setdefault(key, {})
        if args not in memo:
            memo[args] = method(self, *args)
        return memo[args]

    return cached


class Replays:
    def __init__(self, flows: dict, parts: dict, plan: Plan, kit: dict):
        self.flows, self.parts, self.plan, self.kit = flows, parts, plan, kit

    @functools.cached_property
    def readout(self) -> torch.Tensor:
        flow = next(f for f in self.flows.values() if f is not None)
        return Probing({}, self.kit, Plan(**{**self.plan.__dict__, "device": "cpu"})).randn(flow.x.shape, self.plan.readout).cpu()

    def program(self, mode: str) -> Program:
        flow = self.flows.get(mode)
        if flow is None:
            raise ValueError("that run failed")
        return flow.program()

    @per_instance
    def gradients(self, mode: str) -> tuple[np.ndarray, dict]:
        """Gradients through the replayed flow of `mode` (ValueError when it cannot be replayed)."""
        flow = self.flows[mode]
        return param_gradients(self.program(mode), flow.x, self.parts, self.readout, flow.masks(), mode == "train")

    @functools.cached_property
    def profile(self) -> list[float]:
        """The deep-stack profile of blocks that compute the student's eval-mode program (ValueError: cannot).
        Many students write the same program: it is computed once per program and stack (see `_PROFILES`)."""
        program = without_dropout(self.program("eval"))  # a stack is measured with dropout off, as in eval mode
        key = (id(self.kit), self.plan.profile_seed, _program_key(program))
        if key not in _PROFILES:
            plan = Plan(**{**self.plan.__dict__, "device": "cpu"})
            if len(_PROFILES) > 256:
                _PROFILES.clear()
            try:
                _PROFILES[key] = deep_profile(lambda parts: ReplayedBlock(program, parts), self.kit, plan)
            except RuntimeError as error:  # a block whose output does not depend on its input, say
                cut = "does not require grad" in str(error)  # autograd's words for an output outside its graph
                why = "what it returns does not depend on its input through autograd" if cut else str(error)[:80]
                raise ValueError(f"a stack of it has no gradient to measure: {why}") from None
        return _PROFILES[key]

    def output(self, x: np.ndarray, dtype=torch.float32, float32_numbers: bool = False) -> np.ndarray:
        """What the student's eval-mode program gives for another input (ValueError: it cannot be run there).
        `float32_numbers`: its coefficients as float32 numbers (a student's own float32 parameter or tensor keeps
        float32's value after .double(); a Python number is exact in float64): a coefficient's dtype is a hypothesis
        too."""
        program = self.program("eval")
        if float32_numbers:
            single = lambda takes: {k: float(np.float32(c)) for k, c in takes.items()}  # noqa: E731
            program = Program([replace(op, takes=single(op.takes)) for op in program.ops], single(program.out), program.name)
        if any(op.name == "drop" for op in program.ops):
            raise ValueError("your forward is random in eval mode")
        if tuple(x.shape) != tuple(self.flows["eval"].x.shape) and not shape_free(program):
            raise ValueError(
                "your forward works on pieces of the block the grader cannot carry over to an input of another shape"
            )
        parts = self._parts(dtype)
        with torch.no_grad():
            y, _ = run(program, torch.as_tensor(x, dtype=dtype), parts)
        return y.numpy().astype(np.float64)

    @per_instance
    def _parts(self, dtype) -> dict:
        return self.parts if dtype == torch.float32 else {k: copy.deepcopy(v).to(dtype) for k, v in self.parts.items()}

    def silenced(self) -> np.ndarray:
        """The eval program's output with attention and the feed-forward network silenced (every weight 0)."""
        parts = copy.deepcopy(self.parts)
        with torch.no_grad():
            for name in ("att", "ff"):
                for param in parts[name].parameters():
                    param.zero_()
            y, _ = run(self.program("eval"), torch.as_tensor(self.flows["eval"].x, dtype=torch.float32), parts)
        return y.numpy().astype(np.float64)

    @functools.cached_property
    def weights(self) -> dict:
        """How much the eval output depends on each token's content through each branch, as a fraction of Pre-LN's
        (1: as much): the median over tokens of the ratio of the two (`path_weights`), so that a branch that depends
        on a few tokens only, or on none, has little weight."""
        from autograder.engine.reading.script import PRE_LN, compile_script

        flow = self.flows["eval"]
        reference = path_weights(
            live(in_mode(compile_script(PRE_LN, self.plan.drop_p), "eval")), flow.x, self.parts, self.readout
        )
        mine = path_weights(self.program("eval"), flow.x, self.parts, self.readout)
        return {name: _median_ratio(mine[name], reference[name]) for name in mine}


def _median_ratio(mine: np.ndarray, reference: np.ndarray) -> float:
    """The median over tokens of mine / reference, over the tokens where Pre-LN depends on the token at all."""
    live = reference > 1e-12 * max(float(reference.max(initial=0.0)), 1e-300)
    return float(np.median(mine[live] / reference[live])) if live.any() else 0.0


def without_dropout(program: Program) -> Program:
    """The program with every dropout left out (for a block whose dropout acts even in eval mode)."""
    return in_mode(
        Program([replace(op, scale=None) if op.name == "drop" else op for op in program.ops], dict(program.out), program.name),
        "eval",
    )


def _program_key(program: Program) -> tuple:
    from .program import signature

    places = tuple(p.tobytes() for op in program.ops for p in (op.pieces or ()))
    return signature(program), places


_PROFILES: dict = {}  # (kit namespace, stack seed, program signature) -> its profile
