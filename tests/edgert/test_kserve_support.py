"""Helpers for the kserve tests: a real Open Inference Protocol server (MLServer) on free loopback ports.

:class:`KServeServer` runs ``edgert cloud serve --kserve`` (MLServer with edgert's ONNX Runtime
model runtime) as its own process group, and stops every process of it. Also imported by
benchmarks/kserve.py. The tests here check the helper itself.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.edgert.test_cloud_support import ROOT, free_port, wait_port

from edgert.extras import unavailable_here

HAVE_KSERVE = all(importlib.util.find_spec(m) is not None for m in ("mlserver", "tritonclient"))
needs_kserve = pytest.mark.skipif(not HAVE_KSERVE, reason="needs mlserver and tritonclient: " + (
    unavailable_here("mlserver") or "pip install 'edgert[kserve,kserve-server]'"))


class KServeServer:
    """``edgert cloud serve --kserve`` serving the ``.onnx`` files of ``models``: gRPC and REST ports."""

    def __init__(self, models: Path, log: Path) -> None:
        self.models = models
        self.log = log
        self.grpc_port = free_port()
        self.http_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        """``kserve://127.0.0.1:GRPC_PORT``."""
        return f"kserve://127.0.0.1:{self.grpc_port}"

    @property
    def http_url(self) -> str:
        """``kserve+http://127.0.0.1:HTTP_PORT``."""
        return f"kserve+http://127.0.0.1:{self.http_port}"

    def text(self) -> str:
        """Its log so far."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def start(self, timeout_s: float = 90.0) -> None:
        """Start (or restart) it on the same ports; wait until both protocols answer and every model is ready."""
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with open(self.log, "ab") as fh:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "edgert.cli", "cloud", "serve", "--kserve", f"127.0.0.1:{self.grpc_port}",
                 "--http-port", str(self.http_port), "--models", str(self.models)],
                stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT, env=env, start_new_session=True)
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the kserve server exited ({self.proc.returncode}):\n{self.text()[-3000:]}")
            if self._ready():
                wait_port(self.grpc_port, timeout_s=max(1.0, end - time.monotonic()))
                return
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(f"the kserve server was not ready in {timeout_s} s:\n{self.text()[-3000:]}")

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/v2/health/ready", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    def stop(self, timeout_s: float = 20.0) -> None:
        """SIGTERM its process group, then SIGKILL what is left; wait until both ports refuse."""
        p = self.proc
        if p is not None and p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(5)
        if p is not None:
            try:   # anything the server started in its group (it starts none with parallel_workers 0)
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        wait_port(self.grpc_port, up=False)
        wait_port(self.http_port, up=False)


@needs_kserve
@pytest.mark.slow
def test_the_helper_stops_every_process_it_starts(tmp_path: Path) -> None:
    from edgert.testing import genmodels

    genmodels.save("tiny", tmp_path / "models", formats=["onnx"])
    s = KServeServer(tmp_path / "models", tmp_path / "server.log")
    pid = s.proc.pid
    s.stop()
    assert s.proc.poll() is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)   # no process of its group is left
    assert "serving tiny" in s.text()


def self_signed(tmp: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (subjectAltName IP, as gRPC checks it) and its key (openssl)."""
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    return cert, key


class TlsTerminator:
    """A TLS-terminating TCP relay in front of a plain port, as an ingress puts in front of a server:
    TLS (ALPN h2 and http/1.1) on a free loopback port, the bytes relayed to ``target_port``."""

    def __init__(self, target_port: int, cert: Path, key: Path) -> None:
        import asyncio
        import ssl
        import threading

        self.port = free_port()
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(cert, key)
        ctx.set_alpn_protocols(["h2", "http/1.1"])
        self._loop = asyncio.new_event_loop()
        started = threading.Event()

        async def pipe(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            try:
                while data := await r.read(65536):
                    w.write(data)
                    await w.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                w.close()

        async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            try:
                ur, uw = await asyncio.open_connection("127.0.0.1", target_port)
            except OSError:
                w.close()
                return
            await asyncio.gather(pipe(r, uw), pipe(ur, w))

        async def main() -> None:
            self._server = await asyncio.start_server(handle, "127.0.0.1", self.port, ssl=ctx)
            started.set()

        def run() -> None:
            self._loop.run_until_complete(main())
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        started.wait(10)

    def stop(self) -> None:
        """Close the listener and stop its loop."""
        self._loop.call_soon_threadsafe(self._server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


class HealthServer:
    """A test double of an Open Inference Protocol server that answers only the health calls (``live``,
    ``ready``), behind real TLS: grpc's own TLS server (``proto="grpc"``, the protocol's servicer from
    tritonclient) or the standard library's HTTPS server (``proto="http"``). ``cert``/``key``: its
    certificate (None: no TLS); ``client_ca``: require a client certificate signed by it (mutual TLS)."""

    def __init__(self, proto: str, cert: Path | None, key: Path | None, client_ca: Path | None = None) -> None:
        self.proto = proto
        if proto == "grpc":
            self._server, self.port = self._grpc(cert, key, client_ca)
        else:
            self._server, self.port = self._http(cert, key, client_ca)

    @staticmethod
    def _grpc(cert: Path | None, key: Path | None, client_ca: Path | None) -> tuple[object, int]:
        from concurrent import futures

        import grpc
        import tritonclient.grpc.service_pb2 as pb
        import tritonclient.grpc.service_pb2_grpc as svc

        class Health(svc.GRPCInferenceServiceServicer):
            def ServerLive(self, request: object, context: object) -> object:  # noqa: N802 - the protocol's name
                return pb.ServerLiveResponse(live=True)

            def ServerReady(self, request: object, context: object) -> object:  # noqa: N802
                return pb.ServerReadyResponse(ready=True)

        s = grpc.server(futures.ThreadPoolExecutor(2))
        svc.add_GRPCInferenceServiceServicer_to_server(Health(), s)
        if cert is None or key is None:
            port = s.add_insecure_port("127.0.0.1:0")
        else:
            creds = grpc.ssl_server_credentials([(key.read_bytes(), cert.read_bytes())],
                                                root_certificates=client_ca.read_bytes() if client_ca else None,
                                                require_client_auth=client_ca is not None)
            port = s.add_secure_port("127.0.0.1:0", creds)
        s.start()
        return s, port

    @staticmethod
    def _http(cert: Path | None, key: Path | None, client_ca: Path | None) -> tuple[object, int]:
        import ssl
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Health(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                self.send_response(200 if self.path in ("/v2/health/live", "/v2/health/ready") else 404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_: object) -> None:
                pass

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Health)
        if cert is not None and key is not None:
            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ctx.load_cert_chain(cert, key)
            if client_ca is not None:
                ctx.load_verify_locations(client_ca)
                ctx.verify_mode = ssl.CERT_REQUIRED
            httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        return httpd, httpd.server_address[1]

    def stop(self) -> None:
        """Stop serving and close the port."""
        if self.proto == "grpc":
            self._server.stop(None).wait(5)  # type: ignore[attr-defined]
        else:
            self._server.shutdown()  # type: ignore[attr-defined]
            self._server.server_close()  # type: ignore[attr-defined]
