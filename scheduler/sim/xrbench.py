"""XRBench's score (Kwon et al., MLSys'23), computed as XRBench's own code computes it.

Followed: ``lib/include/heterogeneous-space-exploration/HET_scoring-module.hpp``
(``ScoringModule::ComputeScore``, ``ComputeRealtimeScore``,
``ComputeEnergyScore``), ``HET_logger.hpp`` (``InferenceLog::ComputeDelay``)
and the constants in ``XRBench-MAESTRO.cpp`` (``rt_score_param_k = 15``,
``en_score_param_max_en = 1500``) of github.com/XRBench/XRBench-MLSys2023
(commit 8915666). Times are in ms and energy in mJ there too
(``HET_runtime.hpp`` converts nJ to mJ before logging).

Per inference that completed (not dropped)::

    RT = 1 / (1 + e^(k * (t_done - t_deadline)))     k = 15 per ms
    EN = (E_max - E) / E_max                         E in mJ, E_max = 1500 mJ; not clipped (E > E_max gives EN < 0)

Per model with N frames of which D were dropped::

    score_m = (sum over completed frames of RT * EN) / N * (1 - D / N)

and overall ``100 * mean over models of score_m``. Note the sum is divided
by **all** N frames, dropped ones included, and then multiplied by
``1 - D/N`` again: XRBench's code thereby weighs the drop rate twice,
``score_m = (1 - D/N)^2 * mean over completed of RT * EN``. The paper's text
reads as one factor ``(1 - D/N) * mean over completed``; this module
follows the code and also reports that one-factor figure per model
(``paper_score``) so the two can be compared. Models enter the mean only if
they have at least one frame (XRBench's logger lists a model on its first log).

XRBench's E_max of 1500 mJ is an accelerator-simulation budget; on a phone an
inference costs a few mJ, so EN stays near 1. :func:`profile_e_max_mj` offers
a per-profile E_max (the costliest invocation the profile can make) for a score
that feels energy; a report must say which E_max it used.

The exponent is evaluated as a stable sigmoid: no overflow at any lateness.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from scheduler.profile import DeviceProfile
from scheduler.energy import EnergyModel

#: XRBench-MAESTRO.cpp: ``rt_score_param_k`` (per ms).
RT_K_PER_MS = 15.0
#: XRBench-MAESTRO.cpp: ``en_score_param_max_en`` (mJ).
E_MAX_MJ = 1500.0


def sigmoid_neg(x: np.ndarray | float) -> np.ndarray:
    """``1 / (1 + e^x)`` without overflow: ``e^-x / (1 + e^-x)`` for x >= 0, the direct form below."""
    x = np.asarray(x, dtype=np.float64)
    z = np.exp(-np.abs(x))            # in (0, 1]: never overflows
    return np.where(x >= 0, z / (1.0 + z), 1.0 / (1.0 + z))


def realtime_score(done_ms: np.ndarray | float, deadline_ms: np.ndarray | float,
                   k_per_ms: float = RT_K_PER_MS) -> np.ndarray:
    """XRBench's RT of completed inferences: ``1 / (1 + e^(k (done - deadline)))`` (ms); 1.0 for no deadline."""
    delay = np.asarray(done_ms, dtype=np.float64) - np.asarray(deadline_ms, dtype=np.float64)
    return sigmoid_neg(k_per_ms * delay)


def energy_score(energy_mj: np.ndarray | float, e_max_mj: float = E_MAX_MJ) -> np.ndarray:
    """XRBench's EN: ``(E_max - E) / E_max`` with E in mJ (not clipped, as in XRBench)."""
    return (e_max_mj - np.asarray(energy_mj, dtype=np.float64)) / e_max_mj


@dataclass(frozen=True, slots=True)
class ModelScore:
    """One model's part of the score: frames, drops, mean RT/EN over completed frames, and its score."""

    frames: int
    dropped: int
    rt_mean: float
    en_mean: float
    rt_en_mean: float
    score: float          # XRBench's code: sum(RT*EN) / frames * (1 - drop rate)
    paper_score: float    # one drop factor: mean(RT*EN over completed) * (1 - drop rate)


@dataclass(frozen=True, slots=True)
class XRBenchScore:
    """The overall score (0..100 when every EN is in 0..1), per model, and the constants used."""

    overall: float
    per_model: dict[str, ModelScore] = field(default_factory=dict)
    e_max_mj: float = E_MAX_MJ
    k_per_ms: float = RT_K_PER_MS


