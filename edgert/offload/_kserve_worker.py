"""``Runtime(offload="kserve://host:port")``: the ``cloud`` processor as an Open Inference Protocol client.

The worker is the MQTT cloud worker's (:class:`edgert.offload._worker.CloudWorker`) with
another link: the same burst semantics (the policy places a request on the cloud when its
measured round trip promises the deadline; a request gives up in time for a local
processor to still make it; a failure re-places it locally or ends it ``failed`` with the
reason), the same stale-estimate reset. What differs is how a model is found: by name on
the server (or the name the config maps it to), with its metadata checked against the
model edgert loaded (:meth:`KServeDelegate.open_named`).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from delegates.base import Delegate, Session, TensorSpec
from delegates.registry import all_delegates
from edgert.extras import require
from edgert.errors import ConfigError, EdgeRTError, ModelLoadError, OffloadError
from edgert.offload._kserve_config import KServeConfig, parse_kserve_url
from edgert.offload._worker import CloudWorker

if TYPE_CHECKING:
    from edgert._core._model import LoadedModel
    from edgert._core._run import Dispatcher

log = logging.getLogger("edgert.offload")


class KServeWorker(CloudWorker):
    """The ``cloud`` processor on an Open Inference Protocol server (Triton, KServe, MLServer …).

    Raises:
        OffloadError: no server answers at the configured address.
    """

    def __init__(self, cfg: KServeConfig, lock: threading.Lock, runtime: Dispatcher | None = None) -> None:
        from edgert.offload._kserve_client import KServeDelegate, KServeLink  # noqa: PLC0415

        link = KServeLink(cfg)
        super().__init__(cfg, lock, runtime, link=link, delegate=KServeDelegate(link))

    def open_model(self, model: LoadedModel, delegate: Delegate) -> Session:
        """Find ``model`` on the server and check its metadata against the model's inputs and outputs.

        The model's specs come from a local processor that opened it already, else from its
        file (opened on a CPU delegate only to read them: ``cpu_workers=0`` runs nothing here).

        Raises:
            ModelLoadError: the server lacks the model or the version, it is not ready, or its
                metadata differs (which tensor, how); the reason names the server.
        """
        from edgert.offload._kserve_client import KServeDelegate  # noqa: PLC0415

        assert isinstance(delegate, KServeDelegate)
        inputs, outputs = (model.inputs, model.outputs) if model.inputs else specs_of(model)
        try:
            return delegate.open_named(model.name, inputs, outputs)
        except ModelLoadError as exc:
            if model.inputs:   # a local processor has it: it runs there, not offloaded
                log.warning("%s; it runs on this device only", exc)
            raise

    def failure_reason(self, error: str, elapsed_ms: float, budget_ms: float, deadline_in_ms: float,
                       connected: bool) -> str:
        """``cloud server unreachable: …``, ``cloud timeout: …`` or ``cloud error reply: …``; the
        detail names the server (``kserve://host:port``) and, for a refusal, the model."""
        if not connected:
            return f"cloud server unreachable: {error}"
        if elapsed_ms >= budget_ms or error.startswith("no reply from"):
            away = f"the deadline was {deadline_in_ms:.1f} ms away" if deadline_in_ms != float("inf") \
                else "no deadline: the link's timeout"
            return (f"cloud timeout: {error} (waited {elapsed_ms:.1f} ms, gave up at {budget_ms:.1f} ms; {away})")
        return f"cloud error reply: {error}"


def specs_of(model: LoadedModel) -> tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]:
    """The inputs and outputs of ``model``'s first file a CPU delegate of this host can open.

    Raises:
        ModelLoadError: no CPU delegate here reads any of its files.
    """
    errors = []
    for art in model.artifacts:
        for d in all_delegates().values():
            if d.processor != "cpu" or art.format not in d.formats or d.probe() is not None:
                continue
            try:
                s = d.open(art, threads=1)
            except EdgeRTError as exc:
                errors.append(f"{d.name}: {exc}")
                continue
            try:
                return s.inputs, s.outputs
            finally:
                s.close()
    raise ModelLoadError(f"cannot read the inputs and outputs of {model.name!r} to check them against the "
                         f"kserve server: {'; '.join(errors) or 'no CPU delegate here opens its format'}")


def make_kserve_worker(offload: str | KServeConfig, lock: threading.Lock, runtime: Dispatcher | None = None) -> KServeWorker:
    """The cloud worker for ``offload="kserve://…"`` (or a :class:`KServeConfig`).

    Raises:
        ConfigError: a malformed URL or option.
        MissingExtra: ``tritonclient`` is not installed for gRPC (``pip install 'edgert[kserve]'``).
        OffloadError: no server answers at the address.
    """
    cfg = offload if isinstance(offload, KServeConfig) else parse_kserve_url(offload)
    if not isinstance(cfg, KServeConfig):  # pragma: no cover - parse_kserve_url returns one
        raise ConfigError(f"not a kserve offload: {offload!r}")
    if cfg.protocol == "grpc":
        try:
            require("tritonclient.grpc", f"offload={cfg.url()!r}")
        except TypeError as exc:   # protobuf: "duplicate symbol 'inference.…'"
            raise OffloadError(f"cannot reach {cfg.url()}: tritonclient.grpc cannot be imported in this process "
                               f"({exc}): a server of the protocol (mlserver) was imported here first; run the "
                               "server in its own process, or use kserve+http:// from this one") from exc
    return KServeWorker(cfg, lock, runtime)
