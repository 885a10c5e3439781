"""The cloud processor's client side: model requests over MQTT to ``edgert cloud serve`` workers.

Wire format (MQTT 3.1.1 compatible, so the correlation id rides in the payload)::

    b"EDG1" | u32 big-endian header length | header (UTF-8 JSON) | .npy blob | .npy blob | ...

The header names the operation (``run``, ``describe``, ``ping``), the correlation
``id``, the ``reply`` topic, the model ``name`` and the SHA-256 ``digest`` of its
file, the remaining time budget in ms and the byte size of every blob. Tensors
are ``.npy`` (``numpy.lib.format``), read back with ``allow_pickle=False``:
never pickle. Requests go to ``<prefix>/req/<model>``; a worker pool shares
``$share/<group>/<prefix>/req/+``; replies come back on ``<prefix>/res/<client id>``.

:class:`MqttLink` is one paho-mqtt connection (TCP_NODELAY on its socket,
reconnection with exponential backoff, a unique client id) that matches
replies to waiting callers. It measures every round trip: the RTT of empty
``ping`` requests and, from each ``run``, the transfer time (total minus the
server's queue and compute time) over the bytes moved, i.e. the bandwidth.
:class:`CloudSession.expected_ms` combines them into the expected latency of
a request; the runtime's estimator is seeded and updated with the measured
end-to-end time of every cloud run.
"""

from __future__ import annotations

import itertools
import os
import socket
import ssl
import threading
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import numpy as np

from delegates.base import Artifact, Delegate, Session
from scheduler.errors import ConfigError, ModelLoadError, OffloadError
from delegates.cloud_wire import (
    MAX_PAYLOAD_BYTES,
    WireError,
    decode_arrays,
    decode_header,
    encode,
    spec_from_json,
)

#: Topic prefix of requests and replies.
DEFAULT_PREFIX = "edgert"
#: Default shared-subscription group of the workers.
DEFAULT_GROUP = "edgert"
# A model name is one topic level: wildcards, separators and NUL become "_" (the header has the real name).
_TOPIC_UNSAFE = str.maketrans({c: "_" for c in "/+#\0$"})


# -- configuration ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class CloudConfig:
    """Where the broker is and how to talk to it.

    Built from a URL by :func:`parse_broker_url`:
    ``mqtt[s]://[user[:password]@]host[:port][?ca=PATH&cert=PATH&key=PATH&insecure=1&capacity=N
    &timeout_ms=MS&max_payload=BYTES&prefix=P&qos=Q]``. ``mqtts`` turns TLS on (port 8883 by
    default); the password may also come from ``EDGERT_MQTT_PASSWORD``.
    """

    host: str = "127.0.0.1"
    port: int = 1883
    username: str | None = None
    password: str | None = None
    tls: bool = False
    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    insecure: bool = False
    #: Requests one client keeps in flight (the cloud worker's parallel slots).
    capacity: int = 4
    #: Give-up time for a request without a deadline, in ms.
    timeout_ms: float = 5_000.0
    max_payload: int = MAX_PAYLOAD_BYTES
    prefix: str = DEFAULT_PREFIX
    qos: int = 1

    def url(self) -> str:
        """The broker URL without the password (for messages)."""
        user = f"{self.username}@" if self.username else ""
        return f"{'mqtts' if self.tls else 'mqtt'}://{user}{self.host}:{self.port}"


