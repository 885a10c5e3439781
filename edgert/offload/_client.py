"""The cloud processor's delegate and session: a model served by ``edgert cloud serve`` workers.

:class:`CloudSession.expected_ms` combines the link's measured RTT and bandwidth into the
expected latency of a request; the runtime's estimator is seeded and updated with the
measured end-to-end time of every cloud run.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from delegates.base import Artifact, Delegate, Session
from edgert.errors import ModelLoadError, OffloadError
from edgert.offload._config import digest_of
from edgert.offload._link import MqttLink
from edgert.offload._wire import spec_from_json

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
