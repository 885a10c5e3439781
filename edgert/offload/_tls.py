"""TLS for the cloud links: the client's SSL context from a URL's options, and what a failed handshake was.

The MQTT client (paho-mqtt, and aiomqtt over it) retries a failed connection in its own thread and
keeps only "connection failed", and gRPC reports a TLS failure as "failed to connect to all
addresses". The cause, which the TLS layer knows (an :class:`ssl.SSLCertVerificationError` with its
``verify_message``, an alert from the server), is gone by then. :func:`probe` makes the same
handshake again with the same context, once, to name it: a certificate that cannot be verified
(unknown CA, another host name, expired), a client certificate the server refused (mutual TLS),
or a TLS client at a plain port and the other way round. Each of these is a configuration error
that no retry fixes; a port where nothing listens is not (a broker may be starting).
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from edgert.errors import ConfigError

#: ``verify_code`` s of OpenSSL (``X509_V_ERR_*``) that mean "signed by a CA this client does not trust".
_UNKNOWN_CA = {2, 18, 19, 20, 21, 27}
#: ... "issued for another host name or IP address".
_OTHER_HOST = {62, 64}
#: ... "expired" / "not valid yet".
_EXPIRED, _NOT_YET = 10, 9


def client_context(*, ca: str | None, cert: str | None, key: str | None, insecure: bool,
                   what: str) -> ssl.SSLContext:
    """The client's TLS context: ``ca`` (PEM; None: the system's CA store), a client certificate and key
    for mutual TLS, ``insecure`` (no verification, for tests only). ``what`` names the option's owner in
    errors (``"broker URL"``).

    Raises:
        ConfigError: a file that is missing or is not PEM of its kind (which option, which file).
    """
    for opt, path in (("ca", ca), ("cert", cert), ("key", key)):
        if path is not None and not Path(path).is_file():
            raise ConfigError(f"{what} option {opt}={path!r}: no such file")
    if key and not cert:
        raise ConfigError(f"{what} option key= needs cert= (the client certificate it belongs to)")
    try:
        # with ca= only that CA is trusted (a private CA is not diluted by the system's store), else the store
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca or None)
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(f"{what} option ca={ca!r} is not a PEM CA certificate: {exc}") from exc
    try:
        if cert:
            ctx.load_cert_chain(cert, key)
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(f"{what} options cert={cert!r} key={key!r}: not a PEM certificate and its private key "
                          f"({exc})") from exc
    if insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


@dataclass(frozen=True, slots=True)
class Handshake:
    """What one TLS handshake to ``host:port`` found.

    ``outcome``: ``"closed"`` (nothing listens), ``"ok"`` (done, and the server kept the
    connection), ``"certificate"`` (the server's certificate failed verification: ``error``
    is the :class:`ssl.SSLCertVerificationError`), ``"alert"`` (the server ended it with a TLS
    alert, e.g. it wants or refused a client certificate: ``error.reason`` names it),
    ``"not_tls"`` (the other side does not speak TLS), ``"dropped"`` (the handshake was done, then the
    server closed the connection without a word: gRPC's way of refusing a client certificate),
    ``"timeout"``.
    """

    outcome: str
    error: BaseException | None = None

    @property
    def listening(self) -> bool:
        """Something accepted the TCP connection."""
        return self.outcome != "closed"


def probe(host: str, port: int, ctx: ssl.SSLContext, timeout_s: float, *, then: bytes = b"") -> Handshake:
    """One TLS handshake with ``ctx`` (as the client makes it), then ``then`` sent and a first read.

    With TLS 1.3 the server checks a client certificate after the client's side of the handshake is
    done, so its refusal arrives as an alert on the first read: ``then`` (a protocol's first
    message, e.g. an MQTT CONNECT) makes the server answer either that alert or its own reply.
    """
    try:
        sock = socket.create_connection((host, port), timeout=timeout_s)
    except TimeoutError as exc:
        return Handshake("timeout", exc)
    except OSError as exc:
        return Handshake("closed", exc)
    shook = False   # the client's side of the handshake is done
    try:
        with ctx.wrap_socket(sock, server_hostname=host) as tls:
            shook = True
            if not then:
                return Handshake("ok")
            # Wait a moment for an alert before sending: a server that refuses our certificate closes at
            # once, and bytes of ours it never read would turn its alert into a reset that hides it.
            tls.settimeout(min(0.3, timeout_s))
            try:
                if not tls.recv(1):
                    return Handshake("dropped", ConnectionResetError("the server closed the connection"))
                return Handshake("ok")   # a server that speaks first
            except TimeoutError:
                pass
            tls.settimeout(timeout_s)
            tls.sendall(then)
            if not tls.recv(1):
                return Handshake("dropped", ConnectionResetError("the server closed the connection"))
            return Handshake("ok")
    except ssl.SSLCertVerificationError as exc:
        return Handshake("certificate", exc)
    except ssl.SSLError as exc:
        if "ALERT" in str(exc.reason or "").upper():
            return Handshake("alert", exc)
        # EOF, WRONG_VERSION_NUMBER, RECORD_LAYER_FAILURE ...: before the handshake, bytes that are not TLS
        return Handshake("dropped" if shook else "not_tls", exc)
    except TimeoutError as exc:
        return Handshake("timeout", exc)
    except OSError as exc:   # reset, broken pipe
        return Handshake("dropped" if shook else "not_tls", exc)
    finally:
        sock.close()


def speaks_tls(host: str, port: int, timeout_s: float) -> bool:
    """Whether ``host:port`` answers a TLS handshake (any certificate: nothing is verified here)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return probe(host, port, ctx, timeout_s).outcome in ("ok", "alert")


def plain_reply(host: str, port: int, hello: bytes, timeout_s: float) -> bytes | None:
    """The first bytes ``host:port`` answers to ``hello`` without TLS (``b""``: none); None when nothing listens."""
    try:
        sock = socket.create_connection((host, port), timeout=timeout_s)
    except OSError:
        return None
    with sock:
        try:
            sock.sendall(hello)
            return sock.recv(16)
        except OSError:
            return b""


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """What :func:`diagnose` found: whether anything listens, and the configuration error, if one."""

    listening: bool
    problem: str | None = None
    #: False where ``problem`` is the likely cause, not a certain one (a server that closed the connection
    #: right after the handshake: a refused client certificate, or a server going down).
    sure: bool = True


def diagnose(host: str, port: int, ctx: ssl.SSLContext | None, *, hello: bytes, answered: Callable[[bytes], bool],
             server: str, ca: str | None, cert: str | None, insecure_hint: bool, use_tls: str, use_plain: str,
             timeout_s: float = 2.0) -> Diagnosis:
    """Ask ``host:port`` once, as a client of the protocol would, why a connection failed.

    Args:
        ctx: the client's TLS context; None for a plain client.
        hello: the protocol's first message (an MQTT CONNECT, an HTTP request, the HTTP/2 preface), and
            ``answered``: whether the first bytes back are the protocol's reply.
        server: names the server in messages (``"the MQTT broker at mqtts://host:port"``).
        ca, cert: the client's options (for the messages); ``insecure_hint``: the URL takes ``insecure=1``.
        use_tls, use_plain: the fix of a TLS mismatch, each way round (``"use mqtts://host:port?ca=PATH"``).

    Returns:
        ``problem`` is set for a configuration error no retry fixes: the server's certificate cannot be
        verified, the server refused the TLS connection (mutual TLS), or TLS against a plain port or the
        other way round (``sure`` is False for a likely cause). ``listening`` is False when nothing
        accepts connections there.
    """
    if ctx is not None:
        hs = probe(host, port, ctx, timeout_s, then=hello)
        if hs.outcome == "certificate":
            return Diagnosis(True, certificate_problem(hs.error, server, host, ca=ca,  # type: ignore[arg-type]
                                                       insecure_hint=insecure_hint))
        if hs.outcome == "alert":
            return Diagnosis(True, alert_problem(hs.error, server, cert=cert))  # type: ignore[arg-type]
        if hs.outcome == "dropped":
            likely = ("it may require a client certificate (mutual TLS): give one with ?cert=PATH&key=PATH"
                      if not cert else f"it may have refused the client certificate {cert}; use one signed by a "
                                       "CA the server trusts (its CA file)")
            return Diagnosis(True, f"{server} completed the TLS handshake, then closed the connection without "
                                   f"answering: {likely}", sure=False)
        if hs.outcome == "not_tls":
            reply = plain_reply(host, port, hello, timeout_s)
            if reply and answered(reply):
                return Diagnosis(True, f"TLS mismatch: {server} does not speak TLS on port {port} (a plain "
                                       f"listener answers there): {use_plain}")
        return Diagnosis(hs.listening)
    reply = plain_reply(host, port, hello, timeout_s)
    if reply is None:
        return Diagnosis(False)
    if not answered(reply) and speaks_tls(host, port, timeout_s):
        return Diagnosis(True, f"TLS mismatch: {server} speaks TLS on port {port}, and this client does not: "
                               f"{use_tls}")
    return Diagnosis(True)


def certificate_problem(exc: BaseException, server: str, host: str, *, ca: str | None,
                        insecure_hint: bool) -> str:
    """The message for a server certificate that failed verification: what is wrong with it, and the fix.

    ``server`` names it (``"the MQTT broker at mqtts://127.0.0.1:8883"``); ``insecure_hint`` adds
    ``insecure=1`` as the last resort (for tests only) where the URL takes it.
    """
    code = getattr(exc, "verify_code", None)
    why = str(getattr(exc, "verify_message", "") or exc).rstrip(".")
    store = f"the CA in ca={ca}" if ca else "the system's CA store, as no ca= was given"
    if code in _UNKNOWN_CA:
        fix = (f"it is not signed by a CA this client trusts ({store}): give the CA that signed it with ?ca=PATH"
               + (" (insecure=1 skips the check: for tests only)" if insecure_hint else ""))
    elif code in _OTHER_HOST:
        fix = (f"it is not issued for {host!r}: connect with a host name it names, or reissue it with "
               f"subjectAltName={'IP' if _is_ip(host) else 'DNS'}:{host}")
    elif code == _EXPIRED:
        fix = "renew the server's certificate (or check this device's clock)"
    elif code == _NOT_YET:
        fix = "it is not valid yet: check this device's clock"
    else:
        fix = f"check it against {store}"
    return f"{server} presented a TLS certificate that cannot be verified: {why}; {fix}"


def alert_problem(exc: BaseException, server: str, *, cert: str | None) -> str:
    """The message for a handshake the server ended with an alert (mutual TLS: our certificate)."""
    reason = str(getattr(exc, "reason", "") or exc)
    r = reason.upper()
    if "CERTIFICATE_REQUIRED" in r or ("HANDSHAKE_FAILURE" in r and not cert):
        fix = ("it requires a client certificate (mutual TLS): give one with ?cert=PATH&key=PATH" if not cert else
               f"it did not take the client certificate {cert}")
    elif any(k in r for k in ("UNKNOWN_CA", "BAD_CERTIFICATE", "CERTIFICATE_UNKNOWN", "DECRYPT_ERROR",
                              "CERTIFICATE_EXPIRED", "CERTIFICATE_REVOKED", "ACCESS_DENIED")):
        fix = (f"it refused the client certificate {cert}; use one signed by a CA the server trusts "
               "(its CA file)" if cert else "give a client certificate with ?cert=PATH&key=PATH")
    else:
        fix = "see the server's log"
    return f"{server} refused the TLS connection with alert {reason}: {fix}"


def _is_ip(host: str) -> bool:
    import ipaddress  # noqa: PLC0415

    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
