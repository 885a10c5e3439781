"""``scheduler.contract``: the driver contract's outcomes and words, and its one switch (raise or drop)."""

from __future__ import annotations

import pytest

from scheduler import contract
from scheduler.contract import OnBroken
from scheduler.errors import EdgeRTError


def test_the_words_of_each_outcome() -> None:
    assert contract.left_unplaced("p") == "left unplaced by scheduler 'p' while every processor that could run it was idle"
    assert contract.dropped_by("p") == "dropped by scheduler 'p'"
    assert contract.misplaced("p", "gpu", True) == "scheduler 'p' placed it on 'gpu', which cannot run it"
    assert contract.misplaced("p", "npu", False, "request 3") == "scheduler 'p' placed request 3 on 'npu', which does not exist"
    assert contract.not_pending("p", 7).startswith("policy 'p' decided about request 7, which is not pending")


def test_a_broken_decision_raises_under_raise_and_is_the_drop_reason_under_drop() -> None:
    with pytest.raises(EdgeRTError, match="^why$"):
        contract.broken("why", OnBroken.RAISE)
    assert contract.broken("why", OnBroken.DROP) == "why"


def test_the_simulator_raises_and_the_live_runtime_drops() -> None:
    from edgert._core import _run
    from scheduler.sim import driver

    assert driver.ON_BROKEN is OnBroken.RAISE and _run.ON_BROKEN is OnBroken.DROP
