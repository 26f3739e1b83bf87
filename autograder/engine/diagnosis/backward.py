"""Pre-LN's equations run backward: where a forward whose values are Pre-LN's passes back another gradient.

Each of Pre-LN's equations (`steps.EQUATIONS`) makes a boundary value as a sum of earlier ones, so the chain rule
runs it backward: each term receives the gradient of the value it makes, times its coefficient, and a component's
input receives what the component passes back for the gradient at its output (its vector-Jacobian product, which
the grader computes with its own component on the input the call recorded). The child keeps the gradient that
reached each call's output and the block input's (`questions.recording`); the grader sets each against what the
chain rule gives from the gradients recorded after it. The boundary nearest the output where the two differ is
where the gradient left Pre-LN's: a detach, a torch.no_grad() block, a trip through NumPy, a gradient scaled on its
way back. Each check is local, so a cut further down does not hide one nearer the output.

Said only of a run that calls Pre-LN's components once each, in order (a dropout may be left out), whose recorded
values hold every equation; anything else is unknown (None), and its gradients are judged without a cause.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from autograder.engine.questions.parts import part_params
from autograder.engine.facts import Backward
from autograder.engine.ledger import DROPS as BEFORE  # each dropout, by the component whose output it receives
from autograder.engine.steps import EQUATIONS
from autograder.engine.reading.dataflow import DROPOUTS
from autograder.engine.tolerance import GRADIENTS, REPLAYED, close

CHAIN = ("norm1", "att", "drop1", "norm2", "ff", "drop2")  # the calls of Pre-LN's forward, in its order
# The boundaries whose gradient the child keeps, nearest the output first
KEPT = ("drop2.out", "ff.out", "norm2.out", "drop1.out", "att.out", "norm1.out", "x")


def _chain(calls: list) -> dict | None:
    """The run's calls as Pre-LN's, by `CHAIN` name: one each, in order; None where the run made other calls."""
    found, rest = {}, list(calls)
    for name in CHAIN:
        if rest and (rest[0]["name"] in DROPOUTS if name in BEFORE else rest[0]["name"] == name):
            found[name] = rest.pop(0)
        elif name not in BEFORE:
            return None
    return None if rest else found


class _Unread(Exception):
    pass


def _vjp(name: str, call: dict, grad: np.ndarray, parts: dict, tol: float) -> np.ndarray:
    """What component `name` passes back to its input for `grad` at its output, at the input `call` recorded."""
    if name in BEFORE:  # a dropout acts elementwise: kept values scaled by one factor, the rest zero
        ratio = _ratio(call)
        kept = ratio[ratio != 0]
        if kept.size and not close(kept, np.full_like(kept, kept.mean()), tol):
            raise _Unread
        return grad * ratio
    given = torch.as_tensor(call["input"], dtype=torch.float32).requires_grad_(True)
    with torch.enable_grad():
        out = parts[name](given)
        if not close(out.detach().double().numpy(), call["output"], tol, REPLAYED):
            raise _Unread  # not the grader's component: what it passes back is not known
        (back,) = torch.autograd.grad(out, given, torch.as_tensor(grad, dtype=torch.float32))
    return back.double().numpy()


def _ratio(call: dict) -> np.ndarray:
    """What a dropout call multiplied each value by: its output over its input (0 where the input is 0)."""
    given, out = call["input"], call["output"]
    return np.divide(out, given, out=np.zeros_like(out), where=given != 0)


def _users(boundary: str) -> list[tuple[str, float]]:
    """The values `boundary` is a term of, each with its coefficient there."""
    return [(made, coef) for made, terms in EQUATIONS.values() for term, coef in terms if term == boundary]


def gradient_cause(run: dict, x: np.ndarray, parts: dict, readout: np.ndarray, tol: float, mode: str) -> Backward | None:
    """Where the gradients `run` recorded first leave the chain rule, nearest the output; None where they do not, or
    where the run is not Pre-LN's (`tol`: the device's tolerance for values)."""
    calls = _chain(run.get("calls") or [])
    if calls is None or "x_grad" not in run:
        return None
    values, kept = {"x": np.asarray(x, dtype=np.float64), "y": run["y"]}, {"x": run["x_grad"]}
    for name in CHAIN:
        call = calls.get(name) or calls[BEFORE[name]]  # a dropout left out gives back its input
        values[f"{name}.in"] = call["input"] if name in calls else call["output"]
        values[f"{name}.out"], kept[f"{name}.out"] = call["output"], call.get("grad_out")
    if not all(close(values[made], sum(c * values[t] for t, c in terms), tol) for made, terms in EQUATIONS.values()):
        return None
    if kept["x"] is None:
        kept["x"] = np.zeros_like(values["x"])  # the block input is in the graph: no gradient reached it
    own: dict = {"y": readout}

    def passed(made: str) -> np.ndarray:  # what a component passes back to its input, for the gradient at its output
        if made not in own:
            name = made.split(".")[0]
            out = kept[f"{name}.out"]
            own[made] = _vjp(name, calls[name], out, parts, tol) if name in calls else out  # a dropout left out: as is
        return own[made]

    def arriving(boundary: str) -> np.ndarray:  # the chain rule's gradient at `boundary`, from the kept ones after it
        mine = passed(boundary) if boundary == "y" or boundary.endswith(".in") else 0.0
        return mine + sum(c * arriving(made) for made, c in _users(boundary))

    def paths(boundary: str) -> list[tuple[tuple, np.ndarray]]:  # per path: (the use it goes through, its gradient)
        users = _users(boundary)
        if len(users) == 1 and not boundary.endswith(".in"):
            ((made, c),) = users
            return [(use, c * g) for use, g in paths(made)] if made != "y" else []
        mine = [((boundary, boundary.split(".")[0]), passed(boundary))] if boundary.endswith(".in") and users else []
        return mine + [((boundary, made), c * arriving(made)) for made, c in users]

    outside: list = []  # values outside autograd's graph, nearest the output first: each may be where it was cut
    try:
        for boundary in KEPT:
            got, expected = kept[boundary], arriving(boundary)
            if got is None:  # it carries no gradient back: read on as if the chain rule's had reached it
                kept[boundary] = expected
                outside.append((boundary, 0.0))
            elif not close(got, expected, tol, GRADIENTS):
                found = _found(boundary, got, expected, paths(boundary), tol)
                if found and _users(boundary) == [("y", 1.0)]:  # the last branch's gradient is the output's: either cut
                    found.append(("y", found[0][1]))
                cut = next((cut for cut in found + outside if _replayed(run, x, calls, parts, readout, tol, *cut)), None)
                return None if cut is None else Backward(mode, *_place(cut[0]), cut[1])
    except (_Unread, RuntimeError, ValueError):  # a value no component of the grader's takes: nothing is said
        return None
    return None


def _found(boundary: str, got: np.ndarray, expected: np.ndarray, paths: list, tol: float) -> list:
    """Where the gradient may have changed, as (the value whose every use, or the one use (value, user), scaled it; by
    what factor): the gradient at `boundary` is a multiple of the chain rule's, or one path's is with the others whole."""
    factor = _factor(got, expected, tol)
    if factor is not None:
        return [(boundary, factor)]
    for use, path in paths if len(paths) > 1 else []:
        factor = _factor(got - (expected - path), path, tol)
        if factor is not None:
            return [(use, factor)]
    return []


def _replayed(run: dict, x: np.ndarray, calls: dict, parts: dict, readout: np.ndarray, tol: float, cut, factor) -> bool:
    """Does Pre-LN, run by its equations on the grader's components (each dropout as the run's dropped), with the
    gradient scaled by `factor` at `cut`, give the gradients the run reported, the block input's and every
    parameter's?"""
    parts = {name: copy.deepcopy(part).requires_grad_(True) for name, part in parts.items()}
    leaf = torch.as_tensor(x, dtype=torch.float32).clone().requires_grad_(True)
    value = {"x": leaf}

    def use(term: str, user: str) -> torch.Tensor:
        v = value[term]
        return factor * v + (1 - factor) * v.detach() if cut in (term, (term, user)) else v

    for made, terms in EQUATIONS.values():
        value[made] = sum(c * use(t, made) for t, c in terms)
        name = made.split(".")[0]
        if name in CHAIN:
            given = use(made, name)
            if name in BEFORE:  # what the run's dropout did to each value, or nothing where it made no call
                ratio = _ratio(calls[name]) if name in calls else 1.0
                value[f"{name}.out"] = given * torch.as_tensor(ratio, dtype=torch.float32)
            else:
                value[f"{name}.out"] = parts[name](given)
    (use("y", "out") * torch.as_tensor(readout, dtype=torch.float32)).sum().backward()
    pairs = [(run["x_grad"], leaf)] + [(run["param_grads"].get(name), p) for name, p in part_params(parts).items()]
    return all(close(_or_zeros(given, t), _or_zeros(t.grad, t), tol, GRADIENTS) for given, t in pairs)


def _or_zeros(grad, like: torch.Tensor) -> np.ndarray:
    if grad is None:
        return np.zeros(tuple(like.shape))
    return grad.detach().double().numpy() if isinstance(grad, torch.Tensor) else grad


def _factor(got: np.ndarray, path: np.ndarray, tol: float) -> float | None:
    """The number c with got = c * path, where there is one."""
    size = float(np.sum(path * path))
    factor = float(np.sum(got * path)) / size if size > 0 else 0.0
    return factor if close(got, factor * path, tol, GRADIENTS) else None


def _place(cut) -> tuple[str, str | None]:
    """(value, user) of a cut: a boundary (every use of it) or one use of it."""
    return (cut, None) if isinstance(cut, str) else cut
