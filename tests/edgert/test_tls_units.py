"""The TLS helpers on their own: messages by verification code and alert, contexts, a closed port."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from edgert.errors import ConfigError
from edgert.offload._broker_check import connect_packet
from edgert.offload._tls import alert_problem, certificate_problem, client_context, probe
from tests.edgert.test_cloud_support import free_port
from tests.edgert.test_tls_support import Pki


def verify_error(code: int, message: str) -> ssl.SSLCertVerificationError:
    exc = ssl.SSLCertVerificationError(1, f"[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: {message}")
    exc.verify_code = code
    exc.verify_message = message
    return exc


@pytest.mark.parametrize(("code", "message", "fix"), [
    (20, "unable to get local issuer certificate", "it is not signed by a CA this client trusts (the CA in "
                                                   "ca=/ca.pem): give the CA that signed it with ?ca=PATH (insecure=1"),
    (18, "self-signed certificate", "give the CA that signed it with ?ca=PATH"),
    (62, "Hostname mismatch, certificate is not valid for 'broker.lan'",
     "it is not issued for 'broker.lan': connect with a host name it names, or reissue it with "
     "subjectAltName=DNS:broker.lan"),
    (10, "certificate has expired", "renew the server's certificate (or check this device's clock)"),
    (9, "certificate is not yet valid", "it is not valid yet: check this device's clock"),
])
def test_a_certificate_failure_names_what_is_wrong_and_the_fix(code: int, message: str, fix: str) -> None:
    msg = certificate_problem(verify_error(code, message), "the MQTT broker at mqtts://broker.lan:8883", "broker.lan",
                              ca="/ca.pem", insecure_hint=True)
    assert msg.startswith(f"the MQTT broker at mqtts://broker.lan:8883 presented a TLS certificate that cannot be "
                          f"verified: {message}; ")
    assert fix in msg


def test_without_ca_the_message_says_the_system_store_was_used_and_grpc_gets_no_insecure_hint() -> None:
    msg = certificate_problem(verify_error(20, "unable to get local issuer certificate"), "kserve server kserves://h:1",
                              "h", ca=None, insecure_hint=False)
    assert "the system's CA store, as no ca= was given" in msg and "insecure" not in msg


@pytest.mark.parametrize(("reason", "cert", "fix"), [
    ("TLSV13_ALERT_CERTIFICATE_REQUIRED", None, "it requires a client certificate (mutual TLS): give one with "
                                                "?cert=PATH&key=PATH"),
    ("TLSV1_ALERT_UNKNOWN_CA", "/dev.pem", "it refused the client certificate /dev.pem; use one signed by a CA the "
                                          "server trusts (its CA file)"),
    ("TLSV1_ALERT_INTERNAL_ERROR", None, "see the server's log"),
])
def test_an_alert_names_the_client_certificate(reason: str, cert: str | None, fix: str) -> None:
    exc = ssl.SSLError(1, f"[SSL: {reason}] alert")
    exc.reason = reason
    msg = alert_problem(exc, "the MQTT broker at mqtts://b:8883", cert=cert)
    assert msg == f"the MQTT broker at mqtts://b:8883 refused the TLS connection with alert {reason}: {fix}"


def test_a_context_names_a_missing_or_unreadable_file(tmp_path: Path, tls_pki: Pki) -> None:
    with pytest.raises(ConfigError, match=r"broker URL option ca='.*none.pem': no such file"):
        client_context(ca=str(tmp_path / "none.pem"), cert=None, key=None, insecure=False, what="broker URL")
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    with pytest.raises(ConfigError, match=r"option ca='.*junk.pem' is not a PEM CA certificate"):
        client_context(ca=str(tmp_path / "junk.pem"), cert=None, key=None, insecure=False, what="broker URL")
    with pytest.raises(ConfigError, match=r"option key= needs cert="):
        client_context(ca=None, cert=None, key=str(tls_pki.client_key), insecure=False, what="broker URL")
    ctx = client_context(ca=str(tls_pki.ca), cert=str(tls_pki.client), key=str(tls_pki.client_key), insecure=True,
                         what="broker URL")
    assert (ctx.verify_mode, ctx.check_hostname) == (ssl.CERT_NONE, False)


def test_with_ca_only_that_ca_is_trusted_not_the_system_store_too(tls_pki: Pki) -> None:
    ctx = client_context(ca=str(tls_pki.ca), cert=None, key=None, insecure=False, what="broker URL")
    assert ctx.cert_store_stats()["x509_ca"] == 1
    assert (ctx.verify_mode, ctx.check_hostname) == (ssl.CERT_REQUIRED, True)


def test_a_port_where_nothing_listens_is_closed_not_a_configuration_error() -> None:
    hs = probe("127.0.0.1", free_port(), ssl.create_default_context(), 1.0)
    assert hs.outcome == "closed" and not hs.listening


def test_the_connect_packet_is_mqtt_3_1_1() -> None:
    p = connect_packet("abc")
    assert p[0] == 0x10 and p[1] == len(p) - 2                 # CONNECT, remaining length
    assert p[2:10] == b"\x00\x04MQTT\x04\x02"                  # protocol name, level 4, clean session
    assert p[-5:] == b"\x00\x03abc"
