"""The pieces every answer is made of, read strictly: objects with exactly the fields allowed, text cut to size,
numbers, encoded tensors whose dtype, shape and bytes agree, and errors. Anything else raises `Malformed`, which
`answers` turns into that probe's protocol error.
"""

from __future__ import annotations

import base64
import math

import numpy as np

_DTYPES = {"float32": np.float32, "float64": np.float64}
_TEXT = 500


class Malformed(Exception):
    """One answer broke the protocol; the message says where."""


def _field(value: dict, key: str, where: str):
    if key not in value:
        raise Malformed(f"{where}.{key} is missing")
    return value[key]


def _dict(value, where: str, allowed: set) -> dict:
    if not isinstance(value, dict):
        raise Malformed(f"{where} is not an object")
    extra = set(value) - allowed
    if extra:
        raise Malformed(f"{where} has unexpected fields ({', '.join(sorted(map(str, extra))[:3])})")
    return value


def _text(value, where: str, optional: bool = True) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise Malformed(f"{where} is not text")
    return value[:_TEXT]


def tensor(value, where: str, shape: tuple | None = None, max_numel: int | None = None) -> np.ndarray:
    """An encoded tensor: dtype, shape and raw bytes that agree, within the size the plan allows."""
    payload = _dict(value, where, {"__tensor__", "dtype", "shape", "data"})
    if payload.get("__tensor__") is not True or payload.get("dtype") not in ("float32", "float64"):
        raise Malformed(f"{where} is not a float tensor")
    dims = payload.get("shape")
    if not isinstance(dims, list) or len(dims) > 6 or not all(type(n) is int and 0 <= n <= 1 << 20 for n in dims):
        raise Malformed(f"{where} has a bad shape")
    if shape is not None and tuple(dims) != tuple(shape):
        raise Malformed(f"{where} has shape {tuple(dims)}, not {tuple(shape)}")
    if max_numel is not None and math.prod(dims) > max_numel:
        raise Malformed(f"{where} has {math.prod(dims)} elements, more than {max_numel}")
    data = payload.get("data")
    dtype = np.dtype(_DTYPES[payload["dtype"]])
    if not isinstance(data, str) or len(data) > 4 * (math.prod(dims) * dtype.itemsize + 3) // 3 + 4:
        raise Malformed(f"{where} has data that does not match its shape")
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError:
        raise Malformed(f"{where} has data that is not base64") from None
    if len(raw) != math.prod(dims) * dtype.itemsize:
        raise Malformed(f"{where} has data that does not match its shape")
    return np.frombuffer(raw, dtype=dtype).reshape(dims).astype(np.float64)


def _optional_tensor(value, where: str, shape: tuple) -> np.ndarray | None:
    return None if value is None else tensor(value, where, shape)


def error_info(value, where: str = "error") -> dict:
    info = _dict(value, where, {"type", "message", "where"})
    return {key: _text(info.get(key), f"{where}.{key}") or "" for key in ("type", "message")} | {
        "where": _text(info.get("where"), f"{where}.where")
    }


def _number(value, where: str) -> float:
    if type(value) is bool or not isinstance(value, (int, float)):
        raise Malformed(f"{where} is not a number")
    return float(value)


def _short_list(value, where: str, limit: int) -> list:
    if not isinstance(value, list) or len(value) > limit:
        raise Malformed(f"{where} is not a list of at most {limit} entries")
    return value
