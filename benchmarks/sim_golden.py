"""Bit for bit: every scenario × scheduler × device × load of the simulator, written as one JSON file.

Run it at two commits and compare the files: a change to the simulator's speed must leave them
identical (every summary figure but the wall-clock keys, and a SHA-256 of every request's
outcome: id, status, ready / start / end ms, processor, drop reasons)::

    python benchmarks/sim_golden.py /tmp/after.json
    git stash; python benchmarks/sim_golden.py /tmp/before.json; git stash pop
    cmp /tmp/before.json /tmp/after.json && echo identical

504 short runs (4 configurations per scenario, scheduler and device: load 1, load 2.5, a 0.3 ms
hand-off, no heat model) and two long ones (an hour of AR Assistant under fixed_worker, ten minutes
under edgert); about 20 s.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # the repo, when edgert is not installed

from scheduler.registry import policy_names  # noqa: E402
from scheduler.sim import SimConfig, run_simulation  # noqa: E402
from scheduler.sim.workload import scenario_names  # noqa: E402


def fingerprint(cfg: SimConfig) -> dict[str, object]:
    """One run's summary without its wall-clock keys, and a hash of every request's outcome."""
    r = run_simulation(cfg)
    o = r.outcome
    h = hashlib.sha256()
    for a in (o.id, o.status, o.ready_ms, o.start_ms, o.end_ms, o.processor):
        h.update(np.ascontiguousarray(a).tobytes())
    h.update(json.dumps(sorted((int(k), v) for k, v in o.reasons.items())).encode())
    return {"summary": {k: v for k, v in r.summary().items() if not k.startswith("wall")}, "hash": h.hexdigest()}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    out: dict[str, object] = {}
    for dev in ("galaxy-s23", "xr2-gen2", "pixel4"):
        for sc in scenario_names():
            for pol in policy_names():
                for load, extra in ((1.0, {}), (2.5, {}), (1.0, {"dispatch_ms": 0.3}), (1.0, {"thermal": False})):
                    cfg = SimConfig(scenario=sc, profile=dev, scheduler=pol, load=load, seed=3,
                                    duration_s=20.0 if dev == "galaxy-s23" else 8.0, **extra)  # type: ignore[arg-type]
                    out[f"{dev}/{sc}/{pol}/{load}/{sorted(extra.items())}"] = fingerprint(cfg)
    for pol, dur in (("fixed_worker", 3600.0), ("edgert", 600.0)):
        out[f"long/{pol}"] = fingerprint(SimConfig(scenario="ar_assistant", profile="galaxy-s23", scheduler=pol,
                                                   duration_s=dur, seed=0, thermal=False))
    Path(argv[0]).write_text(json.dumps(out, indent=0, sort_keys=True, default=str))
    print(f"{len(out)} runs -> {argv[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
