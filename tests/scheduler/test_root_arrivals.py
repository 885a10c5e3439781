"""``root_arrivals`` (scheduler/sim/columns.py): the root requests the driver's event loop walks, flat.

The driver reads one root at a time and stops an instant at the first root due later, so the list must
be in time order, hold only roots that fire, keep simultaneous roots in id order and end with ``inf``.
"""

from __future__ import annotations

import json
import math

from scheduler.sim.columns import root_arrivals
from scheduler.sim.trace import parse_trace


def _trace(*rows: dict[str, object]) -> list[str]:
    return [json.dumps({"model": "m", **row}) for row in rows]


def test_firing_roots_in_time_then_id_order_and_an_inf_sentinel() -> None:
    wl = parse_trace(_trace(
        {"t_ms": 5.0, "id": "late"},
        {"t_ms": 0.0, "id": "a"},
        {"t_ms": 0.0, "id": "b"},
        {"t_ms": 1.0, "id": "never", "p": 0.0},         # a root that does not fire
        {"t_ms": 2.0, "id": "stage", "after": "a"},    # a cascade stage: ready when "a" ends, not a root
        {"t_ms": 5.0, "id": "late2"},
    ), "t.jsonl")
    times, ids = root_arrivals(wl)
    assert [wl.key(r) for r in ids] == ["a", "b", "late", "late2"]
    assert times == [0.0, 0.0, 5.0, 5.0, math.inf]
    assert times[:-1] == [float(wl.t_ms[r]) for r in ids]


def test_an_empty_workload_has_only_the_sentinel() -> None:
    wl = parse_trace(_trace({"t_ms": 1.0, "id": "never", "p": 0.0}), "t.jsonl")
    assert root_arrivals(wl) == ([math.inf], [])
