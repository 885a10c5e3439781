"""``edgert cloud serve``: a cloud worker answering model requests over MQTT (asyncio, aiomqtt).

A worker serves the models in its ``--models`` directory and only those:
every ``.onnx`` (ONNX Runtime, CPU) and ``.tflite`` (LiteRT, XNNPACK) file,
named by its stem and identified by the SHA-256 of its bytes, so a request
for ``hand`` runs exactly the file the client loaded. Workers subscribe to
``$share/<group>/<prefix>/req/+``: the broker spreads requests over all
workers of the group, so starting another worker adds capacity with no
configuration. (The embedded amqtt broker has no shared subscriptions; a
worker started by ``offload="auto"`` subscribes plainly: ``--group ""``.)

Every request that names a reply topic gets exactly one reply: outputs, or an
error with a code — ``bad_request``, ``unknown_model``, ``too_large``,
``bad_input`` (dtype/shape checked against the model before running),
``expired`` (its time budget ran out while queued), ``inference_failed``, and
``internal_error`` for a bug of ours (logged at ERROR with its traceback).
Garbage without a usable reply topic is logged and counted; the worker keeps
serving. SIGTERM / SIGINT drain: unsubscribe, finish and answer what is in
flight (up to ``drain_s``), then disconnect. A lost or unreachable broker is
retried with exponential backoff (100 ms … 5 s); a configuration error, which
no retry fixes (refused credentials, a broker certificate that cannot be
verified, a refused client certificate, a TLS mismatch), ends the worker with
:class:`OffloadError` (``edgert cloud serve``: one line, exit status 2).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from delegates.base import Artifact, Delegate, Session
from edgert.errors import EdgeRTError, OffloadError
from edgert.offload._broker_check import check_broker
from edgert.offload._config import DEFAULT_GROUP, CloudConfig, digest_of, tls_context
from edgert.offload._wire import (
    WireError,
    decode_arrays,
    decode_header,
    encode,
    spec_to_json,
)

log = logging.getLogger("edgert.cloud")

_FORMATS = {".onnx": "onnx", ".tflite": "tflite"}
#: CONNACK reason codes (MQTT 5 values, as paho reports MQTT 3.1.1's 4 and 5) that refuse the credentials.
_CREDENTIALS_REFUSED = (4, 5, 134, 135)


@dataclass(eq=False)
class ServedModel:
    """One model file the worker serves: one session per parallel slot."""

    name: str
    digest: str
    path: Path
    sessions: list[Session]

    @property
    def spec(self) -> dict[str, Any]:
        """Inputs and outputs as JSON (what ``describe`` returns)."""
        s = self.sessions[0]
        return {"inputs": [spec_to_json(x) for x in s.inputs], "outputs": [spec_to_json(x) for x in s.outputs]}


class ModelStore:
    """The models of one directory, by name and digest; rescanned on demand."""

    def __init__(self, directory: str | Path, slots: int = 1) -> None:
        self.dir = Path(directory)
        if not self.dir.is_dir():
            raise EdgeRTError(f"--models {str(self.dir)!r} is not a directory")
        self.slots = slots
        self._by_name: dict[str, dict[str, ServedModel]] = {}
        self._seen: dict[Path, tuple[float, int]] = {}
        self._delegates: dict[str, Delegate] | None = None

    def _delegate(self, fmt: str) -> Delegate:
        if self._delegates is None:
            from delegates.registry import all_delegates  # noqa: PLC0415

            known = all_delegates()
            self._delegates = {"onnx": known["ort-cpu"], "tflite": known["litert-xnnpack"]}
        return self._delegates[fmt]

    def scan(self) -> list[str]:
        """Load new or changed files; returns one line per file that failed to load."""
        errors = []
        for p in sorted(self.dir.iterdir()):
            fmt = _FORMATS.get(p.suffix.lower())
            if fmt is None or not p.is_file():
                continue
            st = p.stat()
            if self._seen.get(p) == (st.st_mtime, st.st_size):
                continue
            self._seen[p] = (st.st_mtime, st.st_size)
            data = p.read_bytes()
            digest = digest_of(data)
            if digest in self._by_name.get(p.stem, {}):
                continue
            try:
                d = self._delegate(fmt)
                sessions = [d.open(Artifact(fmt, path=p), threads=1) for _ in range(self.slots)]
            except EdgeRTError as exc:
                errors.append(f"{p.name}: {exc}")
                continue
            self._by_name.setdefault(p.stem, {})[digest] = ServedModel(p.stem, digest, p, sessions)
            log.info("serving %s (%s, sha256 %s…)", p.stem, fmt, digest[:12])
        return errors

    def get(self, name: str, digest: str) -> ServedModel | None:
        """The model ``name`` whose file has ``digest``, or None."""
        return self._by_name.get(name, {}).get(digest)

    def names(self) -> list[str]:
        """Names of the served models."""
        return sorted(self._by_name)


@dataclass
class ServerStats:
    """Counters of one worker's life."""

    served: int = 0
    errors: int = 0
    garbage: int = 0
    by_code: dict[str, int] = field(default_factory=dict)


