"""Length-prefixed JSON frames, tensors as plain data, and the control channel that passes descriptors.

Nothing here unpickles. A tensor travels as dtype, shape and base64 bytes; the parent reads every answer
strictly (`autograder.engine.reading.answers`), so a hostile child can send wrong numbers but never code.

The control channel between the parent and the pristine server (`inside.server`) is a SOCK_SEQPACKET Unix
socket: one JSON message per packet, with at most one file descriptor beside it (`send_message`,
`receive_message`). That is how a job's own channel reaches the process that runs the job without its data
ever passing through the server.
"""

from __future__ import annotations

import array
import base64
import json
import os
import select
import socket


MAX_FRAME_BYTES = 16_000_000
MAX_MESSAGE_BYTES = 1 << 20  # one control message (the kit's public code is the largest)
MAX_ANSWER_BYTES = 24 << 20  # what one submission's children report in all (the solution's answers: 0.3 MB)


class ProtocolError(Exception):
    pass


class Unencodable(Exception):
    """A value the grader cannot read (complex numbers, a tensor without values): the student is told so."""


def encode_tensor(tensor) -> dict:
    """A CPU copy of `tensor` as {"dtype", "shape", "data"}, in float32 or float64 whatever its dtype was.

    Half precision, bfloat16 and the float8 types widen to float32 exactly; integers and booleans travel as
    float64 (exact up to 2**53). Complex values, and tensors that hold no values (meta), are refused with
    `Unencodable`, whose message names what was found."""
    import torch

    value = torch.Tensor.detach(tensor)
    if value.is_meta:
        raise Unencodable("a tensor on the meta device, which holds no values")
    if value.is_complex():
        raise Unencodable(f"a {str(value.dtype).removeprefix('torch.')} tensor (complex numbers)")
    if value.is_quantized:
        value = value.dequantize()
    if value.layout != torch.strided:
        value = value.to_dense()
    if value.dtype not in (torch.float32, torch.float64):
        value = value.to(torch.float32 if value.is_floating_point() else torch.float64)
    array_ = value.to("cpu").contiguous().numpy()
    return {"dtype": array_.dtype.name, "shape": list(array_.shape), "data": base64.b64encode(array_.tobytes()).decode()}


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
            body = bytes(self.buffer[4 : 4 + size])
            del self.buffer[: 4 + size]
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


def encode_observation(value, where: str = "answer"):
    """Tensors anywhere inside dicts and lists become encoded tensors marked `__tensor__`. Raises
    `Unencodable` naming where a value the grader cannot read was found (`calls[2].output`, say)."""
    import torch

    if isinstance(value, torch.Tensor):
        try:
            return {"__tensor__": True, **encode_tensor(value)}
        except Unencodable as problem:
            raise Unencodable(f"{problem} in {where}") from None
    if isinstance(value, dict):
        return {str(k): encode_observation(v, f"{where}.{k}" if where != "answer" else str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode_observation(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)[:200]


def encoded_answer(observation: dict) -> dict:
    """The child's answer to one probe as it travels. A value the grader cannot read is refused with a message
    for the student; a failure of the encoder itself is reported as the grader's (type EncoderError)."""
    try:
        return encode_observation(observation)
    except Unencodable as problem:
        return {
            "ok": False,
            "error": {
                "type": "ProbeFailure",
                "where": None,
                "message": f"your code produced {problem}; the grader reads real numbers only",
            },
        }
    except Exception as error:
        return {
            "ok": False,
            "error": {
                "type": "EncoderError",
                "where": None,
                "message": f"the grader could not encode this answer (a grader error, reported: "
                f"{type(error).__name__}: {str(error)[:200]})",
            },
        }


# --- the control channel: one message per packet, a descriptor beside it --------------------------------


def control_pair() -> tuple[socket.socket, socket.socket]:
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)


def send_message(sock: socket.socket, obj, fd: int | None = None) -> None:
    data = json.dumps(obj).encode()
    if len(data) > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"control message of {len(data)} bytes is over the limit")
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))] if fd is not None else []
    sock.sendmsg([data], ancillary)


def receive_message(sock: socket.socket) -> tuple[object, int | None]:
    """(message, descriptor or None); (None, None) when the other side has gone."""
    data, ancillary, flags, _ = sock.recvmsg(MAX_MESSAGE_BYTES, socket.CMSG_SPACE(4 * 4))
    fds = [
        fd
        for level, kind, payload in ancillary
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS
        for fd in array.array("i", payload[: len(payload) - len(payload) % 4])
    ]
    if not data:
        for fd in fds:
            os.close(fd)
        return None, None
    if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC) or len(fds) > 1:
        for fd in fds:
            os.close(fd)
        raise ProtocolError("a control message was cut short or carried more than one descriptor")
    return json.loads(data), (fds[0] if fds else None)


def receive_within(sock: socket.socket, timeout: float):
    """The next control message within `timeout` seconds, or None (nothing came, the other side has gone)."""
    ready, _, _ = select.select([sock], [], [], timeout)
    if not ready:
        return None
    try:
        return receive_message(sock)[0]
    except (OSError, ProtocolError, ValueError):
        return None


def hand_over(control: socket.socket, request: dict, job: dict, timeout: float, limit: int) -> tuple[bool, object]:
    """The parent's side of one job: a fresh socket pair, one end passed to the server beside `request`, the
    job written into the other, the reply read from it. (whether the server took the job, the reply or None)

    The job waits, unread, in the kernel's buffer of the passed end until the supervisor the server forks
    takes it: the server closes its own copy without reading, so the job never enters the server's memory."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with mine:
        try:
            try:
                send_message(control, request, theirs.fileno())
            finally:
                theirs.close()
            mine.settimeout(timeout)
            mine.sendall(frame(job))
            answer = receive_within(control, 60)
        except (OSError, ValueError):
            return False, None
        if not (isinstance(answer, dict) and answer.get("spawned") == request.get("job")):
            return False, None
        reader = FrameReader(limit=limit)
        try:
            while True:
                data = mine.recv(1 << 20)
                if not data:
                    return True, None
                frames = reader.feed(data)
                if frames:
                    return True, frames[0]
        except (OSError, ProtocolError, ValueError, RecursionError):
            return True, None
