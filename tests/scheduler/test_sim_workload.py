"""Built-in XRBench scenarios: rates, cascades, load scaling, bursts."""

from __future__ import annotations

import pytest

from scheduler.errors import ConfigError
from scheduler.sim import SCENARIOS, Burst, build_scenario, scenario_names


def _count(wl, model=None, firing=True):
    return sum(1 for r in wl.all if (model is None or r.model == model) and (r.fires or not firing))


def test_the_seven_scenarios_by_design_name():
    assert scenario_names() == ["social_a", "social_b", "outdoor_a", "outdoor_b", "ar_assistant", "ar_gaming",
                                "vr_gaming"]


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_root_streams_arrive_at_their_fps_with_the_next_frame_as_deadline(name):
    wl = build_scenario(name, duration_s=2.0)
    for s in SCENARIOS[name]:
        if s.after is not None:
            continue
        reqs = [r for r in wl.all if r.model == s.model]
        assert len(reqs) == round(2.0 * s.fps)
        assert reqs[1].t_ms - reqs[0].t_ms == pytest.approx(1000.0 / s.fps)
        assert all(r.deadline_ms == pytest.approx(r.t_ms + 1000.0 / s.fps) for r in reqs)


def test_cascade_stage_fires_with_probability_p_and_keeps_its_frame_time():
    wl = build_scenario("ar_assistant", duration_s=600.0, seed=3)
    kw = [r for r in wl.all if r.model == "keyword_detection"]
    speech = [r for r in wl.all if r.model == "speech_recognition"]
    assert len(speech) == len(kw) == 1800            # one candidate stage per parent frame
    fired = sum(r.fires for r in speech) / len(speech)
    assert 0.45 < fired < 0.55                       # p = 0.5
    assert all(r.parent.model == "keyword_detection" and r.t_ms == r.parent.t_ms for r in speech)
    vr = build_scenario("vr_gaming", duration_s=1.0)
    assert all(r.fires for r in vr.all)             # p = 1.0


def test_load_scales_the_rate_not_the_slo():
    base = build_scenario("ar_gaming", duration_s=2.0)
    double = build_scenario("ar_gaming", duration_s=2.0, load=2.0)
    assert _count(double) == 2 * _count(base)
    hand = [r for r in double.all if r.model == "hand_tracking"]
    assert hand[1].t_ms - hand[0].t_ms == pytest.approx(1000.0 / 90)
    assert hand[0].slo_ms == pytest.approx(1000.0 / 45)


def test_burst_adds_phase_shifted_streams_inside_the_window_only():
    base = build_scenario("ar_gaming", duration_s=10.0)
    burst = build_scenario("ar_gaming", duration_s=10.0, burst=Burst(4.0, 2.0, 3.0))
    extra = [r for r in burst.all if "#b" in r.stream]
    assert len(extra) == 2 * 2 * 90                 # two extra copies x 2 s x 90 requests/s
    assert all(4000.0 <= r.t_ms < 6000.0 for r in extra)
    assert _count(burst) == _count(base) + len(extra)
    b1 = sorted(r.t_ms for r in extra if r.stream == "hand_tracking#b1")
    assert b1[0] == pytest.approx(4000.0 + (1000.0 / 45) / 3)   # copy 1 shifted by a third of a period
    frac = build_scenario("ar_gaming", duration_s=10.0, burst=Burst(0.0, 10.0, 1.5), seed=1)
    n_extra = sum(1 for r in frac.all if "#b" in r.stream)
    assert 0.4 * 900 < n_extra < 0.6 * 900           # factor 1.5: one copy at p = 0.5


def test_ids_follow_time_order_and_are_unique():
    wl = build_scenario("social_a", duration_s=1.0)
    assert [r.id for r in wl.all] == list(range(len(wl.all)))
    assert [r.t_ms for r in wl.all] == sorted(r.t_ms for r in wl.all)


@pytest.mark.parametrize("kwargs, msg", [
    ({"name": "ar_asistant"}, "did you mean 'ar_assistant'"),
    ({"name": "ar_gaming", "load": 0}, "--load must be > 0"),
    ({"name": "ar_gaming", "duration_s": -1}, "--duration must be > 0"),
])
def test_bad_scenario_arguments(kwargs, msg):
    kwargs.setdefault("duration_s", 1.0)
    with pytest.raises(ConfigError, match=msg):
        build_scenario(**kwargs)


@pytest.mark.parametrize("text", ["4:2", "a:b:c", "1:0:2", "1:1:0.5", "-1:1:2"])
def test_bad_burst_text(text):
    with pytest.raises(ConfigError, match="START:DUR:FACTOR"):
        Burst.parse(text)


def test_burst_parse():
    assert Burst.parse("4:2:3") == Burst(4.0, 2.0, 3.0)
    assert Burst(0, 1, 2.5).copies() == [(1, 1.0), (2, 0.5)]