class _Reject(Exception):
    def __init__(self, code: str, msg: str) -> None:
        super().__init__(msg)
        self.code = code


class CloudServer:
    """One cloud worker. ``await serve(stop)`` until ``stop`` is set, then drain.

    Args:
        cfg: broker address, credentials/TLS, topic prefix, payload cap.
        models: the directory of model files to serve.
        group: shared-subscription group (``""`` = plain subscription, for brokers without ``$share``).
        slots: requests computed at once (each slot has its own single-threaded sessions).
        worker_id: the MQTT client id (default: unique, ``edgert-w-<host>-<pid>-<random>``).
        drain_s: how long a graceful stop waits for in-flight requests.
    """

    def __init__(self, cfg: CloudConfig, models: str | Path, *, group: str = DEFAULT_GROUP, slots: int = 1,
                 worker_id: str | None = None, drain_s: float = 10.0) -> None:
        self.cfg = cfg
        self.store = ModelStore(models, slots)
        for line in self.store.scan():
            log.warning("not serving %s", line)
        self.group = group
        base = f"{cfg.prefix}/req/+"
        self.topic_filter = f"$share/{group}/{base}" if group else base
        self.worker_id = worker_id or f"edgert-w-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.drain_s = drain_s
        self.stats = ServerStats()
        self._pool = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="edgert-cloud")
        self._slots: asyncio.Queue[int] | None = None
        self._n_slots = slots
        self._tasks: set[asyncio.Task[None]] = set()
        self.ready = asyncio.Event()
        self._ssl = tls_context(cfg)

    async def serve(self, stop: asyncio.Event) -> None:
        """Connect (retrying with backoff), answer requests until ``stop``, then drain and disconnect.

        Raises:
            OffloadError: a configuration error no retry fixes: the broker refused the credentials, its
                certificate cannot be verified, it refused the client certificate, or TLS and plain MQTT
                do not match (an unreachable or restarting broker is retried instead).
        """
        import aiomqtt  # noqa: PLC0415

        self._slots = asyncio.Queue()
        for i in range(self._n_slots):
            self._slots.put_nowait(i)
        backoff = 0.1
        while not stop.is_set():
            try:
                async with self._client(aiomqtt) as client:
                    await client.subscribe(self.topic_filter, qos=self.cfg.qos)
                    log.info("worker %s ready on %s (%s), models: %s", self.worker_id, self.cfg.url(),
                             self.topic_filter, ", ".join(self.store.names()) or "none")
                    self.ready.set()
                    backoff = 0.1
                    reader = asyncio.create_task(self._read(client))
                    stopper = asyncio.create_task(stop.wait())
                    await asyncio.wait({reader, stopper}, return_when=asyncio.FIRST_COMPLETED)
                    if stop.is_set():
                        await self._drain(client, reader)
                        stopper.cancel()
                        return
                    stopper.cancel()
                    reader.result()  # re-raise the reader's MqttError, if any
            except aiomqtt.MqttError as exc:
                self.ready.clear()
                fatal = await self._configuration_error(aiomqtt, exc)
                if fatal is not None:
                    raise OffloadError(fatal) from exc   # `edgert cloud serve` prints it and exits with status 2
                log.warning("broker %s: %s; reconnecting in %.1f s", self.cfg.url(), exc, backoff)
                try:
                    await asyncio.wait_for(stop.wait(), backoff)
                except TimeoutError:
                    pass
                backoff = min(backoff * 2, 5.0)

    def _client(self, aiomqtt: Any) -> Any:
        tls: dict[str, Any] = {}
        if self.cfg.insecure and self.cfg.tls:
            import ssl  # noqa: PLC0415

            # aiomqtt turns host name checking off only with TLSParameters
            tls = {"tls_params": aiomqtt.TLSParameters(ca_certs=self.cfg.ca, certfile=self.cfg.cert,
                                                       keyfile=self.cfg.key, cert_reqs=ssl.CERT_NONE),
                   "tls_insecure": True}
        elif self._ssl is not None:
            tls = {"tls_context": self._ssl}
        return aiomqtt.Client(self.cfg.host, self.cfg.port, username=self.cfg.username, password=self.cfg.password,
                              identifier=self.worker_id, protocol=aiomqtt.ProtocolVersion.V311, clean_session=True,
                              keepalive=15, socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)], **tls)

    async def _configuration_error(self, aiomqtt: Any, exc: Exception) -> str | None:
        """Why connecting failed when no retry can fix it (refused credentials, a broker certificate that
        cannot be verified, a refused client certificate, TLS against a plain port or the other way
        round), else None (the broker is unreachable or restarting: retry). aiomqtt keeps only the words
        of a failed handshake, so the port is asked once more (:func:`check_broker`)."""
        rc = getattr(exc, "rc", None)
        if isinstance(exc, aiomqtt.MqttCodeError) and getattr(rc, "value", rc) in _CREDENTIALS_REFUSED:
            user = f" of user {self.cfg.username!r}" if self.cfg.username else " (no username given)"
            return (f"the MQTT broker at {self.cfg.url()} refused the credentials{user}: {rc} (check --username, "
                    "the broker URL's user:password, or the password's environment variable, --password-env, "
                    "default EDGERT_MQTT_PASSWORD)")
        check = await asyncio.get_running_loop().run_in_executor(None, check_broker, self.cfg, self._ssl, 2.0)
        return check.problem if check.sure else None

    async def _read(self, client: Any) -> None:
        async for message in client.messages:
            t = asyncio.create_task(self._handle(client, message.payload, time.perf_counter()))
            self._tasks.add(t)
            t.add_done_callback(self._tasks.discard)

    async def _drain(self, client: Any, reader: asyncio.Task[None]) -> None:
        log.info("draining: %d request(s) in flight", len(self._tasks))
        try:
            await client.unsubscribe(self.topic_filter)
        except Exception as exc:  # noqa: BLE001 - a dead broker cannot be unsubscribed from; drain anyway
            log.warning("unsubscribe failed while draining: %s", exc)
        await asyncio.sleep(0.05)  # messages the broker sent before it saw the unsubscribe
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=self.drain_s)
        reader.cancel()
        log.info("drained; served %d, errors %d, garbage %d", self.stats.served, self.stats.errors,
                 self.stats.garbage)

    # -- one request ------------------------------------------------------------------------
    async def _handle(self, client: Any, payload: bytes, t0: float) -> None:
        try:
            head, off = decode_header(payload, max_bytes=1 << 62)
        except WireError as exc:
            self.stats.garbage += 1
            log.warning("ignored a message that is not an edgert frame (%d bytes): %s", len(payload), exc)
            return
        reply = head.get("reply")
        if not (isinstance(reply, str) and reply.startswith(f"{self.cfg.prefix}/res/") and "+" not in reply
                and "#" not in reply):
            self.stats.garbage += 1
            log.warning("ignored a request without a valid reply topic (%r)", reply)
            return
        base = {"id": head.get("id"), "worker": self.worker_id}
        try:
            out, arrays = await self._answer(head, payload, off, t0)
            self.stats.served += 1
        except _Reject as exc:
            out, arrays = self._refused(head, exc), []
        except Exception as exc:  # noqa: BLE001 - a bug of ours: still exactly one reply, and an ERROR log
            log.error("request %s: internal error", head.get("id"), exc_info=exc)
            out, arrays = self._refused(head, _Reject("internal_error", f"{type(exc).__name__}: {exc}")), []
        try:
            await client.publish(reply, encode({**base, **out}, arrays), qos=self.cfg.qos)
        except Exception as exc:  # noqa: BLE001 - the client's reconnect path will see the broker error
            log.warning("could not send the reply to %s: %s", reply, exc)

    def _refused(self, head: dict[str, Any], exc: _Reject) -> dict[str, Any]:
        """Count a refusal and build its error reply."""
        self.stats.errors += 1
        self.stats.by_code[exc.code] = self.stats.by_code.get(exc.code, 0) + 1
        log.debug("request %s refused: [%s] %s", head.get("id"), exc.code, exc)
        return {"ok": False, "code": exc.code, "error": str(exc)}

    async def _answer(self, head: dict[str, Any], payload: bytes, off: int,
                      t0: float) -> tuple[dict[str, Any], list[np.ndarray]]:
        op = head.get("op")
        if op == "ping":
            return {"ok": True}, []
        name, digest = head.get("model"), head.get("digest")
        if not isinstance(name, str) or not isinstance(digest, str):
            raise _Reject("bad_request", "a request needs string fields 'model' and 'digest'")
        if op not in ("run", "describe"):
            raise _Reject("bad_request", f"unknown op {op!r} (ops: run, describe, ping)")
        budget = head.get("budget_ms")
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, (int, float))
                                   or not 0 < budget < float("inf")):
            raise _Reject("bad_request", f"budget_ms must be a number of ms > 0 (or absent), got {budget!r:.40}")
        if len(payload) > self.cfg.max_payload:
            raise _Reject("too_large", f"{len(payload)} bytes is over this worker's {self.cfg.max_payload}-byte cap")
        sm = self.store.get(name, digest)
        if sm is None and op == "describe":
            for line in await asyncio.get_running_loop().run_in_executor(None, self.store.scan):
                log.warning("not serving %s", line)
            sm = self.store.get(name, digest)
        if sm is None:
            raise _Reject("unknown_model", f"this worker does not serve {name!r} with sha256 {digest[:12]}… "
                                           f"(serves: {', '.join(self.store.names()) or 'nothing'})")
        if op == "describe":
            return {"ok": True, **sm.spec}, []
        try:
            arrays = decode_arrays(payload, head, off)
        except WireError as exc:
            raise _Reject("bad_request", str(exc)) from exc
        self._validate(sm, arrays)
        assert self._slots is not None
        slot = await self._slots.get()
        try:
            t_start = time.perf_counter()
            queue_ms = (t_start - t0) * 1e3
            if budget is not None and queue_ms > budget:
                raise _Reject("expired", f"waited {queue_ms:.1f} ms for a slot, over its {budget:.1f} ms budget")
            try:
                if self._n_slots == 1:  # one slot: computing on the loop saves two thread hand-offs
                    outs, compute_ms = _timed_run(sm.sessions[slot], arrays)
                else:
                    outs, compute_ms = await asyncio.get_running_loop().run_in_executor(
                        self._pool, _timed_run, sm.sessions[slot], arrays)
            except EdgeRTError as exc:
                raise _Reject("inference_failed", str(exc)) from exc
        finally:
            self._slots.put_nowait(slot)
        return {"ok": True, "compute_ms": compute_ms, "queue_ms": queue_ms}, outs

    @staticmethod
    def _validate(sm: ServedModel, arrays: list[np.ndarray]) -> None:
        specs = sm.sessions[0].inputs
        if len(arrays) != len(specs):
            raise _Reject("bad_input", f"{sm.name!r} takes {len(specs)} input(s), got {len(arrays)}")
        for spec, a in zip(specs, arrays):
            if a.dtype != spec.dtype or not spec.accepts_shape(a.shape):
                raise _Reject("bad_input", f"input {spec.name!r} of {sm.name!r} expects {spec.describe()}, got "
                                           f"{a.dtype.name}{list(a.shape)}")

    def close(self) -> None:
        """Release the sessions' threads."""
        self._pool.shutdown(wait=False)


def _timed_run(session: Session, arrays: list[np.ndarray]) -> tuple[list[np.ndarray], float]:
    """Run once; returns the outputs and the compute time in ms (the session's run only)."""
    t = time.perf_counter()
    outs = session.run(arrays)
    return outs, (time.perf_counter() - t) * 1e3


def serve_forever(cfg: CloudConfig, models: str | Path, *, group: str = DEFAULT_GROUP, slots: int = 1,
                  worker_id: str | None = None, drain_s: float = 10.0) -> ServerStats:
    """Run a worker until SIGTERM/SIGINT, drain, and return its counters.

    Raises:
        EdgeRTError: the models directory is missing.
        ConfigError: a ca/cert/key file that is missing or not PEM.
        OffloadError: a configuration error no retry fixes (see :meth:`CloudServer.serve`).
    """
    server = CloudServer(cfg, models, group=group, slots=slots, worker_id=worker_id, drain_s=drain_s)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await server.serve(stop)

    try:
        asyncio.run(main())
    finally:
        server.close()
    return server.stats

