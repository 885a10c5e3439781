"""The ``cloud`` processor of the runtime: a worker whose invocations are MQTT round trips.

``Runtime(offload=…)`` calls :func:`edgert.offload._factory.make_cloud_worker`:

* ``"mqtt://host:port"`` / ``"mqtts://…"`` (or a :class:`edgert.offload.CloudConfig`):
  connect to that broker; ``edgert cloud serve`` workers there serve the models.
* ``"auto"``: zero setup. Start an embedded amqtt broker on a free loopback port
  and one local ``edgert cloud serve`` process (its own core), serving the
  models this runtime loads (each loaded file is written into its models
  directory, so it still serves only files it was given). Both stop with the
  runtime (:meth:`CloudWorker.close`).

The worker runs ``capacity`` requests at once (one per thread) and never
inline. A request's give-up time comes from its deadline: it waits until
``deadline - fastest local latency`` (so a local processor can still make it
after a lost reply), but at least twice the cloud's expected latency, and
never past the deadline itself; without a deadline it waits ``timeout_ms``.
Giving up, a lost broker or an error reply raise :class:`OffloadError`: the
runtime re-places the request locally if its deadline allows, else it ends
``failed`` with that reason.

Only work sent to the cloud measures it, so an estimate that no round trip has
refreshed for ``STALE_S`` is reset to the fastest round trip seen (keeping the
prior): a slow spell cannot keep the cloud out for the rest of a session.
"""

from __future__ import annotations

import math
import re
import threading
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from delegates.base import Delegate, Session
from edgert.errors import ModelLoadError, OffloadError
from edgert.offload._client import CloudDelegate, CloudSession
from edgert.offload._config import CloudConfig
from edgert.offload._embedded import EmbeddedCloud
from edgert.offload._kserve_config import KServeConfig
from edgert.offload._link import MqttLink
from edgert._core._run import Worker

if TYPE_CHECKING:
    from edgert._core._model import LoadedModel
    from edgert._core._run import Request
    from edgert._core._run import Dispatcher

#: A cloud estimate no round trip has refreshed for this long (s) is stale: see ``CloudWorker``.
STALE_S = 1.0


