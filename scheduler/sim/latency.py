"""The simulator's device and latency model: its processors, each run's time, each hand-off's delay.

A run of ``model`` on processor ``p`` takes the profile's mean
``latency_ms[model][p]`` times a seeded log-normal factor with mean 1 and
``sigma`` = ``noise``. Where the profile also gives ``latency_p90_ms`` (as
``edgert profile`` does, with ``latency_ms`` its p50), the run time is the
log-normal whose median is ``latency_ms`` and whose 90th percentile is
``latency_p90_ms``. One standard-normal draw per request (seeded,
``default_rng([seed, 4])``, in bulk), so a request's draw does not depend on
where it runs. The cloud is one processor of kind ``"cloud"`` with
``cloud_slots`` parallel server slots; a run takes ``(rtt_ms + server
latency) × factor + input/output bytes over the link`` (``CloudSpec``; the
factor's sigma is ``cloud_noise``, network jitter). Each slot has its own
link (the uplink is not shared between slots).

``dispatch_ms`` (default 0) models a driver's hand-off: a processor given a
request is busy from that instant but starts running it ``dispatch_ms``
later (the live runtime's thread wake-up; the fidelity benchmark measures it).
It is one number, or samples of a measured hand-off (ms) from which each
request draws its own (``default_rng([seed, 5])``): a live runtime's wake-up
is mostly a fraction of a ms with a tail of a few ms (the thread waits for the
GIL or the host's scheduler), and the tail is what moves a short model's median.

:func:`bind_latencies` stores the model on each :class:`SimProcessor` as
``run_times[model code] =`` :class:`~scheduler.sim.processor.RunTimes`; the
driver's one start step asks it for a run's time (``mean_ms * factor + extra_ms``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from scheduler.profile import CloudSpec, DeviceProfile
from scheduler.sim.processor import RunTimes, SimProcessor

_Z90 = 1.2815515655446004   # standard normal 90th percentile

#: (model, processor) -> (mean ms, log-normal sigma, extra ms); the extra (transfer) is not scaled by noise
LatencyTable = dict[tuple[str, str], tuple[float, float, float]]


def hand_offs(dispatch_ms: float | Sequence[float], n: int, seed: int) -> list[float]:
    """Each of ``n`` requests' hand-off delay (ms), by request id.

    Raises:
        ValueError: a negative delay, an empty or non-numeric sequence.
    """
    try:
        hand = np.atleast_1d(np.asarray(dispatch_ms, np.float64))
    except (TypeError, ValueError):
        hand = np.empty(0)
    if hand.ndim != 1 or not hand.size or not bool((hand >= 0.0).all()):
        raise ValueError(f"dispatch_ms must be >= 0 ms, or a non-empty sequence of such samples; "
                         f"got {dispatch_ms!r}")
    if hand.size == 1:
        return [float(hand[0])] * n
    return hand[np.random.default_rng([seed, 5]).integers(0, hand.size, n)].tolist()


def make_processors(profile: DeviceProfile, offload: bool, cloud_slots: int) -> list[SimProcessor]:
    """The profile's processors in its order (the cloud, with ``cloud_slots`` slots, last when the profile
    has a cloud and does not list it); none of kind cloud without ``offload``."""
    procs = [SimProcessor(p.name, p.kind, cloud_slots if p.kind == "cloud" else 1, urgent=p.urgent)
             for p in profile.processors]
    if not offload:
        procs = [p for p in procs if p.kind != "cloud"]
    elif profile.cloud is not None and not any(p.kind == "cloud" for p in procs):
        procs.append(SimProcessor("cloud", "cloud", cloud_slots))
    for i, p in enumerate(procs):
        p.index = i
    return procs


def latency_table(profile: DeviceProfile, procs: Sequence[SimProcessor], noise: float, cloud_noise: float,
                  cloud: CloudSpec | None) -> tuple[LatencyTable, dict[str, dict[str, float]]]:
    """The run-time model of every (model, processor) pair the profile gives for ``procs``, and the
    expected latencies ``{model: {processor: ms}}`` the estimator is seeded with (profile means or
    medians, the cloud's expected round trip)."""
    names = {p.name for p in procs}
    lat: LatencyTable = {}
    table: dict[str, dict[str, float]] = {}
    for model, row in profile.latency_ms.items():
        for pname, ms in row.items():
            if pname not in names:
                continue
            p90 = profile.latency_p90_ms.get(model, {}).get(pname)
            stretch = 1.0 / (1.0 - profile.background.get(pname, 0.0))   # a busy neighbour takes that share
            ms, p90 = ms * stretch, None if p90 is None else p90 * stretch
            if p90 is not None and ms > 0:
                # latency_ms is the median (what `edgert profile` writes as p50): log-normal through both
                sigma = max(0.0, math.log(p90 / ms)) / _Z90
                lat[(model, pname)] = (ms * math.exp(0.5 * sigma * sigma), sigma, 0.0)
            else:
                lat[(model, pname)] = (ms, noise, 0.0)
            table.setdefault(model, {})[pname] = ms
    if cloud is not None:
        cname = next(p.name for p in procs if p.kind == "cloud")
        for model, server in cloud.latency_ms.items():
            total = cloud.expected_ms(model)
            assert total is not None
            transfer = total - cloud.rtt_ms - server
            lat[(model, cname)] = (cloud.rtt_ms + server, cloud_noise, transfer)
            table.setdefault(model, {})[cname] = total
    return lat, table


def bind_latencies(procs: Sequence[SimProcessor], lat: LatencyTable, models: Sequence[str], seed: int,
                   n: int) -> None:
    """Store each processor's run-time model by model code (``models``' order) for ``n`` requests:
    ``p.run_times[code]``, a :class:`RunTimes` (None: it cannot run that model), and
    ``p.keys[code]``, the estimator's key. One standard-normal draw per request, shared by every pair."""
    code = {m: i for i, m in enumerate(models)}
    by_name = {p.name: p for p in procs}
    z = np.random.default_rng([seed, 4]).standard_normal(n)
    factors: dict[float, list[float]] = {}
    for p in procs:
        p.run_times = [None] * len(models)
        p.keys = [(m, p.name) for m in models]
    for (model, pname), (mean, sigma, extra) in lat.items():
        if model not in code:
            continue
        f = factors.get(sigma)
        if f is None:
            f = factors[sigma] = np.exp(sigma * z - 0.5 * sigma * sigma).tolist()
        by_name[pname].run_times[code[model]] = RunTimes(mean, extra, f)
