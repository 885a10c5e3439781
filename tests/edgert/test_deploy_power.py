"""Power sampling of ``edgert deploy``: the battery fuel gauge on Android, tegrastats on a Jetson.

The doubles answer as the real sysfs files and tegrastats do; the deployers,
parsers and profile writer are the real ones.
"""

from __future__ import annotations

from typing import Any

import pytest

from edgert.deploy.parsers import ParseError, parse_fuel_gauge, parse_tegrastats, tegrastats_power_mw
from scheduler.profile import DeviceProfile
from tests.edgert.doubles.install import read_calls
from tests.edgert.test_deploy_android import LAT_US, android_argv, cli, setup  # noqa: F401  (fixture)

BATTERY = {"voltage_uv": 3_900_000, "idle_ua": 250_000,
           "load_ua": {"cpu": 1_050_000, "gpu": 850_000, "nnapi": 500_000, "hexagon": 450_000, "qnn_htp": 400_000}}
ORIN = ("11-22-2026 10:00:01 RAM 2448/30536MB (lfb 6216x4MB) SWAP 0/15268MB (cached 0MB) IRAM 0/252kB(lfb 252kB) "
        "CPU [2%@729,0%@729] EMC_FREQ 0%@2133 GR3D_FREQ 99%@[1300,1300] CPU@44.968C GPU@43.5C "
        "VDD_GPU_SOC 3982mW/3500mW VDD_CPU_CV 795mW/790mW VIN_SYS_5V0 4204mW/4100mW VDDQ_VDD2_1V8AO 503mW/500mW")
NANO = "RAM 1900/3964MB (lfb 4x4MB) CPU [5%@1479,off,off,off] EMC_FREQ 0% GR3D_FREQ 0% POM_5V_IN 2950/2900 POM_5V_GPU 410/400"


def test_parse_tegrastats_both_formats() -> None:
    orin = parse_tegrastats(ORIN + "\n\n" + ORIN)
    assert orin == [{"VDD_GPU_SOC": 3982.0, "VDD_CPU_CV": 795.0, "VIN_SYS_5V0": 4204.0, "VDDQ_VDD2_1V8AO": 503.0}] * 2
    how, mw = tegrastats_power_mw(orin)
    assert how.startswith("sum of") and mw == [3982.0 + 795.0 + 4204.0 + 503.0] * 2
    nano = parse_tegrastats(NANO)
    assert tegrastats_power_mw(nano) == ("POM_5V_IN", [2950.0])
    with pytest.raises(ParseError, match="no power rails"):
        tegrastats_power_mw(parse_tegrastats("RAM 1900/3964MB CPU [5%@1479]"))


@pytest.mark.parametrize("text, expect", [("-812345\n3876000\n", (0.812345, 3.876)),
                                          ("450000\n4100000\n", (0.45, 4.1))])
def test_parse_fuel_gauge(text: str, expect: tuple[float, float]) -> None:
    assert parse_fuel_gauge(text) == pytest.approx(expect)


def test_parse_fuel_gauge_rejects_other_text() -> None:
    with pytest.raises(ParseError, match="current_now"):
        parse_fuel_gauge("cat: /sys/class/power_supply/battery/current_now: Permission denied\n")


def test_android_writes_energy_per_inference_from_the_fuel_gauge(setup: dict[str, Any]) -> None:  # noqa: F811
    log = setup["install"](battery=BATTERY)
    assert cli(android_argv(setup)) == 0
    prof = DeviceProfile.load(setup["out"])
    idle_w = 0.25 * 3.9
    for model, row in LAT_US.items():
        for path, us in row.items():
            want = (BATTERY["load_ua"][path] / 1e6 * 3.9 - idle_w) * us / 1e3
            assert prof.energy_mj[model][path] == pytest.approx(want, rel=1e-5), (model, path)
            assert "fuel gauge" in prof.sources[f"energy_mj/{model}/{path}"]
    cats = [c for c in read_calls(log) if c["tool"] == "adb" and "current_now" in " ".join(c["argv"])]
    assert len(cats) == 2 * sum(len(r) for r in LAT_US.values())       # right before and right after each run


def test_android_without_a_readable_gauge_writes_latency_only(setup: dict[str, Any]) -> None:  # noqa: F811
    setup["install"]()
    assert cli(android_argv(setup)) == 0
    prof = DeviceProfile.load(setup["out"])
    assert prof.energy_mj == {} and prof.latency_ms["cnn"]["cpu"] == pytest.approx(18.2346)


# -- Jetson: tegrastats around each trtexec run ------------------------------------------------------

POWER_MW = {"gpu": 9100, "dla0": 6300, "dla1": 6350}


def test_jetson_writes_energy_per_inference_from_tegrastats(tmp_path, monkeypatch) -> None:
    from tests.edgert.test_deploy_jetson import LAT_MS, jetson_argv
    from tests.edgert.test_deploy_jetson import cli as jcli
    from tests.edgert.test_deploy_jetson import setup as jsetup
    s = jsetup.__wrapped__(tmp_path, monkeypatch)
    log = s["install"](power_mw=POWER_MW)
    assert jcli(jetson_argv(s)) == 0
    prof = DeviceProfile.load(s["out"])
    for model, row in LAT_MS.items():
        for proc, ms in row.items():
            # the doubles' trtexec prints Throughput = 1000 / ms qps: mW / qps = mW x ms / 1000 mJ
            assert prof.energy_mj[model][proc] == pytest.approx(POWER_MW[proc] * ms / 1000, rel=1e-4)
            src = prof.sources[f"energy_mj/{model}/{proc}"]
            assert "tegrastats" in src and "VDD_IN" in src and "40 samples" in src
    ssh = [c["argv"][-1] for c in read_calls(log) if c["tool"] == "ssh"]
    assert sum(cmd.startswith("tegrastats --start") for cmd in ssh) == 6
    assert sum(cmd == "tegrastats --stop" for cmd in ssh) == 6


def test_jetson_without_tegrastats_writes_latency_only(tmp_path, monkeypatch) -> None:
    from tests.edgert.test_deploy_jetson import jetson_argv
    from tests.edgert.test_deploy_jetson import cli as jcli
    from tests.edgert.test_deploy_jetson import setup as jsetup
    s = jsetup.__wrapped__(tmp_path, monkeypatch)
    s["install"]()
    assert jcli(jetson_argv(s)) == 0
    prof = DeviceProfile.load(s["out"])
    assert prof.energy_mj == {} and prof.latency_ms["cnn"]["gpu"] == pytest.approx(1.873)