class CloudWorker(Worker):
    """The ``cloud`` processor: sessions are :class:`CloudSession` s over one :class:`MqttLink`.

    Args:
        cfg: broker address and options.
        lock: the runtime's lock.
        runtime: the runtime's dispatcher (its clock and estimator set the give-up time); None uses
            the request's start time as the clock and keeps no local reserve.
        embedded: the auto-mode broker and worker process this worker owns and stops.

    Raises:
        OffloadError: the broker is not reachable.
    """

    inline_ok = False

    def __init__(self, cfg: CloudConfig | KServeConfig, lock: threading.Lock, runtime: Dispatcher | None = None,
                 embedded: EmbeddedCloud | None = None, *, link: Any = None, delegate: Delegate | None = None) -> None:
        # ``link`` and ``delegate``: another protocol's (kserve: ``_kserve_worker``); a link has
        # ``connected`` and ``close()``, and the delegate's sessions ``run(feeds, timeout_ms)``
        if link is None:
            assert isinstance(cfg, CloudConfig), "a KServe worker passes its own link"
            link = MqttLink(cfg)
        self.link: Any = link
        super().__init__("cloud", "cloud", [delegate or CloudDelegate(self.link)], lock, capacity=cfg.capacity)
        self.cfg = cfg
        self._rt = runtime
        self._embedded = embedded
        # Stale estimates: the policy sends work to the cloud only when its estimate promises the
        # deadline, and only work sent there measures it, so one slow spell (a server warming up, a
        # congested link) would keep the cloud out for the rest of the session. Per model, the
        # fastest round trip seen and when the last one ended (perf_counter s); an ager thread
        # resets an estimate no round trip has refreshed for STALE_S back to that fastest one, so
        # the next request that fits re-measures it (at most one probe per model per STALE_S).
        self._best_ms: dict[str, float] = {}
        self._last_s: dict[str, float] = {}
        self._stop_aging = threading.Event()
        self._ager: threading.Thread | None = None
        if runtime is not None:
            self._ager = threading.Thread(target=self._age, name="edgert-cloud-age", daemon=True)
            self._ager.start()

    def open_model(self, model: LoadedModel, delegate: Delegate) -> Session:
        """Find a worker serving one of ``model``'s files (by digest); in auto mode, hand it the files first.

        Raises:
            ModelLoadError: no worker serves any of the model's files.
        """
        assert isinstance(delegate, CloudDelegate)
        if self._embedded is not None:
            self._embedded.add_model(model)
        errors = []
        for art in model.artifacts:
            try:
                return delegate.open_named(art, model.name)
            except ModelLoadError as exc:
                errors.append(str(exc))
        raise ModelLoadError("; ".join(errors))

    def execute(self, req: Request) -> tuple[list[np.ndarray], str]:
        """One round trip, given up at the time :meth:`give_up_ms` says.

        Raises:
            OffloadError: timeout, lost broker, or an error reply.
        """
        delegate, session = self.sessions[req.model.name]
        now = self._rt.now_ms() if self._rt is not None else req.start_ms
        assert isinstance(session, CloudSession) or hasattr(session, "server_name")   # mqtt or kserve
        run: Any = session.run   # both take (feeds, timeout_ms)
        name = req.model.name
        t = time.perf_counter()
        budget = self.give_up_ms(req, now) - now
        try:
            out = run(req.feeds, budget)
        except OffloadError as exc:
            end = time.perf_counter()
            connected = self.link.connected
            if self._rt is not None and connected:
                # A reply that did not come in time is a latency sample too (a lower bound): without
                # it the estimate would stay at its last good value and the policy would keep sending.
                with self.cond:
                    self._last_s[name] = end
                    self._rt.estimator.update(name, self.name, (end - t) * 1e3)
            raise OffloadError(self.failure_reason(str(exc), (end - t) * 1e3, budget, req.deadline_ms - now,
                                                   connected)) from exc
        end = time.perf_counter()
        with self.cond:
            self._last_s[name] = end
            ms = (end - t) * 1e3
            if ms < self._best_ms.get(name, math.inf):
                self._best_ms[name] = ms
        return out, delegate.name

    def failure_reason(self, error: str, elapsed_ms: float, budget_ms: float, deadline_in_ms: float,
                       connected: bool) -> str:
        """What happened to a failed request (see :func:`failure_reason`; a protocol's worker may word it its way)."""
        return failure_reason(error, elapsed_ms, budget_ms, deadline_in_ms, connected)

    def age_estimates(self, now_s: float) -> list[str]:
        """Reset every stale cloud estimate (no round trip for ``STALE_S``, above 1.25x the fastest
        seen) to the fastest round trip seen; returns the models reset. Called by the ager thread
        every ``STALE_S / 4`` (call under no lock)."""
        if self._rt is None:
            return []
        est = self._rt.estimator
        reset = []
        with self.cond:
            for model, best in self._best_ms.items():
                if now_s - self._last_s.get(model, now_s) < STALE_S:
                    continue
                cur = est.expected_ms(model, self.name)
                if cur is not None and cur > 1.25 * best:
                    est.reset(model, self.name, best)
                    self._last_s[model] = now_s
                    reset.append(model)
        return reset

    def _age(self) -> None:
        while not self._stop_aging.wait(STALE_S / 4):
            try:
                self.age_estimates(time.perf_counter())
            except Exception as exc:  # noqa: BLE001 - a bug of ours: logged, and the loop goes on
                import logging  # noqa: PLC0415

                logging.getLogger("edgert.bug").error("the cloud estimate ager raised %s: %s", type(exc).__name__,
                                                      exc, exc_info=exc)

    # The runtime marks a processor unhealthy for a while after any fault. For the cloud that is
    # right when the broker is gone, but a slow reply while connected is already priced in by the
    # estimator (see execute): keeping the cloud out for seconds would waste it in a burst.
    @property
    def unhealthy_until_ms(self) -> float:
        """Until when (runtime ms) placement skips the cloud; only a lost broker connection sets it."""
        return self._unhealthy_until_ms

    @unhealthy_until_ms.setter
    def unhealthy_until_ms(self, value: float) -> None:
        # Lowering it (clearing a mark, e.g. to 0.0 after a reconnect) is always taken; a new mark
        # only while the broker connection is down.
        if (value <= getattr(self, "_unhealthy_until_ms", math.inf) or not getattr(self, "link", None)
                or not self.link.connected):
            self._unhealthy_until_ms = value

    def give_up_ms(self, req: Request, now_ms: float) -> float:
        """When to stop waiting for ``req``'s reply, on the runtime clock (ms); see :func:`give_up_ms`."""
        expected, reserve = 0.0, 0.0
        if self._rt is not None:
            est = self._rt.estimator.expected_ms
            expected = est(req.model.name, self.name) or 0.0
            local = [v for p in self._rt.processors if p != self.name
                     and (v := est(req.model.name, p)) is not None]
            reserve = min(local) if local else 0.0
        return give_up_ms(req.deadline_ms, now_ms, expected, reserve, self.cfg.timeout_ms)

    def close(self) -> None:
        """Disconnect, then stop the embedded worker and broker (auto mode)."""
        self._stop_aging.set()
        try:
            super().close()
            self.link.close()
        finally:
            if self._embedded is not None:
                self._embedded.close()


