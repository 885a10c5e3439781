"""Where an Open Inference Protocol server is: ``kserve://host:port`` URLs parsed into a :class:`KServeConfig`.

The Open Inference Protocol (KServe v2) is what Triton Inference Server, KServe,
Seldon MLServer and others speak, over gRPC and REST. URL forms::

    kserve://host:port          gRPC (default port 8001)
    kserves://host:port         gRPC over TLS (default port 443)
    kserve+http://host:port     REST (default port 8000)
    kserve+https://host:port    REST over TLS (default port 443)

Query options (all optional)::

    model.NAME=SERVER[:VERSION]  serve edgert's model NAME as the server's model SERVER (version VERSION;
                                 default: the same name, the server's default version); repeatable
    header=Name:Value            an extra request header / gRPC metadata (auth); repeatable
    ca=PATH cert=PATH key=PATH   TLS: CA bundle, client certificate and key (mutual TLS)
    insecure=1                   REST over TLS without verifying the server's certificate (testing only)
    capacity=N                   requests one runtime keeps in flight (default 4)
    timeout_ms=MS                give-up time of a request without a deadline (default 5000)

``EDGERT_KSERVE_TOKEN`` in the environment adds ``Authorization: Bearer <token>`` (unless a
header names Authorization), so a secret need not sit in a URL or a command line.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from edgert.errors import ConfigError
from edgert.offload._config import url_flag

#: URL scheme -> (protocol, TLS, default port).
SCHEMES: dict[str, tuple[str, bool, int]] = {
    "kserve": ("grpc", False, 8001), "kserves": ("grpc", True, 443),
    "kserve+grpc": ("grpc", False, 8001), "kserve+grpcs": ("grpc", True, 443),
    "kserve+http": ("http", False, 8000), "kserve+https": ("http", True, 443),
}
#: Environment variable holding a bearer token for ``Authorization``.
TOKEN_ENV = "EDGERT_KSERVE_TOKEN"


@dataclass(frozen=True, slots=True)
class KServeConfig:
    """An Open Inference Protocol server and how to reach it (see the module docstring).

    ``models`` maps edgert model names to ``(server model name, version)``; ``""`` as the
    version means the server's default. ``headers`` go with every call (auth tokens).
    """

    host: str = "127.0.0.1"
    port: int = 8001
    protocol: str = "grpc"
    tls: bool = False
    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    insecure: bool = False
    headers: tuple[tuple[str, str], ...] = ()
    models: tuple[tuple[str, str, str], ...] = ()
    #: Requests one runtime keeps in flight to the server.
    capacity: int = 4
    #: Give-up time for a request without a deadline, in ms.
    timeout_ms: float = 5_000.0
    #: How long a health or metadata call may take, in ms.
    connect_timeout_ms: float = 3_000.0

    def url(self) -> str:
        """The server's URL without options or secrets (for messages), e.g. ``kserve://127.0.0.1:8001``."""
        scheme = {("grpc", False): "kserve", ("grpc", True): "kserves", ("http", False): "kserve+http",
                  ("http", True): "kserve+https"}[(self.protocol, self.tls)]
        return f"{scheme}://{self.host}:{self.port}"

    @property
    def address(self) -> str:
        """``host:port`` as the protocol clients take it."""
        return f"{self.host}:{self.port}"

    def server_model(self, name: str) -> tuple[str, str]:
        """The server's ``(model name, version)`` for edgert's model ``name`` (version ``""``: the default)."""
        for ours, theirs, version in self.models:
            if ours == name:
                return theirs, version
        return name, ""

    def header_dict(self) -> dict[str, str]:
        """The request headers, with ``Authorization: Bearer $EDGERT_KSERVE_TOKEN`` when that is set."""
        out = dict(self.headers)
        token = os.environ.get(TOKEN_ENV)
        if token and not any(k.lower() == "authorization" for k in out):
            out["Authorization"] = f"Bearer {token}"
        return out


