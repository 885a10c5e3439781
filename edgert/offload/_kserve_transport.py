"""The Open Inference Protocol's two transports: gRPC (``tritonclient.grpc``) and REST (the standard library).

Both offer the same five calls (``live``, ``ready``, ``metadata``, ``index``, ``infer``),
take a timeout in seconds and raise only the three exceptions below, so the link
above (:mod:`edgert.offload._kserve_client`) maps every failure once:

* :class:`Unreachable`: no connection (server down, refused, TLS handshake failed);
* :class:`TimedOut`: no answer within the timeout;
* :class:`Refused`: the server answered with an error (``status``: a gRPC code name or
  an HTTP status, ``message``: the server's words).

REST speaks JSON (``"data"`` as a flat row-major list), which every server of the protocol
takes; ``binary=True`` uses the binary-tensor extension (Triton) instead. One keep-alive
connection per calling thread (``http.client`` is not thread-safe); the gRPC channel is
shared by every thread.
"""

from __future__ import annotations

import http.client
import itertools
import json
import socket
import ssl
import threading
from typing import Any
from urllib.parse import quote

import numpy as np

from edgert.offload._kserve_config import KServeConfig

#: Open Inference Protocol datatype -> numpy dtype (BYTES and BF16 are not numeric arrays here).
DATATYPES: dict[str, np.dtype] = {k: np.dtype(v) for k, v in {
    "BOOL": "bool", "UINT8": "uint8", "UINT16": "uint16", "UINT32": "uint32", "UINT64": "uint64",
    "INT8": "int8", "INT16": "int16", "INT32": "int32", "INT64": "int64",
    "FP16": "float16", "FP32": "float32", "FP64": "float64"}.items()}
_NAMES = {v: k for k, v in DATATYPES.items()}


def datatype_of(dtype: np.dtype) -> str:
    """The protocol's name of a numpy dtype (``float32`` -> ``FP32``); ``?dtype`` when it has none."""
    return _NAMES.get(np.dtype(dtype), f"?{np.dtype(dtype).name}")


class TransportError(Exception):
    """Base of what a transport raises."""


class Unreachable(TransportError):
    """No connection to the server."""


class TimedOut(TransportError):
    """No answer within the timeout."""


