"""Task 2's autograd part, forged: submissions that try to earn `magnitude_by_autograd` without measuring the
gradient of the chain they are given. Each stands for a family:

* a throw-away `backward()` (autograd "ran", on something else) around a formula;
* poking the grader: counters, flags or the probe itself, patched from inside the child, or the grader's own
  arithmetic borrowed from the child's memory;
* a formula passed off as autograd: one factor taken from the layer, the chain's values, the layer's linear
  coefficient read from the closure;
* an estimate of the slope instead of a derivative: finite differences, and the complex-step trick.

Every one keeps `magnitude_by_formula` and `classify_factor` right, so the honest baseline is the same
submission with `magnitude_by_autograd` left as released: they must score no more than that.
"""
from __future__ import annotations

from .task2_variants import _replace

UNFINISHED = _replace("magnitude_by_autograd", '''
        def magnitude_by_autograd(layer, n_layers):
            raise NotImplementedError("Task 2: write magnitude_by_autograd")''')

FORGED = {
    "throwaway_backward_around_a_guessed_factor": _replace("magnitude_by_autograd", '''
        def magnitude_by_autograd(layer, n_layers):
            torch.ones((), requires_grad=True).mul(2).backward()          # autograd ran, on something else
            torch.autograd.grad(torch.ones((), requires_grad=True) * 3, [torch.ones((), requires_grad=True)],
                                allow_unused=True)
            factor = layer(torch.tensor(1.0, dtype=torch.float64)).item()
            return magnitude_by_formula(factor, n_layers)'''),
    "pokes_counters_and_flags": _replace("magnitude_by_autograd", '''
        def magnitude_by_autograd(layer, n_layers):
            import sys
            for module in list(sys.modules.values()):
                if getattr(module, "__name__", "").startswith("autograder"):
                    for name in list(vars(module)):
                        value = getattr(module, name)
                        if isinstance(value, type) and hasattr(value, "count"):
                            value.count = 10 ** 6                       # "autograd ran a million times"
                    module.autograd_ran = True
            slope = layer(torch.tensor(1.0, dtype=torch.float64)).item()
            return [abs(slope) ** k for k in range(1, n_layers + 1)]'''),
    "patched_probe_answers_the_formula": _replace("magnitude_by_autograd", '''
        def magnitude_by_autograd(layer, n_layers):
            return [abs(layer(torch.tensor(1.0, dtype=torch.float64)).item()) ** k for k in range(1, n_layers + 1)]''')
    + '''
        import sys
        _probes = sys.modules.get("autograder.engine.questions.probes")
        if _probes is not None:                   # the child's own harness: answer |a| ** k for every layer
            _honest = _probes.PROBES["compounding"]
            def _forged(p):
                answer = _honest(p)
                answer["autograd"] = [{"value": [abs(spec[0]) ** k for k in range(1, n + 1)]}
                                      for spec, n in p.plan.layers]
                return answer
            _probes.PROBES["compounding"] = _forged
''',
    "chain_values_as_gradients": _replace("magnitude_by_autograd", '''
        def magnitude_by_autograd(layer, n_layers):
            x = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
            y, out = x, []
            for _ in range(n_layers):
                y = layer(y)
                out.append(abs(y.item()))
            y.backward()                                                  # autograd ran, once, at the end
            return out'''),
    "linear_coefficient_read_from_the_closure": _replace("magnitude_by_autograd", '''
        def magnitude_by_autograd(layer, n_layers):
            cells = [c.cell_contents for c in (layer.__closure__ or ())]
            numbers = [c for c in cells if isinstance(c, float)]
            factor = numbers[0] if numbers else layer(torch.tensor(1.0, dtype=torch.float64)).item()
            return [abs(factor) ** k for k in range(1, n_layers + 1)]'''),
    # The grader's own chain-rule arithmetic, if the child held it, would give exact values without autograd.
    "borrows_the_graders_arithmetic": _replace("magnitude_by_autograd", '''
        def magnitude_by_autograd(layer, n_layers):
            import sys
            cells = [c.cell_contents for c in (layer.__closure__ or ())]
            a = next((c for c in cells if isinstance(c, float)), 1.0)
            names = {torch.erf: "erf", torch.tanh: "tanh", torch.atan: "atan", torch.sigmoid: "sigmoid", torch.sin: "sin"}
            terms = tuple((names.get(f, "sin"), b, c) for cell in cells if isinstance(cell, list) for f, b, c in cell)
            for module in list(sys.modules.values()):
                for name in ("by_hand", "expected", "exact_magnitudes"):
                    helper = getattr(module, name, None)
                    if callable(helper) and getattr(module, "__name__", "").startswith("autograder"):
                        try:
                            return list(helper((a, terms), n_layers)[0])
                        except Exception:
                            pass
            return [abs(a) ** k for k in range(1, n_layers + 1)]'''),
    "finite_differences": _replace("magnitude_by_autograd", '''
        def magnitude_by_autograd(layer, n_layers, h=1e-6):
            def chain(start, n):
                y = torch.tensor(start, dtype=torch.float64)
                for _ in range(n):
                    y = layer(y)
                return y.item()
            return [abs(chain(1 + h, n) - chain(1 - h, n)) / (2 * h) for n in range(1, n_layers + 1)]'''),
    "complex_step": _replace("magnitude_by_autograd", '''
        def magnitude_by_autograd(layer, n_layers, h=1e-30):
            out = []
            for n in range(1, n_layers + 1):
                y = torch.tensor(complex(1.0, h), dtype=torch.complex128)
                for _ in range(n):
                    y = layer(y)
                out.append(abs(y.imag.item() / h))
            return out'''),
}