def is_kserve_url(url: object) -> bool:
    """True for a string whose scheme is one of :data:`SCHEMES`."""
    return isinstance(url, str) and url.split("://", 1)[0].lower() in SCHEMES and "://" in url


def parse_kserve_url(url: str, *, models: dict[str, str] | None = None,
                     headers: dict[str, str] | None = None) -> KServeConfig:
    """Parse a ``kserve://`` URL (see the module docstring).

    Args:
        url: the server URL with its options.
        models: more ``{edgert name: "server_name[:version]"}`` mappings (the URL's ``model.*`` too).
        headers: more request headers (added to the URL's ``header=`` ones).

    Raises:
        ConfigError: another scheme, a bad port, an unknown or invalid option.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise ConfigError(f"offload URL {url!r} must start with kserve:// (gRPC) or kserve+http:// (REST), "
                          "e.g. kserve://127.0.0.1:8001")
    protocol, tls, default_port = SCHEMES[scheme]
    try:
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"offload URL {url!r} has a bad port: {exc}") from exc
    if parts.username or parts.password:
        raise ConfigError(f"offload URL {url!r}: a kserve server takes no user:password@; pass a token with "
                          f"header=Authorization:Bearer%20TOKEN or the {TOKEN_ENV} environment variable")
    if parts.path not in ("", "/"):
        raise ConfigError(f"offload URL {url!r}: a kserve URL has no path (the Open Inference Protocol's paths "
                          "are fixed); give host:port only")
    maps: list[tuple[str, str, str]] = []
    hdrs: list[tuple[str, str]] = []
    fields: dict[str, Any] = {}
    conv: dict[str, Callable[[str], Any]] = {"ca": str, "cert": str, "key": str, "insecure": url_flag, "capacity": int, "timeout_ms": float,
            "connect_timeout_ms": float}
    for k, v in parse_qsl(parts.query, keep_blank_values=True):
        if k.startswith("model."):
            maps.append(_mapping(k[len("model."):], v))
        elif k == "header":
            hdrs.append(_header(v))
        elif k in conv:
            try:
                fields[k] = conv[k](v)
            except ValueError as exc:
                raise ConfigError(f"offload URL option {k}={v!r} is invalid: {exc}") from exc
        else:
            from edgert.errors import did_you_mean  # noqa: PLC0415

            raise did_you_mean("kserve URL option", k, [*conv, "header", "model.NAME"])
    for ours, theirs in (models or {}).items():
        maps.append(_mapping(ours, theirs))
    hdrs += [_header(f"{k}:{v}") for k, v in (headers or {}).items()]
    if fields.get("capacity", 1) < 1 or fields.get("timeout_ms", 1.0) <= 0:
        raise ConfigError(f"offload URL {url!r}: capacity must be >= 1 and timeout_ms > 0")
    if fields.get("insecure") and protocol == "grpc":
        raise ConfigError("insecure=1 (no certificate check) is only for kserve+https://; for gRPC over TLS "
                          "give the server's CA with ca=PATH")
    cfg = KServeConfig(host=parts.hostname or "127.0.0.1", port=port or default_port, protocol=protocol,
                       tls=tls or bool(fields.get("ca") or fields.get("cert")), headers=tuple(hdrs),
                       models=tuple(maps))
    return replace(cfg, **fields)


def _mapping(ours: str, theirs: str) -> tuple[str, str, str]:
    name, _, version = theirs.partition(":")
    if not ours or not name:
        raise ConfigError(f"model mapping model.{ours}={theirs!r}: give model.EDGERT_NAME=SERVER_NAME[:VERSION]")
    return ours, name, version


def _header(v: str) -> tuple[str, str]:
    name, sep, value = v.partition(":")
    if not sep or not name.strip():
        raise ConfigError(f"header {v!r} must be Name:Value, e.g. header=Authorization:Bearer%20TOKEN")
    return name.strip(), value.strip()