class Refused(TransportError):
    """The server answered with an error."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(f"[{status}] {message}")
        self.status = status
        self.message = message


#: Request ids (the protocol's optional ``id``; some servers echo it into a field they require).
_IDS = itertools.count(1)

#: (name, array) of one input.
Feed = tuple[str, np.ndarray]


class GrpcTransport:
    """The gRPC transport: one ``tritonclient.grpc`` client (one channel) shared by every thread."""

    def __init__(self, cfg: KServeConfig) -> None:
        import tritonclient.grpc as grpcclient  # noqa: PLC0415 - lazy (make_kserve_worker imported it first)

        self._g = grpcclient
        kw: dict[str, Any] = {}
        if cfg.tls:
            kw = {"ssl": True, "root_certificates": cfg.ca, "private_key": cfg.key, "certificate_chain": cfg.cert}
        big = 2**31 - 1
        # A server that comes back is reconnected to within a second: gRPC's default reconnect backoff grows
        # to 120 s, which would keep the cloud out long after the server is up again.
        args = [("grpc.max_send_message_length", big), ("grpc.max_receive_message_length", big),
                ("grpc.initial_reconnect_backoff_ms", 100), ("grpc.min_reconnect_backoff_ms", 100),
                ("grpc.max_reconnect_backoff_ms", 1000)]
        self._client = grpcclient.InferenceServerClient(cfg.address, channel_args=args, **kw)
        # gRPC metadata keys must be lower case
        self._headers = {k.lower(): v for k, v in cfg.header_dict().items()} or None

    def _call(self, fn: Any, *args: Any, **kw: Any) -> Any:
        from tritonclient.utils import InferenceServerException  # noqa: PLC0415

        try:
            return fn(*args, headers=self._headers, **kw)
        except InferenceServerException as exc:
            status = str(exc.status() or "").removeprefix("StatusCode.")
            msg = str(exc.message() or exc)
            if status == "UNAVAILABLE":
                raise Unreachable(msg) from exc
            if status == "DEADLINE_EXCEEDED":
                raise TimedOut(msg) from exc
            raise Refused(status or "ERROR", msg) from exc

    def live(self, timeout_s: float) -> bool:
        """Whether the server says it is live."""
        return bool(self._call(self._client.is_server_live, client_timeout=timeout_s))

    def ready(self, name: str, version: str, timeout_s: float) -> bool:
        """Whether the model (version) is ready."""
        return bool(self._call(self._client.is_model_ready, name, version, client_timeout=timeout_s))

    def metadata(self, name: str, version: str, timeout_s: float) -> dict[str, Any]:
        """The model's metadata as the protocol's JSON (shapes as ints)."""
        md = self._call(self._client.get_model_metadata, name, version, as_json=True, client_timeout=timeout_s)
        for t in (*md.get("inputs", []), *md.get("outputs", [])):   # protobuf's JSON writes int64 as str
            t["shape"] = [int(d) for d in t.get("shape", [])]
        return dict(md)

    def index(self, timeout_s: float) -> list[dict[str, Any]]:
        """The repository index (Triton and MLServer extension): ``[{name, version, state}]``."""
        idx = self._call(self._client.get_model_repository_index, as_json=True, client_timeout=timeout_s)
        return list(idx.get("models", []))

    def infer(self, name: str, version: str, feeds: list[Feed], outputs: list[str],
              timeout_s: float) -> dict[str, np.ndarray]:
        """One inference asking for ``outputs``; returns what the server answered, by name, in its order."""
        from tritonclient.utils import InferenceServerException  # noqa: PLC0415

        g = self._g
        ins = []
        try:
            for n, a in feeds:
                i = g.InferInput(n, list(a.shape), datatype_of(a.dtype))
                i.set_data_from_numpy(a if a.flags.c_contiguous else a.copy())   # (ascontiguousarray makes 0-d 1-d)
                ins.append(i)
        except InferenceServerException as exc:
            raise Refused("CLIENT", str(exc.message() or exc)) from exc
        res = self._call(self._client.infer, name, ins, model_version=version, request_id=str(next(_IDS)),
                         outputs=[g.InferRequestedOutput(o) for o in outputs], client_timeout=timeout_s)
        return _grpc_outputs(res.get_response())

    def close(self) -> None:
        """Close the channel."""
        self._client.close()


#: Typed ``contents`` field of each datatype, for servers that answer without raw_output_contents.
_CONTENTS = {"BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents", "INT32": "int_contents",
             "INT64": "int64_contents", "UINT8": "uint_contents", "UINT16": "uint_contents",
             "UINT32": "uint_contents", "UINT64": "uint64_contents", "FP32": "fp32_contents",
             "FP64": "fp64_contents"}


def _grpc_outputs(resp: Any) -> dict[str, np.ndarray]:
    """Every numeric output of a ModelInferResponse, by name in its order: from ``raw_output_contents``
    (Triton, MLServer) or from the typed ``contents`` (the kserve SDK, among others)."""
    got: dict[str, np.ndarray] = {}
    raw = resp.raw_output_contents
    for k, o in enumerate(resp.outputs):
        dt = DATATYPES.get(o.datatype)
        if dt is None:
            continue
        shape = list(o.shape)
        if k < len(raw):
            got[o.name] = np.frombuffer(raw[k], dt).reshape(shape).copy()
        elif o.datatype in _CONTENTS:
            got[o.name] = np.array(getattr(o.contents, _CONTENTS[o.datatype]), dtype=dt).reshape(shape)
    return got


class HttpTransport:
    """The REST transport: ``http.client``, one keep-alive connection per calling thread."""

    def __init__(self, cfg: KServeConfig, binary: bool = False) -> None:
        self.cfg = cfg
        self.binary = binary
        self._local = threading.local()
        self._conns: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._headers = cfg.header_dict()
        self._ssl: ssl.SSLContext | None = None
        if cfg.tls:
            ctx = ssl.create_default_context(cafile=cfg.ca)
            if cfg.cert:
                ctx.load_cert_chain(cfg.cert, cfg.key)
            if cfg.insecure:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            self._ssl = ctx

    def _conn(self) -> http.client.HTTPConnection:
        c = getattr(self._local, "conn", None)
        if c is None:
            c = (http.client.HTTPSConnection(self.cfg.host, self.cfg.port, context=self._ssl) if self._ssl
                 else http.client.HTTPConnection(self.cfg.host, self.cfg.port))
            self._local.conn = c
            with self._lock:
                self._conns.append(c)
        return c

    def _request(self, method: str, path: str, body: bytes | None, timeout_s: float,
                 extra: dict[str, str] | None = None) -> tuple[int, http.client.HTTPResponse, bytes]:
        headers = {**self._headers, **(extra or {})}
        if body is not None:
            headers.setdefault("Content-Type", "application/json")
        for attempt in (0, 1):   # a kept-alive connection the server closed meanwhile: reconnect once
            c = self._conn()
            reused = c.sock is not None
            c.timeout = timeout_s
            if c.sock is not None:
                c.sock.settimeout(timeout_s)
            try:
                c.request(method, path, body=body, headers=headers)
                resp = c.getresponse()
                data = resp.read()
                return resp.status, resp, data
            except (TimeoutError, socket.timeout) as exc:
                c.close()
                raise TimedOut(f"no answer within {timeout_s * 1e3:.0f} ms") from exc
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                c.close()
                if attempt == 0 and reused:
                    continue
                raise Unreachable(f"{type(exc).__name__}: {exc}") from exc
            except (OSError, http.client.HTTPException) as exc:
                c.close()
                raise Unreachable(f"{type(exc).__name__}: {exc}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _path(name: str, version: str, tail: str = "") -> str:
        p = f"/v2/models/{quote(name, safe='')}"
        if version:
            p += f"/versions/{quote(version, safe='')}"
        return p + tail

    @staticmethod
    def _refused(status: int, data: bytes) -> Refused:
        try:
            msg = str(json.loads(data).get("error", "")) or data.decode(errors="replace")
        except (ValueError, AttributeError):
            msg = data.decode(errors="replace")
        return Refused(str(status), msg.strip()[:500] or http.client.responses.get(status, ""))

    def live(self, timeout_s: float) -> bool:
        """GET /v2/health/live."""
        status, _, _ = self._request("GET", "/v2/health/live", None, timeout_s)
        return status == 200

    def ready(self, name: str, version: str, timeout_s: float) -> bool:
        """GET /v2/models/NAME[/versions/V]/ready."""
        status, _, _ = self._request("GET", self._path(name, version, "/ready"), None, timeout_s)
        return status == 200

    def metadata(self, name: str, version: str, timeout_s: float) -> dict[str, Any]:
        """GET /v2/models/NAME[/versions/V]."""
        status, _, data = self._request("GET", self._path(name, version), None, timeout_s)
        if status != 200:
            raise self._refused(status, data)
        return dict(json.loads(data))

    def index(self, timeout_s: float) -> list[dict[str, Any]]:
        """POST /v2/repository/index (an extension: Triton and MLServer have it)."""
        status, _, data = self._request("POST", "/v2/repository/index", b"{}", timeout_s)
        if status != 200:
            raise self._refused(status, data)
        out = json.loads(data)
        return list(out if isinstance(out, list) else out.get("models", []))

    def infer(self, name: str, version: str, feeds: list[Feed], outputs: list[str],
              timeout_s: float) -> dict[str, np.ndarray]:
        """POST /v2/models/NAME[/versions/V]/infer asking for ``outputs``; returns what the server answered,
        by name, in its order."""
        ins: list[dict[str, Any]] = []
        blobs: list[bytes] = []
        for n, a in feeds:
            t: dict[str, Any] = {"name": n, "shape": list(a.shape), "datatype": datatype_of(a.dtype)}
            if self.binary:
                b = a.tobytes()   # C order
                t["parameters"] = {"binary_data_size": len(b)}
                blobs.append(b)
            else:
                t["data"] = a.reshape(-1).tolist()
            ins.append(t)
        req: dict[str, Any] = {"id": str(next(_IDS)), "inputs": ins, "outputs": [
            {"name": o, **({"parameters": {"binary_data": True}} if self.binary else {})} for o in outputs]}
        head = json.dumps(req, separators=(",", ":")).encode()
        extra = {"Inference-Header-Content-Length": str(len(head)),
                 "Content-Type": "application/octet-stream"} if self.binary else None
        status, resp, data = self._request("POST", self._path(name, version, "/infer"), b"".join([head, *blobs]),
                                           timeout_s, extra)
        if status != 200:
            raise self._refused(status, data)
        hlen = resp.getheader("Inference-Header-Content-Length")
        body = json.loads(data[:int(hlen)] if hlen else data)
        return _decode_outputs(body, data[int(hlen):] if hlen else b"")

    def close(self) -> None:
        """Close every thread's connection."""
        with self._lock:
            for c in self._conns:
                c.close()
            self._conns.clear()


def _decode_outputs(body: dict[str, Any], blob: bytes) -> dict[str, np.ndarray]:
    """The numeric outputs of a REST response (JSON ``data`` or binary parts), in response order."""
    got: dict[str, np.ndarray] = {}
    off = 0
    for o in body.get("outputs", []):
        dt = DATATYPES.get(str(o.get("datatype")))
        shape = [int(d) for d in o.get("shape", [])]
        size = (o.get("parameters") or {}).get("binary_data_size")
        if size is not None:
            raw, off = blob[off:off + int(size)], off + int(size)
            if dt is None:
                continue
            arr = np.frombuffer(raw, dt).reshape(shape).copy()
        else:
            if dt is None:
                continue
            arr = np.asarray(o.get("data", []), dtype=dt).reshape(shape)
        got[str(o.get("name"))] = arr
    return got
