"""edgert's lone-request decisions (``EdgertPolicy._lone``, ``_best_effort``) against its general path.

The lone path is a shortcut taken for every sync call: it must give the same assignments and leave the
policy in the same state as the general path on every snapshot it answers. Random snapshots, both paths on
copies of one policy; a test double (``_general_only``) switches the shortcut off.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import random

import pytest

from scheduler.estimator import LatencyEstimator
from scheduler.policies._slots import _processor_table
from scheduler.policies.edgert import EdgertPolicy
from scheduler.types import ProcessorView, RequestView, SchedulerView

MODELS = ("a", "b", "c")


class _GeneralOnly(EdgertPolicy):
    """Test double: edgert's policy with the lone shortcut off (the same slots, so a copy can change class)."""

    __slots__ = ()

    def _lone(self, *args: object, **kwargs: object) -> None:
        return None

    def _best_effort(self, *args: object, **kwargs: object) -> None:
        return None


class _LoneOnly(EdgertPolicy):
    """Test double: edgert's policy with only the ``_lone`` shortcut (``_best_effort`` off)."""

    __slots__ = ()

    def _best_effort(self, *args: object, **kwargs: object) -> None:
        return None


def _general_only(policy: EdgertPolicy) -> EdgertPolicy:
    """A copy of ``policy`` that always takes the general path."""
    twin = copy.deepcopy(policy)
    twin.__class__ = _GeneralOnly
    return twin


def _snapshot(rng: random.Random, now: float, rid: int) -> SchedulerView:
    n = rng.randint(1, 4)
    est = LatencyEstimator()
    procs = []
    model = rng.choice(MODELS)
    for i in range(n):
        name = f"p{i}"
        for m in MODELS:
            if rng.random() < 0.8:
                est.seed(m, name, rng.choice([0.5, 1.0, 3.0, 10.0, 40.0]) * rng.uniform(0.9, 1.1))
        busy = 0.0 if rng.random() < 0.5 else now + rng.uniform(-2.0, 20.0)
        queued = 0.0 if rng.random() < 0.7 else rng.uniform(0.0, 15.0)
        procs.append(ProcessorView(name, rng.choice(["cpu", "gpu", "npu"]), busy, queued, int(queued > 0),
                                   rng.random() < 0.9, 1, 0 if busy > now else 1))
    if n > 1 and rng.random() < 0.3:   # peers: one processor seen as several slots share one estimate (ties)
        for m in MODELS:
            first = est.expected_ms(m, "p0")
            for p in procs[1:]:
                if first is not None and est.expected_ms(m, p.name) is not None:
                    est.seed(m, p.name, first)
    near = [est.expected_ms(model, p.name) for p in procs if est.expected_ms(model, p.name) is not None]
    u = rng.random()
    if u < 0.25:
        deadline = math.inf
    elif u < 0.6 and near:   # about one run away: where the headroom and the slack rules decide
        deadline = now + rng.choice(near) * rng.uniform(0.9, 2.5)
    else:
        deadline = now + rng.uniform(0.2, 60.0)
    allowed = None if rng.random() < 0.7 else tuple(p.name for p in procs if rng.random() < 0.6)
    req = RequestView(rid, model, now, deadline, model, -1, rng.choice([0.0, 0.0, 2.0]), allowed)
    return SchedulerView((req,), tuple(procs), est)


@pytest.mark.parametrize("seed", range(6))
def test_lone_decision_equals_the_general_path(seed: int) -> None:
    rng = random.Random(seed)
    policy: EdgertPolicy = _LoneOnly(stale_ms=None)
    answered = 0
    for k in range(400):
        now = 10.0 * k + rng.uniform(0.0, 5.0)
        view = _snapshot(rng, now, k)
        twin = _general_only(policy)
        lone = policy._lone(view.pending[0], _processor_table(view.processors, now), view.estimator, now) if policy.plan.idle else None
        answered += lone is not None
        policy.plan = copy.deepcopy(twin.plan)   # the probe above may have counted the request: start equal
        got, want = policy.decide(view, now), twin.decide(view, now)
        assert got == want, (seed, k, view)
        assert policy.plan.fates == twin.plan.fates
        assert _state(policy.plan._streams) == _state(twin.plan._streams)
        assert policy.plan._budget == twin.plan._budget
        if rng.random() < 0.5:   # either carries on: their states are equal
            policy = twin
            policy.__class__ = _LoneOnly
    assert answered > 60   # the shortcut answered a good share of the snapshots, not only the easy ones


def test_lone_decision_leaves_a_pending_request_to_the_general_path_when_late() -> None:
    est = LatencyEstimator()
    est.seed("a", "p0", 50.0)
    procs = (ProcessorView("p0", "cpu", 0.0, 0.0, 0, True, 1, 1),)
    req = RequestView(1, "a", 0.0, 10.0, "a", -1, 0.0, None)
    policy = EdgertPolicy(stale_ms=None)
    assert policy._lone(req, _processor_table(procs, 0.0), est, 0.0) is None
    out = policy.decide(SchedulerView((req,), procs, est), 0.0)
    assert [a.processor for a in out] == [None] and "cannot meet its deadline" in out[0].reason



def _state(obj: object) -> dict[str, object]:
    """Every slot of ``obj`` (the streams' rate tracking) as a dict, to compare two."""
    return {k: getattr(obj, k) for c in type(obj).__mro__ for k in getattr(c, "__slots__", ()) if hasattr(obj, k)}


@pytest.mark.parametrize("seed", range(4))
def test_best_effort_decision_equals_the_general_path(seed: int) -> None:
    """A lone request without a deadline on idle processors: the same placement as the general path (its
    state differs only in what the general path defers to its next decision anyway)."""
    rng = random.Random(100 + seed)
    policy = EdgertPolicy(stale_ms=None)
    answered = 0
    for k in range(300):
        now = 10.0 * k
        view = _snapshot(rng, now, k)
        idle = tuple(dataclasses.replace(p, busy_until_ms=0.0, queued_ms=0.0, n_queued=0, free_slots=1,
                                         kind=rng.choice(["cpu", "gpu"])) for p in view.processors)
        req = dataclasses.replace(view.pending[0], deadline_ms=math.inf)
        view = SchedulerView((req,), idle, view.estimator)
        twin = _general_only(policy)
        answered += policy._best_effort(req, view, now) is not None
        assert policy.decide(view, now) == twin.decide(view, now), (seed, k, view)
    assert answered > 100
