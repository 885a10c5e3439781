"""Memory in device profiles (scheduler/profile.py ``memory_mb``) and the simulator refusing a placement that
would overflow a processor's memory (scheduler/sim/memory.py)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.errors import TraceError
from scheduler.profile import DeviceProfile
from scheduler.sim import SimConfig, run_simulation
from scheduler.sim.memory import fit_memory


def _profile(npu_mb: float | None, **extra: Any) -> DeviceProfile:
    npu: dict[str, Any] = {"name": "npu", "kind": "npu"}
    if npu_mb is not None:
        npu["memory_mb"] = npu_mb
    return DeviceProfile.from_json({
        "name": "tiny-headset", "processors": [{"name": "cpu0", "kind": "cpu"}, npu],
        "latency_ms": {"hand": {"cpu0": 9.0, "npu": 2.0}, "depth": {"cpu0": 30.0, "npu": 5.0}},
        "memory_mb": {"hand": {"cpu0": 20.0, "npu": 300.0}, "depth": {"cpu0": 60.0, "npu": 400.0}},
        **extra})


def test_memory_fields_round_trip_and_are_optional() -> None:
    p = _profile(512)
    assert p.processors[1].memory_mb == 512 and p.processors[0].memory_mb is None
    assert p.memory_mb["depth"]["npu"] == 400.0
    again = DeviceProfile.from_json(p.to_json())
    assert again.to_json() == p.to_json()
    assert "memory_mb" not in _profile(None).to_json()["processors"][1]


@pytest.mark.parametrize(("patch", "message"), [
    ({"memory_mb": {"hand": {"gpu": 1.0}}}, "memory_mb['hand'] names unknown processor(s) ['gpu']"),
    ({"memory_mb": {"hand": {"npu": -1}}}, "memory_mb['hand']['npu'] must be a memory size in MB"),
    ({"memory_mb": {"hand": {"npu": "300"}}}, "memory_mb['hand']['npu'] must be a number"),
    ({"processors": [{"name": "cpu0", "kind": "cpu", "memory_mb": 4e12}]}, "processors[0].memory_mb must be a memory size"),
])
def test_bad_memory_fields_name_the_field(patch: dict[str, Any], message: str) -> None:
    obj = _profile(None).to_json()
    obj.update(patch)
    if "processors" in patch:
        obj["latency_ms"] = {"hand": {"cpu0": 9.0}}
        obj.pop("memory_mb")
    with pytest.raises(TraceError, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")
                       .replace(")", r"\)")):
        DeviceProfile.from_json(obj)


def test_what_does_not_fit_is_refused_in_first_use_order() -> None:
    p = _profile(512)
    table = {"hand": {"cpu0": 9.0, "npu": 2.0}, "depth": {"cpu0": 30.0, "npu": 5.0}}
    refused = fit_memory(p, ["hand", "depth"], table)
    assert [(r.model, r.processor) for r in refused] == [("depth", "npu")]
    assert refused[0].reason == "depth needs 400 MB on npu, which has 512 MB for models and 300 MB resident already"
    assert table == {"hand": {"cpu0": 9.0, "npu": 2.0}, "depth": {"cpu0": 30.0}}
    table = {"hand": {"cpu0": 9.0, "npu": 2.0}, "depth": {"cpu0": 30.0, "npu": 5.0}}
    assert [(r.model, r.processor) for r in fit_memory(p, ["depth", "hand"], table)] == [("hand", "npu")]


def test_no_limit_no_refusal() -> None:
    table = {"hand": {"cpu0": 9.0, "npu": 2.0}, "depth": {"cpu0": 30.0, "npu": 5.0}}
    assert fit_memory(_profile(None), ["hand", "depth"], table) == [] and table["depth"]["npu"] == 5.0


def _trace(tmp_path) -> Any:
    lines = []
    for i in range(20):
        lines.append(f'{{"t_ms": {i * 33.3:.1f}, "model": "hand", "slo_ms": 33.0}}')
        lines.append(f'{{"t_ms": {i * 33.3:.1f}, "model": "depth", "slo_ms": 33.0}}')
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_simulator_never_places_a_refused_model_there_and_says_why(tmp_path) -> None:
    res = run_simulation(SimConfig(trace=_trace(tmp_path), profile=_profile(512), offload=False))
    s = res.summary()
    assert s["memory_refused"] == [{"model": "depth", "processor": "npu", "need_mb": 400.0, "used_mb": 300.0,
                                    "capacity_mb": 512.0, "reason": "depth needs 400 MB on npu, which has 512 MB "
                                                                    "for models and 300 MB resident already"}]
    assert {r.processor for r in res.records if r.model == "depth" and r.processor} == {"cpu0"}
    unlimited = run_simulation(SimConfig(trace=_trace(tmp_path), profile=_profile(None), offload=False))
    assert "memory_refused" not in unlimited.summary()
    assert "npu" in {r.processor for r in unlimited.records if r.model == "depth"}


def test_a_model_that_fits_nowhere_is_an_error_before_the_run(tmp_path) -> None:
    obj = _profile(512).to_json()
    obj["processors"][0]["memory_mb"] = 50
    with pytest.raises(TraceError, match=r"model 'depth' fits in the memory of no processor of device profile "
                                         r"'tiny-headset': depth needs 60 MB on cpu0, which has 50 MB"):
        run_simulation(SimConfig(trace=_trace(tmp_path), profile=DeviceProfile.from_json(obj), offload=False))


