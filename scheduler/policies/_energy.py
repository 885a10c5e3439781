"""edgert's energy and heat objective: the energy figures it decides with, and its choice.

Deadlines first. :class:`Greener` only ever moves a request from the placement
the deadline rules chose to one that also makes its effective deadline, with
more headroom than those rules ask (``k_energy`` × the run time, not
``1 + margin``; the cloud only free now and with ``cloud_margin``), and only
when that placement spends less energy: the invocation's energy above idle on
a local processor (``active_w − idle_w`` × expected ms, or the measured
``energy_mj`` less idle), the radio's on the cloud. Waiting for a cheaper
processor is a claim (late dispatch), as when the deadline rules wait for a
faster one.

:class:`HeatWatch` keeps the policy's own estimate of the device's
temperature (the profile's lumped RC model, fed with the power its view
implies: baseline and idle, plus each busy processor's power above idle) and
looks ahead with :meth:`~scheduler.thermal.ThermalModel.time_to_severity`:
when the next throttling level is due within ``horizon_ms`` at the current
power, or the device is throttled already, the choice turns frugal (the
``"energy"`` headroom, and any saving counts) so the power falls before the
throttle hits. Pure: no clock, no I/O; its state changes only with ``now_ms``
and the views. Units: ms, mJ, W, °C.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scheduler.power import ThermalSpec
from scheduler.profile import DeviceProfile

if TYPE_CHECKING:
    from scheduler.policies._slots import Processors

_INF = float("inf")
#: the objectives' ``wait_slack`` (see Greener): 0.3 ties fixed_worker's all-on-the-NPU placement on the sustained
#: galaxy-s23 and xr2-gen2 cells (the energy optimum there), and saves 20 % over the scheduler table (0: 16.5 %)
WAIT_SLACK = 0.3
#: a policy's objectives, least frugal first (``scheduler.registry.OBJECTIVES`` lists the same)
OBJECTIVES: tuple[str, ...] = ("deadlines", "balanced", "energy")


@dataclass(frozen=True, slots=True)
class EnergyTable:
    """The energy figures of one device, for a policy (plain data; build it with :meth:`from_profile`).

    Attributes:
        above_idle_w: processor -> W it draws above idle while it runs an invocation.
        measured_mj: (model, processor) -> mJ above idle of one invocation, where the profile measured it.
        cloud_mj: model -> radio mJ of one cloud invocation.
        base_w: W the device draws with every processor idle (baseline + idle powers).
        thermal: the lumped RC model and throttling levels, or None.
    """

    above_idle_w: dict[str, float] = field(default_factory=dict)
    measured_mj: dict[tuple[str, str], float] = field(default_factory=dict)
    cloud_mj: dict[str, float] = field(default_factory=dict)
    base_w: float = 0.0
    thermal: ThermalSpec | None = None

    @classmethod
    def from_profile(cls, profile: DeviceProfile) -> EnergyTable | None:
        """The table of ``profile``'s ``power`` / ``energy_mj`` / ``thermal`` sections; None without figures."""
        from scheduler.energy import EnergyModel

        em = EnergyModel(profile)
        if not em.has_figures:
            return None
        procs = em.power.processors
        above = {n: p.active_w - p.idle_w for n, p in procs.items()}
        measured = {(m, p): mj - em.idle_w(p) * profile.latency_ms.get(m, {}).get(p, 0.0)
                    for m, row in profile.energy_mj.items() for p, mj in row.items()}
        cloud = {m: em.cloud_mj(m) for m in (profile.cloud.latency_ms if profile.cloud else {})}
        return cls(above, measured, cloud, em.device_power_w({}), profile.thermal)

    def invocation_mj(self, model: str, processor: str, ms: float, cloud: bool) -> float:
        """mJ above idle of one invocation of ``model`` on ``processor`` expected to take ``ms``."""
        if cloud:
            return self.cloud_mj.get(model, 0.0)
        got = self.measured_mj.get((model, processor))
        return got if got is not None else self.above_idle_w.get(processor, 0.0) * ms


