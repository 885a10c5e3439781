"""Power and thermal sections of the shipped profiles (used by ``_build_profiles``; issue #19).

No per-processor power or per-inference energy of these SoCs is in this
repository's published tables, so the per-processor watts are **assumed**
(each ``sources`` entry says why). The thermal model is calibrated to two
published throttling observations, quoted in issue #19:

* 3DMark Wild Life Extreme stress test on a Galaxy S23 Ultra (Snapdragon 8 Gen 2):
  about -28 % over ~20 minutes (20 loops) -> CPU/GPU keep 0.72 of their speed
  at SEVERE, and C is chosen so that the stress power reaches SEVERE after 20 min.
* A user report on Tensor G3: NPU latency about 2x after 30 minutes of
  sustained inference -> the NPU/DSP keep 0.5 of their speed at CRITICAL.

The severity thresholds are the VIRTUAL-SKIN ones of Pixel-style Android
thermal HAL configs (39/43/45/47/52/55 deg C, 1.9 K hysteresis; assumed for
every device, not a vendor figure of these devices). Levels between NONE and
the published points are interpolated (assumed). The thermal resistance R is
assumed per device class; C follows from the 20-minute calibration.
"""

from __future__ import annotations

import math
from typing import Any

AMBIENT_C = 25.0
THRESHOLDS_C = {"light": 39.0, "moderate": 43.0, "severe": 45.0, "critical": 47.0, "emergency": 52.0,
                "shutdown": 55.0}
HYSTERESIS_K = 1.9
CALIBRATION_S = 20 * 60          # 3DMark stress reaches SEVERE after ~20 min
# speed kept per level: (cpu/gpu, npu/dsp); SEVERE cpu/gpu 0.72 and CRITICAL npu 0.5 are the published points
SPEEDS = {"light": (0.95, 0.95), "moderate": (0.85, 0.8), "severe": (0.72, 0.65), "critical": (0.6, 0.5),
          "emergency": (0.4, 0.35), "shutdown": (0.1, 0.1)}

#: per device: processor -> (active W, idle W), baseline W, R K/W, stress W, a sentence on the assumptions
DEVICES: dict[str, dict[str, Any]] = {
    "galaxy-s23": {"proc": {"cpu": (3.5, 0.10), "gpu": (4.0, 0.05), "npu": (1.2, 0.02)},
                   "baseline_w": 3.0, "r": 4.0, "stress_w": 6.5,
                   "why": "Snapdragon 8 Gen 2 phone, 168 g"},
    "xr2-gen2": {"proc": {"cpu": (3.0, 0.10), "gpu": (3.5, 0.05), "npu": (1.0, 0.02)},
                 "baseline_w": 4.0, "r": 3.0, "stress_w": 8.0,
                 "why": "Snapdragon XR2 Gen 2 headset with a fan (Quest 3 class)"},
    "pixel4": {"proc": {"cpu": (3.5, 0.12), "gpu": (3.5, 0.05), "dsp": (1.0, 0.02)},
               "baseline_w": 3.0, "r": 4.5, "stress_w": 5.5,
               "why": "Snapdragon 855 phone, 162 g"},
}
# Wi-Fi radio: linear model P = a_u * up + a_d * down + base (mW, Mbit/s), the form of Huang et al. (MobiSys'12)
RADIO = {"uplink_mw_per_mbps": 10.0, "downlink_mw_per_mbps": 5.0, "active_mw": 300.0}


def capacitance_j_per_k(r_k_per_w: float, stress_w: float) -> float:
    """C (J/K) such that ``stress_w`` from ambient reaches SEVERE after :data:`CALIBRATION_S` s."""
    rise, need = stress_w * r_k_per_w, THRESHOLDS_C["severe"] - AMBIENT_C
    if rise <= need:
        raise ValueError(f"{stress_w} W x {r_k_per_w} K/W never reaches SEVERE")
    return CALIBRATION_S / (r_k_per_w * math.log(rise / (rise - need)))


def minutes_to(level: str, power_w: float, r: float, c: float) -> float:
    """Minutes from ambient to ``level`` at constant ``power_w`` (inf if never)."""
    rise, need = power_w * r, THRESHOLDS_C[level] - AMBIENT_C
    return math.inf if rise <= need else r * c * math.log(rise / (rise - need)) / 60


def xr_load_w(dev: dict[str, Any]) -> float:
    """The reference sustained XR load (W): baseline + every accelerator half busy + the CPU a quarter busy."""
    total = dev["baseline_w"]
    for name, (active, idle) in dev["proc"].items():
        share = 0.25 if name == "cpu" else 0.5
        total += share * active + (1 - share) * idle
    return total


