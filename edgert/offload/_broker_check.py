"""Why a connection to an MQTT broker failed, when the MQTT client cannot say.

Shared by the client (:class:`edgert.offload._link.MqttLink`) and the worker
(:mod:`edgert.offload.server`): after a failed attempt, :func:`check_broker` asks the port once
more, as the client would (:func:`edgert.offload._tls.diagnose` with an MQTT CONNECT), and tells a
configuration error, which no retry fixes (a certificate that cannot be verified, a client
certificate the broker refused, TLS against a plain listener or the other way round), from a port
where nothing listens (a broker that is not running yet, or restarting).
"""

from __future__ import annotations

import ssl
import struct

from edgert.offload._config import CloudConfig
from edgert.offload._tls import Diagnosis, diagnose


def connect_packet(client_id: str = "edgert-check") -> bytes:
    """An MQTT 3.1.1 CONNECT without credentials (clean session, keep-alive 10 s): every broker answers
    it with a CONNACK (refused or not), so its first byte tells an MQTT listener from anything else."""
    cid = client_id.encode()
    body = b"\x00\x04MQTT\x04\x02\x00\x0a" + struct.pack("!H", len(cid)) + cid
    return bytes([0x10, len(body)]) + body


def check_broker(cfg: CloudConfig, ctx: ssl.SSLContext | None, timeout_s: float = 2.0) -> Diagnosis:
    """Ask the broker's port what a failed connection was, as the client ``cfg`` (TLS with ``ctx``)."""
    where = f"{cfg.host}:{cfg.port}"
    return diagnose(cfg.host, cfg.port, ctx if cfg.tls else None, hello=connect_packet(),
                    answered=lambda b: b[:1] == b"\x20",   # CONNACK
                    server=f"the MQTT broker at {cfg.url()}", ca=cfg.ca, cert=cfg.cert, insecure_hint=True,
                    use_tls=f"use mqtts://{where}?ca=PATH (PATH: the CA that signed the broker's certificate)",
                    use_plain=f"use mqtt://{where}, or mqtts:// to the broker's TLS port (usually 8883)",
                    timeout_s=timeout_s)
