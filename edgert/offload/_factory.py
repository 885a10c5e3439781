"""``Runtime(offload=…)``: the cloud worker an offload value names (MQTT's or the Open Inference Protocol's)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from edgert.extras import require
from edgert.errors import ConfigError
from edgert.offload._config import CloudConfig, parse_broker_url
from edgert.offload._embedded import EmbeddedCloud
from edgert.offload._kserve_config import KServeConfig, is_kserve_url
from edgert.offload._kserve_worker import make_kserve_worker
from edgert.offload._worker import CloudWorker

if TYPE_CHECKING:
    from edgert._core._run import Dispatcher


def make_cloud_worker(offload: str | CloudConfig | KServeConfig, lock: threading.Lock,
                      runtime: Dispatcher | None = None) -> CloudWorker:
    """The cloud worker for ``Runtime(offload=…)``: ``"auto"``, ``"mqtt[s]://…"``, ``"kserve://…"``
    (and its REST and TLS forms, see :mod:`edgert.offload._kserve_config`), or a config object.

    Raises:
        ConfigError: an offload value that is none of these.
        OffloadError: the broker is unreachable, or the auto-mode worker did not start.
        MissingExtra: the MQTT packages are not installed (``pip install 'edgert[cloud]'``).
    """
    if isinstance(offload, KServeConfig) or is_kserve_url(offload):
        return make_kserve_worker(offload, lock, runtime)   # type: ignore[arg-type]
    require("paho.mqtt.client", "offload")   # before starting anything: name the extra
    if offload == "auto":
        require("amqtt", "offload='auto' (the embedded broker)")
    if isinstance(offload, CloudConfig):
        return CloudWorker(offload, lock, runtime)
    if not isinstance(offload, str):
        raise ConfigError(f"offload must be None, 'auto' or 'mqtt://host:port', got {offload!r}")
    if offload == "auto":
        emb = EmbeddedCloud()
        try:
            w = CloudWorker(parse_broker_url(emb.url + "?capacity=2"), lock, runtime, emb)
        except BaseException:
            emb.close()
            raise
        try:
            emb.wait_ready(w.link)
        except BaseException:
            w.close()
            raise
        return w
    if not offload.startswith(("mqtt://", "mqtts://")):
        raise ConfigError(f"unknown offload {offload!r}: use 'auto', 'mqtt://host:port', 'mqtts://host:port' or "
                          "'kserve://host:port' (None or 'off' for no offload)")
    return CloudWorker(parse_broker_url(offload), lock, runtime)
