"""Task 2 (compounding) answers: right ones in several styles (lists, tuples, NumPy arrays and tensors; reverse and
forward autograd), and the usual mistakes with the part they must lose and the phrase the message must contain."""
from __future__ import annotations

RIGHT = {
    "loop_product": """
        import math, torch

        def magnitude_by_formula(factor, n_layers):
            out, value = [], 1.0
            for _ in range(n_layers):
                value *= abs(factor)
                out.append(value)
            return out

        def magnitude_by_autograd(layer, n_layers):
            out = []
            for n in range(1, n_layers + 1):
                x = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
                y = x
                for _ in range(n):
                    y = layer(y)
                y.backward()
                out.append(abs(x.grad.item()))
            return out

        def classify_factor(factor):
            if math.isclose(abs(factor), 1.0):
                return "stable"
            return "vanishing" if abs(factor) < 1 else "exploding"
        """,
    "math_pow_and_tensors": """
        import math, torch

        def magnitude_by_formula(factor, n_layers):
            return [math.pow(abs(factor), k) for k in range(1, n_layers + 1)]

        def magnitude_by_autograd(layer, n_layers):
            x = torch.ones((), dtype=torch.float64, requires_grad=True)
            chain, grads = x, []
            for _ in range(n_layers):
                chain = layer(chain)
                grads.append(torch.autograd.grad(chain, x, retain_graph=True)[0].abs())
            return torch.stack(grads) if grads else torch.zeros(0, dtype=torch.float64)

        def classify_factor(factor):
            return {True: "Exploding", False: "vanishing"}[abs(factor) > 1] if abs(factor) != 1 else "STABLE"
        """,
    # NumPy arrays are lists of floats too; each layer's own factor measured by autograd, multiplied up by hand.
    "numpy_arrays_and_local_factors": """
        import numpy as np, torch

        def magnitude_by_formula(factor, n_layers):
            return np.abs(float(factor)) ** np.arange(1, n_layers + 1)

        def magnitude_by_autograd(layer, n_layers):
            value, total, out = 1.0, 1.0, []
            for _ in range(n_layers):
                y = torch.tensor(value, dtype=torch.float64, requires_grad=True)
                out_value = layer(y)
                (slope,) = torch.autograd.grad(out_value, y)
                total *= slope.item()
                value = out_value.item()
                out.append(abs(total))
            return np.array(out)

        def classify_factor(factor):
            return ["vanishing", "stable", "exploding"][int(np.sign(abs(factor) - 1)) + 1]
        """,
    # Forward-mode autograd: a dual number carries the derivative along the chain.
    "forward_mode": """
        import torch
        import torch.autograd.forward_ad as fwAD

        def magnitude_by_formula(factor, n_layers):
            return tuple(abs(factor) ** k for k in range(1, n_layers + 1))

        def magnitude_by_autograd(layer, n_layers):
            out = []
            with fwAD.dual_level():
                y = fwAD.make_dual(torch.tensor(1.0, dtype=torch.float64), torch.tensor(1.0, dtype=torch.float64))
                for _ in range(n_layers):
                    y = layer(y)
                    out.append(abs(fwAD.unpack_dual(y).tangent.item()))
            return out

        def classify_factor(factor):
            return "vanishing" if abs(factor) < 1 else "exploding" if abs(factor) > 1 else "stable"
        """,
}

SOLVED = """
        import math, torch

        def magnitude_by_formula(factor, n_layers):
            return [abs(factor) ** k for k in range(1, n_layers + 1)]

        def magnitude_by_autograd(layer, n_layers):
            x = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
            y, out = x, []
            for _ in range(n_layers):
                y = layer(y)
                out.append(torch.autograd.grad(y, x, retain_graph=True)[0].abs().item())
            return out

        def classify_factor(factor):
            return "vanishing" if abs(factor) < 1 else "exploding" if abs(factor) > 1 else "stable"
"""


def _replace(name: str, body: str) -> str:
    """The solved Task 2 with one function swapped for `body`."""
    start = SOLVED.index(f"        def {name}(")
    end = SOLVED.find("\n        def ", start + 1)
    return SOLVED[:start] + body.strip("\n") + "\n" + (SOLVED[end:] if end != -1 else "")


