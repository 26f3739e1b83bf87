"""Length-prefixed JSON frames, and tensors as plain data: what crosses between sandbox and parent.

Nothing here unpickles. A tensor travels as dtype, shape and base64 bytes; the parent reads every answer
strictly (`autograder.answers`), so a hostile child can send wrong numbers but never code.
"""
from __future__ import annotations

import base64
import json
import os

import numpy as np

MAX_FRAME_BYTES = 16_000_000
_DTYPES = {"float32": np.float32, "float64": np.float64, "bool": np.bool_, "int64": np.int64}


class ProtocolError(Exception):
    pass


def encode_tensor(tensor) -> dict:
    """A CPU copy of `tensor` as {"dtype", "shape", "data"}; other dtypes travel as float64."""
    array = tensor.detach().to("cpu").contiguous().numpy()
    if array.dtype.name not in _DTYPES:
        array = array.astype(np.float64)
    return {"dtype": array.dtype.name, "shape": list(array.shape), "data": base64.b64encode(array.tobytes()).decode()}


def frame(obj) -> bytes:
    data = json.dumps(obj).encode()
    return len(data).to_bytes(4, "big") + data


def write_frame(fd: int, obj) -> None:
    view = memoryview(frame(obj))
    while view:
        written = os.write(fd, view)
        view = view[written:]


class FrameReader:
    """Feed bytes in any pieces; take whole decoded frames out."""

    def __init__(self, limit: int = MAX_FRAME_BYTES):
        self.buffer = bytearray()
        self.limit = limit

    def feed(self, data: bytes) -> list:
        self.buffer.extend(data)
        frames = []
        while len(self.buffer) >= 4:
            size = int.from_bytes(self.buffer[:4], "big")
            if size > self.limit:
                raise ProtocolError(f"frame of {size} bytes is over the limit")
            if len(self.buffer) < 4 + size:
                break
            body = bytes(self.buffer[4:4 + size])
            del self.buffer[:4 + size]
            try:
                frames.append(json.loads(body))
            except (ValueError, UnicodeDecodeError, RecursionError):
                raise ProtocolError("a frame is not valid JSON, or nested too deeply") from None
        return frames


def read_frame(stream):
    """One frame from a blocking binary stream, or None at end of stream."""
    header = stream.read(4)
    if len(header) < 4:
        return None
    size = int.from_bytes(header, "big")
    if size > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame of {size} bytes is over the limit")
    body = stream.read(size)
    if len(body) < size:
        return None
    return json.loads(body)


def encode_observation(value):
    """Tensors anywhere inside dicts and lists become encoded tensors marked `__tensor__`."""
    import torch

    if isinstance(value, torch.Tensor):
        return {"__tensor__": True, **encode_tensor(value)}
    if isinstance(value, dict):
        return {str(k): encode_observation(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode_observation(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)[:200]