class HeatWatch:
    """The policy's estimate of the device's temperature, and whether the throttle is near."""

    __slots__ = ("_above", "_next_c", "_power", "horizon_ms", "hot", "model")

    def __init__(self, table: EnergyTable, horizon_ms: float) -> None:
        from scheduler.thermal import ThermalModel

        assert table.thermal is not None
        self.model = ThermalModel(table.thermal)
        self.horizon_ms = horizon_ms
        self._power = table.base_w
        self._above = table
        self._next_c = table.thermal.levels[0].at_c   # LIGHT's entry (deg C): hot from there on anyway
        #: True while throttled or the next level is due within the horizon at the current power
        self.hot = False

    def observe(self, procs: Processors, now_ms: float) -> bool:
        """Integrate to ``now_ms`` at the power the last view implied; take this view's; returns :attr:`hot`."""
        m = self.model
        if now_ms > m.now_ms:
            m.advance(now_ms, self._power)
        t = self._above
        w = t.base_w
        above = t.above_idle_w
        for name, ready, cloud in zip(procs.names, procs.ready, procs.is_cloud):
            if ready > now_ms and not cloud:
                w += above.get(name, 0.0)
        self._power = w
        nxt = self._next_c
        self.hot = m.level > 0 or (m.steady_state_c(w) > nxt and m.time_to_c(nxt, w) <= self.horizon_ms)
        return self.hot


