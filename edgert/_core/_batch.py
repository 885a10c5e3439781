"""Which waiting requests run with the one a worker is about to start, as one batched invocation (issue 30).

A pure rule, no clock and no lock of its own: the dispatcher calls :func:`gather` under its lock when a
worker is about to start ``head`` and other requests of the same model wait, and runs ``head`` with the
gathered ones through ``Session.run_batch``. Nothing here imports the dispatcher; requests are anything
with a ``deadline_ms`` (:class:`Waiting`).

Contract (what the caller provides):

* ``head``: the request the worker starts now (the policy already chose it for this worker).
* ``candidates``: the other requests that would otherwise *wait*, of the same model, whose feeds have the
  same shapes and dtypes as ``head``'s (:func:`feed_key` gives the key to group them by), in the order the
  caller prefers among equals (its queue order). Not requests an idle worker is about to start: those
  run at the same time elsewhere, which a batch on this core cannot beat.
* ``max_batch``: the session's ``Session.max_batch`` (1: the model does not batch; nothing is gathered).
* ``batch_ms(k)``: the expected duration (ms) of one invocation on ``k`` requests on this worker, for
  ``1 <= k <= max_batch``, non-decreasing in ``k``; ``batch_ms(1)`` is the single run. From measured
  figures (``benchmarks/batching.py``; the estimator keyed by model and k); ``math.inf`` for a size that
  must not run. A conservative guess for an unmeasured k is ``k * batch_ms(1)``, which gathers nothing.
* ``now_ms``: when the run would start (the dispatcher's clock).

The rule (what :func:`gather` promises):

1. Nothing is gathered when the head cannot meet its own deadline alone (``now_ms + batch_ms(1) >
   head.deadline_ms``): a late head is not made later by others' work.
2. Candidates are taken earliest deadline first (stable: equal deadlines keep the caller's order).
3. Taking a candidate as the k-th member must keep the expected finish ``now_ms + batch_ms(k)`` within
   the head's deadline and every member's. A candidate whose own deadline the batch would miss is passed
   over (a later deadline may still fit); when the head's or a member's deadline fails, gathering stops
   (larger batches take longer).
4. At most ``max_batch`` requests in all, the head included.
5. Of the batches so built (the head with the first 1, 2, ... members), the one that saves the most
   against running its members one by one is chosen: ``k * batch_ms(1) - batch_ms(k)``, which must exceed
   ``min_saving`` of the k single runs (default 0: any saving; pass a margin above the noise of the
   figures, e.g. 0.1 where batch / singles ratios vary by +-5 % from run to run, as on this CPU:
   BENCHMARKS.md, "Cross-user batching"); the smaller batch on a tie (it ends sooner). None saves:
   nothing is gathered. (Not greedy on the marginal cost: XNNPACK's batch of 2 can cost more than two
   runs where a batch of 3 costs less than three.)

The answer is plain data (:class:`Gathered`): the members taken besides the head, the expected finish,
and why it stopped short of every candidate, for traces and tests.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import numpy as np

__all__ = ["Gathered", "Waiting", "feed_key", "gather"]


class Waiting(Protocol):
    """What :func:`gather` reads of a request: its absolute deadline (ms, the dispatcher's clock)."""

    @property
    def deadline_ms(self) -> float: ...


R = TypeVar("R", bound=Waiting)


@dataclass(frozen=True, slots=True)
class Gathered(Generic[R]):
    """The decision: run ``head`` with ``members`` (deadline order, the head not among them) as one batch.

    ``finish_ms``: the batch's expected end, ``now_ms + batch_ms(1 + len(members))`` (ms).
    ``note``: why not every candidate was taken ("" when all were, or there were none).
    """

    members: tuple[R, ...]
    finish_ms: float
    note: str = ""

    @property
    def size(self) -> int:
        """Requests in the batch, the head included."""
        return 1 + len(self.members)


def feed_key(feeds: Sequence[np.ndarray]) -> tuple[tuple[tuple[int, ...], str], ...]:
    """Requests of one model batch together only when this key (each feed's shape and dtype) is equal."""
    return tuple((tuple(np.shape(x)), np.asarray(x).dtype.str) for x in feeds)


def gather(head: R, candidates: Sequence[R], max_batch: int, batch_ms: Callable[[int], float],
           now_ms: float, min_saving: float = 0.0) -> Gathered[R]:
    """The candidates to run with ``head`` as one batch (the rule in the module doc).

    Raises:
        ValueError: ``max_batch`` < 1, ``min_saving`` outside [0, 1), or ``batch_ms`` gave NaN or a negative
            duration.
    """
    if not 0.0 <= min_saving < 1.0:
        raise ValueError(f"gather: min_saving is a share of the single runs a batch replaces, in [0, 1); "
                         f"got {min_saving}")
    if max_batch < 1:
        raise ValueError(f"gather: max_batch must be >= 1 (the session's Session.max_batch), got {max_batch}")
    single = _cost(batch_ms, 1)
    if not candidates:
        return Gathered((), now_ms + single)
    if max_batch == 1:
        return Gathered((), now_ms + single, "the model does not batch (max_batch 1)")
    if now_ms + single > head.deadline_ms:
        return Gathered((), now_ms + single, f"the head misses its deadline alone ({now_ms + single:.3f} > "
                                             f"{head.deadline_ms:.3f} ms)")
    taken: list[R] = []
    bound = head.deadline_ms          # the earliest deadline among the members so far
    best, best_saving, best_cost = 0, 0.0, single
    stop = ""
    for c in sorted(candidates, key=lambda r: r.deadline_ms):
        k = len(taken) + 2
        if k > max_batch:
            stop = f"the batch is full ({max_batch})"
            break
        cost = _cost(batch_ms, k)
        end = now_ms + cost
        if end > bound:
            stop = f"a batch of {k} would end at {end:.3f} ms, after a member's deadline ({bound:.3f} ms)"
            break
        if end > c.deadline_ms:
            stop = f"passed over a candidate whose deadline ({c.deadline_ms:.3f} ms) a batch of {k} misses"
            continue
        taken.append(c)
        bound = min(bound, c.deadline_ms)
        if k * single - cost > max(best_saving, min_saving * k * single):
            best, best_saving, best_cost = len(taken), k * single - cost, cost
    if best == 0:
        size = len(taken) + 1
        note = (f"no batch saves more than {min_saving:.0%} of its single runs ({single:.3f} ms each; tried up "
                f"to {size})"
                if taken else stop)
        return Gathered((), now_ms + single, note)
    note = stop if best == len(taken) else f"a batch of {best + 1} saves the most ({best_saving:.3f} ms)"
    return Gathered(tuple(taken[:best]), now_ms + best_cost, note)


def _cost(batch_ms: Callable[[int], float], k: int) -> float:
    ms = float(batch_ms(k))
    if math.isnan(ms) or ms < 0:
        raise ValueError(f"gather: batch_ms({k}) gave {ms}; it must be a duration in ms >= 0 (math.inf: never)")
    return ms
