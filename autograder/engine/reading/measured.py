"""Reading the answers of `questions/measured.py`, strictly, like every other answer."""

from __future__ import annotations

from autograder.engine.questions.measured import DIRECTIONS, STEPS
from .strict import Malformed, _dict, _field, _number, _short_list, error_info, tensor


def read_derivative(answer: dict, expect) -> dict:
    _dict(answer, "answer", {"ok", "eval", "train"})
    out = {}
    for mode in ("eval", "train"):
        run = _dict(_field(answer, mode, "answer"), mode, {"x_grad", "param_grads", "moved"})
        grads = _dict(_field(run, "param_grads", mode), f"{mode}.param_grads", set(expect.params))
        moved = _dict(_field(run, "moved", mode), f"{mode}.moved", set(DIRECTIONS))
        if set(grads) != set(expect.params) or set(moved) != set(DIRECTIONS):
            raise Malformed(f"{mode} does not answer for every parameter and every direction")
        out[mode] = {
            "x_grad": tensor(_field(run, "x_grad", mode), f"{mode}.x_grad", expect.x),
            "param_grads": {
                name: tensor(grads[name], f"{mode}.param_grads.{name}", shape) for name, shape in expect.params.items()
            },
            "moved": {direction: _pairs(moved[direction], f"{mode}.moved.{direction}") for direction in DIRECTIONS},
        }
    return out


def _pairs(value, where: str) -> list[list[float]]:
    pairs = _short_list(value, where, len(STEPS))
    if len(pairs) != len(STEPS):
        raise Malformed(f"{where} does not hold one pair of losses per step")
    out = []
    for pair in pairs:
        numbers = _short_list(pair, where, 2)
        if len(numbers) != 2:
            raise Malformed(f"{where} does not hold one pair of losses per step")
        out.append([_number(n, where) for n in numbers])
    return out


def read_same_function(answer: dict, expect) -> dict:
    _dict(answer, "answer", {"ok", "short", "longer", "double"})
    shapes = {"short": expect.small, "longer": expect.batch, "double": expect.x}
    out = {}
    for key, shape in shapes.items():
        run = _dict(_field(answer, key, "answer"), key, {"value", "error"})
        if "error" in run:
            out[key] = {"ok": False, "error": error_info(run["error"], f"{key}.error")}
        else:
            out[key] = {"ok": True, "y": tensor(_field(run, "value", key), key, shape)}
    return out
