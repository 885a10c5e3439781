"""The cloud processor over the Open Inference Protocol: link, delegate and session.

:class:`KServeLink` is one client of one server (gRPC or REST, see
:mod:`edgert.offload._kserve_transport`). It knows whether the server is up: a
call that finds no server marks it down, a watcher thread polls the server's
``live`` endpoint until it answers again, and meanwhile requests fail at once
with :class:`OffloadError` naming the server (so the runtime re-places them
locally, or ends them ``failed`` with that reason).

:class:`KServeDelegate.open_named` checks, at load time, that the server has the
model (and the version asked for), that it is ready, and that its metadata (input
and output names, datatypes, shapes) matches the model edgert loaded: a mismatch
is a :class:`ModelLoadError` saying which tensor differs and how.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import numpy as np

from delegates.base import Artifact, Delegate, Session, TensorSpec
from edgert.errors import ConfigError, ModelLoadError, OffloadError
from edgert.offload._kserve_config import KServeConfig
from edgert.offload._kserve_transport import (
    DATATYPES,
    GrpcTransport,
    HttpTransport,
    Refused,
    TimedOut,
    TransportError,
    Unreachable,
    datatype_of,
)
from edgert.offload._tls import Diagnosis, client_context, diagnose

log = logging.getLogger("edgert.offload")

#: Statuses that mean "not allowed", not "not there" (HTTP and gRPC).
_AUTH = ("401", "403", "UNAUTHENTICATED", "PERMISSION_DENIED")

#: How often the watcher asks a down server whether it is live again (s).
WATCH_S = 0.1


class KServeLink:
    """One client of one Open Inference Protocol server, shared by every session of a runtime.

    Raises:
        OffloadError: (constructor) no server answered ``live`` at the address, or a TLS handshake failed
            in a way no retry fixes (the server's certificate cannot be verified, it refused the client
            certificate, TLS against a plain port or the other way round): the message names the cause
            and the fix.
    """

    def __init__(self, cfg: KServeConfig) -> None:
        self.cfg = cfg
        self.transport: GrpcTransport | HttpTransport = (GrpcTransport(cfg) if cfg.protocol == "grpc"
                                                         else HttpTransport(cfg))
        self._down: str | None = None
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._watcher: threading.Thread | None = None
        #: Round trip of an empty ``live`` call (ms, the fastest of the first three).
        self.rtt_ms: float | None = None
        try:
            rtts = []
            for _ in range(3):
                t = time.perf_counter()
                live = self.transport.live(cfg.connect_timeout_ms / 1e3)
                rtts.append((time.perf_counter() - t) * 1e3)
                if not live:
                    raise Refused("not live", "the server says it is not live")
            self.rtt_ms = min(rtts)
        except TransportError as exc:
            self.transport.close()
            problem = None if isinstance(exc, Refused) else diagnose_server(cfg).problem
            if problem is not None:
                raise OffloadError(problem) from exc
            raise OffloadError(f"no Open Inference Protocol server answered at {cfg.url()}: {exc} "
                               f"({_hint(cfg, str(exc))})") from exc

    @property
    def connected(self) -> bool:
        """False while the server is down (since a call found no server, until it answers ``live``)."""
        return self._down is None

    def down_reason(self) -> str | None:
        """Why the server is considered down, or None."""
        return self._down

    def mark_down(self, why: str) -> None:
        """Consider the server down and start polling it until it is live again."""
        with self._lock:
            if self._down is None:
                self._down = why
            if self._watcher is None or not self._watcher.is_alive():
                self._watcher = threading.Thread(target=self._watch, name="edgert-kserve-watch", daemon=True)
                self._watcher.start()

    def _watch(self) -> None:
        while not self._closed.wait(WATCH_S):
            try:
                if self.transport.live(max(WATCH_S, self.rtt_ms or 0.0)):
                    with self._lock:
                        self._down = None
                        self._watcher = None
                    return
            except TransportError:
                continue

    def call(self, what: str, fn: Any, *args: Any) -> Any:
        """A metadata call (``fn(*args, timeout_s)``); failures become OffloadError naming the server."""
        try:
            return fn(*args, self.cfg.connect_timeout_ms / 1e3)
        except Unreachable as exc:
            self.mark_down(str(exc))
            raise OffloadError(f"kserve server {self.cfg.url()} is unreachable ({what}): {exc}") from exc
        except TimedOut as exc:
            raise OffloadError(f"kserve server {self.cfg.url()} did not answer {what}: {exc}") from exc

    def close(self) -> None:
        """Stop the watcher and close the connections."""
        self._closed.set()
        self.transport.close()


def _hint(cfg: KServeConfig, error: str) -> str:
    """What to check when no server answered and :func:`diagnose_server` found no TLS problem."""
    if "CERTIFICATE_VERIFY_FAILED" in error.upper():
        return "the server's certificate is not trusted here: give its CA with ?ca=PATH"
    if not cfg.tls and ("Socket closed" in error or "RemoteDisconnected" in error):
        return "a TLS port? use kserves:// or kserve+https://"
    return f"is the server running, and is {cfg.protocol.upper()} its protocol on port {cfg.port}?"


#: HTTP/2's client preface and an empty SETTINGS frame: a gRPC server answers with its SETTINGS frame.
_H2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def diagnose_server(cfg: KServeConfig, timeout_s: float = 2.0) -> Diagnosis:
    """Why a connection to the server failed, when it is a TLS configuration error no retry fixes.

    gRPC reports a failed handshake as "failed to connect to all addresses" (with the reason only
    sometimes in its words), so the port is asked once more with Python's TLS and the same options
    (:func:`edgert.offload._tls.diagnose`): a certificate that cannot be verified (unknown CA, another
    host name, expired), a client certificate the server refused, or TLS against a plain port and the
    other way round.
    """
    ctx = None
    if cfg.tls:
        try:
            ctx = client_context(ca=cfg.ca, cert=cfg.cert, key=cfg.key, insecure=cfg.insecure, what="kserve URL")
        except ConfigError as exc:
            return Diagnosis(True, str(exc))
        ctx.set_alpn_protocols(["h2"] if cfg.protocol == "grpc" else ["http/1.1"])
    if cfg.protocol == "grpc":
        hello, answered = _H2_HELLO, (lambda b: len(b) >= 4 and b[3] == 0x04)   # a SETTINGS frame
        tls_scheme, plain_scheme = "kserves", "kserve"
    else:
        hello = f"GET /v2/health/live HTTP/1.1\r\nHost: {cfg.host}\r\nConnection: close\r\n\r\n".encode()
        answered, tls_scheme, plain_scheme = (lambda b: b.startswith(b"HTTP/")), "kserve+https", "kserve+http"
    where = f"{cfg.host}:{cfg.port}"
    return diagnose(cfg.host, cfg.port, ctx, hello=hello, answered=answered, server=f"kserve server {cfg.url()}",
                    ca=cfg.ca, cert=cfg.cert, insecure_hint=cfg.protocol == "http",
                    use_tls=f"use {tls_scheme}://{where}?ca=PATH (PATH: the CA that signed the server's certificate)",
                    use_plain=f"use {plain_scheme}://{where}, or {tls_scheme}:// to the server's TLS port",
                    timeout_s=timeout_s)


class KServeSession(Session):
    """One model on the server: ``inputs``/``outputs`` are the model's, checked against the server's."""

    def __init__(self, link: KServeLink, name: str, server_name: str, version: str,
                 inputs: tuple[TensorSpec, ...], outputs: tuple[TensorSpec, ...]) -> None:
        self.link = link
        self.name = name
        self.server_name = server_name
        self.version = version
        self.inputs = inputs
        self.outputs = outputs
        #: The server's metadata lists no outputs: when the reply's names are not the model's but their
        #: count is, take them in order (servers that name outputs ``output-0`` …).
        self.by_position = False

    def target(self) -> str:
        """``'server_name' version V on kserve://host:port`` (for messages)."""
        v = f" version {self.version}" if self.version else ""
        return f"model {self.server_name!r}{v} on kserve server {self.link.cfg.url()}"

    def run(self, feeds: list[np.ndarray], timeout_ms: float | None = None) -> list[np.ndarray]:
        """One inference request; waits at most ``timeout_ms`` (default: the link's ``timeout_ms``).

        Raises:
            OffloadError: the server is down or unreachable, did not answer in time, refused the
                request (model missing, bad input …) or answered outputs that are not the model's.
        """
        link = self.link
        down = link.down_reason()
        if down is not None:
            raise OffloadError(f"kserve server {link.cfg.url()} is down: {down}")
        timeout = link.cfg.timeout_ms if timeout_ms is None else timeout_ms
        names = [o.name for o in self.outputs]
        try:
            got = link.transport.infer(self.server_name, self.version, [(s.name, f) for s, f in zip(self.inputs, feeds)],
                                       names, max(timeout, 1.0) / 1e3)
        except Unreachable as exc:
            link.mark_down(str(exc))
            raise OffloadError(f"kserve server {link.cfg.url()} is unreachable: {exc}") from exc
        except TimedOut as exc:
            raise OffloadError(f"no reply from {self.target()} within {timeout:.1f} ms") from exc
        except Refused as exc:
            raise OffloadError(f"{self.target()} refused the request: [{exc.status}] {exc.message}") from exc
        if self.by_position and not all(n in got for n in names) and len(got) == len(names):
            got = dict(zip(names, got.values()))   # the server names its outputs its own way (see open_named)
        outs = []
        for spec in self.outputs:
            a = got.get(spec.name)
            if a is None:
                raise OffloadError(f"{self.target()} returned no output {spec.name!r} (got: {', '.join(got) or 'none'})")
            if a.dtype != spec.dtype or not spec.accepts_shape(a.shape):
                raise OffloadError(f"{self.target()} returned output {spec.name!r} as {datatype_of(a.dtype)}"
                                   f"{list(a.shape)}; the model's is {spec.describe()}")
            outs.append(a if a.flags.writeable else np.array(a))
        return outs


