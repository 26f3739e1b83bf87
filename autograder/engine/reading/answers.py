"""The child's answers, read strictly: every probe's answer must have exactly the form the plan asks for.

Everything the sandbox sends is untrusted. `read_answer` walks only the fields a probe's answer may have,
with the types, shapes and sizes the plan fixes (each piece read by `strict`); it never recurses into whatever
else was sent. Anything else (a missing field, an extra call, a tensor of the wrong shape, a list too long)
makes that probe's answer a protocol error: 0 for what depends on it, with a message, and never an exception in
the parent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from autograder.engine.questions.plan import BATCH, BIG_BATCH, MOVED_RUNS, PROFILE_DEPTH, RESPONDING, SHORT, Plan
from autograder.engine.questions.probes import PROBES
from autograder.engine.questions.recording import DEVICE_MOVES, MAX_CALLS, MAX_EVENTS, MAX_LAYER_CALLS, RESPONSE_CALLS
from .measured import read_derivative, read_same_function
from .sweep import read_sweep
from .strict import Malformed, _dict, _field, _number, _optional_tensor, _short_list, _text, error_info, tensor

CALL_NAMES = {"norm1", "norm2", "att", "ff", "drop_shortcut", "dropout", "layer_norm"}
LAYERED = {"norm1", "norm2", "att", "ff", "drop_shortcut"}  # components with layers of their own
EVENT_OPS = {"detach", ".data", "inplace", "factory", "random", *DEVICE_MOVES}


@dataclass(frozen=True)
class Expect:
    """The shapes a plan's answers must have."""

    x: tuple
    small: tuple
    params: dict  # "att.W_query.weight" -> shape
    chains: tuple
    factors: int
    layers: tuple = ()
    batch: tuple = ()
    sweep: tuple = ()  # per block of the sweep, per call: (its input's shape, train mode?, input gradient asked?)

    @classmethod
    def of(cls, plan: Plan, params: dict) -> "Expect":
        cfg = plan.cfg
        x = (BATCH, cfg["context_length"], cfg["emb_dim"])
        return cls(
            x,
            (1, cfg["context_length"] - SHORT, cfg["emb_dim"]),
            dict(params),
            tuple(plan.chains),
            len(plan.factors),
            tuple(plan.layers),
            (BIG_BATCH, cfg["context_length"], cfg["emb_dim"]),
            tuple(
                tuple(
                    ((c["batch"], c["tokens"], block["cfg"]["emb_dim"]), c["mode"] == "train", c["grad"] == "need")
                    for c in block["calls"]
                )
                for block in plan.sweep
            ),
        )

    @property
    def numel(self) -> int:
        return math.prod(self.x)


def _calls(value, expect: Expect, most: int = MAX_CALLS) -> list[dict]:
    if not isinstance(value, list) or len(value) > most:
        raise Malformed(f"calls is not a list of at most {most} calls")
    calls, limit = [], 16 * expect.numel
    for i, raw in enumerate(value):
        where = f"calls[{i}]"
        call = _dict(raw, where, {"name", "kind", "input", "output", "training", "via", "where", "no_grad", "grad_out"})
        name, kind = _field(call, "name", where), _field(call, "kind", where)
        if name not in CALL_NAMES or kind not in ("module", "function"):
            raise Malformed(f"{where} names no component of the block")
        training, via = call.get("training"), call.get("via")
        if training is not None and type(training) is not bool or via not in (None, "module", "function"):
            raise Malformed(f"{where} has a bad mode")
        out = tensor(_field(call, "output", where), f"{where}.output", max_numel=limit)
        calls.append(
            {
                "name": name,
                "kind": kind,
                "training": training,
                "via": via,
                "input": tensor(_field(call, "input", where), f"{where}.input", max_numel=limit),
                "output": out,
                "where": _text(call.get("where"), f"{where}.where"),
                "no_grad": call.get("no_grad") is True,
                "grad_out": _optional_tensor(call.get("grad_out"), f"{where}.grad_out", out.shape),  # the output's
            }
        )
    return calls