class Greener:
    """The energy-aware choice among the placements that make a request's effective deadline.

    Each model has a *home*: the cheapest local processor that runs it within its budget with the energy
    headroom and still has room, the models that save the most energy per ms first, until a processor's
    homed work reaches ``cap`` of its time (:meth:`plan`, from the streams' rates whenever they change).
    A request moves only to its model's home or to a free cloud slot, so the cheap processors do not fill
    up past what their tighter streams can share.

    Args:
        table: the device's energy figures.
        k_energy: a placement must finish within its effective deadline with this factor of its run time.
        keep: switch only when the cheaper placement spends less than ``keep`` × the chosen one's energy.
        cloud_margin: the cloud's headroom, as a fraction of its expected round trip.
        cap: the share of a processor's time the homed models may fill.
        wait: the longest wait for the home, as a multiple of the run there (a longer claim holds the home
            from later, tighter requests: measured on the scheduler table, 1.0 misses least) …
        wait_slack: … or, when longer, this share of the time left to the effective deadline: a stream with a
            roomy deadline waits its turn on the home (as a fixed placement would) rather than taking a
            costlier processor free now.
        k_frugal: the headroom factor while :attr:`frugal` (default ``k_energy``).

    While :attr:`frugal` (the heat watch sees the throttle near) any saving counts (``keep`` = 1), with
    ``k_frugal``'s headroom.
    """

    __slots__ = ("cap", "cloud_margin", "frugal", "home", "k_energy", "k_frugal", "keep", "table", "wait",
                 "wait_slack")

    def __init__(self, table: EnergyTable, k_energy: float, keep: float, cloud_margin: float,
                 cap: float = 0.5, wait: float = 1.0, k_frugal: float | None = None,
                 wait_slack: float = 0.0) -> None:
        self.table = table
        self.k_energy = k_energy
        self.k_frugal = k_energy if k_frugal is None else k_frugal
        self.keep = keep
        self.cloud_margin = cloud_margin
        self.cap = cap
        self.wait = wait
        self.wait_slack = wait_slack
        self.frugal = False
        #: model -> the local processor its requests may move to for energy
        self.home: dict[str, str] = {}

    def plan(self, rates: dict[str, float], budgets: dict[str, float],
             est: Callable[[str, str], float | None], local: Sequence[str]) -> None:
        """Recompute :attr:`home` from the streams' ``rates`` (requests per ms) and ``budgets`` (ms)."""
        mj = self.table.invocation_mj
        options: dict[str, list[tuple[float, str, float]]] = {}
        gain: dict[str, float] = {}
        for m, rate in rates.items():
            budget = budgets.get(m, 0.0)
            row = sorted((mj(m, p, ms, False), p, ms) for p in local
                         if (ms := est(m, p)) is not None and self.k_energy * ms <= budget)
            if len(row) > 1:
                options[m], gain[m] = row, rate * (row[-1][0] - row[0][0])
        used = dict.fromkeys(local, 0.0)
        home: dict[str, str] = {}
        for m in sorted(options, key=lambda x: (-gain[x], x)):
            for _, p, ms in options[m]:
                if used[p] + rates[m] * ms <= self.cap:
                    used[p] += rates[m] * ms
                    home[m] = p
                    break
        self.home = home

    def choose(self, model: str, row: Sequence[tuple[int, float]], pick: int, finish: float, procs: Processors,
               target: float, now_ms: float) -> tuple[int, float]:
        """``(processor, finish)``: the cheapest placement that makes ``target`` with the energy headroom when
        it spends less than ``keep`` × the energy of ``pick`` (finishing at ``finish``); else ``pick``."""
        names, ready, is_cloud = procs.names, procs.ready, procs.is_cloud
        home = self.home.get(model)
        if home is None or names[pick] == home:   # no local move: only a free cloud slot might save energy
            return self._cloud_or(model, row, pick, finish, procs, target, now_ms)
        mj = self.table.invocation_mj
        pick_e = self._mj_on(model, row, pick, procs)
        best, best_f, best_e = pick, finish, pick_e if self.frugal else pick_e * self.keep
        k, kc = self.k_frugal if self.frugal else self.k_energy, 1.0 + self.cloud_margin
        wait_ms = self.wait_slack * (target - now_ms)   # a roomy deadline may wait longer for the home
        for i, ms in row:
            st = ready[i]
            if is_cloud[i]:   # a free slot, with the cloud's headroom
                if st > now_ms or st + kc * ms > target:
                    continue
            elif names[i] != home or st + k * ms > target or st - now_ms > wait_ms and st - now_ms > self.wait * ms:
                continue
            e = mj(model, names[i], ms, is_cloud[i])
            if e < best_e:
                best, best_f, best_e = i, st + ms, e
        return best, best_f

    def _cloud_or(self, model: str, row: Sequence[tuple[int, float]], pick: int, finish: float, procs: Processors,
                  target: float, now_ms: float) -> tuple[int, float]:
        """:meth:`choose` where no home move exists: a free cloud slot in time when it saves enough, else ``pick``."""
        names, ready, is_cloud = procs.names, procs.ready, procs.is_cloud
        last, cloud_ms = row[-1]   # rows run in processor order: with the cloud last (as drivers list it), it is
        cloud = (last if is_cloud[last] else -1) if is_cloud[-1] else next((i for i, _ in row if is_cloud[i]), -1)
        if cloud < 0 or cloud == pick or (st := ready[cloud]) > now_ms:   # the row's last entry or not in it
            return pick, finish                       # nowhere to move (most requests: a few checks)
        if cloud != last:
            cloud_ms = next(ms for i, ms in row if i == cloud)
        if st + (1.0 + self.cloud_margin) * cloud_ms > target:
            return pick, finish
        pick_e = self._mj_on(model, row, pick, procs)
        cloud_e = self.table.invocation_mj(model, names[cloud], cloud_ms, True)
        if cloud_e < (pick_e if self.frugal else pick_e * self.keep):
            return cloud, st + cloud_ms
        return pick, finish

    def _mj_on(self, model: str, row: Sequence[tuple[int, float]], pick: int, procs: Processors) -> float:
        """mJ above idle of ``model``'s run on processor ``pick``, as long as ``row`` expects it there (inf: not in the
        row)."""
        for i, ms in row:
            if i == pick:
                return self.table.invocation_mj(model, procs.names[i], ms, procs.is_cloud[i])
        return _INF


def make_objective(objective: str, table: EnergyTable | None, margin: float, cloud_margin: float,
                   horizon_ms: float) -> tuple[Greener | None, HeatWatch | None]:
    """The policy's energy choice and heat watch for ``objective`` (both None for ``"deadlines"`` or no table).

    Raises:
        ValueError: an unknown objective.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, not {objective!r}")
    if table is None or objective == "deadlines":
        return None, None
    if objective == "energy":
        green = Greener(table, 1.0 + margin, 1.0, cloud_margin, wait_slack=WAIT_SLACK)
    else:
        green = Greener(table, 1.0 + 2.0 * margin, 0.8, cloud_margin, k_frugal=1.0 + margin, wait_slack=WAIT_SLACK)
    watch = HeatWatch(table, horizon_ms) if table.thermal is not None and table.thermal.levels else None
    return green, watch
