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

HAVE_KSERVE = all(importlib.util.find_spec(m) is not None for m in ("mlserver", "tritonclient"))
needs_kserve = pytest.mark.skipif(not HAVE_KSERVE, reason="needs mlserver and tritonclient: "
                                                          "pip install 'edgert[kserve,kserve-server]'")


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
