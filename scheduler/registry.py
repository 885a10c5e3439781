"""Policy names → policy classes, imported lazily (one file per policy in ``scheduler/policies``)."""

from __future__ import annotations

import importlib
from typing import Any

from scheduler.errors import ConfigError, did_you_mean
from scheduler.profile import DeviceProfile
from scheduler.types import Policy

#: The project's own policy, used when ``scheduler=None``.
DEFAULT_POLICY = "edgert"

# name -> "module:Class"; Band's baselines keep Band's names.
_POLICIES: dict[str, str] = {
    "edgert": "scheduler.policies.edgert:EdgertPolicy",
    "fixed_worker": "scheduler.policies.fixed_worker:FixedWorkerPolicy",
    "round_robin": "scheduler.policies.round_robin:RoundRobinPolicy",
    "shortest_expected_latency": "scheduler.policies.shortest_expected_latency:ShortestExpectedLatencyPolicy",
    "heterogeneous_earliest_finish_time":
        "scheduler.policies.heterogeneous_earliest_finish_time:HeterogeneousEarliestFinishTimePolicy",
    "least_slack_time_first": "scheduler.policies.least_slack_time_first:LeastSlackTimeFirstPolicy",
}

#: Band's five baselines, in the order Band's paper and tables list them.
BAND_POLICIES: tuple[str, ...] = (
    "fixed_worker",
    "round_robin",
    "shortest_expected_latency",
    "heterogeneous_earliest_finish_time",
    "least_slack_time_first",
)


def register(name: str, target: str) -> None:
    """Register a policy class under ``name`` (``target`` is ``"module:Class"``)."""
    _POLICIES[name] = target


def policy_names() -> list[str]:
    """Every registered policy name, sorted."""
    return sorted(_POLICIES)


#: The objectives of a policy that has one (edgert's; see ``scheduler/policies/edgert.py``).
OBJECTIVES: tuple[str, ...] = ("deadlines", "balanced", "energy")


def make_policy(name: str | None = None, *, profile: DeviceProfile | None = None, objective: str | None = None,
                **options: Any) -> Policy:
    """Instantiate the policy called ``name`` (None = the default).

    A policy that has an energy objective (class attribute ``energy_aware``) is given the energy figures
    of ``profile`` (``energy=EnergyTable.from_profile(profile)``) and ``objective`` when one is named;
    other policies ignore ``profile``.

    Raises:
        ConfigError: unknown name, with "did you mean" and the choices; an ``objective`` for a policy
            without one, or an unknown objective.
    """
    name = DEFAULT_POLICY if name is None else name
    target = _POLICIES.get(name)
    if target is None:
        raise did_you_mean("scheduler", name, _POLICIES)
    module, cls_name = target.split(":")
    cls = getattr(importlib.import_module(module), cls_name)
    aware = getattr(cls, "energy_aware", False)
    if objective is not None:
        if not aware:
            raise ConfigError(f"scheduler {name!r} has no objective; --objective applies to "
                              f"{', '.join(n for n in _POLICIES if n == DEFAULT_POLICY)}")
        if objective not in OBJECTIVES:
            raise did_you_mean("objective", objective, OBJECTIVES)
        options.setdefault("objective", objective)
    if aware and profile is not None and "energy" not in options:
        from scheduler.policies._energy import EnergyTable

        options["energy"] = EnergyTable.from_profile(profile)
    return cls(**options)
