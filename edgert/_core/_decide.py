"""Step 2 of a request's life: the policy decides, and its decision is applied to the workers.

The snapshot a policy sees is the pending requests and each worker's view
(:func:`scheduler.contract.processor_view`); its decision is applied by :func:`scheduler.contract.apply`
and what it left is swept by :func:`scheduler.contract.sweep_unplaced`, exactly as the simulator does.
:class:`Decider` gives those two the workers (the :class:`scheduler.contract.Driver` methods). A broken
decision drops the request it names (:data:`ON_BROKEN`); a policy that raises fails every pending request.
Called under the runtime's lock by the dispatcher (:mod:`edgert._core._dispatch`).
"""

from __future__ import annotations

from collections.abc import Sequence

from edgert._core._ends import Ends
from edgert._core._handoff import bug_log
from edgert._core._worker import Request, Worker
from edgert.errors import EdgeRTError
from scheduler.contract import OnBroken, apply, left_unplaced, processor_view, sweep_unplaced
from scheduler.estimator import LatencyEstimator
from scheduler.types import Assignment, Policy, ProcessorView, SchedulerView


#: A decision that breaks the driver contract drops the request it names (the simulator raises instead):
#: the app keeps running and every request still ends once. See scheduler.contract.
ON_BROKEN = OnBroken.DROP


class Decider:
    """The policy's decisions over the pending requests, applied to the workers (see the module doc).

    Args:
        policy: the policy object (``decide(view, now_ms)``).
        estimator: the latency estimator the policy reads.
        ends: where a dropped or failed request ends.
    """

    def __init__(self, policy: Policy, estimator: LatencyEstimator, ends: Ends) -> None:
        self.policy = policy
        self.policy_name: str = getattr(policy, "name", type(policy).__name__)
        self.on_broken = ON_BROKEN
        self.estimator = estimator
        self.ends = ends
        self.workers: list[Worker] = []
        self.by_name: dict[str, Worker] = {}
        #: request id -> request awaiting a decision (the dispatcher admits into it)
        self.pending: dict[int, Request] = {}
        self._given: list[Worker] = []   # workers the last decision queued work on, to notify
        self._idle_procs: tuple[ProcessorView, ...] = ()   # every worker's idle view

    def adopt(self, workers: list[Worker]) -> None:
        """Decide over ``workers`` from now on."""
        self.workers = workers
        self.by_name = {w.name: w for w in workers}
        self._idle_procs = tuple(w.idle_view for w in workers)

    def lone(self, req: Request, now: float) -> bool:
        """Decide on ``req``, the only request pending, every worker idle: True when placed on a worker the sync
        caller may run it on (started at ``now``: nothing else was placed); else the decision is applied as any
        other, and the workers it gave work are notified."""
        decisions = self._ask(SchedulerView((req.view,), self._idle_procs, self.estimator), now)
        if decisions is None:
            return False
        if len(decisions) == 1:
            rid, name, _ = decisions[0]
            w = self.by_name.get(name) if rid == req.id and name is not None else None
            if w is not None and w.inline_ok and self.can_run(w, req):
                del self.pending[rid]
                req.worker = w
                w.running.append(req)
                req.start_ms = now
                return True
        self._apply(decisions, now)
        self.wake()
        return False

    def decide(self, now: float, ahead: tuple[Worker, ...] = (), wake: bool = True) -> None:
        """Ask the policy about every pending request and apply its answer; ``wake``: notify the workers given
        work now (else :meth:`wake`). ``ahead``: busy workers shown as free, to queue their next requests ahead."""
        if not self.pending:
            return
        if self.all_idle(now):   # a sync caller's usual case: one tuple, so the policy may reuse what it derived
            procs = self._idle_procs
        else:
            procs = tuple([w.idle_view if w in ahead or not (w.running or w.queue) and now >= w.unhealthy_until_ms
                           else self.view(w, now) for w in self.workers])
        views = tuple([r.view for r in self.pending.values()])
        decisions = self._ask(SchedulerView(views, procs, self.estimator), now)
        if decisions is not None:
            self._apply(decisions, now)
        if wake:
            self.wake()

    def _ask(self, view: SchedulerView, now: float) -> list[Assignment] | None:
        """The policy's decision on ``view``; None when it raised: it is logged as a bug, and every pending
        request fails with it (a policy bug must not lose requests)."""
        try:
            return self.policy.decide(view, now)
        except Exception as exc:  # noqa: BLE001 - logged, and chained to each request's error
            bug_log.error("scheduler %r raised deciding %d request(s)", self.policy_name, len(self.pending),
                          exc_info=exc)
            err = EdgeRTError(f"scheduler {self.policy_name!r} raised {exc!r} (a bug: see the edgert.bug log)")
            err.__cause__ = exc
            for stranded in list(self.pending.values()):
                self.ends.fail(stranded, err, now)
            self.pending.clear()
            return None

    def _apply(self, decisions: list[Assignment], now: float) -> None:
        """The decision applied, then the "left unplaced" sweep (:mod:`scheduler.contract`)."""
        apply(self, self.pending, decisions, now)
        if self.pending:
            sweep_unplaced(self, self.pending, now)

    def wake(self) -> None:
        """Notify each worker the last decision queued work on (once per request), if that work still waits.
        After the decision, not at each placement: a sync caller takes the request it runs itself first, and a
        worker woken for nothing would cost that caller the GIL."""
        for w in self._given:
            if w.queue:
                w.cond.notify()
        self._given.clear()

    def all_idle(self, now: float) -> bool:
        """Every worker runs nothing, has nothing queued and is healthy."""
        for w in self.workers:
            if w.running or w.queue or now < w.unhealthy_until_ms:
                return False
        return True

    def view(self, w: Worker, now: float) -> ProcessorView:
        """``w`` as the policy sees it, from the estimator now (a run or a queued request without an estimate
        counts 0 ms)."""
        exp = self.estimator.expected_ms
        ends = [r.start_ms + (exp(r.model.name, w.name) or 0.0) for r in w.running]
        queued = sum((exp(r.model.name, w.name) or 0.0) for r in w.queue) if w.queue else 0.0
        return processor_view(w.name, w.kind, w.capacity, ends, queued, len(w.queue), now >= w.unhealthy_until_ms)

    # -- the driver interface (scheduler.contract.Driver) ----------------------------------------
    def can_run(self, w: Worker, req: Request) -> bool:
        """``w`` has an estimate for ``req``'s model (a session) and ``req`` may run there."""
        allowed = req.view.allowed
        return self.estimator.expected_ms(req.model.name, w.name) is not None and (allowed is None or w.name in allowed)

    def place(self, req: Request, w: Worker, now_ms: float) -> None:
        """``req`` joins ``w``'s queue; ``w`` is notified when the decision is done (:meth:`wake`)."""
        req.worker = w
        w.queue.append(req)
        self._given.append(w)

    def drop(self, req: Request, reason: str, now_ms: float) -> None:
        """``req`` ends dropped."""
        self.ends.drop(req, reason, now_ms)

    def candidates(self, req: Request) -> Sequence[Worker]:
        """The workers that can run ``req``."""
        return [w for w in self.workers if self.can_run(w, req)]

    def unplaced(self, req: Request, able: Sequence[Worker], now_ms: float) -> str:
        """Why ``req`` is dropped with every worker that could run it idle (or with none that could)."""
        if not able:
            return f"no processor of this runtime can run model {req.model.name!r}"
        unhealthy = [w.name for w in able if now_ms < w.unhealthy_until_ms]
        return f"its processors {unhealthy} are unhealthy after a fault" if unhealthy else left_unplaced(self.policy_name)
