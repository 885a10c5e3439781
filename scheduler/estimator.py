"""Latency estimator per (model, processor), shared by the live runtime and the simulator.

Following Band (MobiSys'22): seeded from a profile or a warm-up, then updated
after every run with an exponential moving average,
``new = (1 - alpha) * old + alpha * measured`` (``alpha`` ≈ 0.1). It never
reads the clock; callers pass measured latencies in (ms).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator, Mapping


class LatencyEstimator:
    """Expected latency in ms for each (model, processor) pair it has seen.

    A pair that was never seeded is unsupported (``expected_ms`` returns None):
    that is how a policy learns which processor can run which model.
    """

    __slots__ = ("alpha", "_ms", "_prior", "prior_version")

    def __init__(self, alpha: float = 0.1, seed: Mapping[str, Mapping[str, float]] | None = None) -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {alpha}")
        self.alpha = alpha
        self._ms: dict[tuple[str, str], float] = {}
        self._prior: dict[tuple[str, str], float] = {}
        #: bumped whenever a prior changes (seed, forget), so callers may cache what they derive from priors
        self.prior_version = 0
        if seed:
            for model, per_proc in seed.items():
                for proc, ms in per_proc.items():
                    self.seed(model, proc, ms)

    def expected_ms(self, model: str, processor: str) -> float | None:
        """Expected latency in ms, or None when ``processor`` cannot run ``model``."""
        return self._ms.get((model, processor))

    def prior_ms(self, model: str, processor: str) -> float | None:
        """The latency in ms the pair was seeded with (profile or warm-up; the first measurement of a pair
        learnt without a seed), which ``update`` never moves; None when unsupported. What a policy
        that fixes its placement ahead of time (Band's ``fixed_worker``) decides on."""
        return self._prior.get((model, processor))

    def seed(self, model: str, processor: str, ms: float) -> None:
        """Set the estimate and its prior outright (from a profile or a warm-up run)."""
        if not ms >= 0.0:
            raise ValueError(f"latency for {model!r} on {processor!r} must be >= 0 ms, got {ms}")
        self._ms[(model, processor)] = self._prior[(model, processor)] = float(ms)
        self.prior_version += 1

    def reset(self, model: str, processor: str, ms: float) -> None:
        """Set the current estimate of a known pair to ``ms``, keeping its prior (e.g. to forget
        measurements that have gone stale). Unknown pairs are left unknown."""
        key = (model, processor)
        if key in self._ms:
            self._ms[key] = float(ms)

    def update(self, model: str, processor: str, measured_ms: float) -> float:
        """Fold one measured latency (ms) into the moving average; return the new estimate. A pair
        measured before it was ever seeded takes that measurement as its prior too.

        The one place the moving average is written: the simulator calls it after every simulated run, the live
        runtime (through :meth:`update_shared`) after every run."""
        key = (model, processor)
        table = self._ms
        old = table.get(key)
        if old is None:
            self._prior[key] = new = measured_ms
            self.prior_version += 1
        else:
            new = old + self.alpha * (measured_ms - old)
        table[key] = new
        return new

    def update_shared(self, model: str, processor: str, peers: tuple[str, ...], measured_ms: float) -> float:
        """:meth:`update` ``processor``'s estimate and give each of ``peers`` it already knows the same value
        (processors that are one, seen as several slots: one moving average over all their runs); the new ms."""
        new = self.update(model, processor, measured_ms)
        table = self._ms
        for peer in peers:
            if peer != processor and (model, peer) in table:
                table[(model, peer)] = new
        return new

    def ema_table(self) -> dict[tuple[str, str], float]:
        """The live ``{(model, processor): expected ms}`` table, to read many estimates in an inner loop
        (a policy's decision, the simulator's processor views): the same dict for the estimator's life, so a caller
        may keep it (or its ``get``). Read only: every change goes through the methods (:meth:`update`, seeds,
        forgetting), which keep the priors."""
        return self._ms

    def forget(self, model: str, processor: str | None = None) -> None:
        """Mark ``model`` unsupported on ``processor`` (or everywhere)."""
        for key in [k for k in self._ms if k[0] == model and (processor is None or k[1] == processor)]:
            del self._ms[key]
            self._prior.pop(key, None)
        self.prior_version += 1

    def pairs(self) -> Iterator[tuple[str, str, float]]:
        """Every (model, processor, expected_ms) known."""
        for (m, p), ms in list(self._ms.items()):
            yield m, p, ms

    def as_table(self) -> dict[str, dict[str, float]]:
        """``{model: {processor: ms}}``, the ``latency_ms`` shape of a device profile."""
        out: dict[str, dict[str, float]] = {}
        for m, p, ms in self.pairs():
            out.setdefault(m, {})[p] = ms
        return out


class EstimateAger:
    """Ages stale estimates back toward their floor, so one slow run cannot shut a model out for good.

    A policy admits a request only when the estimate promises its deadline, and only a run measures
    the estimate: after one slow run (a busy moment, a page fault) an estimate may stay above every
    deadline for the rest of the session, since every later request is dropped before it runs. The
    ager, called by the policy at each decision with the decision's ``now_ms`` (it never reads the
    clock, so the simulator runs the same code), notices an observation as a change of the estimate
    and, once a pair has had none for ``stale_ms`` (and, when the policy says which, its model was
    refused on its estimate since), moves its estimate toward its *floor*, the lower of
    its prior (profile or warm-up) and the lowest estimate it held, halving the distance every
    ``half_life_ms``::

        aged = floor + (observed - floor) * 0.5 ** ((now_ms - observed_at_ms - stale_ms) / half_life_ms)

    where ``observed`` is the estimate the last observation left. As soon as the aged estimate fits a
    request's deadline that request runs as a probe, and its measurement folds into the aged estimate
    as usual: an estimate that was right (the model is that slow now) climbs back, one that was an
    outlier stays down. A model that keeps running is never touched. At most one pass every
    ``stale_ms / 4`` (ms of ``now_ms``), so it costs nothing on almost every decision.

    Args:
        stale_ms: time without an observation after which an estimate starts aging (ms).
        half_life_ms: how fast it then ages toward its floor (ms).

    Raises:
        ValueError: a non-positive ``stale_ms`` or ``half_life_ms``.
    """

    __slots__ = ("half_life_ms", "stale_ms", "_next_ms", "_state")

    def __init__(self, stale_ms: float = 1000.0, half_life_ms: float = 500.0) -> None:
        for label, value in (("stale_ms", stale_ms), ("half_life_ms", half_life_ms)):
            if not value > 0.0:
                raise ValueError(f"{label} must be > 0 ms, got {value}")
        self.stale_ms = float(stale_ms)
        self.half_life_ms = float(half_life_ms)
        self._next_ms = -math.inf
        #: per pair: [estimate last seen, estimate the last observation left, when it was noticed (ms), floor]
        self._state: dict[tuple[str, str], list[float]] = {}

    def age(self, estimator: LatencyEstimator, now_ms: float, processors: Collection[str] | None = None,
            refused: set[str] | None = None) -> list[tuple[str, str]]:
        """Note new observations and age the stale estimates of ``estimator``; returns the pairs whose
        estimate it lowered. Only pairs on ``processors`` (None: all), and only of the models in
        ``refused`` (None: all): a policy passes the models it refused on their estimate since their
        last observation, and the ager removes a model from it when it notices a new observation of it,
        so a model the application simply stopped asking for keeps its estimate."""
        if now_ms < self._next_ms:
            return []
        self._next_ms = now_ms + 0.25 * self.stale_ms
        state, aged = self._state, []
        table = estimator.ema_table()
        for key in [k for k in state if k not in table]:   # forgotten pairs
            del state[key]
        for key, cur in table.items():
            if processors is not None and key[1] not in processors:
                continue
            s = state.get(key)
            if s is None:
                prior = estimator.prior_ms(*key)
                state[key] = [cur, cur, now_ms, min(cur, cur if prior is None else prior)]
                continue
            seen, observed, at, floor = s
            if cur != seen:   # a measurement came in (or someone set it): a fresh observation
                if refused is not None:
                    refused.discard(key[0])
                s[0] = s[1] = cur
                s[2] = now_ms
                prior = estimator.prior_ms(*key)
                s[3] = min(floor, cur, floor if prior is None else prior)
                continue
            idle = now_ms - at - self.stale_ms
            if idle <= 0.0 or observed <= floor or refused is not None and key[0] not in refused:
                continue
            new = floor + (observed - floor) * 0.5 ** (idle / self.half_life_ms)
            if new < cur - 1e-9 * max(1.0, cur):
                estimator.reset(key[0], key[1], new)
                s[0] = new
                aged.append(key)
        return aged