def xrbench_score(models: Sequence[str], done_ms: Sequence[float] | np.ndarray,
                  deadline_ms: Sequence[float] | np.ndarray, energy_mj: Sequence[float] | np.ndarray, *,
                  e_max_mj: float = E_MAX_MJ, k_per_ms: float = RT_K_PER_MS) -> XRBenchScore:
    """XRBench's score of a run, one entry per inference (frame).

    Args:
        models: the model name of each inference.
        done_ms: completion time (ms); NaN for a dropped (or failed) inference.
        deadline_ms: its absolute deadline (ms); ``inf`` for none.
        energy_mj: its energy (mJ); ignored for dropped ones (XRBench logs 0 for them).
        e_max_mj: E_max (XRBench: 1500 mJ). k_per_ms: the RT slope (XRBench: 15 per ms).

    Raises:
        ValueError: the columns differ in length, or ``e_max_mj`` is not > 0.
    """
    done = np.asarray(done_ms, dtype=np.float64)
    dl = np.asarray(deadline_ms, dtype=np.float64)
    en = np.asarray(energy_mj, dtype=np.float64)
    if not (len(models) == done.size == dl.size == en.size):
        raise ValueError(f"columns differ in length: models {len(models)}, done_ms {done.size}, "
                         f"deadline_ms {dl.size}, energy_mj {en.size}")
    if not (e_max_mj > 0 and math.isfinite(e_max_mj)):
        raise ValueError(f"e_max_mj must be a finite number > 0, not {e_max_mj!r}")
    names, codes = _model_codes(models)
    ok = ~np.isnan(done)
    rt = np.zeros(done.size)
    es = np.zeros(done.size)
    rt[ok] = realtime_score(done[ok], dl[ok], k_per_ms)
    es[ok] = energy_score(en[ok], e_max_mj)
    n = np.bincount(codes, minlength=len(names))
    n_ok = np.bincount(codes, weights=ok, minlength=len(names))
    sums = [np.bincount(codes, weights=w, minlength=len(names)) for w in (rt, es, rt * es)]
    per: dict[str, ModelScore] = {}
    for i, name in enumerate(names):
        frames, done_n = int(n[i]), int(n_ok[i])
        keep = done_n / frames
        mean = lambda s: float(s[i] / done_n) if done_n else 0.0
        per[name] = ModelScore(frames=frames, dropped=frames - done_n, rt_mean=mean(sums[0]),
                               en_mean=mean(sums[1]), rt_en_mean=mean(sums[2]),
                               score=float(sums[2][i] / frames) * keep, paper_score=mean(sums[2]) * keep)
    overall = 100.0 * sum(s.score for s in per.values()) / len(per) if per else 0.0
    return XRBenchScore(overall, per, e_max_mj, k_per_ms)


def _model_codes(models: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The distinct model names (as ``str``), sorted, and each inference's index into them: ``np.unique``'s
    answer with ``return_inverse``, without sorting every inference's name (an hour's run has 250,000)."""
    label = {m: str(m) for m in dict.fromkeys(models)}
    names = sorted(set(label.values()))
    pos = {name: i for i, name in enumerate(names)}
    code = {m: pos[name] for m, name in label.items()}
    return names, np.fromiter(map(code.__getitem__, models), np.intp, len(models))


def profile_e_max_mj(profile: DeviceProfile) -> float | None:
    """A per-profile E_max (mJ): the costliest single invocation the profile can make at nominal speed.

    The maximum over its models and processors of ``energy_mj`` where
    measured, else ``active_w x latency_ms``; None when the profile has no
    power or energy figures.
    """
    active = {n: p.active_w for n, p in (profile.power.processors.items() if profile.power else ())}
    best = 0.0
    for model, row in profile.latency_ms.items():
        measured = profile.energy_mj.get(model, {})
        for proc, ms in row.items():
            mj = measured.get(proc, active.get(proc, 0.0) * ms)
            best = max(best, mj)
    return best if best > 0 else None


def score_ceiling(profile: DeviceProfile, models: Sequence[str], e_max_mj: float, *, offload: bool = True) -> float:
    """The highest XRBench score a run of ``models`` can expect on ``profile`` (any policy): 100 × the mean over
    the models of the energy score of each one's least-energy placement at nominal speed (the cloud's radio
    energy too, with ``offload``), i.e. every frame met early (RT = 1), none dropped, every invocation where
    it costs least. A run can exceed it only by chance (its drawn run times move its energy; by about 0.01
    on the shipped profiles).

    Raises:
        ValueError: ``e_max_mj`` is not > 0, or a model the profile has no latency for.
    """
    if not (e_max_mj > 0 and math.isfinite(e_max_mj)):
        raise ValueError(f"e_max_mj must be a finite number > 0, not {e_max_mj!r}")
    em = EnergyModel(profile)
    best = []
    for m in dict.fromkeys(models):
        if m not in profile.latency_ms:
            raise ValueError(f"model {m!r} is not in device profile {profile.name!r}")
        costs = [em.invocation_mj(m, p, ms) for p, ms in profile.latency_ms[m].items()]
        if offload and profile.cloud is not None and m in profile.cloud.latency_ms:
            costs.append(em.cloud_mj(m))
        best.append(float(energy_score(min(costs), e_max_mj)))
    return 100.0 * sum(best) / len(best) if best else 0.0