def power_and_thermal(name: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """The ``power`` and ``thermal`` objects of profile ``name`` and their ``sources`` entries."""
    dev = DEVICES[name]
    r = dev["r"]
    c = round(capacitance_j_per_k(r, dev["stress_w"]), 1)
    power = {"processors": {p: {"active_w": a, "idle_w": i} for p, (a, i) in dev["proc"].items()},
             "baseline_w": dev["baseline_w"], "radio": dict(RADIO)}
    levels = []
    for sev, at_c in THRESHOLDS_C.items():
        fast, slow = SPEEDS[sev]
        levels.append({"severity": sev, "at_c": at_c,
                       "speed": {p: (slow if p in ("npu", "dsp") else fast) for p in dev["proc"]}})
    thermal = {"capacitance_j_per_k": c, "resistance_k_per_w": r, "ambient_c": AMBIENT_C,
               "hysteresis_c": HYSTERESIS_K, "levels": levels}
    xr = xr_load_w(dev)
    src = {
        "power/processors/*/active_w": (f"assumed ({dev['why']}): power of the processor while it runs one "
                                        "inference, in the range of flagship-SoC CPU clusters (3-4 W at 4 threads), "
                                        "mobile GPUs under compute load (3.5-4 W) and NPUs (about 1 W); no "
                                        "per-processor power of this SoC is in the published tables. Measured "
                                        "energy_mj (edgert deploy) replaces these"),
        "power/processors/*/idle_w": "assumed: a power-gated idle processor draws tens of mW (CPU cluster ~0.1 W)",
        "power/baseline_w": (f"assumed: display, cameras and rendering of an XR session ({dev['baseline_w']} W); "
                             "heats the device, not charged to any inference"),
        "power/radio": ("assumed: Wi-Fi 5 at ~0.8 W when transferring at the profile's 50/100 Mbit/s, 0.3 W "
                        "while waiting, in the linear form of Huang et al., 'A Close Examination of Performance "
                        "and Power Characteristics of 4G LTE Networks', MobiSys 2012; that paper's own Wi-Fi fit "
                        "is for 802.11g-era rates and would give >10 W extrapolated to 100 Mbit/s, so it is not used"),
        "thermal/capacitance_j_per_k": (f"derived: C such that {dev['stress_w']} W (assumed 3DMark-like GPU stress "
                                        f"power of this device) from {AMBIENT_C:g} C reaches SEVERE ({THRESHOLDS_C['severe']:g} C) "
                                        "after 20 min, as the 3DMark Wild Life Extreme stress test on Galaxy S23 "
                                        "Ultra loses ~28 % over ~20 minutes (figure quoted in issue #19)"),
        "thermal/resistance_k_per_w": (f"assumed ({dev['why']}): {r} K/W to ambient, so that about "
                                       f"{(THRESHOLDS_C['light'] - AMBIENT_C) / r:.1f} W is sustainable below LIGHT"),
        "thermal/ambient_c": "assumed: 25 C room",
        "thermal/levels/*/at_c": ("assumed: VIRTUAL-SKIN thresholds of Pixel-style Android thermal HAL configs "
                                  "(LIGHT 39, MODERATE 43, SEVERE 45, CRITICAL 47, EMERGENCY 52, SHUTDOWN 55 C; "
                                  "hysteresis 1.9 K), not a vendor figure for this device"),
        "thermal/levels/severe/speed": ("published: 3DMark Wild Life Extreme stress test on Galaxy S23 Ultra, "
                                        "~-28 % over ~20 minutes (issue #19) -> CPU/GPU keep 0.72; NPU 0.65 "
                                        "interpolated towards CRITICAL (assumed)"),
        "thermal/levels/critical/speed": ("published (user report, issue #19): Tensor G3 NPU latency ~2x after 30 "
                                          "minutes of sustained inference -> NPU/DSP keep 0.5; CPU/GPU 0.6 assumed"),
        "thermal/levels/*/speed": "assumed: interpolated between NONE (1.0) and the published points above",
        "thermal/xr_load": (f"derived: the reference sustained XR load (baseline + accelerators half busy + CPU "
                            f"a quarter busy) is {xr:.2f} W: LIGHT after {minutes_to('light', xr, r, c):.1f} min, "
                            f"SEVERE after {minutes_to('severe', xr, r, c):.1f} min"),
    }
    return power, thermal, src
