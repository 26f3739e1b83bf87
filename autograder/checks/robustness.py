"""Robustness: the forward behaves the same for other batch and context sizes, without autograd, in float64,
and on the input's device. Each part compares the student's forward with itself, so a wrong but robust
forward keeps these points."""
from __future__ import annotations

from . import PASS, Evidence, difference, error_text, fail

NAME = "forward_robustness"
DEVICE_MOVES = ("cpu", "cuda", "to", "numpy", "item", "tolist")


def _moves(evidence: Evidence) -> list[str]:
    return sorted({e["op"] for e in evidence.obs("eval").get("events", []) if e.get("op") in DEVICE_MOVES})


def evaluate(evidence: Evidence) -> dict:
    run = evidence.obs("eval")
    if not run["ok"]:
        message = error_text(run)
        return {part: fail(message) for part in ("batch of one, short context", "under torch.no_grad()",
                                                  "float64 after .double()", "stays on the input's device")}
    y = run["y"]
    outcomes = {}
    small = evidence.obs("robust_small")
    tokens = small.get("y").shape[1] if small.get("ok") else 0
    if not small["ok"]:
        outcomes["batch of one, short context"] = fail(f"With a batch of one and fewer tokens than context_length: {error_text(small)}.")
    elif evidence.close(small["y"], y[:1, :tokens]):
        outcomes["batch of one, short context"] = PASS
    else:
        outcomes["batch of one, short context"] = fail(
            "A batch of one with fewer tokens than context_length gave different values for the same tokens than "
            f"the full batch did ({difference(small['y'], y[:1, :tokens])}): the forward must not depend on the "
            "batch or sequence size.")
    nograd = evidence.obs("robust_nograd")
    if not nograd["ok"]:
        outcomes["under torch.no_grad()"] = fail(f"Under torch.no_grad(): {error_text(nograd)}.")
    else:
        outcomes["under torch.no_grad()"] = PASS if evidence.close(nograd["y"], y) else fail(
            f"Under torch.no_grad() the output changed ({difference(nograd['y'], y)}).")
    double = evidence.obs("robust_double")
    if not double["ok"]:
        outcomes["float64 after .double()"] = fail(
            f"After block.double() with a float64 input: {error_text(double)}. Create any new tensor with the "
            "input's dtype (e.g. torch.zeros_like(x)).")
    elif double["dtype"] != "float64":
        outcomes["float64 after .double()"] = fail(f"After block.double() the output was {double['dtype']}, not float64.")
    else:
        outcomes["float64 after .double()"] = PASS if evidence.close(double["y"], y, 10) else fail(
            f"In float64 the output differs from float32 by more than rounding ({difference(double['y'], y)}).")
    meta = evidence.obs("robust_meta")
    moves = _moves(evidence)
    how = f" Your forward calls {', '.join('.' + m + '()' for m in moves)}." if moves else ""
    if not meta["ok"]:
        outcomes["stays on the input's device"] = fail(
            f"On another device than the CPU your forward failed ({error_text(meta)}).{how} Keep every tensor on "
            "x.device: no .cpu(), .numpy() or .item() inside forward, and create new tensors with device=x.device.")
    elif meta["device"] != "meta":
        outcomes["stays on the input's device"] = fail(
            f"For an input on another device your forward returned a tensor on '{meta['device']}'.{how} Keep "
            "every tensor on x.device.")
    else:
        outcomes["stays on the input's device"] = PASS
    return outcomes