WRONG = [
    ("formula_starts_at_layer_0", "magnitude_by_formula", "one layer behind", _replace("magnitude_by_formula", """
        def magnitude_by_formula(factor, n_layers):
            return [abs(factor) ** k for k in range(n_layers)]""")),
    ("formula_includes_the_start", "magnitude_by_formula", "values: the list starts after layer 1", _replace("magnitude_by_formula", """
        def magnitude_by_formula(factor, n_layers):
            return [abs(factor) ** k for k in range(n_layers + 1)]""")),
    ("formula_sums", "magnitude_by_formula", "adding the factor", _replace("magnitude_by_formula", """
        def magnitude_by_formula(factor, n_layers):
            return [factor * k for k in range(1, n_layers + 1)]""")),
    ("formula_rounds", "magnitude_by_formula", "rounded", _replace("magnitude_by_formula", """
        def magnitude_by_formula(factor, n_layers):
            return [round(abs(factor) ** k, 4) for k in range(1, n_layers + 1)]""")),
    ("autograd_in_float32", "magnitude_by_autograd", "float64", _replace("magnitude_by_autograd", """
        def magnitude_by_autograd(layer, n_layers):
            x = torch.tensor(1.0, requires_grad=True)
            y, out = x, []
            for _ in range(n_layers):
                y = layer(y)
                out.append(torch.autograd.grad(y, x, retain_graph=True)[0].abs().item())
            return out""")),
    ("autograd_one_layer_short", "magnitude_by_autograd", "values: one per layer", _replace("magnitude_by_autograd", """
        def magnitude_by_autograd(layer, n_layers):
            x = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
            y, out = x, []
            for _ in range(n_layers - 1):
                y = layer(y)
                out.append(torch.autograd.grad(y, x, retain_graph=True)[0].abs().item())
            return out""")),
    ("autograd_returns_the_chain_values", "magnitude_by_autograd", "the chain's values", _replace("magnitude_by_autograd", """
        def magnitude_by_autograd(layer, n_layers):
            y, out = torch.tensor(1.0, dtype=torch.float64), []
            for _ in range(n_layers):
                y = layer(y)
                out.append(abs(y.item()))
            return out""")),
    ("autograd_records_each_layers_own_factor", "magnitude_by_autograd", "each layer's own factor", _replace("magnitude_by_autograd", """
        def magnitude_by_autograd(layer, n_layers):
            value, out = 1.0, []
            for _ in range(n_layers):
                y = torch.tensor(value, dtype=torch.float64, requires_grad=True)
                after = layer(y)
                out.append(torch.autograd.grad(after, y)[0].abs().item())
                value = after.item()
            return out""")),
    ("autograd_multiplies_by_the_layer", "magnitude_by_autograd", "apply it with y = layer(y)", _replace("magnitude_by_autograd", """
        def magnitude_by_autograd(layer, n_layers):
            x = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
            y, out = x, []
            for _ in range(n_layers):
                y = y * layer
                out.append(torch.autograd.grad(y, x, retain_graph=True)[0].abs().item())
            return out""")),
    ("one_counts_as_vanishing", "classify_factor", "expected 'stable'", _replace("classify_factor", """
        def classify_factor(factor):
            return "exploding" if abs(factor) > 1 else "vanishing\"""")),
    ("one_counts_as_exploding", "classify_factor", "expected 'stable'", _replace("classify_factor", """
        def classify_factor(factor):
            return "vanishing" if abs(factor) < 1 else "exploding\"""")),
    ("sign_not_size", "classify_factor", "a negative factor only flips the sign", _replace("classify_factor", """
        def classify_factor(factor):
            if factor == 1:
                return "stable"
            return "vanishing" if factor < 1 else "exploding\"""")),
    ("negative_magnitudes", "magnitude_by_formula", "some values are negative", _replace("magnitude_by_formula", """
        def magnitude_by_formula(factor, n_layers):
            return [factor ** k for k in range(1, n_layers + 1)]""")),
    ("autograd_copies_the_formula", "magnitude_by_autograd", "one fixed factor", _replace("magnitude_by_autograd", """
        def magnitude_by_autograd(layer, n_layers):
            factor = layer(torch.tensor(1.0, dtype=torch.float64)).item()     # what the first layer does to 1.0
            return magnitude_by_formula(factor, n_layers)""")),
    ("tolerant_boundary", "classify_factor", "returned 'stable'", _replace("classify_factor", """
        def classify_factor(factor):
            if abs(abs(factor) - 1) < 0.01:
                return "stable"
            return "vanishing" if abs(factor) < 1 else "exploding\"""")),
]
# Right wherever the lesson's examples go (so the students' own tests pass them), wrong at the edges of the domain
# that only the grader asks about: a factor of 0, a depth of 0.
EDGES = [
    ("formula_through_logarithms", "magnitude_by_formula", "math domain error", _replace("magnitude_by_formula", """
        def magnitude_by_formula(factor, n_layers):
            return [math.exp(k * math.log(abs(factor))) for k in range(1, n_layers + 1)]""")),
    ("autograd_stacks_an_empty_list", "magnitude_by_autograd", "non-empty", _replace("magnitude_by_autograd", """
        def magnitude_by_autograd(layer, n_layers):
            x = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
            y, out = x, []
            for _ in range(n_layers):
                y = layer(y)
                out.append(torch.autograd.grad(y, x, retain_graph=True)[0].abs())
            return torch.stack(out)""")),
]
