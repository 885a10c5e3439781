"""``kserves://`` and ``kserve+https://`` as a user gets them wrong: each TLS failure is named with its fix.

The servers are real TLS servers (grpc's own, and the standard library's HTTPS server) in front of a
test double of an Open Inference Protocol server that answers only the health calls: connecting is
what TLS decides, and ``Runtime(offload=…)`` connects with three ``live`` calls. The certificates
come from the CA the tests make (``tls_pki``). The whole protocol over TLS, with MLServer, is in
test_kserve.py (it needs ``mlserver``).
"""

from __future__ import annotations

import importlib.util
import re
import time

import pytest

import edgert
from edgert.errors import OffloadError
from tests.edgert.test_cloud_support import free_port
from tests.edgert.test_kserve_support import HealthServer
from tests.edgert.test_tls_support import Pki

needs_grpc = pytest.mark.skipif(importlib.util.find_spec("tritonclient") is None,
                                reason="needs tritonclient[grpc]: pip install 'edgert[kserve]'")
SCHEMES = {"grpc": ("kserves", "kserve"), "http": ("kserve+https", "kserve+http")}
PROTOS = [pytest.param("grpc", marks=needs_grpc), "http"]


@pytest.fixture(scope="module")
def servers(tls_pki: Pki):
    """Per protocol: a server with the good certificate, an expired one, one for another host, one that
    requires a client certificate, and a plain one."""
    p = tls_pki
    made: dict[str, dict[str, HealthServer]] = {}
    try:
        for proto in ("grpc", "http"):
            if proto == "grpc" and importlib.util.find_spec("tritonclient") is None:
                continue
            made[proto] = {"tls": HealthServer(proto, p.broker, p.broker_key),
                           "expired": HealthServer(proto, p.expired, p.expired_key),
                           "other_host": HealthServer(proto, p.other_host, p.other_host_key),
                           "mtls": HealthServer(proto, p.broker, p.broker_key, client_ca=p.ca),
                           "plain": HealthServer(proto, None, None)}
        yield made
    finally:
        for by_case in made.values():
            for s in by_case.values():
                s.stop()


def url(servers: dict, proto: str, case: str, *, tls: bool = True, **opts: object) -> str:
    scheme = SCHEMES[proto][0 if tls else 1]
    q = "&".join(f"{k}={v}" for k, v in opts.items())
    return f"{scheme}://127.0.0.1:{servers[proto][case].port}" + (f"?{q}" if q else "")


@pytest.mark.parametrize("proto", PROTOS)
def test_the_right_ca_connects_and_so_does_mutual_tls_with_the_cas_client_certificate(servers, tls_pki: Pki,
                                                                                    proto: str) -> None:
    p = tls_pki
    for u in (url(servers, proto, "tls", ca=p.ca), url(servers, proto, "mtls", ca=p.ca, cert=p.client, key=p.client_key)):
        with edgert.Runtime(offload=u, cpu_workers=0) as rt:
            assert rt.processors == ["cloud"]


ROWS = {
    "wrong CA": ("tls", True, {"ca": "other_ca"},
                 r"presented a TLS certificate that cannot be verified: unable to get local issuer certificate; it is "
                 r"not signed by a CA this client trusts \(the CA in ca=.*other_ca.pem\): give the CA that signed it "
                 r"with \?ca=PATH"),
    "no CA": ("tls", True, {}, r"cannot be verified: .*the system's CA store, as no ca= was given"),
    "expired": ("expired", True, {"ca": "ca"}, r"cannot be verified: certificate has expired; renew the server's"),
    "another host": ("other_host", True, {"ca": "ca"},
                     r"cannot be verified: IP address mismatch.*reissue it with subjectAltName=IP:127.0.0.1"),
    "plain client to a TLS port": ("tls", False, {},
                                   r"TLS mismatch: kserve server kserve(\+http)?://127.0.0.1:\d+ speaks TLS on port \d+, "
                                   r"and this client does not: use kserve(s|\+https)://127.0.0.1:\d+\?ca=PATH"),
    "TLS client to a plain port": ("plain", True, {"ca": "ca"},
                                   r"TLS mismatch: .* does not speak TLS on port \d+ \(a plain listener answers "
                                   r"there\): use kserve(\+http)?://127.0.0.1:\d+"),
    "mutual TLS without a client certificate": ("mtls", True, {"ca": "ca"},
                                                r"client certificate \(mutual TLS\): give one with \?cert=PATH&key=PATH"),
    "mutual TLS with a certificate of another CA": ("mtls", True, {"ca": "ca", "cert": "stranger",
                                                                   "key": "stranger_key"},
                                                    r"refused the client certificate .*stranger.pem"),
}


@pytest.mark.parametrize("row", list(ROWS))
@pytest.mark.parametrize("proto", PROTOS)
def test_each_tls_failure_is_named_with_its_fix(servers, tls_pki: Pki, proto: str, row: str) -> None:
    case, tls, opts, want = ROWS[row]
    u = url(servers, proto, case, tls=tls, connect_timeout_ms=10_000, **{k: getattr(tls_pki, v) for k, v in opts.items()})
    t = time.monotonic()
    with pytest.raises(OffloadError) as err:
        edgert.Runtime(offload=u, cpu_workers=0)
    assert time.monotonic() - t < 10.0   # at the first attempt, not after the connect timeout
    msg = str(err.value)
    assert re.search(want, msg), f"{proto} {row}: {msg}"
    assert f"127.0.0.1:{servers[proto][case].port}" in msg and "is the server running" not in msg


@pytest.mark.parametrize("proto", PROTOS)
def test_nothing_listening_asks_whether_the_server_runs(tls_pki: Pki, proto: str) -> None:
    u = f"{SCHEMES[proto][0]}://127.0.0.1:{free_port()}?ca={tls_pki.ca}&connect_timeout_ms=1000"
    with pytest.raises(OffloadError, match=r"no Open Inference Protocol server answered at .*is the server running"):
        edgert.Runtime(offload=u, cpu_workers=0)
