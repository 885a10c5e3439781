"""Energy accounting (scheduler.energy): hand-computed invocations, idle, baseline, radio, gaps."""

from __future__ import annotations

import pytest

from scheduler.profile import DeviceProfile
from scheduler.energy import EnergyModel
from tests.scheduler.meters import CloudMeter

OBJ = {
    "name": "t",
    "processors": [{"name": "cpu", "kind": "cpu"}, {"name": "npu", "kind": "npu"}, {"name": "dsp", "kind": "dsp"}],
    "latency_ms": {"hand": {"cpu": 10.0, "npu": 2.0, "dsp": 4.0}, "kws": {"cpu": 1.0, "npu": 0.5}},
    "energy_mj": {"hand": {"npu": 1.5}},
    "power": {"processors": {"cpu": {"active_w": 3.0, "idle_w": 0.2}, "npu": {"active_w": 1.0, "idle_w": 0.05}},
              "baseline_w": 2.0,
              "radio": {"uplink_mw_per_mbps": 100.0, "downlink_mw_per_mbps": 10.0, "active_mw": 200.0}},
    "cloud": {"rtt_ms": 20.0, "uplink_mbps": 10.0, "downlink_mbps": 100.0, "latency_ms": {"hand": 5.0},
              "input_bytes": {"hand": 12500}, "output_bytes": {"hand": 1250}},
}


@pytest.fixture()
def model() -> EnergyModel:
    return EnergyModel(DeviceProfile.from_json(OBJ))


@pytest.mark.parametrize("m, proc, ms, mj, watts", [
    ("hand", "cpu", 10.0, 30.0, 3.0),      # 3 W x 10 ms
    ("hand", "cpu", 12.5, 37.5, 3.0),      # a throttled (longer) run costs more
    ("hand", "npu", 2.0, 1.5, 0.75),       # the measured table wins: 1.5 mJ / 2 ms
    ("hand", "npu", 3.0, 1.5, 0.5),
    ("kws", "npu", 0.5, 0.5, 1.0),         # no table entry: 1 W x 0.5 ms
    ("hand", "dsp", 4.0, 0.0, 0.0),        # no figure at all
])
def test_invocation_energy_table(model: EnergyModel, m: str, proc: str, ms: float, mj: float, watts: float) -> None:
    assert model.invocation_mj(m, proc, ms) == pytest.approx(mj)
    assert model.invocation_power_w(m, proc, ms) == pytest.approx(watts)


def test_cloud_radio_energy_by_hand(model: EnergyModel) -> None:
    # up: 12500 B = 0.1 Mbit at 10 Mbit/s = 10 ms at (100*10 + 200) mW = 12 mJ
    # down: 1250 B = 0.01 Mbit at 100 Mbit/s = 0.1 ms at (10*100 + 200) mW = 0.12 mJ
    # wait: rtt 20 + server 5 = 25 ms at 200 mW = 5 mJ
    assert model.cloud_mj("hand") == pytest.approx(17.12)
    assert model.cloud_mj("kws") == 0.0                     # the server lacks it


def test_device_power_sums_running_idle_and_baseline(model: EnergyModel) -> None:
    assert model.device_power_w({}) == pytest.approx(2.0 + 0.2 + 0.05)
    assert model.device_power_w({"cpu": 3.0}) == pytest.approx(2.0 + 3.0 + 0.05)
    assert model.device_power_w({"cpu": 3.0, "dsp": 0.4}) == pytest.approx(2.0 + 3.0 + 0.05 + 0.4)


def test_run_report_by_hand(model: EnergyModel) -> None:
    meter = CloudMeter(model)
    assert meter.record("hand", "cpu", 10.0) == pytest.approx(30.0)
    meter.record("hand", "npu", 2.0)
    meter.record("kws", "npu", 0.5)
    meter.record("hand", "dsp", 4.0)
    assert meter.record_cloud("hand") == pytest.approx(17.12)
    rep = meter.report(100.0)
    assert rep.inference_mj == pytest.approx(30.0 + 1.5 + 0.5)
    # idle: cpu 0.2 W x 90 ms + npu 0.05 W x 97.5 ms (dsp has no idle figure)
    assert rep.idle_mj == pytest.approx(18.0 + 4.875)
    assert rep.baseline_mj == pytest.approx(200.0) and rep.radio_mj == pytest.approx(17.12)
    assert rep.total_mj == pytest.approx(32.0 + 22.875 + 200.0 + 17.12)
    assert rep.mean_power_w == pytest.approx(rep.total_mj / 100.0)
    assert rep.unaccounted == 1 and rep.radio_modelled
    assert rep.per_processor["npu"] == {"busy_ms": 2.5, "active_mj": 2.0, "idle_mj": pytest.approx(4.875)}
    assert rep.per_model["hand"]["count"] == 4 and rep.per_model["hand"]["mj"] == pytest.approx(48.62)
    assert rep.to_json()["total_mj"] == round(rep.total_mj, 3)


def test_profile_without_power_costs_nothing_and_says_so() -> None:
    obj = {k: v for k, v in OBJ.items() if k not in ("power", "energy_mj")}
    meter = CloudMeter(DeviceProfile.from_json(obj))
    assert not meter.model.has_figures
    assert meter.record("hand", "cpu", 10.0) == 0.0 and meter.record_cloud("hand") == 0.0
    rep = meter.report(50.0)
    assert rep.total_mj == 0.0 and rep.unaccounted == 1 and not rep.radio_modelled