def parse_broker_url(url: str) -> CloudConfig:
    """Parse ``mqtt://…`` / ``mqtts://…`` (see :class:`CloudConfig`).

    Raises:
        ConfigError: another scheme, a bad port or an unknown/invalid query option.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("mqtt", "mqtts"):
        raise ConfigError(f"broker URL {url!r} must start with mqtt:// or mqtts://, e.g. mqtt://127.0.0.1:1883")
    try:
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"broker URL {url!r} has a bad port: {exc}") from exc
    tls = parts.scheme == "mqtts"
    cfg = CloudConfig(host=parts.hostname or "127.0.0.1", port=port or (8883 if tls else 1883),
                      username=unquote(parts.username) if parts.username else None,
                      password=unquote(parts.password) if parts.password else os.environ.get("EDGERT_MQTT_PASSWORD"),
                      tls=tls)
    fields: dict[str, Any] = {}
    conv = {"ca": str, "cert": str, "key": str, "prefix": str, "insecure": _flag, "capacity": int,
            "timeout_ms": float, "max_payload": int, "qos": int}
    for k, vals in parse_qs(parts.query, keep_blank_values=True).items():
        if k not in conv:
            from scheduler.errors import did_you_mean  # noqa: PLC0415

            raise did_you_mean("broker URL option", k, conv)
        try:
            fields[k] = conv[k](vals[-1])
        except ValueError as exc:
            raise ConfigError(f"broker URL option {k}={vals[-1]!r} is invalid: {exc}") from exc
    if fields.get("qos", 1) not in (0, 1) or fields.get("capacity", 1) < 1:
        raise ConfigError(f"broker URL {url!r}: qos must be 0 or 1 and capacity >= 1")
    return replace(cfg, **fields)


def _flag(v: str) -> bool:
    return v.lower() in ("", "1", "true", "yes", "on")


# -- wire format -----------------------------------------------------------------------------
class _Waiter:
    __slots__ = ("event", "head", "arrays", "error", "nbytes")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.head: dict[str, Any] | None = None
        self.arrays: list[np.ndarray] = []
        self.error: OffloadError | None = None
        self.nbytes = 0


class MqttLink:
    """One MQTT connection to the broker, shared by every cloud session of a runtime.

    Connects in the background and reconnects with exponential backoff (50 ms … 5 s)
    after a lost broker; while disconnected, requests fail at once with
    :class:`OffloadError` (so the runtime re-places them) and those in flight fail
    with "lost the broker connection".

    Raises:
        OffloadError: (constructor) the broker is not reachable within ``connect_timeout_s``.
    """

    def __init__(self, cfg: CloudConfig, connect_timeout_s: float = 5.0) -> None:
        import paho.mqtt.client as mqtt  # noqa: PLC0415 - lazy: only the cloud path needs it

        self.cfg = cfg
        self.client_id = f"edgert-c-{uuid.uuid4().hex[:16]}"
        self.reply_topic = f"{cfg.prefix}/res/{self.client_id}"
        self._ids = itertools.count()
        self._waiters: dict[str, _Waiter] = {}
        self._lock = threading.Lock()
        self._connected = threading.Event()
        self._closed = False
        self._refused: str | None = None
        self.rtt_ms: float | None = None
        self.bandwidth_mbps: float | None = None
        self.reconnects = 0
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=self.client_id,
                        protocol=mqtt.MQTTv311, clean_session=True)
        if cfg.username:
            c.username_pw_set(cfg.username, cfg.password)
        if cfg.tls:
            c.tls_set(ca_certs=cfg.ca, certfile=cfg.cert, keyfile=cfg.key,
                      cert_reqs=ssl.CERT_NONE if cfg.insecure else ssl.CERT_REQUIRED)
            if cfg.insecure:
                c.tls_insecure_set(True)
        c.reconnect_delay_set(0.05, 5)  # type: ignore[arg-type] - paho takes float seconds
        c.max_inflight_messages_set(max(20, 4 * cfg.capacity))
        c.on_socket_open = _nodelay
        c.on_connect = self._on_connect
        c.on_disconnect = self._on_disconnect
        c.on_message = self._on_message
        self._client = c
        try:
            c.connect_async(cfg.host, cfg.port, keepalive=15)
        except (OSError, ValueError) as exc:
            raise OffloadError(f"cannot connect to the MQTT broker at {cfg.url()}: {exc}") from exc
        c.loop_start()
        end = time.monotonic() + connect_timeout_s
        while not self._connected.wait(0.02) and self._refused is None and time.monotonic() < end:
            pass
        if not self._connected.is_set():
            self.close()
            if self._refused is not None:
                raise OffloadError(f"the MQTT broker at {cfg.url()} refused the connection: {self._refused} "
                                   "(check the username/password in the broker URL or EDGERT_MQTT_PASSWORD)")
            raise OffloadError(f"no MQTT broker answered at {cfg.url()} within {connect_timeout_s:g} s "
                               "(is mosquitto running? start one, or use offload='auto')")

    # paho callbacks (its network thread)
    def _on_connect(self, client: Any, _u: Any, _f: Any, rc: Any, _p: Any = None) -> None:
        if rc.is_failure:
            self._refused = str(rc)
            return
        client.subscribe(self.reply_topic, qos=self.cfg.qos)
        self._connected.set()

    def _on_disconnect(self, _c: Any, _u: Any, _f: Any, rc: Any, _p: Any = None) -> None:
        self._connected.clear()
        if not self._closed:
            self.reconnects += 1
        self._fail_all(f"lost the connection to the MQTT broker at {self.cfg.url()} ({rc})")

    def _on_message(self, _c: Any, _u: Any, msg: Any) -> None:
        payload = msg.payload
        try:
            head, off = decode_header(payload, self.cfg.max_payload)
        except WireError:
            return  # not ours to answer: replies to us are only ever edgert frames
        with self._lock:
            w = self._waiters.pop(str(head.get("id")), None)
        if w is None:
            return  # a reply after its caller gave up
        try:
            w.arrays = decode_arrays(payload, head, off) if head.get("ok") else []
            w.head = head
        except WireError as exc:
            w.error = OffloadError(f"malformed reply from cloud worker {head.get('worker', '?')}: {exc}")
        w.nbytes = len(payload)
        w.event.set()

    def _fail_all(self, why: str) -> None:
        with self._lock:
            waiters, self._waiters = self._waiters, {}
        for w in waiters.values():
            w.error = OffloadError(why)
            w.event.set()

    @property
    def connected(self) -> bool:
        """True while the broker connection is up."""
        return self._connected.is_set()

    def request(self, head: dict[str, Any], arrays: list[np.ndarray], model: str,
                timeout_ms: float) -> tuple[dict[str, Any], list[np.ndarray], int, int]:
        """Send one request and wait for its reply.

        Returns:
            (reply header, reply arrays, request bytes, reply bytes).

        Raises:
            OffloadError: not connected, payload over the cap, timeout, lost broker, or an
                error reply (its code and message).
        """
        rid = f"{next(self._ids):x}"
        payload = encode({**head, "id": rid, "reply": self.reply_topic, "model": model}, arrays)
        if len(payload) > self.cfg.max_payload:
            raise OffloadError(f"request for {model!r} is {len(payload)} bytes, over the {self.cfg.max_payload}-byte "
                               "cap (raise max_payload in the broker URL and the workers' --max-payload)")
        if not self._connected.is_set():
            raise OffloadError(f"not connected to the MQTT broker at {self.cfg.url()} (reconnecting)")
        w = _Waiter()
        with self._lock:
            self._waiters[rid] = w
        topic = f"{self.cfg.prefix}/req/{model.translate(_TOPIC_UNSAFE) or '_'}"
        info = self._client.publish(topic, payload, qos=self.cfg.qos)
        if info.rc != 0:
            with self._lock:
                self._waiters.pop(rid, None)
            raise OffloadError(f"publishing to the MQTT broker at {self.cfg.url()} failed (rc={info.rc})")
        if not w.event.wait(max(0.0, timeout_ms) / 1e3):
            with self._lock:
                self._waiters.pop(rid, None)
            raise OffloadError(f"no reply from a cloud worker for {model!r} within {timeout_ms:.1f} ms")
        if w.error is not None:
            raise w.error
        assert w.head is not None
        if not w.head.get("ok"):
            raise OffloadError(f"cloud worker {w.head.get('worker', '?')} refused {model!r}: "
                               f"[{w.head.get('code', 'error')}] {w.head.get('error', '')}")
        return w.head, w.arrays, len(payload), w.nbytes

    def ping(self, timeout_ms: float = 1_000.0) -> float:
        """Round trip of an empty request through the broker and a worker, in ms (updates ``rtt_ms``)."""
        t = time.perf_counter()
        self.request({"op": "ping"}, [], "_ping", timeout_ms)
        ms = (time.perf_counter() - t) * 1e3
        self.rtt_ms = ms if self.rtt_ms is None else min(ms, 0.9 * self.rtt_ms + 0.1 * ms)
        return ms

    def observe_transfer(self, nbytes: int, transfer_ms: float) -> None:
        """Fold one run's transfer time (total minus server time, ms) for ``nbytes`` into the bandwidth."""
        rtt = self.rtt_ms or 0.0
        wire = transfer_ms - rtt
        if nbytes < 16_384 or wire <= 0.05:
            return  # too small to say anything about the bandwidth
        mbps = nbytes * 8 / 1e3 / wire
        self.bandwidth_mbps = mbps if self.bandwidth_mbps is None else self.bandwidth_mbps + 0.1 * (mbps - self.bandwidth_mbps)

    def close(self) -> None:
        """Disconnect and stop the network thread; fails anything still waiting."""
        self._closed = True
        try:
            self._client.disconnect()
        finally:
            self._client.loop_stop()
        self._fail_all("the cloud link was closed")


