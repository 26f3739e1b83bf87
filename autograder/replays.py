"""The grader's own recomputation of a student's forward: gradients and the deep-stack profile.

A named run (`dataflow.Flow`) is a small program of calls and sums. Replayed with the grader's own
components, it gives the gradients the student's code *should* have produced for the function it
demonstrably computed, and the profile a stack of such blocks *should* have. The child's reports must agree
with these: a detached path, a branch cut from autograd only in train mode, or a block that behaves
differently in a deep stack than alone all show as disagreement, and nothing the child claims is taken on
trust.
"""
from __future__ import annotations

import copy
import functools

import numpy as np
import torch

from .dataflow import Flow, ReplayedBlock, replay
from .harness.probes import Plan, Probing, deep_profile, part_params


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

    def _readout(self, shape) -> torch.Tensor:
        return Probing({}, self.kit, self.plan).randn(shape, self.plan.readout).cpu()

    @per_instance
    def gradients(self, mode: str) -> tuple[np.ndarray, dict]:
        """x's gradient and every component parameter's gradient of the plan's read-out loss, through the
        replayed flow of `mode` (raises ValueError when the flow cannot be replayed)."""
        flow: Flow = self.flows[mode]
        if flow is None or not flow.replayable:
            raise ValueError(flow.why_not_replayable() if flow is not None else "the run failed")
        parts = copy.deepcopy(self.parts)
        for part in parts.values():
            part.train(mode == "train")
            for param in part.parameters():
                param.requires_grad_(True)
                param.grad = None
        x = torch.as_tensor(flow.x, dtype=torch.float32).clone().requires_grad_(True)
        y = replay(flow, x, parts)
        if y.requires_grad:          # a forward that returns a constant has no gradient at all
            (y * self._readout(y.shape)).sum().backward()
        grads = {name: (p.grad.numpy().astype(np.float64) if p.grad is not None else np.zeros(tuple(p.shape)))
                 for name, p in part_params(parts).items()}
        x_grad = x.grad.numpy().astype(np.float64) if x.grad is not None else np.zeros(flow.x.shape)
        return x_grad, grads

    @functools.cached_property
    def profile(self) -> list[float]:
        """The deep-stack profile of blocks that compute the student's eval-mode flow (ValueError: cannot).
        Many students write the same program: it is computed once per program and stack (see `_PROFILES`)."""
        flow: Flow = self.flows["eval"]
        if flow is None or not flow.replayable:
            raise ValueError(flow.why_not_replayable() if flow is not None else "the run failed")
        if any(step.drops for step in flow.steps):
            raise ValueError("your forward is random in eval mode")
        if not flow.influences("x", minimum=1e-12) and "x" not in (flow.y_takes or {}):
            raise ValueError("your block's output does not depend on its input")
        key = (id(self.kit), self.plan.profile_seed, flow.signature())
        if key not in _PROFILES:
            plan = Plan(**{**self.plan.__dict__, "device": "cpu"})
            if len(_PROFILES) > 256:
                _PROFILES.clear()
            _PROFILES[key] = deep_profile(lambda parts: ReplayedBlock(flow, parts), self.kit, plan)
        return _PROFILES[key]


_PROFILES: dict = {}     # (kit namespace, stack seed, program signature) -> its profile
