"""Fuzzing the file surfaces (issue #16): device profiles and traces.

Invariant: a clear EdgeRTError, or a result that simulates with every request ending once.
Default run: a few dozen cases each; ``pytest -m fuzz``: 2,000 each (tests/conftest.py).
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.errors import EdgeRTError
from scheduler.profile import DeviceProfile
from scheduler.sim import SimConfig, parse_trace, run_simulation
from scheduler.sim.profiles import PROFILE_DIR

pytestmark = [pytest.mark.fuzz, pytest.mark.timeout(1800)]

SHIPPED = json.loads((PROFILE_DIR / "galaxy-s23.json").read_text())
SHIPPED["cloud"] = {**SHIPPED.get("cloud", {}), "rtt_ms": 20.0, "uplink_mbps": 50.0}
WEIRD = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0, -1, 1e-300, 1e308, "9.5", "", "cpu"]),
    st.text(max_size=8), st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))


def _paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


PATHS = [p for p in _paths(SHIPPED) if p]


@st.composite
def mutated_profile(draw: st.DrawFn) -> Any:
    d = json.loads(json.dumps(SHIPPED))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PATHS))
        node = d
        try:
            for k in path[:-1]:
                node = node[k]
            if draw(st.booleans()) or not isinstance(node, (dict, list)):
                node[path[-1]] = draw(WEIRD)
            elif isinstance(node, dict):
                node.pop(path[-1], None)
        except (KeyError, IndexError, TypeError):
            pass   # an earlier mutation replaced the parent
    return d


def _every_request_ends_once(summary: dict[str, Any]) -> None:
    assert summary["ok"] + summary["late"] + summary["dropped"] == summary["requests"]


@given(mutated_profile())
def test_fuzz_profiles(obj: Any) -> None:
    try:
        prof = DeviceProfile.from_json(obj, origin="fuzz.json")
    except EdgeRTError:
        return
    for row in prof.latency_ms.values():
        assert all(math.isfinite(v) and v > 0 for v in row.values())
    if prof.cloud is not None:
        assert all(math.isfinite(prof.cloud.expected_ms(m) or 0.0) for m in prof.cloud.latency_ms)
    try:
        res = run_simulation(SimConfig(scenario="ar_assistant", duration_s=0.1, profile=prof, noise=0.05))
    except EdgeRTError:
        return
    _every_request_ends_once(res.summary())


MODELS = ["hand_tracking", "eye_segmentation", "keyword_detection"]
LINE = st.fixed_dictionaries(
    {"t_ms": st.one_of(st.floats(0, 500), WEIRD), "model": st.one_of(st.sampled_from(MODELS), WEIRD)},
    optional={"slo_ms": st.one_of(st.floats(1, 100), WEIRD), "id": st.one_of(st.sampled_from("abcdefgh"), WEIRD),
              "after": st.one_of(st.sampled_from("abcdefgh"), WEIRD), "p": st.one_of(st.floats(0, 1), WEIRD),
              "stream": st.one_of(st.sampled_from(["s1", "s2"]), WEIRD), "frame": st.one_of(st.integers(-2, 9), WEIRD)})
TRACE_LINE = st.one_of(LINE.map(lambda d: json.dumps(d)), st.text(max_size=20), st.just(""), st.just("# c"),
                       st.sampled_from(['{"t_ms": Infinity, "model": "hand_tracking"}', "[" * 3000, "{}", "null"]))


@given(lines=st.lists(TRACE_LINE, min_size=1, max_size=12), seed=st.integers(0, 3))
def test_fuzz_traces(lines: list[str], seed: int, tmp_path_factory: pytest.TempPathFactory) -> None:
    try:
        wl = parse_trace(lines, "fuzz.jsonl", seed=seed)
    except EdgeRTError:
        return
    n = sum(1 for s in lines if s.strip() and not s.strip().startswith("#"))
    assert len(wl) == n and (wl.parent < n).all() and (wl.t_ms[1:] >= wl.t_ms[:-1]).all()
    path = tmp_path_factory.mktemp("t") / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    try:
        res = run_simulation(SimConfig(trace=path, profile="galaxy-s23", seed=seed))
    except EdgeRTError:
        return
    s = res.summary()
    _every_request_ends_once(s)
    assert s["requests"] == int(wl.fires.sum())
