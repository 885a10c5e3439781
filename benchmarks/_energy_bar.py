"""Bar 4 of ``benchmarks/schedulers.py``: edgert's energy against today's default (objective deadlines).

Per profile, each policy's placement energy (inference + idle + radio, J), the total with the
device's baseline, and the mean XRBench score with the profile's E_max; the bar: edgert spends
``ENERGY_SAVING`` less placement energy than :data:`TODAY` at deadline-met within ``ENERGY_MET_PT``
points of it on every cell.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from scheduler.registry import DEFAULT_POLICY

#: the default policy under objective deadlines: today's default, the energy bar's reference
TODAY = "edgert@deadlines"
#: the energy bar: ``ENERGY_SAVING`` less energy at deadline-met within ``ENERGY_MET_PT`` of today's, every cell
ENERGY_SAVING, ENERGY_MET_PT = 0.15, 0.1


def energy_block(results: list[tuple[tuple, dict[str, Any]]], policies: Sequence[str], short: Mapping[str, str],
                 label: Callable[[tuple], str]) -> tuple[str, tuple[str, bool, str]]:
    """The energy table (per profile: each policy's energy, mJ, and mean XRBench score with the profile's
    E_max) and the energy bar: edgert (its objective) vs :data:`TODAY`."""
    with_today = [(c, f) for c, f in results if TODAY in f and f[TODAY].total_mj > 0]
    names = (*policies, TODAY)
    head = f"{'profile':<12}" + "".join(f"{short[n]:>9}" for n in names)
    lines = ["energy the placement spends (inference + idle + radio, J; total incl. baseline below), "
             "XRBench score (profile's E_max)", head, "-" * len(head)]
    for prof in dict.fromkeys(c[0] for c, _ in with_today):
        rows = [f for c, f in with_today if c[0] == prof]
        seeds = with_today[0][0][5]
        lines.append(f"{prof:<12}" + "".join(f"{sum(f[n].energy_mj for f in rows) / 1e3:>9.1f}" for n in names))
        lines.append(f"{'  total J':<12}" + "".join(f"{sum(f[n].total_mj for f in rows) / 1e3:>9.1f}" for n in names))
        lines.append(f"{'  XRBench':<12}" + "".join(f"{sum(f[n].xrbench for f in rows) / len(rows) / seeds:>9.1f}"
                                                     for n in names))
    worse = [f"{label(c)}: {f[DEFAULT_POLICY].met_pct:.2f} % vs {f[TODAY].met_pct:.2f} %" for c, f in with_today
             if f[DEFAULT_POLICY].met_pct < f[TODAY].met_pct - ENERGY_MET_PT]
    ours = sum(f[DEFAULT_POLICY].energy_mj for _, f in with_today)
    today = sum(f[TODAY].energy_mj for _, f in with_today) or 1.0
    tot = sum(f[DEFAULT_POLICY].total_mj for _, f in with_today) / (sum(f[TODAY].total_mj for _, f in with_today) or 1.0)
    saving = 1.0 - ours / today
    met = (sum(f[DEFAULT_POLICY].met for _, f in with_today), sum(f[TODAY].met for _, f in with_today))
    name = (f"4. energy: edgert spends >= {ENERGY_SAVING:.0%} less than today's default (objective deadlines) at "
            f"deadline-met within {ENERGY_MET_PT} pt on every cell: {saving:+.1%} placement energy "
            f"({1 - tot:+.1%} of the total with baseline), {len(with_today) - len(worse)}/{len(with_today)} cells "
            f"within {ENERGY_MET_PT} pt, met {met[0]} vs {met[1]}")
    return "\n".join(lines), (name, saving >= ENERGY_SAVING and not worse, "\n".join(worse))
