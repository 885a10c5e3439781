"""The cloud path's wire format: a JSON header and ``.npy`` blobs in one MQTT payload (never pickle).

    b"EDG1" | u32 big-endian header length | header (UTF-8 JSON) | .npy blob | .npy blob | ...

Shared by the client (:mod:`edgert.offload`) and the worker (``edgert cloud serve``).
Decoding is zero-copy and reads ``.npy`` headers with ``allow_pickle=False``.
"""

from __future__ import annotations

import io
import json
import math
import struct
from typing import Any

import numpy as np

from delegates.base import TensorSpec
from edgert.errors import OffloadError

#: Largest request or reply accepted, in bytes (``max_payload`` in the broker URL changes it).
MAX_PAYLOAD_BYTES = 16 * 1024 * 1024
MAGIC = b"EDG1"
_HEAD = struct.Struct(">I")


class WireError(OffloadError, ValueError):
    """A message that is not a valid edgert frame (says what is wrong)."""


def encode(header: dict[str, Any], arrays: list[np.ndarray] = ()) -> bytes:  # type: ignore[assignment]
    """One frame: the JSON header (with ``sizes`` added) followed by ``.npy`` blobs.

    Raises:
        ValueError: an object array (those would need pickle).
    """
    parts: list[Any] = []
    sizes = []
    for a in arrays:
        a = np.asarray(a)
        if not a.flags.c_contiguous:
            a = np.ascontiguousarray(a)
        if a.dtype.hasobject:
            raise ValueError(f"cannot send an array of dtype {a.dtype} (object arrays would need pickle)")
        buf = io.BytesIO()
        np.lib.format.write_array_header_1_0(buf, np.lib.format.header_data_from_array_1_0(a))
        npy_head = buf.getvalue()
        parts += [npy_head, a.reshape(-1).view(np.uint8) if a.size else b""]
        sizes.append(len(npy_head) + a.nbytes)
    head = json.dumps({**header, "sizes": sizes}, separators=(",", ":")).encode()
    return b"".join([MAGIC, _HEAD.pack(len(head)), head, *parts])


def decode_header(payload: bytes, max_bytes: int = MAX_PAYLOAD_BYTES) -> tuple[dict[str, Any], int]:
    """The header of a frame and the offset where its blobs start.

    Raises:
        WireError: bad magic, truncated, not JSON, or larger than ``max_bytes``.
    """
    if payload[:4] != MAGIC:
        raise WireError(f"not an edgert frame (expected magic {MAGIC!r}, got {bytes(payload[:4])!r})")
    if len(payload) < 8:
        raise WireError(f"truncated frame: {len(payload)} bytes, shorter than the 8-byte magic and header length")
    (n,) = _HEAD.unpack_from(payload, 4)
    if 8 + n > len(payload):
        raise WireError(f"truncated frame: header of {n} bytes, frame of {len(payload)}")
    try:
        head = json.loads(bytes(payload[8:8 + n]))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WireError(f"frame header is not JSON: {exc}") from exc
    except RecursionError:
        raise WireError("frame header is JSON nested too deeply") from None
    if not isinstance(head, dict):
        raise WireError("frame header is not a JSON object")
    if len(payload) > max_bytes:
        raise WireError(f"frame of {len(payload)} bytes is over the {max_bytes}-byte cap")
    return head, 8 + n


def decode_arrays(payload: bytes, head: dict[str, Any], offset: int) -> list[np.ndarray]:
    """The ``.npy`` blobs of a frame (``allow_pickle=False``: object arrays are refused).

    Raises:
        WireError: sizes that do not add up, or a blob that is not a valid ``.npy``.
    """
    sizes = head.get("sizes", [])
    if not isinstance(sizes, list) or not all(isinstance(s, int) and s >= 0 for s in sizes):
        raise WireError("frame header 'sizes' must be a list of byte counts")
    if offset + sum(sizes) != len(payload):
        raise WireError(f"frame blobs add up to {sum(sizes)} bytes but {len(payload) - offset} follow the header")
    view = memoryview(payload)
    out = []
    for i, n in enumerate(sizes):
        out.append(_npy(view, offset, n, i))
        offset += n
    return out


#: Parsed .npy headers by their bytes (steady traffic repeats a few shapes; numpy's parser costs ~40 us).
_NPY_HEADERS: dict[bytes, tuple[tuple[int, ...], bool, np.dtype, int]] = {}


def _npy(view: memoryview, offset: int, n: int, i: int) -> np.ndarray:
    """One .npy blob as a read-only array over ``view`` (no copy); never unpickles."""
    head = bytes(view[offset:offset + min(n, 128)])
    parsed = _NPY_HEADERS.get(head)
    if parsed is None:
        parsed = _parse_npy_header(view, offset, n, i)
        if parsed[3] == len(head) and len(_NPY_HEADERS) < 1024:
            _NPY_HEADERS[head] = parsed
    shape, fortran, dtype, start = parsed
    count = math.prod(shape)   # Python ints: (2**32, 2**32) must not wrap to 0 as int64 would
    if start + count * dtype.itemsize != n:
        raise WireError(f"tensor {i} is not a valid .npy blob: {dtype}{list(shape)} needs "
                        f"{count * dtype.itemsize} bytes, the blob has {n - start}")
    arr = np.frombuffer(view, dtype, count, offset + start)
    return arr.reshape(shape[::-1]).T if fortran else arr.reshape(shape)


def _parse_npy_header(view: memoryview, offset: int, n: int, i: int) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    fmt = np.lib.format
    f = io.BytesIO(view[offset:offset + min(n, 65_600)])
    try:
        major, _ = fmt.read_magic(f)
        read = fmt.read_array_header_1_0 if major == 1 else fmt.read_array_header_2_0
        shape, fortran, dtype = read(f)
    except (ValueError, OSError, EOFError, TypeError, SyntaxError, MemoryError) as exc:
        raise WireError(f"tensor {i} is not a valid .npy blob: {exc}") from exc
    if not all(isinstance(d, int) and d >= 0 for d in shape) or len(shape) > 32:
        raise WireError(f"tensor {i} is not a valid .npy blob: shape {shape} (at most 32 dims, each >= 0)")
    if dtype.hasobject:
        raise WireError(f"tensor {i} is not a valid .npy blob: dtype {dtype} holds Python objects (pickle refused)")
    return tuple(shape), bool(fortran), dtype, f.tell()


def spec_to_json(s: TensorSpec) -> dict[str, Any]:
    """A TensorSpec as JSON (shape with null for dynamic dims)."""
    return {"name": s.name, "shape": list(s.shape), "dtype": s.dtype.str}


def spec_from_json(d: dict[str, Any]) -> TensorSpec:
    """Inverse of :func:`spec_to_json`.

    Raises:
        WireError: not ``{name, shape, dtype}`` with a list of ints / nulls and a numpy dtype string.
    """
    try:
        shape = d["shape"]
        if not isinstance(shape, list) or not all(x is None or (type(x) is int and x >= 0) for x in shape):
            raise TypeError(f"shape {shape!r} is not a list of sizes")
        dtype = np.dtype(d["dtype"])
        if dtype.hasobject:
            raise TypeError(f"dtype {dtype} holds Python objects")
        return TensorSpec(str(d["name"]), tuple(shape), dtype)
    except (KeyError, TypeError, ValueError) as exc:
        raise WireError(f"tensor spec {d!r:.80} is not {{name, shape, dtype}}: {exc}") from None


# -- the MQTT link ---------------------------------------------------------------------------
