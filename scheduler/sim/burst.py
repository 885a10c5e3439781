"""A burst on unequal processors, simulated: does it finish no later than on the best processor alone?

A *burst* is ``n`` requests of one model submitted at once (``spacing_ms`` apart: a client's loop over
a folder of images or a recorded video's frames), each with the same SLO. On a device whose processors
differ by a wide factor (:func:`unequal_profile`: a GPU ``ratio`` times faster than its CPU), a placement
that counts each processor's backlog gives the slow processor a request only when it finishes that
request sooner than the fast one would after its queue; so the burst's *makespan* (first arrival to last
finish) is never later than on the fast processor alone. :func:`compare_alone` runs the same burst on
the whole device and on each processor alone (the same policy, the same seed) and returns both.

>>> from scheduler.sim.burst import compare_alone, unequal_profile
>>> both, alone = compare_alone(unequal_profile(1.0, 50.0), n=200, slo_ms=60_000.0)
>>> both.makespan_ms <= min(a.makespan_ms for a in alone.values())
True

Times are ms on the simulator's virtual clock.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass

from scheduler.profile import DeviceProfile
from scheduler.sim.driver import Simulation
from scheduler.sim.trace import parse_trace
from scheduler.registry import make_policy

__all__ = ["BurstOutcome", "burst_lines", "compare_alone", "simulate_burst", "unequal_profile"]


def unequal_profile(fast_ms: float, ratio: float, model: str = "det") -> DeviceProfile:
    """A device with a ``gpu`` that runs ``model`` in ``fast_ms`` and a ``cpu`` ``ratio`` times slower."""
    return DeviceProfile.from_json({
        "name": f"gpu-{ratio:g}x-cpu",
        "description": f"a gpu {ratio:g}x faster than the cpu on {model!r} (a made-up device for the burst demo)",
        "processors": [{"name": "cpu", "kind": "cpu"}, {"name": "gpu", "kind": "gpu"}],
        "latency_ms": {model: {"cpu": fast_ms * ratio, "gpu": fast_ms}},
        "sources": {f"latency_ms/{model}/*": f"derived: a gpu at {fast_ms:g} ms, the cpu {ratio:g}x slower"},
    }, origin="<unequal_profile>")


def burst_lines(n: int, model: str, slo_ms: float, spacing_ms: float = 0.001, rounds: int = 1,
                round_ms: float = 0.0) -> list[str]:
    """Trace lines (docs/design.md §6): ``rounds`` bursts ``round_ms`` apart from t = 0, each of ``n`` requests
    of ``model`` ``spacing_ms`` apart with ``slo_ms``; ids ``r<round>b<k>``."""
    return [json.dumps({"t_ms": r * round_ms + k * spacing_ms, "model": model, "slo_ms": slo_ms, "id": f"r{r}b{k}"})
            for r in range(rounds) for k in range(n)]


@dataclass(frozen=True, slots=True)
class BurstOutcome:
    """One simulated burst: how it ended and where it ran."""

    #: first arrival (t = 0) to the last finish of a request that ran (ms); 0 when none ran
    makespan_ms: float
    ok: int
    late: int
    dropped: int
    #: processor -> requests it ran
    by_processor: dict[str, int]
    #: the reason of every dropped request, in request order
    reasons: tuple[str, ...] = ()


def simulate_burst(profile: DeviceProfile, n: int, slo_ms: float, model: str = "det", *,
                   scheduler: str | None = None, spacing_ms: float = 0.001, noise: float = 0.0,
                   seed: int = 0, rounds: int = 1, round_ms: float = 0.0) -> BurstOutcome:
    """Run ``rounds`` bursts of ``n`` requests (:func:`burst_lines`) on ``profile`` (all its processors; no
    cloud) with ``scheduler`` (None: the default policy), one policy object throughout; ``noise`` is the
    log-normal sigma of each run around the profile's ms. The makespan is the last round's (from its start)."""
    wl = parse_trace(burst_lines(n, model, slo_ms, spacing_ms, rounds, round_ms), name=f"burst of {n}")
    sim = Simulation(wl, profile, make_policy(scheduler, profile=profile), seed=seed, noise=noise,
                     offload=False, thermal=False)
    sim.run()
    recs = sim.outcome().records()
    last = (rounds - 1) * round_ms
    ends = [r.end_ms - last for r in recs if not math.isnan(r.end_ms) and r.arrival_ms >= last]
    status = Counter(r.status for r in recs)
    return BurstOutcome(max(ends, default=0.0), status["ok"], status["late"], status["dropped"],
                        dict(Counter(r.processor for r in recs if r.processor)),
                        tuple(r.reason for r in recs if r.status == "dropped"))


def compare_alone(profile: DeviceProfile, n: int, slo_ms: float, model: str = "det", *,
                  scheduler: str | None = None, noise: float = 0.0,
                  seed: int = 0) -> tuple[BurstOutcome, dict[str, BurstOutcome]]:
    """The burst on the whole device, and on each processor alone (a profile with that one processor)."""
    both = simulate_burst(profile, n, slo_ms, model, scheduler=scheduler, noise=noise, seed=seed)
    alone: dict[str, BurstOutcome] = {}
    for p in profile.processors:
        if model not in profile.latency_ms or p.name not in profile.latency_ms[model]:
            continue
        one = DeviceProfile.from_json({
            "name": f"{profile.name} ({p.name} alone)",
            "processors": [{"name": p.name, "kind": p.kind}],
            "latency_ms": {model: {p.name: profile.latency_ms[model][p.name]}},
        }, origin="<compare_alone>")
        alone[p.name] = simulate_burst(one, n, slo_ms, model, scheduler=scheduler, noise=noise, seed=seed)
    return both, alone