class KServeDelegate(Delegate):
    """Runs models on an Open Inference Protocol server (Triton, KServe, MLServer …)."""

    name = "kserve-cloud"
    processor = "cloud"
    backend = "kserve"
    formats = ("onnx", "tflite")

    def __init__(self, link: KServeLink) -> None:
        self.link = link

    def probe(self) -> str | None:
        """None while the server is up, else why not (never cached: it changes)."""
        return self._probe()

    def _probe(self) -> str | None:
        down = self.link.down_reason()
        return None if down is None else f"kserve server {self.link.cfg.url()} is down: {down}"

    def open(self, artifact: Artifact, threads: int = 1) -> Session:  # noqa: ARG002 - the server has its own
        """Not usable without a model name: use :meth:`open_named`."""
        raise ModelLoadError("the kserve delegate needs the model's name and specs: it is opened by the cloud worker")

    def open_named(self, name: str, inputs: tuple[TensorSpec, ...], outputs: tuple[TensorSpec, ...]) -> KServeSession:
        """Check that the server serves ``name`` (mapped by the config) with these inputs and outputs.

        Raises:
            ModelLoadError: the server is unreachable, lacks the model or the version, the model
                is not ready, or its metadata differs from ``inputs``/``outputs`` (which tensor, how).
        """
        link = self.link
        server_name, version = link.cfg.server_model(name)
        session = KServeSession(link, name, server_name, version, inputs, outputs)
        where = session.target()
        try:
            md = link.call("model metadata", link.transport.metadata, server_name, version)
        except Refused as exc:
            if exc.status in _AUTH:
                raise ModelLoadError(f"cannot offload {name!r}: kserve server {link.cfg.url()} refused the "
                                     f"credentials: [{exc.status}] {exc.message} (send a token with "
                                     "EDGERT_KSERVE_TOKEN or ?header=Authorization:Bearer%20TOKEN)") from exc
            alt = None if version or any(m[0] == name for m in link.cfg.models) else self._only_match(inputs, outputs)
            if alt is None:
                raise ModelLoadError(self._missing(name, server_name, version, exc)) from exc
            server_name, md = alt
            log.warning("kserve server %s has no model %r; offloading it to %r, the one model there whose metadata "
                        "matches it (map it explicitly with ?model.%s=%s)", link.cfg.url(), name, server_name,
                        name, server_name)
            session = KServeSession(link, name, server_name, version, inputs, outputs)
            where = session.target()
        except OffloadError as exc:
            raise ModelLoadError(f"cannot offload {name!r}: {exc}") from exc
        try:
            ready = link.call("model ready", link.transport.ready, server_name, version)
        except (Refused, OffloadError) as exc:
            raise ModelLoadError(f"cannot offload {name!r}: {where} did not say whether it is ready: {exc}") from exc
        if not ready:
            raise ModelLoadError(f"cannot offload {name!r}: {where} is not ready (the server has it but has not "
                                 "loaded it: see the server's log)")
        session.by_position = not md.get("outputs")
        problems = check_metadata(md, inputs, outputs)
        if problems:
            raise ModelLoadError(f"cannot offload {name!r}: {where} does not match the model edgert loaded: "
                                 + "; ".join(problems) + (f" (map edgert's {name!r} to another server model with "
                                                          f"?model.{name}=SERVER_NAME[:VERSION])"))
        return session

    def _only_match(self, inputs: tuple[TensorSpec, ...],
                    outputs: tuple[TensorSpec, ...]) -> tuple[str, dict[str, Any]] | None:
        """The one model of the server's repository whose metadata lists these exact inputs and outputs
        (a Triton repository names a model by its directory, its file is ``model.onnx``), else None."""
        link = self.link
        try:
            names = sorted({str(m.get("name")) for m in link.call("repository index", link.transport.index)
                            if str(m.get("state") or "READY").upper().endswith("READY")})   # MLServer/gRPC: State.READY
        except (Refused, OffloadError):
            return None
        found = []
        for n in names[:32]:
            try:
                md = link.call("model metadata", link.transport.metadata, n, "")
            except (Refused, OffloadError):
                continue
            if md.get("inputs") and md.get("outputs") and not check_metadata(md, inputs, outputs) \
                    and len(md["inputs"]) == len(inputs) and len(md["outputs"]) == len(outputs):
                found.append((n, md))
        return found[0] if len(found) == 1 else None

    def _missing(self, name: str, server_name: str, version: str, exc: Refused) -> str:
        """Why metadata was refused: no such model, or no such version of it (with what the server has)."""
        link = self.link
        url = link.cfg.url()
        if version:
            try:
                md = link.call("model metadata", link.transport.metadata, server_name, "")
            except (Refused, OffloadError):
                md = None
            if md is not None:
                versions = ", ".join(str(v) for v in md.get("versions") or []) or "not listed"
                return (f"cannot offload {name!r}: kserve server {url} has model {server_name!r} but not version "
                        f"{version!r} (versions: {versions}; the server said [{exc.status}] {exc.message})")
        try:
            served = sorted({str(m.get("name")) for m in link.call("repository index", link.transport.index)})
            has = f"; it serves: {', '.join(served) or 'nothing'}"
        except (Refused, OffloadError):
            has = ""
        hint = "" if server_name != name else f", or map it with ?model.{name}=SERVER_NAME[:VERSION]"
        return (f"cannot offload {name!r}: kserve server {url} does not serve a model {server_name!r}{has} "
                f"(the server said [{exc.status}] {exc.message}; add it to the server's model repository{hint})")