def _layers(value, expect: Expect) -> list[dict]:
    """A component's own layers called by the forward itself: the component, the layer's place among its modules,
    what it received and gave, and how many component calls were recorded before it."""
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_LAYER_CALLS:
        raise Malformed(f"layers is not a list of at most {MAX_LAYER_CALLS} calls")
    calls, limit = [], 16 * expect.numel
    for i, raw in enumerate(value):
        where = f"layers[{i}]"
        call = _dict(raw, where, {"name", "layer", "input", "output", "at"})
        name, layer, at = (_field(call, key, where) for key in ("name", "layer", "at"))
        if name not in LAYERED or type(layer) is not int or not 0 < layer < 64 or type(at) is not int or not 0 <= at <= MAX_CALLS:
            raise Malformed(f"{where} names no layer of the block's components")
        calls.append(
            {
                "name": name,
                "layer": layer,
                "at": at,
                "input": tensor(_field(call, "input", where), f"{where}.input", max_numel=limit),
                "output": tensor(_field(call, "output", where), f"{where}.output", max_numel=limit),
            }
        )
    return calls


def _events(value, expect: Expect) -> list[dict]:
    if not isinstance(value, list) or len(value) > MAX_EVENTS:
        raise Malformed(f"events is not a list of at most {MAX_EVENTS} events")
    events = []
    for i, raw in enumerate(value):
        where = f"events[{i}]"
        event = _dict(raw, where, {"op", "name", "on_input", "where", "value", "consumer"})
        if event.get("op") not in EVENT_OPS:
            raise Malformed(f"{where} is not a known operation")
        clean = {
            "op": event["op"],
            "name": _text(event.get("name"), f"{where}.name"),
            "where": _text(event.get("where"), f"{where}.where"),
            "consumer": _text(event.get("consumer"), f"{where}.consumer"),
            "on_input": event.get("on_input") is True,
        }
        if event.get("value") is not None:
            clean["value"] = tensor(event["value"], f"{where}.value", max_numel=16 * expect.numel)
        events.append(clean)
    return events


def _recorded_run(answer: dict, expect: Expect) -> dict:
    _dict(answer, "answer", {"ok", "y", "calls", "notes", "x_grad", "param_grads", "grad_error", "events", "counts", "layers"})
    out = {
        "y": tensor(_field(answer, "y", "answer"), "y", expect.x),
        "counts": _counts(answer.get("counts"), "counts"),
        "calls": _calls(_field(answer, "calls", "answer"), expect),
        "events": _events(_field(answer, "events", "answer"), expect),
        "layers": _layers(answer.get("layers"), expect),
        "notes": [_text(n, "notes[]", False) for n in _short_list(answer.get("notes", []), "notes", 5)],
    }
    if answer.get("grad_error") is not None:
        out["grad_error"] = error_info(answer["grad_error"], "grad_error")
    else:
        out["x_grad"] = _optional_tensor(answer.get("x_grad"), "x_grad", expect.x)
        grads = _dict(_field(answer, "param_grads", "answer"), "param_grads", set(expect.params))
        if set(grads) != set(expect.params):
            raise Malformed("param_grads does not name every parameter of the block's components")
        out["param_grads"] = {
            name: _optional_tensor(grads[name], f"param_grads.{name}", shape) for name, shape in expect.params.items()
        }
    return out


def _plain_run(answer: dict, expect: Expect, where: str = "answer") -> dict:
    """A recorded run without gradients (the `eval_other` and `token` questions, each of `respond`'s)."""
    _dict(answer, where, {"ok", "y", "calls", "counts", "layers"} if where == "answer" else {"y", "calls", "counts", "layers"})
    return {
        "y": tensor(_field(answer, "y", where), f"{where}.y", expect.x),
        "counts": _counts(answer.get("counts"), f"{where}.counts"),
        "layers": _layers(answer.get("layers"), expect),
        "calls": _calls(_field(answer, "calls", where), expect, MAX_CALLS if where == "answer" else RESPONSE_CALLS),
    }


def _counts(value, where: str) -> dict:
    """How many times the run called each component, recorded or not (used only to say whether it ran)."""
    if value is None:
        return {}
    counts = _dict(value, where, CALL_NAMES)
    if not all(type(n) is int and 0 <= n <= 1 << 20 for n in counts.values()):
        raise Malformed(f"{where} holds something other than counts")
    return dict(counts)


def _attempt(value, where: str, read) -> dict:
    attempt = _dict(value, where, {"value", "error"})
    if "error" in attempt:
        return {"error": error_info(attempt["error"], f"{where}.error")}
    return {"value": read(_field(attempt, "value", where))}


