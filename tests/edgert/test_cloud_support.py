"""Helpers for the cloud tests: a real mosquitto on a free loopback port and real worker processes.

Also imported by benchmarks/cloud.py. The few tests here check the helpers themselves.
"""

from __future__ import annotations

import contextlib

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

MOSQUITTO = shutil.which("mosquitto") or ("/usr/sbin/mosquitto" if os.path.exists("/usr/sbin/mosquitto") else None)
ROOT = Path(__file__).resolve().parents[2]
needs_mosquitto = pytest.mark.skipif(MOSQUITTO is None, reason="mosquitto is not installed (apt-get install mosquitto)")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, up: bool = True, timeout_s: float = 10.0) -> None:
    """Wait until 127.0.0.1:``port`` accepts (``up``) or refuses connections."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                if up:
                    return
        except OSError:
            if not up:
                return
        time.sleep(0.02)
    raise TimeoutError(f"port {port} did not come {'up' if up else 'down'} in {timeout_s} s")


#: Every process these helpers started, so the session's end can check that none is left running
#: (tests/conftest.py stops and reports any that is).
STARTED: list[subprocess.Popen[bytes]] = []


def started(proc: subprocess.Popen[bytes]) -> subprocess.Popen[bytes]:
    """Remember ``proc`` in STARTED and return it."""
    STARTED.append(proc)
    return proc


def end(proc: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    """Stop ``proc`` if it still runs: SIGTERM, then SIGKILL after ``timeout_s``; always reaped."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


class Mosquitto:
    """A mosquitto broker on a free loopback port, with a temp config (``set_tcp_nodelay true``)."""

    def __init__(self, tmp: Path, *, users: dict[str, str] | None = None, tls: tuple[Path, Path] | None = None,
                 max_bytes: int = 0) -> None:
        assert MOSQUITTO is not None
        self.tmp = tmp
        self.port = free_port()
        lines = [f"listener {self.port} 127.0.0.1", "set_tcp_nodelay true", "persistence false",
                 f"message_size_limit {max_bytes}" if max_bytes else "", "max_queued_messages 10000",
                 # as root, mosquitto would switch to user "mosquitto", who cannot read pytest's temp dirs
                 "user root" if os.geteuid() == 0 else ""]
        if users:
            pw = tmp / "passwd"
            pw.write_text("".join(f"{u}:{p}\n" for u, p in users.items()))
            subprocess.run(["mosquitto_passwd", "-U", str(pw)], check=True, capture_output=True)
            lines += ["allow_anonymous false", f"password_file {pw}"]
        else:
            lines.append("allow_anonymous true")
        if tls:
            lines += [f"certfile {tls[0]}", f"keyfile {tls[1]}"]
        self.conf = tmp / f"mosquitto-{self.port}.conf"
        self.conf.write_text("\n".join(x for x in lines if x) + "\n")
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        """``mqtt://127.0.0.1:PORT``."""
        return f"mqtt://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start (or restart) it on the same port; a no-op while it runs (a second broker could not bind the
        port, and the first would outlive the tests: the wire fixtures once left two behind that way)."""
        if self.proc is not None and self.proc.poll() is None:
            return
        self.proc = started(subprocess.Popen([MOSQUITTO, "-c", str(self.conf)], stdout=subprocess.DEVNULL,
                                             stderr=subprocess.DEVNULL))
        wait_port(self.port)

    def stop(self) -> None:
        """Stop it (SIGTERM, then SIGKILL after 10 s) and wait until the port refuses connections."""
        if self.proc is not None:
            end(self.proc)
        wait_port(self.port, up=False)


class WorkerProc:
    """An ``edgert cloud serve`` process; ``ready()`` waits for its "ready" log line."""

    def __init__(self, url: str, models: Path, log: Path, *extra: str, env: dict[str, str] | None = None) -> None:
        self.log = log
        self._fh = open(log, "ab")  # noqa: SIM115
        self._seen = log.stat().st_size
        env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
        self.proc = started(subprocess.Popen([sys.executable, "-m", "edgert.cli", "cloud", "serve", "--broker", url,
                                              "--models", str(models), "-v", *extra],
                                             stdout=self._fh, stderr=subprocess.STDOUT, cwd=ROOT, env=env))

    def text(self) -> str:
        """Its log so far."""
        return self.log.read_text(errors="replace")

    def ready(self, timeout_s: float = 60.0, count: int = 1) -> None:
        """Wait until it logged "ready" ``count`` times (a reconnect logs it again)."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if self.text().count(" ready on ") >= count:
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited ({self.proc.returncode}):\n{self.text()}")
            time.sleep(0.05)
        raise TimeoutError(f"worker not ready after {timeout_s} s:\n{self.text()}")

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 20.0) -> int:
        """Signal it and wait; returns its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._fh.close()
        return self.proc.returncode


def make_models(directory: Path, names: tuple[str, ...] = ("tiny", "cnn", "multi_input", "raises")) -> Path:
    """Generated models (onnx) in ``directory``."""
    from edgert.testing import genmodels  # noqa: PLC0415

    for n in names:
        genmodels.save(n, directory, formats=["onnx"])
    return directory


@needs_mosquitto
@contextlib.contextmanager
def cloud_stack(tmp: Path) -> Iterator[tuple[Mosquitto, Path, WorkerProc]]:
    """A broker, the test models and one ``edgert cloud serve`` worker on it, ready; both stopped on exit."""
    broker = Mosquitto(tmp)
    models = make_models(tmp / "models")
    worker = WorkerProc(broker.url, models, tmp / "worker.log")
    try:
        worker.ready()
        yield broker, models, worker
    finally:
        worker.stop()
        broker.stop()


@needs_mosquitto
def test_mosquitto_helper_restarts_on_the_same_port(tmp_path: Path) -> None:
    b = Mosquitto(tmp_path)
    try:
        assert "set_tcp_nodelay true" in b.conf.read_text()
        b.stop()
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", b.port), timeout=0.2).close()
        b.start()
        socket.create_connection(("127.0.0.1", b.port), timeout=1).close()
    finally:
        b.stop()


@needs_mosquitto
def test_a_running_broker_is_found_as_left_over_and_a_stopped_one_is_not(tmp_path: Path) -> None:
    from tests.conftest import leftover_processes  # noqa: PLC0415

    b = Mosquitto(tmp_path)
    try:
        b.start()   # a second start while it runs must not start a second broker
        assert b.proc is not None
        mine = [pid for pid, cmd in leftover_processes() if "mosquitto" in cmd and str(b.conf) in cmd]
        assert mine == [b.proc.pid]
    finally:
        b.stop()
    assert not [pid for pid, cmd in leftover_processes() if str(b.conf) in cmd]


def test_the_leftover_check_knows_brokers_and_workers() -> None:
    from tests.conftest import is_broker_or_worker  # noqa: PLC0415

    assert is_broker_or_worker(["/usr/sbin/mosquitto", "-c", "x.conf"])
    assert is_broker_or_worker([sys.executable, "-m", "edgert.cli", "cloud", "serve"])
    assert is_broker_or_worker(["/usr/local/bin/edgert", "cloud", "serve"])
    assert not is_broker_or_worker(["flock", "-s", "/tmp/l", "python", "-m", "pytest", "tests/edgert/test_cloud_mosquitto.py"])
    assert not is_broker_or_worker([sys.executable, "-m", "pytest"])
    assert not is_broker_or_worker([])
