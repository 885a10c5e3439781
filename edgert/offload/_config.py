"""Where the cloud is: ``mqtt://host:port`` URLs parsed into a :class:`CloudConfig`.

Shared by the client (:mod:`edgert.offload._link`, :mod:`edgert.offload._client`) and the
worker (:mod:`edgert.offload.server`).
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from edgert.errors import ConfigError
from edgert.offload._wire import MAX_PAYLOAD_BYTES

#: Topic prefix of requests and replies.
DEFAULT_PREFIX = "edgert"
#: Default shared-subscription group of the workers.
DEFAULT_GROUP = "edgert"


def digest_of(data: bytes) -> str:
    """SHA-256 hex digest of a model file: how a request names exactly which model it means."""
    import hashlib  # noqa: PLC0415

    return hashlib.sha256(data).hexdigest()


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
    conv: dict[str, Callable[[str], Any]] = {"ca": str, "cert": str, "key": str, "prefix": str, "insecure": url_flag, "capacity": int,
            "timeout_ms": float, "max_payload": int, "qos": int}
    for k, vals in parse_qs(parts.query, keep_blank_values=True).items():
        if k not in conv:
            from edgert.errors import did_you_mean  # noqa: PLC0415

            raise did_you_mean("broker URL option", k, conv)
        try:
            fields[k] = conv[k](vals[-1])
        except ValueError as exc:
            raise ConfigError(f"broker URL option {k}={vals[-1]!r} is invalid: {exc}") from exc
    if fields.get("qos", 1) not in (0, 1) or fields.get("capacity", 1) < 1:
        raise ConfigError(f"broker URL {url!r}: qos must be 0 or 1 and capacity >= 1")
    return replace(cfg, **fields)


def tls_context(cfg: CloudConfig) -> ssl.SSLContext | None:
    """The TLS context of a broker connection (None for ``mqtt://``), from the URL's ca, cert, key, insecure.

    Raises:
        ConfigError: a file that is missing or not PEM.
    """
    if not cfg.tls:
        return None
    from edgert.offload._tls import client_context  # noqa: PLC0415

    return client_context(ca=cfg.ca, cert=cfg.cert, key=cfg.key, insecure=cfg.insecure, what="broker URL")


def url_flag(v: str) -> bool:
    """A URL query flag: present with no value, or 1/true/yes/on (any case), is on."""
    return v.lower() in ("", "1", "true", "yes", "on")