def check_metadata(md: dict[str, Any], inputs: tuple[TensorSpec, ...], outputs: tuple[TensorSpec, ...]) -> list[str]:
    """What differs between a server's model metadata and the model's specs (empty: they match).

    Names must match, datatypes must be the protocol's names of the dtypes, shapes must have
    the same rank and agree wherever both are fixed (``-1`` and None are wildcards). A server
    that lists no inputs (or no outputs) is not contradicted: that side is not checked.

    >>> spec = TensorSpec("x", (1, 4), np.dtype("float32"))
    >>> check_metadata({"inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}]}, (spec,), ())
    []
    >>> check_metadata({"inputs": [{"name": "x", "datatype": "FP64", "shape": [1, 5]}]}, (spec,), ())
    ["input 'x' is FP64[1,5] on the server, float32[1,4] here (FP32[1,4])"]
    """
    problems = []
    for kind, specs, theirs in (("input", inputs, md.get("inputs") or []), ("output", outputs, md.get("outputs") or [])):
        if not theirs:
            continue
        by_name = {str(t.get("name")): t for t in theirs}
        missing = False
        for s in specs:
            t = by_name.pop(s.name, None)
            if t is None:
                missing = True
                problems.append(f"the server has no {kind} {s.name!r} (its {kind}s: {', '.join(str(x.get('name')) for x in theirs)})")
                continue
            shape = [int(d) for d in t.get("shape", [])]
            dt = str(t.get("datatype", ""))
            fits = len(shape) == len(s.shape) and all(a < 0 or b is None or a == b for a, b in zip(shape, s.shape))
            if DATATYPES.get(dt) != s.dtype or not fits:
                dims = ",".join("?" if d is None else str(d) for d in s.shape)
                problems.append(f"{kind} {s.name!r} is {dt}[{','.join(map(str, shape))}] on the server, "
                                f"{s.describe()} here ({datatype_of(s.dtype)}[{dims}])")
        if kind == "input" and by_name and not missing:
            problems.append(f"the server's model also takes input(s) {', '.join(map(repr, by_name))}, which edgert's has not")
    return problems
