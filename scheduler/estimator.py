"""Latency estimator per (model, processor), shared by the live runtime and the simulator.

Following Band (MobiSys'22): seeded from a profile or a warm-up, then updated
after every run with an exponential moving average,
``new = (1 - alpha) * old + alpha * measured`` (``alpha`` ≈ 0.1). It never
reads the clock; callers pass measured latencies in (ms).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping


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
        """Fold one measured latency (ms) into the moving average; return the new estimate."""
        key = (model, processor)
        old = self._ms.get(key)
        if old is None:
            self._prior[key] = new = measured_ms
            self.prior_version += 1
        else:
            new = old + self.alpha * (measured_ms - old)
        self._ms[key] = new
        return new

    def ema_table(self) -> dict[tuple[str, str], float]:
        """The live ``{(model, processor): expected ms}`` table, for a driver's inner loop that folds
        many measurements itself (the simulator): for a pair already in it,
        ``t[k] += alpha * (measured - t[k])`` is exactly :meth:`update`. Anything else goes through the
        methods (new pairs, seeds, forgetting), which keep the priors."""
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