def _compounding(answer: dict, expect: Expect) -> dict:
    _dict(answer, "answer", {"ok", "formula", "autograd", "classify"})
    cases = {"formula": expect.chains, "autograd": expect.layers}
    lists = {key: _short_list(_field(answer, key, "answer"), key, len(asked)) for key, asked in cases.items()}
    factors = _short_list(_field(answer, "classify", "answer"), "classify", expect.factors)
    if any(len(lists[key]) != len(asked) for key, asked in cases.items()) or len(factors) != expect.factors:
        raise Malformed("the answers do not match the grader's list of cases")
    out = {}
    for key, asked in cases.items():
        out[key] = []
        for i, ((case, n), raw) in enumerate(zip(asked, lists[key])):
            where = f"{key}[{i}]"
            numbers = lambda v, w=where, n=n: [_number(x, w) for x in _short_list(v, w, n + 2)]  # noqa: E731
            out[key].append({"case": case, "n": n, **_attempt(raw, where, numbers)})
    out["classify"] = [
        _attempt(raw, f"classify[{i}]", lambda v, i=i: _text(v, f"classify[{i}]", False)[:40]) for i, raw in enumerate(factors)
    ]
    return out


def _read(probe: str, answer: dict, expect: Expect) -> dict:
    if probe == "sweep":
        return read_sweep(answer, expect.sweep)
    if probe in ("eval", "train"):
        return _recorded_run(answer, expect)
    if probe == "compounding":
        return _compounding(answer, expect)
    if probe in ("derivative", "same_function"):
        return (read_derivative if probe == "derivative" else read_same_function)(answer, expect)
    if probe in ("eval_other", "token"):
        return _plain_run(answer, expect)
    if probe == "respond":
        _dict(answer, "answer", {"ok", *RESPONDING})
        return {name: _plain_run(_field(answer, name, "answer"), expect, name) for name in RESPONDING}
    if probe == "moved":
        _dict(answer, "answer", {"ok", *MOVED_RUNS})
        return {name: _plain_run(_field(answer, name, "answer"), expect, name) for name in MOVED_RUNS}
    if probe == "profile":
        _dict(answer, "answer", {"ok", "profile"})
        values = _short_list(_field(answer, "profile", "answer"), "profile", PROFILE_DEPTH)
        if len(values) != PROFILE_DEPTH:
            raise Malformed(f"profile has {len(values)} entries, not {PROFILE_DEPTH}")
        return {"profile": [_number(v, "profile[]") for v in values]}
    fields = {
        "eval_seeds": {"y_a": expect.x, "y_b": expect.x},
        "robust_small": {"y": expect.small},
        "robust_batch": {"y": expect.batch},
        "robust_double": {"y": expect.x},
    }[probe]
    extra = {"dtype"} if probe == "robust_double" else set()
    _dict(answer, "answer", {"ok", *fields, *extra})
    out = {key: tensor(_field(answer, key, "answer"), key, shape) for key, shape in fields.items()}
    if extra:
        out["dtype"] = _text(_field(answer, "dtype", "answer"), "dtype", False)[:20]
    return out


def read_answer(probe: str, answer, expect: Expect) -> dict:
    """The probe's answer as checked data: {"ok": True, ...} or {"ok": False, "error": {...}}. Never raises."""
    if probe not in PROBES:
        raise KeyError(probe)
    try:
        if not isinstance(answer, dict) or type(answer.get("ok")) is not bool:
            raise Malformed("no answer came back")
        if not answer["ok"]:
            _dict(answer, "answer", {"ok", "error"})
            return {"ok": False, "error": error_info(_field(answer, "error", "answer"))}
        return {"ok": True, **_read(probe, answer, expect)}
    except Malformed as problem:
        return {
            "ok": False,
            "error": {
                "type": "ProtocolError",
                "where": None,
                "message": f"the answer to the grader's '{probe}' question was malformed ({problem})",
            },
        }
    except Exception as problem:  # the reader's own failure on an answer it should have read or refused
        return {
            "ok": False,
            "error": {
                "type": "GraderError",
                "where": None,
                "message": f"the grader could not read its '{probe}' question's answer (a "
                f"grader error, reported: {type(problem).__name__}: {problem})"[:400],
            },
        }
