"""Shipped device profiles: loadable by name, cover every scenario model, every number sourced."""

from __future__ import annotations

import pytest

from scheduler.errors import ConfigError, TraceError
from scheduler.profile import DeviceProfile
from scheduler.sim import SCENARIOS, load_profile, profile_names
from scheduler.sim.profiles import PROFILE_DIR

SCENARIO_MODELS = sorted({s.model for streams in SCENARIOS.values() for s in streams})


def test_shipped_names():
    assert profile_names() == ["galaxy-s23", "pixel4", "xr2-gen2"]


@pytest.mark.parametrize("name", ["galaxy-s23", "xr2-gen2", "pixel4"])
def test_profile_covers_every_scenario_model_and_sources_every_number(name):
    prof = load_profile(name)
    assert prof.name == name and "XRBench tasks mapped" in prof.description
    assert sorted(prof.latency_ms) == SCENARIO_MODELS
    for model, row in prof.latency_ms.items():
        assert row, model
        for proc, ms in row.items():
            src = prof.sources[f"latency_ms/{model}/{proc}"]
            assert src.startswith(("published:", "derived:")), src
            assert ms > 0
    assert prof.cloud is not None and prof.cloud.rtt_ms > 0
    assert all(k in prof.sources for k in ("cloud/rtt_ms", "cloud/uplink_mbps", "cloud/latency_ms/*"))
    assert set(prof.cloud.latency_ms) == set(SCENARIO_MODELS)


def test_published_cells_match_the_tables():
    s23, xr2, p4 = load_profile("galaxy-s23"), load_profile("xr2-gen2"), load_profile("pixel4")
    assert s23.latency_ms["depth_estimation"]["npu"] == 3.29                  # AI Hub MiDaS v2, S23
    assert s23.latency_ms["hand_tracking"]["npu"] == pytest.approx(0.73 + 1.02)
    assert xr2.latency_ms["object_detection"]["npu"] == 6.58                  # AI Hub YOLOv8, XR2 Gen 2
    assert xr2.latency_ms["speech_recognition"]["npu"] == 44.4                # AI Hub MobileBERT
    assert p4.latency_ms["object_detection"] == {"cpu": 29.0, "gpu": 20.0, "dsp": pytest.approx(29.0 * 3.3 / 5)}
    assert p4.sources["latency_ms/object_detection/cpu"].startswith("published:")
    assert p4.sources["latency_ms/object_detection/dsp"].startswith("derived:")
    assert "speech_recognition" in p4.latency_ms and "gpu" not in p4.latency_ms["speech_recognition"]


def test_load_by_path_and_passthrough(tmp_path):
    prof = load_profile("pixel4")
    assert load_profile(prof) is prof
    assert load_profile(str(PROFILE_DIR / "pixel4.json")).latency_ms == prof.latency_ms
    p = tmp_path / "mine.json"
    prof.save(p)
    assert load_profile(p).latency_ms == prof.latency_ms


def test_unknown_profile_names_and_bad_files(tmp_path):
    with pytest.raises(ConfigError, match="did you mean 'galaxy-s23'"):
        load_profile("galaxy-s32")
    with pytest.raises(ConfigError, match="not found"):
        load_profile(str(tmp_path / "nope.json"))
    bad = tmp_path / "bad.json"
    bad.write_text('{"processors": []}')
    with pytest.raises(TraceError, match="missing required field 'latency_ms'"):
        load_profile(bad)


def test_profiles_are_reproducible_from_the_builder(tmp_path, monkeypatch):
    from scheduler.sim import _build_profiles as b

    monkeypatch.setattr(b, "OUT", tmp_path)
    b.build()
    for name in profile_names():
        assert DeviceProfile.load(tmp_path / f"{name}.json").to_json() == load_profile(name).to_json()
