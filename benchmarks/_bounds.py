"""What ``benchmarks/schedulers.py`` proves about the cells its bars 2 and 3 fail: the capacity LP's
bound (``benchmarks/capacity_bound.py``, needs SciPy) at mean latencies and in expectation under the
simulator's cloud jitter, and the verdict (infeasible, or edgert falls short); and bar 3's measure of
when offloading stops after a burst (:func:`last_burst_offload`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from scheduler.registry import BAND_POLICIES, DEFAULT_POLICY
from scheduler.sim import SimConfig

#: bar 3: the share of a 3x burst's requests that must meet their deadline
BURST_MET = 0.99
CLOUD_NOISE = SimConfig().cloud_noise   # the simulator's cloud jitter (log-normal sigma), for the burst ceiling


BoundRow = tuple[str, Any, int, int, int, str]   # (label, edgert's figures, best, LP, LP with jitter, verdict)


def bound_rows(results: list[tuple[tuple, dict[str, Any]]], jobs: int, label: Callable[[tuple], str]
               ) -> list[BoundRow]:
    """For each cell failing bar 2: (label, edgert's figures, best baseline misses, LP min misses at mean
    latencies, LP min misses in expectation under the cloud's jitter, verdict)."""
    todo = []
    for cell, figs in results:
        best = min(figs[n].misses for n in BAND_POLICIES)
        ours = figs[DEFAULT_POLICY]
        if cell[2] >= 2.0 and ours.misses > 0.5 * best:
            todo.append((cell, ours, best))
    bounds = _pmap(_bound_cell, [(c[0], c[1], c[2], c[3], c[4], c[6]) for c, _, _ in todo], jobs)
    rows = []
    for (cell, ours, best), (lp, lp_odds) in zip(todo, bounds):
        if lp > 0.5 * best:
            verdict = "infeasible (the LP ceiling misses more than half the baseline)"
        elif lp_odds > 0.5 * best:
            verdict = "infeasible in expectation (with the cloud's jitter)"
        else:
            verdict = "feasible: edgert falls short"
        rows.append((label(cell), ours, best, lp, lp_odds, verdict))
    return rows


def _pmap(fn: Callable[[tuple], Any], args: list[tuple], jobs: int) -> list[Any]:
    """``[fn(a) for a in args]``, on ``jobs`` processes when there is more than one."""
    if jobs > 1 and args:
        with ProcessPoolExecutor(jobs) as ex:
            return list(ex.map(fn, args))
    return [fn(a) for a in args]


def _bound_cell(a: tuple) -> tuple[int, int]:
    from capacity_bound import bound

    plain = bound(a[0], a[1], a[2], a[3], a[4], a[5]).min_misses
    return plain, bound(a[0], a[1], a[2], a[3], a[4], a[5], cloud_odds=CLOUD_NOISE).min_misses


def burst_rows(results: list[tuple[tuple, dict[str, Any]]], jobs: int, label: Callable[[tuple], str]
               ) -> list[tuple[str, float, float, float, str]]:
    """For each cell failing bar 3: (label, edgert % met in the burst, LP burst ceiling %, the ceiling in
    expectation with the cloud's jitter %, verdict)."""
    todo = []
    for cell, figs in results:
        ours = figs[DEFAULT_POLICY]
        if cell[3] and cell[2] == 1.0 and ours.burst_requests:
            rate = ours.burst_met / ours.burst_requests
            if rate < BURST_MET:
                todo.append((cell, 100.0 * rate))
    ceilings = _pmap(_burst_cell, [(c[0], c[1], c[2], c[3], c[4], c[6]) for c, _ in todo], jobs)
    rows = []
    for (cell, ours), (plain, odds) in zip(todo, ceilings):
        if plain < 100.0 * BURST_MET:
            verdict = "infeasible (even the fluid ceiling is under 99 %)"
        elif odds < 100.0 * BURST_MET:
            verdict = "infeasible in expectation (the cloud's jitter keeps the ceiling under 99 %)"
        else:
            verdict = f"feasible only in the fluid ceiling ({odds - 100.0 * BURST_MET:.1f} pt above 99 %): edgert falls short"
        rows.append((label(cell), ours, plain, odds, verdict))
    return rows


def _burst_cell(a: tuple) -> tuple[float, float]:
    from capacity_bound import bound

    plain = bound(a[0], a[1], a[2], a[3], a[4], a[5], burst_only=True)
    odds = bound(a[0], a[1], a[2], a[3], a[4], a[5], burst_only=True, cloud_odds=CLOUD_NOISE)
    n = plain.burst_requests or 1
    return 100.0 * plain.burst_max_met / n, 100.0 * odds.burst_max_met / n


def last_burst_offload(arrivals: list[float], w0: float, w1: float, bin_ms: float = 500.0) -> float:
    """The latest offloaded arrival the burst ``[w0, w1)`` still drove, minus ``w1`` (ms; -inf: none).

    An offload after the burst counts when its ``bin_ms`` bin offloads more than 1.25 × the most any bin
    before the burst did (a steady share jitters by a request or two a bin): an energy objective sends
    some work to the cloud all along (``balanced`` gives a free slot a model it saves energy on), and
    "offload stops" means back to that rate. With no offload before the burst, every offload after it
    counts."""
    before: dict[int, int] = {}
    after: dict[int, list[float]] = {}
    for t in arrivals:
        if t < w0:
            before[int(t // bin_ms)] = before.get(int(t // bin_ms), 0) + 1
        elif t >= w1:
            after.setdefault(int((t - w1) // bin_ms), []).append(t)
    if not before:
        return max(arrivals, default=-math.inf) - w1   # every offload counts (those in the burst: negative)
    usual = max(before.values())
    return max((max(ts) - w1 for ts in after.values() if len(ts) > 1.25 * usual), default=-math.inf)
