"""Task 2's chains: the per-layer functions the grader hands `magnitude_by_autograd`, and its own answer.

A layer is written down as a spec, `(a, ((op, b, c), ...))`, meaning

    layer(y) = a * y + b1 * op1(c1 * y) + b2 * op2(c2 * y) + ...

A spec with no terms is Task 2's constant factor `a`. The others mix in functions whose derivatives the
lesson never gives (erf, tanh, atan, sigmoid) and a tiny, fast sine: it moves the chain's values by about a
millionth but its slope by several percent, so only an exact derivative gets the magnitudes right (a finite
difference is off by 1e-6 or more), and erf has no complex version, so a complex-step trick fails too.

The child builds the torch function (`torch_layer`). The magnitudes the grader expects are computed by the trusted
parent alone, by the chain rule in plain floating point (`checks/compounding.by_hand`): that arithmetic is never
loaded in the child, so student code cannot borrow it.
"""

from __future__ import annotations

import random

import torch

START = 1.0  # every chain starts from x = 1.0

OPS = {"erf": torch.erf, "tanh": torch.tanh, "atan": torch.atan, "sigmoid": torch.sigmoid, "sin": torch.sin}


def as_spec(raw) -> tuple:
    """A spec as the plan stores it (lists after a round trip through JSON) back to tuples, checked."""
    a, terms = raw
    spec = (float(a), tuple((str(op), float(b), float(c)) for op, b, c in terms))
    if any(op not in OPS for op, _, _ in spec[1]):
        raise ValueError(f"unknown operation in layer spec {raw!r}")
    return spec


def constant(factor: float) -> tuple:
    return (float(factor), ())


def draw(rng: random.Random) -> tuple:
    """A smooth layer whose local factor changes with y, between about 0.4 and 1.7 in size."""
    a = rng.choice((-1, 1)) * round(rng.uniform(0.85, 1.2), 3)
    return (
        a,
        (
            ("erf", round(rng.uniform(-0.15, 0.15), 3), round(rng.uniform(0.5, 1.5), 3)),
            (rng.choice(("tanh", "atan", "sigmoid")), round(rng.uniform(-0.1, 0.1), 3), round(rng.uniform(0.5, 1.5), 3)),
            ("sin", round(rng.uniform(1.0, 2.0), 2) * 1e-6, float(rng.randrange(20_000, 40_000))),
        ),
    )


def torch_layer(spec: tuple):
    """The layer as a function of a tensor (what the student's `magnitude_by_autograd` receives)."""
    a, terms = spec
    functions = [(OPS[op], b, c) for op, b, c in terms]

    def layer(y):
        out = a * y
        for function, b, c in functions:
            out = out + b * function(c * y)
        return out

    return layer


def describe(spec: tuple) -> str:
    """The layer in the words a message uses: `0.93*y - 0.12*erf(1.2*y) + 1.5e-06*sin(31000*y)`."""
    a, terms = spec
    text = f"{a:g}*y"
    for op, b, c in terms:
        text += f" {'-' if b < 0 else '+'} {abs(b):g}*{op}({c:g}*y)"
    return text
