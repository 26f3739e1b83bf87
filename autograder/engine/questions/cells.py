"""Turning cells into definitions, and what student code leaves behind: its errors, said in its own terms, what
it returned that a probe cannot use, and torch's global state, reset after every cell and before every probe.

The trusted parent loads the kit and the reference the same way, so every side turns notebook cells into
definitions alike.
"""

from __future__ import annotations

import builtins
import linecache
import traceback

import torch


def full_precision_float32() -> None:
    """No TF32 (nor bf16) for float32 work, whichever of torch's two APIs switched it on: CUDA matmuls in
    TF32 keep 10 mantissa bits, far outside the comparison tolerances. The new API's settings go back to
    their defaults ('none': inherit) first, then the legacy flags go off: torch raises when the two disagree."""
    backends = torch.backends
    for knob in (
        backends,
        backends.cuda.matmul,
        backends.cudnn,
        getattr(backends.cudnn, "conv", None),
        getattr(backends.cudnn, "rnn", None),
        backends.mkldnn,
        getattr(backends.mkldnn, "matmul", None),
        getattr(backends.mkldnn, "conv", None),
        getattr(backends.mkldnn, "rnn", None),
    ):
        if knob is not None and hasattr(knob, "fp32_precision"):  # torch >= 2.9
            knob.fp32_precision = "none"
    backends.cuda.matmul.allow_tf32 = False
    backends.cudnn.allow_tf32 = False


def reset_torch_state() -> None:
    """Undo global changes student code may have made (default dtype/device, grad mode, TF32)."""
    torch.set_default_dtype(torch.float32)
    torch.set_grad_enabled(True)
    full_precision_float32()
    try:
        torch.set_default_device(None)
    except Exception:
        pass


def seed_random(seed: int, device: str = "cpu") -> None:
    """Seed torch's global random numbers before a call of the student's forward, for the device it runs on (the
    CPU's generator, and CUDA's on a GPU). `torch.manual_seed` would also queue a seed for CUDA on a machine
    without it, and record the call's stack for that: a few milliseconds each time, on every probe."""
    torch.default_generator.manual_seed(int(seed))
    if str(device).startswith("cuda"):
        torch.cuda.manual_seed(int(seed))


def cell_where(filename: str, lineno: int | None) -> str:
    """`cell N, line L: its text` for a line of a cell compiled as `<cell N>` (its text is in linecache, put there
    by `load_cells`)."""
    line = linecache.getline(filename, lineno).strip() if lineno else ""
    return f"{filename.strip('<>')}, line {lineno}" + (f": {line}" if line else "")


def describe_error(error: BaseException) -> dict:
    """Type, message and the innermost line of student code involved (cells are compiled as `<cell N>`)."""
    where = None
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        if frame.filename.startswith("<cell"):
            where = cell_where(frame.filename, frame.lineno)
            break
    message = str(error)
    if isinstance(error, MemoryError) and not message:
        message = "out of memory: the grader's memory limit was reached"
    return {"type": type(error).__name__, "message": message[:400] + ("..." if len(message) > 400 else ""), "where": where}


def load_cells(cells, namespace: dict | None = None) -> tuple[dict, list[dict]]:
    """Execute (label, code) cells in order, one namespace; a failing cell is recorded and skipped."""
    namespace = {"__name__": "__main__", "__builtins__": builtins} if namespace is None else namespace
    errors = []
    for label, code in cells:
        filename = f"<{label}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        try:
            exec(compile(code, filename, "exec"), namespace)
        except SyntaxError as error:
            errors.append(
                {
                    "cell": label,
                    "type": "SyntaxError",
                    "message": f"{error.msg} (line {error.lineno})",
                    "where": f"{label}, line {error.lineno}: {(error.text or '').strip()}",
                }
            )
        except BaseException as error:  # SystemExit, KeyboardInterrupt: the cell ends, loading goes on
            errors.append({"cell": label, **describe_error(error)})
        reset_torch_state()
    return namespace, errors


class ProbeFailure(Exception):
    """The student's code returned something a probe cannot use (wrong type, wrong shape...)."""


def tensor_out(value, like=None):
    if not isinstance(value, torch.Tensor):
        raise ProbeFailure(f"forward returned {type(value).__name__}, not a tensor")
    if like is not None and tuple(value.shape) != tuple(like.shape):
        raise ProbeFailure(f"forward returned shape {tuple(value.shape)}, expected {tuple(like.shape)}")
    return value
