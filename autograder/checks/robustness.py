"""Robustness: the forward behaves the same for other batch and context sizes, without autograd, in float64,
and on the input's device. Each part compares the student's forward with itself (so a wrong but robust
forward keeps these points), and pays only for a block that did the work (`Evidence.work`)."""
from __future__ import annotations

from ..harness.recording import DEVICE_MOVES, device_suspects
from . import PASS, Evidence, difference, error_text, fail

NAME = "forward_robustness"
SMALL, NOGRAD, DOUBLE, DEVICE = ("batch of one, short context", "under torch.no_grad()", "float64 after .double()",
                                 "stays on the input's device")


def _moves(evidence: Evidence) -> list[str]:
    return sorted({e["op"] for e in evidence.obs("eval").get("events", []) if e.get("op") in DEVICE_MOVES})


def _random_in_eval(evidence: Evidence) -> bool:
    seeds = evidence.obs("eval_seeds")
    flow = evidence.flows.get("eval")
    return (flow is not None and any(step.drops for step in flow.steps)) or (
        seeds["ok"] and not evidence.close(seeds["y_a"], seeds["y_b"]))


def evaluate(evidence: Evidence) -> dict:
    run = evidence.obs("eval")
    if not run["ok"]:
        message = error_text(run)
        return {part: fail(message) for part in (SMALL, NOGRAD, DOUBLE, DEVICE)}
    y = run["y"]
    loose = _random_in_eval(evidence)     # a random forward is compared by form only (dropout's check says why)
    outcomes = {}
    small = evidence.obs("robust_small")
    if not small["ok"]:
        outcomes[SMALL] = fail(f"With a batch of one and fewer tokens than context_length: {error_text(small)}.")
    else:
        tokens = small["y"].shape[1]
        outcomes[SMALL] = PASS if loose or evidence.close(small["y"], y[:1, :tokens]) else fail(
            "A batch of one with fewer tokens than context_length gave different values for the same tokens than the "
            f"full batch did ({difference(small['y'], y[:1, :tokens])}): the forward must not depend on the batch or "
            "sequence size.")
    nograd = evidence.obs("robust_nograd")
    if not nograd["ok"]:
        outcomes[NOGRAD] = fail(f"Under torch.no_grad(): {error_text(nograd)}.")
    else:
        outcomes[NOGRAD] = PASS if loose or evidence.close(nograd["y"], y) else fail(
            f"Under torch.no_grad() the output changed ({difference(nograd['y'], y)}).")
    double = evidence.obs("robust_double")
    if not double["ok"]:
        outcomes[DOUBLE] = fail(f"After block.double() with a float64 input: {error_text(double)}. Create any new tensor "
                                "with the input's dtype (e.g. torch.zeros_like(x)).")
    elif double["dtype"] != "float64":
        outcomes[DOUBLE] = fail(f"After block.double() the output was {double['dtype']}, not float64.")
    else:
        outcomes[DOUBLE] = PASS if loose or evidence.close(double["y"], y, 10) else fail(
            f"In float64 the output differs from float32 by more than rounding ({difference(double['y'], y)}).")
    meta = evidence.obs("robust_meta")
    moves = _moves(evidence)
    how = f" Your forward calls {', '.join('.' + m + '()' for m in moves)}." if moves else ""
    if meta["ok"] and meta["screened"]:
        suspects = device_suspects(run.get("events", []), evidence.sources)
        outcomes[DEVICE] = PASS if not suspects else fail(
            "Your code skipped the device check although its forward made a CPU tensor or moved one "
            f"({suspects[0]}): the grader's own screening disagrees with what it was told.")
    elif not meta["ok"]:
        outcomes[DEVICE] = fail(f"On another device than the CPU your forward failed ({error_text(meta)}).{how} Keep "
                                "every tensor on x.device: no .cpu() or .numpy() inside forward, and create new tensors "
                                "with device=x.device.")
    elif meta["device"] != "meta":
        outcomes[DEVICE] = fail(f"For an input on another device your forward returned a tensor on '{meta['device']}'."
                                f"{how} Keep every tensor on x.device.")
    else:
        outcomes[DEVICE] = PASS
    return {part: evidence.gate(outcome) for part, outcome in outcomes.items()}