def _nodelay(_client: Any, _u: Any, sock: Any) -> None:
    # Without it a QoS 1 reply waits for the delayed-ACK timer (~45 ms measured on loopback).
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except (OSError, AttributeError):  # pragma: no cover - a unix socket / websocket transport
        pass


# -- delegate and session --------------------------------------------------------------------
def digest_of(data: bytes) -> str:
    """SHA-256 hex digest of a model file: how a request names exactly which model it means."""
    import hashlib  # noqa: PLC0415

    return hashlib.sha256(data).hexdigest()


class CloudSession(Session):
    """A model served by the cloud workers: inputs/outputs as the worker reported them."""

    def __init__(self, link: MqttLink, name: str, digest: str, reply: dict[str, Any]) -> None:
        self.link = link
        self.name = name
        self.digest = digest
        self.inputs = tuple(spec_from_json(d) for d in reply.get("inputs", []))
        self.outputs = tuple(spec_from_json(d) for d in reply.get("outputs", []))
        #: Server compute time of this model, EMA in ms.
        self.compute_ms: float | None = None
        #: The last reply's worker id and server compute time (ms).
        self.last_worker = ""
        self.last_compute_ms = 0.0

    def run(self, feeds: list[np.ndarray], timeout_ms: float | None = None) -> list[np.ndarray]:
        """One round trip; waits at most ``timeout_ms`` (default: the link's ``timeout_ms``).

        Raises:
            OffloadError: timeout, lost broker, oversize payload or an error reply.
        """
        timeout = self.link.cfg.timeout_ms if timeout_ms is None else timeout_ms
        t = time.perf_counter()
        head, outs, up, down = self.link.request({"op": "run", "digest": self.digest, "budget_ms": timeout},
                                                 feeds, self.name, timeout)
        total = (time.perf_counter() - t) * 1e3
        compute = self.last_compute_ms = float(head.get("compute_ms", 0.0))
        self.compute_ms = compute if self.compute_ms is None else self.compute_ms + 0.1 * (compute - self.compute_ms)
        self.link.observe_transfer(up + down, total - compute - float(head.get("queue_ms", 0.0)))
        self.last_worker = str(head.get("worker", ""))
        if len(outs) != len(self.outputs):
            raise OffloadError(f"cloud worker {self.last_worker} returned {len(outs)} outputs for {self.name!r}, "
                               f"expected {len(self.outputs)}")
        return [np.array(o) for o in outs]  # writable copies, not views of the message

    def expected_ms(self, nbytes: int) -> float | None:
        """RTT + ``nbytes`` over the measured bandwidth + server compute (ms); None before measurements."""
        if self.link.rtt_ms is None or self.compute_ms is None:
            return None
        wire = nbytes * 8 / 1e3 / self.link.bandwidth_mbps if self.link.bandwidth_mbps else 0.0
        return self.link.rtt_ms + wire + self.compute_ms


