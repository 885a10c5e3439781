"""A real mosquitto, an in-process cloud worker, and a paho client that sends raw payloads.

Shared by tests/inputs/test_wire.py and tests/fuzz/test_fuzz_wire.py.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from pathlib import Path
from typing import Any

from edgert.offload._config import digest_of, parse_broker_url
from edgert.offload._wire import decode_header
from edgert.offload.server import CloudServer
from tests.edgert.test_cloud_support import Mosquitto, make_models


class WireRig:
    """``send(payload)`` publishes raw bytes to the worker; ``ask(header, blobs)`` waits for the one reply."""

    def __init__(self, tmp: Path) -> None:
        import paho.mqtt.client as mqtt  # noqa: PLC0415

        self.broker = Mosquitto(tmp)   # started by its constructor
        try:
            self._start(tmp, mqtt)
        except BaseException:
            self.broker.stop()
            raise

    def _start(self, tmp: Path, mqtt: Any) -> None:
        models = make_models(tmp / "models", ("tiny",))
        self.digest = digest_of((models / "tiny.onnx").read_bytes())
        cfg = parse_broker_url(self.broker.url)
        self.prefix = cfg.prefix
        self.server = CloudServer(cfg, models, group="")
        self._stop = asyncio.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_until_complete,
                                        args=(self.server.serve(self._stop),), daemon=True)
        self._thread.start()
        self.replies: dict[str, list[bytes]] = {}
        self._cond = threading.Condition()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"rig-{uuid.uuid4().hex[:6]}")
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", self.broker.port)
        self.client.subscribe(f"{self.prefix}/res/#", qos=1)
        self.client.loop_start()
        for _ in range(200):
            if self.server.ready.is_set():
                break
            threading.Event().wait(0.05)
        assert self.ask({"op": "ping"}) is not None, "the worker did not answer a ping"

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        with self._cond:
            self.replies.setdefault(msg.topic, []).append(msg.payload)
            self._cond.notify_all()

    def send(self, payload: bytes) -> None:
        """Publish raw bytes as a request (QoS 1, waits until the broker has it)."""
        self.client.publish(f"{self.prefix}/req/tiny", payload, qos=1).wait_for_publish(5)

    def topic(self) -> str:
        """A fresh reply topic."""
        return f"{self.prefix}/res/{uuid.uuid4().hex}"

    def wait(self, topic: str, timeout_s: float = 10.0) -> list[bytes]:
        """The replies on ``topic`` once there is one (empty after ``timeout_s``), plus a short grace for a second."""
        with self._cond:
            self._cond.wait_for(lambda: topic in self.replies, timeout_s)
            self._cond.wait_for(lambda: len(self.replies.get(topic, ())) > 1, 0.005)
            return self.replies.pop(topic, [])

    def ask(self, header: dict[str, Any], blobs: bytes = b"", raw_header: bytes | None = None) -> dict[str, Any] | None:
        """Send one frame with a reply topic; returns the decoded reply header (None: no reply)."""
        from edgert.offload._wire import _HEAD, MAGIC  # noqa: PLC0415

        topic = self.topic()
        head = raw_header if raw_header is not None else __import__("json").dumps({**header, "reply": topic}).encode()
        self.send(MAGIC + _HEAD.pack(len(head)) + head + blobs)
        got = self.wait(topic)
        assert len(got) <= 1, f"{len(got)} replies to one request"
        return decode_header(got[0])[0] if got else None

    def close(self) -> None:
        """Stop the worker, the client and the broker (the broker even when stopping the others fails)."""
        try:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(timeout=20)
            self.server.close()
            self.client.disconnect()
            self.client.loop_stop()
        finally:
            self.broker.stop()
