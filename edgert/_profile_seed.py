"""A device profile's latencies into the runtime's estimator, by processor name or kind (``Runtime(profile=...)``)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from scheduler.estimator import LatencyEstimator
from scheduler.profile import DeviceProfile


def _kind_of(name: str) -> str:
    """``cpu1`` → ``cpu``; ``npu`` → ``npu``."""
    return re.sub(r"\d+$", "", name)


def seed_from_profile(estimator: LatencyEstimator, profile: DeviceProfile | str | Path,
                      processor_names: Iterable[str] | Mapping[str, str]) -> int:
    """Seed ``estimator`` with a profile's latencies (ms) for the runtime's processors; return pairs seeded.

    Name mapping, per runtime processor:

    1. a profile processor of the same name (``cpu0`` → ``cpu0``, ``gpu`` → ``gpu``);
    2. else the first profile processor of the same kind (``cpu0`` also seeds
       ``cpu1``, ``cpu2``…: the runtime's CPU workers are identical);
    3. a ``cloud`` processor gets the profile's cloud estimate (RTT + transfer + server);
    4. otherwise nothing: the pair stays unsupported until measured live.

    Args:
        processor_names: the runtime's processor names (kind = name without
            trailing digits), or a mapping name → kind.

    Raises:
        TraceError: ``profile`` is a path to a missing or malformed file.
    """
    prof = profile if isinstance(profile, DeviceProfile) else DeviceProfile.load(profile)
    kinds = dict(processor_names) if isinstance(processor_names, Mapping) else {
        n: _kind_of(n) for n in processor_names}
    by_name = {p.name: p for p in prof.processors}
    first_of_kind: dict[str, str] = {}
    for p in prof.processors:
        first_of_kind.setdefault(p.kind, p.name)
    seeded = 0
    for proc, kind in kinds.items():
        if kind == "cloud" and proc not in by_name:
            if prof.cloud is not None:
                for model in prof.cloud.latency_ms:
                    est = prof.cloud.expected_ms(model)
                    if est is not None:
                        estimator.seed(model, proc, est)
                        seeded += 1
            continue
        column = proc if proc in by_name else first_of_kind.get(kind)
        if column is None:
            continue
        for model, row in prof.latency_ms.items():
            if column in row:
                estimator.seed(model, proc, row[column])
                seeded += 1
    return seeded
