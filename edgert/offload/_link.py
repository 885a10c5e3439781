"""The cloud link: one MQTT connection carrying model requests to ``edgert cloud serve`` workers.

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
import socket
import threading
import time
import uuid
from typing import Any

import numpy as np

from edgert.errors import OffloadError
from edgert.offload._broker_check import check_broker
from edgert.offload._config import CloudConfig, tls_context
from edgert.offload._wire import WireError, decode_arrays, decode_header, encode

# A model name is one topic level: wildcards, separators and NUL become "_" (the header has the real name).
_TOPIC_UNSAFE = str.maketrans({c: "_" for c in "/+#\0$"})


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
        OffloadError: (constructor) the broker is not reachable within ``connect_timeout_s``, refused the
            credentials, or a TLS handshake failed in a way no retry fixes (the broker's certificate cannot
            be verified, it refused the client certificate, TLS against a plain port or the other way
            round): raised at the first failed attempt, naming the cause and the fix.
        ConfigError: (constructor) a ``ca``/``cert``/``key`` file that is missing or not PEM.
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
        self._attempt_failed = threading.Event()
        self._ever_connected = False
        self.rtt_ms: float | None = None
        self.bandwidth_mbps: float | None = None
        self.reconnects = 0
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=self.client_id,
                        protocol=mqtt.MQTTv311, clean_session=True)
        if cfg.username:
            c.username_pw_set(cfg.username, cfg.password)
        self._ssl = tls_context(cfg)
        if self._ssl is not None:
            c.tls_set_context(self._ssl)
            c.tls_insecure_set(cfg.insecure)
        c.reconnect_delay_set(0.05, 5)  # type: ignore[arg-type]  # paho takes float seconds
        c.max_inflight_messages_set(max(20, 4 * cfg.capacity))
        c.on_socket_open = _nodelay
        c.on_connect = self._on_connect
        c.on_connect_fail = self._on_connect_fail
        c.on_disconnect = self._on_disconnect
        c.on_message = self._on_message
        self._client = c
        try:
            c.connect_async(cfg.host, cfg.port, keepalive=15)
        except (OSError, ValueError) as exc:
            raise OffloadError(f"cannot connect to the MQTT broker at {cfg.url()}: {exc}") from exc
        c.loop_start()
        self._wait_connected(connect_timeout_s)

    def _wait_connected(self, timeout_s: float) -> None:
        """Wait for the first CONNACK. paho retries a failed attempt in its thread and keeps only "connection
        failed", so after each failed attempt the broker's port is asked once more what it was
        (:func:`check_broker`): a configuration error (a certificate, TLS against a plain port …) is raised
        at once; while nothing listens, the wait goes on (a broker may be starting)."""
        cfg = self.cfg
        end = time.monotonic() + timeout_s
        listening = False
        likely: str | None = None
        while not self._connected.wait(0.02) and self._refused is None and time.monotonic() < end:
            if not self._attempt_failed.is_set():
                continue
            self._attempt_failed.clear()
            check = check_broker(cfg, self._ssl, max(0.1, min(2.0, end - time.monotonic())))
            listening = listening or check.listening
            likely = check.problem or likely
            if check.problem is not None and check.sure and not self._connected.is_set():
                self.close()
                raise OffloadError(check.problem)
        if self._connected.is_set():
            return
        self.close()
        if self._refused is not None:
            raise OffloadError(f"the MQTT broker at {cfg.url()} refused the connection: {self._refused} "
                               "(check the username/password in the broker URL or EDGERT_MQTT_PASSWORD)")
        if likely is not None:
            raise OffloadError(likely)
        if listening:
            raise OffloadError(f"something listens at {cfg.url()} but did not complete an MQTT connection within "
                               f"{timeout_s:g} s (is it an MQTT broker, and is {'TLS' if cfg.tls else 'plain MQTT'} "
                               f"what port {cfg.port} speaks?)")
        raise OffloadError(f"no MQTT broker answered at {cfg.url()} within {timeout_s:g} s "
                           "(is mosquitto running? start one, or use offload='auto')")

    # paho callbacks (its network thread)
    def _on_connect(self, client: Any, _u: Any, _f: Any, rc: Any, _p: Any = None) -> None:
        if rc.is_failure:
            self._refused = str(rc)
            return
        client.subscribe(self.reply_topic, qos=self.cfg.qos)
        self._ever_connected = True
        self._connected.set()

    def _on_connect_fail(self, _c: Any, _u: Any) -> None:
        self._attempt_failed.set()   # the TCP connection or the TLS handshake failed (paho keeps no cause)

    def _on_disconnect(self, _c: Any, _u: Any, _f: Any, rc: Any, _p: Any = None) -> None:
        if not self._ever_connected:
            self._attempt_failed.set()   # closed before the CONNACK: e.g. mqtt:// to a TLS port
        self._connected.clear()
        if not self._closed:
            self.reconnects += 1
        self._fail_all(f"lost the connection to the MQTT broker at {self.cfg.url()} ({rc})")

    def _on_message(self, _c: Any, _u: Any, msg: Any) -> None:
        """paho's network thread calls this: an exception escaping it would end that thread (and with it
        every reply), so anything unexpected fails the one waiting request with its type and message."""
        try:
            self._deliver(msg)
        except Exception as exc:  # noqa: BLE001 - a bug of ours must not kill paho's loop
            import logging  # noqa: PLC0415

            logging.getLogger("edgert.bug").error("handling a cloud reply raised %s: %s", type(exc).__name__, exc,
                                                  exc_info=exc)
            self._fail_one(msg, f"handling the cloud reply raised {type(exc).__name__}: {exc}")

    def _fail_one(self, msg: Any, why: str) -> None:
        """Fail the request ``msg`` answers (when its header names it), or nothing."""
        try:
            head, _ = decode_header(msg.payload, self.cfg.max_payload)
        except Exception:  # noqa: BLE001 - no id to fail: its caller times out, as for a lost reply
            return
        with self._lock:
            w = self._waiters.pop(str(head.get("id")), None)
        if w is not None:
            w.error = OffloadError(why)
            w.event.set()

    def _deliver(self, msg: Any) -> None:
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
        except Exception as exc:  # noqa: BLE001 - a bug of ours: this request fails, named; the loop goes on
            w.error = OffloadError(f"decoding the reply of cloud worker {head.get('worker', '?')} raised "
                                   f"{type(exc).__name__}: {exc}")
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


