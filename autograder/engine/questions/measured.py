"""Questions whose answers the grader can judge without computing what the block should give.

Where the grader can neither match a block to Pre-LN nor replay its program, it still knows two things about any
block, whatever it computes, and these questions ask for the values that show them:

* `probe_derivative`: autograd's gradients are the derivative of what the forward returns. In float64 the child
  runs the block on the grader's input, then on that input moved a small step each way along directions the
  grader draws (for the block input, and for each component's parameters); the parent compares the slope of
  the read-out loss between the two with the slope the reported gradients give.
* `probe_same_function`: a block computes one function of each sequence, whatever the batch around it and its
  precision. The child runs it on the grader's input's first sequence cut short, on the batch with two of its
  sequences again, and in float64; the parent compares each with the eval run's output.

The child only answers: every direction, step and input is the plan's, and the parent decides.
"""

from __future__ import annotations

import torch

from .cells import describe_error, tensor_out
from .parts import part_params
from .plan import BATCH, BIG_BATCH, SHORT, Plan

# Three step sizes: a slope two of them agree on is the derivative; a step that crosses a jump (a rounding, a kink)
# disagrees with the others, and a smaller step crosses one less often. Where no two agree, nothing is judged.
STEPS = (1e-7, 1e-6, 1e-5)
DIRECTIONS = ("input", "parameters")  # the block input; every component's parameters at once
REPEATED = BIG_BATCH - BATCH  # sequences the longer batch repeats: it has the robustness question's batch size


def directions(shapes: dict, plan: Plan, mode: str) -> dict:
    """The grader's two directions for `mode`, each of unit length: {"input": tensor} and {"parameters": {dotted
    name: tensor}}, drawn from the plan's read-out seed over `shapes` ("x" and every parameter, by dotted name) in
    sorted order. The child moves along them, and the parent draws the same."""
    generator = torch.Generator().manual_seed(plan.readout * 1009 + (0 if mode == "eval" else 7))
    drawn = {name: torch.randn(tuple(shapes[name]), generator=generator, dtype=torch.float64) for name in sorted(shapes)}
    x = drawn.pop("x")
    length = sum(float((value * value).sum()) for value in drawn.values()) ** 0.5 or 1.0
    return {"input": x / x.norm(), "parameters": {name: value / length for name, value in drawn.items()}}


def probe_derivative(p) -> dict:
    """Per mode: autograd's gradients of the read-out loss in float64, and the loss on the input (or on every
    component's parameters) moved by each step, both ways, along the grader's directions."""
    answer = {}
    for mode in ("eval", "train"):
        block = p.block().double().train(mode == "train")
        x = p.x(torch.float64)
        leaf = x.clone().requires_grad_(True)
        y = p.call(block, leaf.clone())
        readout = p.randn(y.shape, p.plan.readout, torch.float64)

        def loss(given, block=block, readout=readout) -> float:
            return float((tensor_out(p.call(block, given), given).detach().double() * readout).sum())

        if y.requires_grad:  # a forward that cuts every path gives no gradient: autograd's is then zero
            (y * readout).sum().backward()
        params = part_params(block)
        drawn = directions({"x": x.shape, **{name: param.shape for name, param in params.items()}}, p.plan, mode)
        v = drawn["input"].to(x.device)
        answer[mode] = {
            "x_grad": leaf.grad.detach() if leaf.grad is not None else torch.zeros_like(x),
            "param_grads": {
                name: (param.grad.detach() if param.grad is not None else torch.zeros_like(param))
                for name, param in params.items()
            },
            "moved": {
                "input": [[loss(x + step * v), loss(x - step * v)] for step in STEPS],
                "parameters": [_moved_parameters(params, drawn["parameters"], step, lambda: loss(x)) for step in STEPS],
            },
        }
    return answer


def _moved_parameters(params: dict, directions: dict, step: float, loss) -> list[float]:
    """The loss with the parameters moved by +step and by -step along `directions`, each put back as it was."""
    kept = {name: params[name].detach().clone() for name in directions}
    out = []
    try:
        for sign in (1.0, -1.0):
            with torch.no_grad():
                for name, direction in directions.items():
                    params[name].copy_(kept[name] + sign * step * direction.to(kept[name].device))
            out.append(loss())
    finally:
        with torch.no_grad():
            for name in directions:
                params[name].copy_(kept[name])
    return out


def probe_same_function(p) -> dict:
    """Eval mode: the block on the first sequence of the grader's input without its last `SHORT` tokens, on the
    input with its first `REPEATED` sequences again after it, and in float64 on the input itself; each run on its
    own (an error in one leaves the others' answers)."""
    x = p.x()

    def run(block, given):
        try:
            return {"value": p.call(block, given).detach().clone()}
        except Exception as error:  # the student's forward: what it raised is this run's answer
            return {"error": describe_error(error)}

    block = p.block().eval()
    return {
        "short": run(block, x[:1, : x.shape[1] - SHORT].clone()),
        "longer": run(block, torch.cat([x, x[:REPEATED]])),
        "double": run(p.block().double().eval(), x.double()),
    }
