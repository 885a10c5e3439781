"""Policy names → policy classes, imported lazily (one file per policy in ``scheduler/policies``)."""

from __future__ import annotations

import importlib
from typing import Any

from scheduler.errors import did_you_mean
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


def make_policy(name: str | None = None, **options: Any) -> Policy:
    """Instantiate the policy called ``name`` (None = the default).

    Raises:
        ConfigError: unknown name, with "did you mean" and the choices.
    """
    name = DEFAULT_POLICY if name is None else name
    target = _POLICIES.get(name)
    if target is None:
        raise did_you_mean("scheduler", name, _POLICIES)
    module, cls = target.split(":")
    return getattr(importlib.import_module(module), cls)(**options)
