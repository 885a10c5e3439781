"""The live runtime's power counters: found where the deploy tools read them, else one reason, said once."""

from __future__ import annotations

import logging

import pytest

import edgert
from edgert import _power
from edgert._power import probe


@pytest.mark.parametrize("files, source, words", [
    ({"class/power_supply/battery/power_now": "1500000"}, "class/power_supply/battery/power_now", "fuel gauge power"),
    ({"class/power_supply/battery/current_now": "-300000", "class/power_supply/battery/voltage_now": "3900000"},
     "class/power_supply/battery/current_now", "current × voltage"),
    ({"class/powercap/intel-rapl:0/energy_uj": "123"}, "class/powercap/intel-rapl:0/energy_uj", "RAPL"),
    ({"bus/i2c/drivers/ina3221x/1-0040/iio:device0/in_power0_input": "4000"}, "bus/i2c/drivers/ina3221x", "INA3221"),
])
def test_probe_finds_each_kind_of_counter(tmp_path, files, source, words):
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    found = probe(tmp_path)
    assert found.source == str(tmp_path / source) and words in found.reason


def test_no_counter_gives_the_reason(tmp_path):
    (tmp_path / "class" / "power_supply" / "AC").mkdir(parents=True)   # a supply with no readings
    found = probe(tmp_path)
    assert found.source is None
    assert found.line().startswith("power counters: none (no battery fuel gauge, no Intel RAPL zone")


def test_runtime_says_it_once_per_process(caplog):
    _power.power_counters.cache_clear()
    with caplog.at_level(logging.INFO, logger="edgert"):
        with edgert.Runtime(delegates=["litert-xnnpack"], cpu_workers=1) as a, \
                edgert.Runtime(delegates=["litert-xnnpack"], cpu_workers=1) as b:
            assert a.power_counters == b.power_counters == probe()
    said = [r.getMessage() for r in caplog.records if "power counters" in r.getMessage()]
    assert said == [f"edgert: {probe().line()}"]
