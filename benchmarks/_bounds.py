"""What ``benchmarks/schedulers.py`` proves about the cells its bars 2 and 3 fail: the capacity LP's
bound (``benchmarks/capacity_bound.py``, needs SciPy) at mean latencies and in expectation under the
simulator's cloud jitter, and the verdict (infeasible, or edgert falls short)."""

from __future__ import annotations

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