class CloudDelegate(Delegate):
    """Runs models on ``edgert cloud serve`` workers reached through an MQTT broker."""

    name = "mqtt-cloud"
    processor = "cloud"
    backend = "mqtt"
    formats = ("onnx", "tflite")

    def __init__(self, link: MqttLink) -> None:
        self.link = link

    def probe(self) -> str | None:
        """None while the broker connection is up, else why not (never cached: it changes)."""
        return self._probe()

    def _probe(self) -> str | None:
        return None if self.link.connected else f"not connected to the MQTT broker at {self.link.cfg.url()}"

    def open(self, artifact: Artifact, threads: int = 1) -> Session:  # noqa: ARG002 - the worker has its own
        """Not usable without a model name: use :meth:`open_named`."""
        raise ModelLoadError("the cloud delegate needs the model's name: it is opened by the cloud worker")

    def open_named(self, artifact: Artifact, name: str, timeout_ms: float = 3_000.0) -> CloudSession:
        """Ask the workers whether they serve ``name`` with this artifact's digest; return its session.

        Raises:
            ModelLoadError: no worker answered, or none serves this exact file.
        """
        digest = digest_of(artifact.read())
        try:
            head, _, _, _ = self.link.request({"op": "describe", "digest": digest}, [], name, timeout_ms)
        except OffloadError as exc:
            raise ModelLoadError(f"the cloud cannot serve {name!r} ({artifact.format}, sha256 {digest[:12]}…): {exc}; "
                                 f"put this exact file in the --models DIR of `edgert cloud serve`") from exc
        if self.link.rtt_ms is None:
            for _ in range(3):
                self.link.ping()
        return CloudSession(self.link, name, digest, head)
