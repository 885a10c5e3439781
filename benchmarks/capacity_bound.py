"""Capacity bound: the most deadlines ANY scheduler could meet in a benchmark cell (a fluid LP relaxation).

A cell of ``benchmarks/schedulers.py`` (scenario × profile × load × burst)
is turned into a linear program whose optimum is an upper bound on the
number of requests that any scheduler, online or clairvoyant, could finish
by their deadlines at the profile's *mean* latencies:

* every request r that fires (cascade draws from the same seed as the
  simulator) has a window ``[a_r, d_r]``: ``a_r`` is its frame time, or for a
  cascade stage its frame time plus the fastest run of each stage above it
  (it cannot be ready earlier); ``d_r`` is its absolute deadline;
* time is cut into ``--grid`` ms intervals, each window widened outwards to
  the grid (only loosens the bound);
* ``w[r, p, k]`` = ms that processor p spends on r in interval k, allowed only
  for intervals inside r's window and only when one run fits the window
  (``latency[r, p] <= d_r - a_r``); ``w <= interval length`` (one request runs
  on one slot at a time);
* r is served by fraction ``x_r = sum_{p,k} w[r,p,k] / latency[r,p] <= 1``;
  a cascade stage is served at most as much as its parent (it needs the
  parent's output before the shared deadline);
* each processor offers ``slots × interval length`` ms per interval (1 slot
  locally, ``cloud_slots`` for the cloud, whose latency is RTT + transfer +
  server time);
* maximise ``sum_r x_r``.

Every real schedule is a feasible point (preemption, migration and
fractional service are *allowed* here, so the LP can only do better), hence
"met <= LP optimum" up to latency noise: the simulator draws each run's
latency around the mean (log-normal, sigma 0.1 local / 0.2 cloud), which
the bound does not model. The figures are therefore a bound at mean
latencies, not a proof under noise; with noise, risky cloud runs (mean
latency close to the deadline) fail more often than the LP assumes, so the
real ceiling is lower still.

``--burst-only`` maximises only the requests that arrive inside the burst
window (the others may be dropped for free), the ceiling for bar 3.

``--cloud-odds SIGMA`` bounds the *expected* number met instead, with the
simulator's cloud jitter: a cloud run takes ``(rtt + server) × F + transfer``
with F log-normal of mean 1 and sigma SIGMA (``SimConfig.cloud_noise``, 0.2),
so a request served by the cloud meets its deadline with probability at most
``q_r = P(F <= (d_r - a_r - transfer) / (rtt + server))`` (dispatching it at
its earliest possible moment; any later only lowers the odds). The objective
counts cloud service times ``q_r``; local service still counts at mean
latencies. This stays an upper bound on the expected met count of any
scheduler (at mean local latencies), and it is what a 99 % bar over a burst
of risky round trips runs into.

    python benchmarks/capacity_bound.py --cell pixel4 vr_gaming 3 burst
    python benchmarks/capacity_bound.py --failing benchmarks/results/schedulers.md

Needs scipy (HiGHS), a benchmark-only dependency.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # the repo, when edgert is not installed

from scheduler.sim import Burst, build_scenario, load_profile  # noqa: E402

CLOUD_SLOTS = 4   # the simulator's default, as benchmarks/schedulers.py runs it


@dataclass(frozen=True, slots=True)
class Bound:
    """LP ceiling for one cell: requests and the most of them any scheduler can meet (at mean latencies)."""

    requests: int
    max_met: float
    burst_requests: int
    burst_max_met: float | None   # None unless solved with burst_only

    @property
    def min_misses(self) -> int:
        """At least this many requests miss whatever the scheduler (rounded up from the LP)."""
        return max(0, math.ceil(self.requests - self.max_met - 1e-6))


def _burst(duration_s: float) -> Burst:
    return Burst(start_s=round(0.4 * duration_s, 3), duration_s=2.0, factor=3.0)


def _cloud_odds(window_ms: float, rtt_server_ms: float, transfer_ms: float, sigma: float) -> float:
    """P(a cloud run fits ``window_ms``) when it takes rtt_server × F + transfer, F log-normal (mean 1, sigma)."""
    room = window_ms - transfer_ms
    if room <= 0.0 or rtt_server_ms <= 0.0:
        return 0.0 if room <= 0.0 else 1.0
    if sigma <= 0.0:
        return 1.0 if rtt_server_ms <= room else 0.0
    z = (math.log(room / rtt_server_ms) + 0.5 * sigma * sigma) / sigma
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def bound(profile: str, scenario: str, load: float, burst: bool, duration_s: float = 10.0, seed: int = 0,
          grid_ms: float = 1.0, cloud_slots: int = CLOUD_SLOTS, burst_only: bool = False,
          cloud_odds: float | None = None) -> Bound:
    """Solve the LP for one cell (see the module docstring). Raises ImportError without scipy.

    ``cloud_odds`` (a sigma) weighs cloud service by its odds of meeting the deadline (``--cloud-odds``).
    """
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    prof = load_profile(profile)
    b = _burst(duration_s) if burst else None
    wl = build_scenario(scenario, duration_s, load, b, seed)
    procs = [p.name for p in prof.processors]
    slots = [1] * len(procs)
    lat: dict[str, list[float | None]] = {}
    cloud = prof.cloud
    for m, row in prof.latency_ms.items():
        lat[m] = [row.get(p) for p in procs]
        if cloud is not None:
            lat[m].append(cloud.expected_ms(m))
    if cloud is not None:
        procs.append("cloud")
        slots.append(cloud_slots)
    best = {m: min(v for v in row if v is not None) for m, row in lat.items()}

    def fires(r) -> bool:
        while r is not None:
            if not r.fires:
                return False
            r = r.parent
        return True

    reqs = [r for r in wl.all if fires(r)]
    index = {r.id: i for i, r in enumerate(reqs)}
    a = np.empty(len(reqs))
    d = np.empty(len(reqs))
    for i, r in enumerate(reqs):
        ready, q = r.t_ms, r.parent
        while q is not None:
            ready += best[q.model]
            q = q.parent
        a[i], d[i] = ready, r.deadline_ms
    k0 = np.floor(a / grid_ms).astype(int)
    k1 = np.ceil(d / grid_ms).astype(int)
    n_k = int(k1.max()) + 1 if len(reqs) else 1
    w0 = b.start_s * 1000.0 if b else 0.0
    w1 = (b.start_s + b.duration_s) * 1000.0 if b else 0.0
    in_burst = np.array([b is not None and w0 <= r.t_ms < w1 for r in reqs])

    rows_r, cols, coef_r = [], [], []      # per-request service rows
    cap_rows, cap_cols = [], []            # per (processor, interval) capacity rows
    obj = []
    vals = []                              # met per ms of service, per variable (1/latency × cloud odds)
    var = 0
    owner: list[tuple[int, float]] = []    # (request, 1/latency) per variable
    for i, r in enumerate(reqs):
        span = d[i] - a[i]
        for p, ms in enumerate(lat[r.model]):
            if ms is None or ms > span + 1e-9 or ms <= 0:
                continue
            ks = np.arange(k0[i], k1[i])
            n = len(ks)
            rows_r.append(np.full(n, i))
            cols.append(np.arange(var, var + n))
            coef_r.append(np.full(n, 1.0 / ms))
            cap_rows.append(p * n_k + ks)
            cap_cols.append(np.arange(var, var + n))
            val = 1.0 / ms
            if cloud_odds is not None and cloud is not None and p == len(procs) - 1:
                server = cloud.latency_ms[r.model]
                val *= _cloud_odds(span, cloud.rtt_ms + server, ms - cloud.rtt_ms - server, cloud_odds)
            vals.append(np.full(n, val))
            weight = val if (not burst_only or in_burst[i]) else 0.0
            obj.append(np.full(n, -weight))
            owner.append((i, 1.0 / ms))
            var += n
    if var == 0:
        return Bound(len(reqs), 0.0, int(in_burst.sum()), 0.0 if burst_only else None)
    rr = np.concatenate(rows_r)
    cc = np.concatenate(cols)
    cr = np.concatenate(coef_r)
    serve = coo_matrix((cr, (rr, cc)), shape=(len(reqs), var)).tocsr()
    # cascade: served(child) - served(parent) <= 0
    pairs = [(index[r.id], index[r.parent.id]) for r in reqs if r.parent is not None and r.parent.id in index
             and r.deadline_ms <= r.parent.deadline_ms]
    blocks = [serve]
    ub = [np.ones(len(reqs))]
    if pairs:
        ch = np.array([c for c, _ in pairs])
        pa = np.array([p for _, p in pairs])
        blocks.append(serve[ch] - serve[pa])
        ub.append(np.zeros(len(pairs)))
    capr = np.concatenate(cap_rows)
    capc = np.concatenate(cap_cols)
    used = np.unique(capr)
    remap = np.searchsorted(used, capr)
    cap = coo_matrix((np.ones(len(capr)), (remap, capc)), shape=(len(used), var)).tocsr()
    blocks.append(cap)
    slot_of = np.array(slots, dtype=float)[used // n_k]
    ub.append(slot_of * grid_ms)
    from scipy.sparse import vstack
    res = linprog(np.concatenate(obj), A_ub=vstack(blocks).tocsr(), b_ub=np.concatenate(ub),
                  bounds=(0.0, grid_ms), method="highs")
    if res.status != 0:
        raise RuntimeError(f"LP for {profile} {scenario} x{load:g}{' +burst' if burst else ''} failed: {res.message}")
    # met (expected, with cloud odds) per request: service fractions, cloud service weighed by its odds
    served = coo_matrix((np.concatenate(vals) * res.x[cc], (rr, np.zeros_like(rr))),
                        shape=(len(reqs), 1)).toarray().ravel()
    total = float(served.sum())
    burst_met = float(served[in_burst].sum()) if burst_only else None
    return Bound(len(reqs), total, int(in_burst.sum()), burst_met)


_ROW = re.compile(r"^- (\S+) (\S+) x([\d.]+)( \+burst)?: ")


def failing_cells(markdown_path: str) -> list[tuple[str, str, float, bool]]:
    """The cells listed under a FAIL bar in a results markdown written by benchmarks/schedulers.py."""
    out: list[tuple[str, str, float, bool]] = []
    for line in open(markdown_path, encoding="utf-8"):
        m = _ROW.match(line.strip())
        if m:
            cell = (m.group(1), m.group(2), float(m.group(3)), bool(m.group(4)))
            if cell not in out:
                out.append(cell)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cell", nargs=4, action="append", metavar=("PROFILE", "SCENARIO", "LOAD", "burst|-"),
                    help="a cell to bound (repeatable)")
    ap.add_argument("--failing", metavar="RESULTS.md", help="bound every cell a FAIL bar lists in this file")
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--grid", type=float, default=1.0, help="interval length in ms (default 1)")
    ap.add_argument("--burst-only", action="store_true", help="maximise only requests arriving in the burst")
    ap.add_argument("--cloud-odds", type=float, metavar="SIGMA", default=None,
                    help="bound the expected met count, cloud runs jittered log-normally with this sigma (0.2)")
    args = ap.parse_args(argv)
    cells = [(p, s, float(x), bt == "burst") for p, s, x, bt in (args.cell or [])]
    if args.failing:
        cells += failing_cells(args.failing)
    if not cells:
        ap.error("give --cell or --failing")
    print(f"{'cell':<36} {'requests':>8} {'LP max met':>10} {'min misses':>10} {'burst ceiling':>13} {'s':>5}")
    for prof, scen, load, burst in cells:
        t0 = time.perf_counter()
        bd = bound(prof, scen, load, burst, args.duration, grid_ms=args.grid, burst_only=args.burst_only,
                   cloud_odds=args.cloud_odds)
        extra = (f"{100 * bd.burst_max_met / bd.burst_requests:12.1f}%" if bd.burst_max_met is not None
                 and bd.burst_requests else f"{'-':>13}")
        label = f"{prof} {scen} x{load:g}{' +burst' if burst else ''}"
        print(f"{label:<36} {bd.requests:>8} {bd.max_met:>10.1f} {bd.min_misses:>10} {extra} "
              f"{time.perf_counter() - t0:>5.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
