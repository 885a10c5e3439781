"""XRBench's score (scheduler.sim.xrbench) on hand-built runs, against its formula; sigmoid stability."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scheduler.profile import DeviceProfile
from scheduler.sim import SimConfig, build_scenario, load_profile, run_simulation
from scheduler.sim.xrbench import (E_MAX_MJ, RT_K_PER_MS, energy_score, profile_e_max_mj, realtime_score,
                                   score_ceiling, sigmoid_neg, xrbench_score)

NAN = math.nan


def rt(delay_ms: float) -> float:
    return 1.0 / (1.0 + math.exp(15.0 * delay_ms))


def test_constants_are_xrbenchs() -> None:
    assert (RT_K_PER_MS, E_MAX_MJ) == (15.0, 1500.0)


@pytest.mark.parametrize("x", [-1e6, -800.0, -50.0, -1.0, 0.0, 1e-9, 1.0, 50.0, 800.0, 1e6, math.inf, -math.inf])
def test_sigmoid_is_stable_and_matches_the_direct_form(x: float) -> None:
    with np.errstate(over="raise"):
        got = float(sigmoid_neg(x))
    assert 0.0 <= got <= 1.0 and not math.isnan(got)
    if abs(x) < 700:
        assert got == pytest.approx(1.0 / (1.0 + math.exp(x)), rel=1e-12, abs=1e-300)
    assert float(sigmoid_neg(x)) + float(sigmoid_neg(-x)) == pytest.approx(1.0)


@pytest.mark.parametrize("done, deadline, expect", [
    (10.0, 10.0, 0.5), (9.9, 10.0, rt(-0.1)), (10.2, 10.0, rt(0.2)), (1e9, 0.0, 0.0), (0.0, 1e9, 1.0),
    (5.0, math.inf, 1.0),
])
def test_realtime_score_table(done: float, deadline: float, expect: float) -> None:
    assert float(realtime_score(done, deadline)) == pytest.approx(expect, abs=1e-15)


@pytest.mark.parametrize("mj, e_max, expect", [(0.0, 1500.0, 1.0), (150.0, 1500.0, 0.9), (1500.0, 1500.0, 0.0),
                                               (3000.0, 1500.0, -1.0), (5.0, 10.0, 0.5)])
def test_energy_score_table(mj: float, e_max: float, expect: float) -> None:
    assert float(energy_score(mj, e_max)) == pytest.approx(expect)


def test_one_model_all_on_time() -> None:
    s = xrbench_score(["a", "a"], [9.0, 19.0], [10.0, 20.0], [150.0, 150.0])
    assert s.overall == pytest.approx(100.0 * rt(-1.0) * 0.9)


def test_two_models_with_drops_follow_xrbenchs_code() -> None:
    # a: 4 frames, 1 dropped; b: 2 frames, none dropped
    models = ["a", "a", "b", "a", "b", "a"]
    done = [10.0, 20.1, 5.0, NAN, 15.0, 40.0]
    deadline = [10.0, 20.0, 5.5, 30.0, 15.0, 40.0]
    energy = [300.0, 300.0, 0.0, 999.0, 750.0, 0.0]
    s = xrbench_score(models, done, deadline, energy)
    a_terms = [0.5 * 0.8, rt(0.1) * 0.8, 0.5 * 1.0]
    b_terms = [rt(-0.5) * 1.0, 0.5 * 0.5]
    score_a = sum(a_terms) / 4 * (1 - 1 / 4)         # sum over completed / all frames x (1 - drop rate)
    score_b = sum(b_terms) / 2 * 1.0
    assert s.per_model["a"].score == pytest.approx(score_a)
    assert s.per_model["b"].score == pytest.approx(score_b)
    assert s.overall == pytest.approx(100 * (score_a + score_b) / 2)
    a = s.per_model["a"]
    assert (a.frames, a.dropped, a.dropped / a.frames) == (4, 1, 0.25)
    assert a.rt_en_mean == pytest.approx(sum(a_terms) / 3)
    assert a.paper_score == pytest.approx(sum(a_terms) / 3 * 0.75)
    assert a.score == pytest.approx(a.paper_score * 0.75)   # the code weighs the drop rate twice
    assert a.en_mean == pytest.approx(0.8 * 2 / 3 + 1.0 / 3)


def test_all_dropped_model_scores_zero_and_counts_in_the_mean() -> None:
    s = xrbench_score(["a", "b"], [1.0, NAN], [1.0, 2.0], [0.0, 0.0])
    assert s.per_model["b"].score == 0.0 and s.per_model["b"].dropped == s.per_model["b"].frames
    assert s.overall == pytest.approx(100 * 0.5 / 2)


def test_per_profile_e_max_and_bad_input() -> None:
    s = xrbench_score(["a"], [0.0], [1e9], [5.0], e_max_mj=10.0)
    assert s.overall == pytest.approx(50.0) and s.e_max_mj == 10.0
    assert xrbench_score([], [], [], []).overall == 0.0
    with pytest.raises(ValueError, match="differ in length"):
        xrbench_score(["a"], [1.0, 2.0], [1.0], [1.0])
    with pytest.raises(ValueError, match="e_max_mj"):
        xrbench_score(["a"], [1.0], [1.0], [1.0], e_max_mj=0.0)
    prof = DeviceProfile.from_json({
        "processors": [{"name": "cpu", "kind": "cpu"}, {"name": "npu", "kind": "npu"}],
        "latency_ms": {"a": {"cpu": 10.0, "npu": 2.0}, "b": {"npu": 30.0}},
        "energy_mj": {"b": {"npu": 12.0}},
        "power": {"processors": {"cpu": {"active_w": 3.0, "idle_w": 0.1}, "npu": {"active_w": 1.0, "idle_w": 0.0}}},
    })
    assert profile_e_max_mj(prof) == pytest.approx(30.0)      # a on cpu: 3 W x 10 ms beats b's 12 mJ
    no_power = {"processors": [{"name": "cpu", "kind": "cpu"}], "latency_ms": {"a": {"cpu": 1.0}}}
    assert profile_e_max_mj(DeviceProfile.from_json(no_power)) is None


_CEILING_PROFILE = {
    "processors": [{"name": "cpu", "kind": "cpu"}, {"name": "npu", "kind": "npu"}],
    "latency_ms": {"a": {"cpu": 10.0, "npu": 2.0}, "b": {"npu": 30.0}},
    "energy_mj": {"b": {"npu": 12.0}},
    "power": {"processors": {"cpu": {"active_w": 3.0, "idle_w": 0.1}, "npu": {"active_w": 1.0, "idle_w": 0.0}},
              "radio": {"uplink_mw_per_mbps": 1.0, "downlink_mw_per_mbps": 1.0, "active_mw": 10.0}},
    "cloud": {"rtt_ms": 5.0, "uplink_mbps": 10.0, "downlink_mbps": 100.0, "latency_ms": {"a": 5.0},
              "input_bytes": {"a": 1250}, "output_bytes": {"a": 125}},
}


def test_score_ceiling_is_each_models_least_energy_placement() -> None:
    prof = DeviceProfile.from_json(_CEILING_PROFILE)
    # local only: a costs 2 mJ on the npu (1 W x 2 ms), b 12 mJ (its table); E_max 30 (a on the cpu)
    assert score_ceiling(prof, ["a", "b", "a"], 30.0, offload=False) == pytest.approx(100 * (28 / 30 + 18 / 30) / 2)
    # the cloud's radio: (1 x 10 + 10) mW x 1 ms up + (1 x 100 + 10) mW x 0.01 ms down + 10 mW x 10 ms waiting
    radio_mj = (20.0 + 1.1 + 100.0) / 1e3
    assert score_ceiling(prof, ["a", "b"], 30.0) == pytest.approx(100 * ((30 - radio_mj) / 30 + 18 / 30) / 2)
    assert score_ceiling(prof, [], 30.0) == 0.0
    with pytest.raises(ValueError, match="e_max_mj"):
        score_ceiling(prof, ["a"], 0.0)
    with pytest.raises(ValueError, match="'c' is not in device profile"):
        score_ceiling(prof, ["c"], 30.0)


@pytest.mark.parametrize("policy", ["fixed_worker", "round_robin", "edgert"])
def test_no_policy_scores_above_the_ceiling(policy: str) -> None:
    prof = load_profile("galaxy-s23")
    e_max = profile_e_max_mj(prof)
    assert e_max is not None
    top = score_ceiling(prof, build_scenario("social_a", 1.0).models, e_max)
    got = run_simulation(SimConfig(scenario="social_a", profile=prof, scheduler=policy, duration_s=5.0)).summary()
    assert got["xrbench"]["score_profile_e_max"] <= top + 0.02
