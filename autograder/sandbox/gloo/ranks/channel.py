"""Framed messages between a rank's trusted process and its student process.

A frame is two 32-bit lengths (header, payload), a JSON header and raw
payload bytes (tensor data). Both ends are capped: a header over
MAX_HEADER_BYTES or a payload over MAX_PAYLOAD_BYTES is a protocol error,
so a student process cannot make its trusted peer allocate without bound;
so is a header that is not a JSON object nested at most `schema.MAX_DEPTH`
levels (any failure of the parser, a RecursionError included, is the
sender's), so no code that reads a header later can recurse without bound.
Tensors travel as their bytes plus {"dtype", "shape"}, dtypes from a fixed
list, shapes torch can lay out (`schema.Shape`).
"""
from __future__ import annotations

import json
import socket
import struct
import threading
from typing import overload

import torch

from shardlab.autograder.kit.schema import MAX_DEPTH, Malformed, Shape, Text, nesting_depth, shape_of

FRAME = struct.Struct("!II")
MAX_HEADER_BYTES = 1 << 20
MAX_PAYLOAD_BYTES = 1 << 28          # 256 MiB: the bucket benchmark moves tens of MB

# keyed by str(dtype); looked up with whatever a frame header holds (None when it holds nothing)
DTYPES: dict[object, torch.dtype] = {
    str(d): d for d in (torch.float32, torch.float64, torch.float16, torch.bfloat16,
                        torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool)}
# the fields that describe a tensor in a header (`kit.schema`)
TENSOR_FIELDS = {"dtype": Text(choices=[str(k) for k in DTYPES]), "shape": Shape()}


class ProtocolError(Exception):
    """The other end sent something that is not a valid frame."""


class Channel:
    """One end of a socketpair; `send` may be called from several threads."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.lock = threading.Lock()

    def send(self, header: dict, payload: bytes | memoryview = b"") -> None:
        head = json.dumps(header).encode()
        with self.lock:
            self.sock.sendall(FRAME.pack(len(head), len(payload)) + head)
            if len(payload):
                self.sock.sendall(payload)

    def receive(self) -> tuple[dict, bytearray] | None:
        """The next frame, or None at end of stream."""
        start = self._exactly(FRAME.size, eof_ok=True)
        if start is None:
            return None
        head_len, payload_len = FRAME.unpack(start)
        if head_len > MAX_HEADER_BYTES or payload_len > MAX_PAYLOAD_BYTES:
            raise ProtocolError(f"a frame of {head_len} + {payload_len} bytes is over the cap")
        head = self._exactly(head_len)
        try:
            header = json.loads(head)
        except RecursionError:
            raise ProtocolError(f"a frame header nested deeper than {MAX_DEPTH} levels") from None
        except (ValueError, MemoryError):        # UnicodeDecodeError is a ValueError
            raise ProtocolError("a frame header is not JSON") from None
        if not isinstance(header, dict):
            raise ProtocolError("a frame header is not an object")
        if nesting_depth(header) > MAX_DEPTH:
            raise ProtocolError(f"a frame header nested deeper than {MAX_DEPTH} levels")
        return header, self._exactly(payload_len) if payload_len else bytearray()

    @overload
    def _exactly(self, n: int) -> bytearray: ...

    @overload
    def _exactly(self, n: int, eof_ok: bool) -> bytearray | None: ...

    def _exactly(self, n: int, eof_ok: bool = False) -> bytearray | None:
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            k = self.sock.recv_into(view[got:])
            if k == 0:
                if eof_ok and got == 0:
                    return None
                raise ProtocolError("the stream ended inside a frame")
            got += k
        return buf

    def close(self) -> None:
        self.sock.close()


def tensor_bytes(t: torch.Tensor) -> memoryview:
    flat = t.detach().contiguous().reshape(-1)
    # ignore: numpy's stubs give ndarray `__buffer__` on Python 3.12+ only; it has the buffer protocol on 3.11 too
    return memoryview(flat.view(torch.uint8).numpy()) if flat.numel() else memoryview(b"")  # type: ignore[arg-type]


def describe(t: torch.Tensor) -> dict:
    return {"dtype": str(t.dtype), "shape": list(t.shape)}


def tensor_from(meta: dict, data: bytes | bytearray | memoryview) -> torch.Tensor:
    """A fresh tensor from {"dtype", "shape"} and its bytes, checked."""
    dtype = DTYPES.get(meta.get("dtype"))
    try:
        shape = shape_of(meta.get("shape"))
    except Malformed as exc:
        raise ProtocolError(f"not a tensor description: {exc}") from None
    if dtype is None:
        raise ProtocolError(f"not a tensor description: {str(meta)[:200]}")
    numel = 1
    for s in shape:
        numel *= s
    size = numel * torch.empty((), dtype=dtype).element_size()
    if size != len(data):
        raise ProtocolError(f"{len(data)} bytes for a {meta['dtype']} tensor of shape {shape}")
    if not size:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).view(dtype).reshape(shape)


def pack_tensors(tensors: dict[str, torch.Tensor]) -> tuple[list[dict], bytes]:
    """Several named tensors as (metadata list, one payload)."""
    metas, chunks, offset = [], [], 0
    for name, t in tensors.items():
        data = tensor_bytes(t)
        metas.append({"name": name, **describe(t), "offset": offset, "nbytes": len(data)})
        chunks.append(bytes(data))
        offset += len(data)
    return metas, b"".join(chunks)


def unpack_tensors(metas: list[dict], payload: bytearray) -> dict[str, torch.Tensor]:
    out = {}
    for m in metas:
        out[m["name"]] = tensor_from(m, memoryview(payload)[m["offset"]:m["offset"] + m["nbytes"]])
    return out
