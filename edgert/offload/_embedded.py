"""``offload="auto"``: zero-setup offload through an embedded broker and one local worker process."""

from __future__ import annotations

import asyncio
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgert.errors import ModelLoadError, OffloadError
from edgert.offload._config import digest_of
from edgert.offload._link import MqttLink

if TYPE_CHECKING:
    from edgert._core._model import LoadedModel

#: How long ``offload="auto"`` waits for its local worker process to answer (s).
AUTO_START_S = 60.0


class EmbeddedCloud:
    """``offload="auto"``: an amqtt broker on a free loopback port and one local worker process.

    The broker listens on 127.0.0.1 only and takes anonymous clients (it is
    reachable only from this host). The worker serves a temporary directory
    that :meth:`add_model` fills with the runtime's model files.

    Raises:
        OffloadError: the broker or the worker did not start (with the worker's log).
    """

    def __init__(self, slots: int = 1) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="edgert-cloud-"))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._broker: Any = None
        self._thread: threading.Thread | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        try:
            self.port = self._start_broker()
            self.url = f"mqtt://127.0.0.1:{self.port}"
            self._log = open(self.dir / "worker.log", "wb")  # noqa: SIM115 - closed in close()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "edgert.cli", "cloud", "serve", "--broker", self.url, "--models",
                 str(self.dir / "models"), "--group", "", "--slots", str(slots), "--drain-s", "5"],
                stdout=self._log, stderr=subprocess.STDOUT)
        except BaseException:
            self.close()
            raise

    def _start_broker(self) -> int:
        from amqtt.broker import Broker  # noqa: PLC0415 - only auto mode needs it

        (self.dir / "models").mkdir()
        ready = threading.Event()
        failure: list[BaseException] = []
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        config = {"listeners": {"default": {"type": "tcp", "bind": f"127.0.0.1:{port}"}},
                  "plugins": {"amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}}}

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            try:
                self._broker = Broker(config, loop=loop)
                loop.run_until_complete(self._broker.start())
            except BaseException as exc:  # noqa: BLE001 - reported to the constructor
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="edgert-amqtt", daemon=True)
        self._thread.start()
        ready.wait(30)
        if failure or self._broker is None:
            raise OffloadError(f"the embedded amqtt broker did not start on 127.0.0.1:{port}: "
                               f"{failure[0] if failure else 'timed out'}")
        return port

    def wait_ready(self, link: MqttLink, timeout_s: float = AUTO_START_S) -> None:
        """Ping until the local worker answers.

        Raises:
            OffloadError: it exited or did not answer within ``timeout_s`` (its log is quoted).
        """
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if self.proc is not None and self.proc.poll() is not None:
                break
            try:
                link.ping(250.0)
                return
            except OffloadError:
                continue
        tail = (self.dir / "worker.log").read_text(errors="replace")[-800:]
        raise OffloadError(f"the local cloud worker of offload='auto' did not answer within {timeout_s:g} s"
                           f"{' (it exited)' if self.proc is not None and self.proc.poll() is not None else ''}: "
                           f"{tail.strip() or 'no output'}")

    def add_model(self, model: LoadedModel) -> None:
        """Write the model's files into the worker's directory as ``<name>.<format>`` (atomically)."""
        if not model.name or any(c in model.name for c in "/\\\0") or model.name.startswith("."):
            raise ModelLoadError(f"model name {model.name!r} cannot be a file name for the local cloud worker")
        for art in model.artifacts:
            data = art.read()
            path = self.dir / "models" / f"{model.name}.{art.format}"
            if path.exists() and digest_of(path.read_bytes()) == digest_of(data):
                continue
            tmp = path.with_suffix(".part")
            tmp.write_bytes(data)
            tmp.replace(path)

    def close(self) -> None:
        """Stop the worker (SIGTERM: it drains), then the broker; remove the directory."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if getattr(self, "_log", None) is not None:
            self._log.close()
        loop = self._loop
        if loop is not None and self._broker is not None and not loop.is_closed():
            try:
                asyncio.run_coroutine_threadsafe(self._broker.shutdown(), loop).result(10)
            except Exception:  # noqa: BLE001 - best effort on the way out
                pass
            loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        shutil.rmtree(self.dir, ignore_errors=True)