def failure_reason(error: str, elapsed_ms: float, budget_ms: float, deadline_in_ms: float, connected: bool) -> str:
    """What happened to a failed cloud request, as ``"cloud <what>: <detail>"``.

    ``<what>`` is ``broker lost`` (the connection is down), ``timeout`` (no reply within the
    give-up time ``budget_ms``), ``error reply [code]`` (a worker answered with an error) or
    ``error``; the text before the first ``": "`` is what a report counts requests by.

    >>> failure_reason("no reply", 20.4, 20.0, 33.3, True)
    'cloud timeout: no reply after 20.4 ms (gave up at 20.0 ms; the deadline was 33.3 ms away)'
    >>> failure_reason("cloud worker w1 refused 'm': [busy] queue full", 3.0, 20.0, 33.3, True)
    "cloud error reply [busy]: cloud worker w1 refused 'm': [busy] queue full"
    """
    if not connected:
        return f"cloud broker lost: {error}"
    if elapsed_ms >= budget_ms:
        away = f"the deadline was {deadline_in_ms:.1f} ms away" if math.isfinite(deadline_in_ms) \
            else "no deadline: the link's timeout"
        return f"cloud timeout: no reply after {elapsed_ms:.1f} ms (gave up at {budget_ms:.1f} ms; {away})"
    code = re.search(r"refused .*?: \[([^\]]+)\]", error)
    if code:
        return f"cloud error reply [{code.group(1)}]: {error}"
    return f"cloud error: {error}"


def give_up_ms(deadline_ms: float, now_ms: float, expected_ms: float, reserve_ms: float,
               timeout_ms: float) -> float:
    """The time (ms, runtime clock) a cloud request stops waiting for its reply.

    ``deadline_ms - reserve_ms`` (``reserve_ms``: the fastest local latency, so the request
    can still be re-placed locally and make it), but not before ``now_ms + 2 * expected_ms``
    (a reply merely slower than usual is not abandoned) and never after the deadline.
    Without a deadline (inf): ``now_ms + timeout_ms``.

    >>> give_up_ms(100.0, 0.0, 10.0, 30.0, 5000.0), give_up_ms(100.0, 90.0, 10.0, 30.0, 5000.0)
    (70.0, 100.0)
    """
    if not math.isfinite(deadline_ms):
        return now_ms + timeout_ms
    return min(max(deadline_ms - reserve_ms, now_ms + 2.0 * expected_ms), deadline_ms)
