"""The pieces of one edgert decision (scheduler/policies/_slots.py) on hand-built processor tables: each
processor's ready time, a model's row, the earliest finishes, a multi-slot processor's ready time after a
claim, leaving an idle processor to the tighter stream that reserved it, a newer frame taking an older one's
slot, and the swap that gives a late request a more urgent one's processor.

Times are ms; ``k_local`` is 1.2 (the default 20 % margin) throughout.
"""

from __future__ import annotations

from scheduler.policies._slots import (
    Processors,
    Claims,
    _idle_choice,
    _processor_table,
    _row,
    _slot_ready,
    leave_to_tighter_stream,
    swap_slot,
    take_older_slot,
)
from scheduler.policies.edgert import EdgertPolicy
from scheduler.types import Assignment, ProcessorView, RequestView
from tests.scheduler.policy_snapshots import plan, proc, req, view

K = 1.2
CLOUD4 = ProcessorView("cloud", "cloud", slots=4, free_slots=4)


def _procs(names: list[str], ready: list[float], cloud: tuple[str, ...] = ("cloud",)) -> Processors:
    is_cloud = [n in cloud for n in names]
    return Processors(names, ready, is_cloud, [0] * len(names), [1] * len(names),
                      [n for n in names if n not in cloud], next((n for n in names if n in cloud), None), 1)


# -- the processor table --

def test_processor_table_ready_times() -> None:
    views = [ProcessorView("cpu", "cpu", busy_until_ms=4.0, queued_ms=3.0),        # behind now: now + queue
             ProcessorView("gpu", "gpu", busy_until_ms=20.0, queued_ms=3.0),       # busy: its finish + queue
             ProcessorView("npu", "npu", available=False),
             ProcessorView("dsp", "dsp", busy_until_ms=10.0, queued_ms=0.0),
             ProcessorView("pool", "gpu", busy_until_ms=30.0, queued_ms=8.0, slots=2, free_slots=0),
             ProcessorView("cloud", "cloud", busy_until_ms=30.0, queued_ms=8.0, slots=4, free_slots=1)]
    t = _processor_table(views, 10.0)
    assert t == Processors(names=["cpu", "gpu", "dsp", "pool", "cloud"], ready=[13.0, 23.0, 10.0, 34.0, 10.0],
                           is_cloud=[False, False, False, False, True], free=[0, 0, 0, 0, 1], slots=[1, 1, 1, 2, 4],
                           local=["cpu", "gpu", "dsp", "pool"], cloud_name="cloud", cloud_slots=4)


def test_a_full_multi_slot_cloud_is_ready_when_its_queue_shares_out() -> None:
    t = _processor_table([ProcessorView("cloud", "cloud", busy_until_ms=5.0, queued_ms=8.0, slots=4,
                                        free_slots=0)], 10.0)
    assert t.ready == [12.0] and t.free == [0] and t.cloud_name == "cloud" and t.cloud_slots == 4


def test_no_cloud_in_the_table() -> None:
    t = _processor_table([ProcessorView("cpu", "cpu")], 0.0)
    assert t.cloud_name is None and t.cloud_slots == 0 and t.local == ["cpu"]


# -- a model's row --

class EstimatorDouble:
    """Test double for a LatencyModel: a fixed table."""

    def expected_ms(self, model: str, processor: str) -> float | None:
        return {("m", "gpu"): 4.0, ("m", "cloud"): 9.0}.get((model, processor))


def test_row_from_the_estimator_or_a_lookup() -> None:
    names = ["cpu", "gpu", "cloud"]
    assert _row(None, EstimatorDouble(), "m", names) == [(1, 4.0), (2, 9.0)]
    table = {("m", "cpu"): 7.0}
    assert _row(table.get, EstimatorDouble(), "m", names) == [(0, 7.0)]


# -- the earliest finishes --

def test_a_model_that_runs_only_in_the_cloud_goes_there() -> None:
    pol = EdgertPolicy(plan=False)
    got = pol.decide(view([req(0, "m", deadline=100.0)], [proc("cpu"), CLOUD4], {"m": {"cloud": 5.0}}), 0.0)
    assert plan(got) == [(0, "cloud")]


def test_the_earliest_local_finish_ties_keep_the_first_processor() -> None:
    lat = {"m": {"cpu": 10.0, "gpu": 10.0}}
    got = EdgertPolicy(plan=False).decide(view([req(0, "m", deadline=100.0)], [proc("cpu"), proc("gpu")], lat), 0.0)
    assert plan(got) == [(0, "cpu")]


def test_a_free_processor_takes_a_request_only_with_the_margin_exactly() -> None:
    # margin 0.2: a 10 ms run on the free cpu makes a 12 ms deadline (10 x 1.2); at 11.9 ms it does not, and
    # the cloud (5 ms) that makes it takes the request instead
    lat = {"m": {"cpu": 10.0, "cloud": 5.0}}
    for deadline, where in ((12.0, "cpu"), (11.9, "cloud")):
        got = EdgertPolicy(plan=False).decide(view([req(0, "m", deadline=deadline, arrival=0.0)],
                                                   [proc("cpu"), CLOUD4], lat), 0.0)
        assert plan(got) == [(0, where)], deadline


# -- a multi-slot processor after a claim --

def test_slot_ready() -> None:
    ready, free, slots = [7.0], [2], [4]
    assert _slot_ready(0, 10.0, 30.0, ready, free, slots) == 7.0 and free == [1]   # a slot stays free
    assert _slot_ready(0, 10.0, 30.0, ready, free, slots) == 30.0 and free == [0]  # the last free slot
    assert _slot_ready(0, 10.0, 30.0, ready, free, slots) == 15.0 and free == [0]  # full: the run shares out


# -- leaving an idle processor to a tighter stream --

NAMES = ["cloud", "cpu", "gpu", "npu"]


def test_leave_for_the_first_in_time_processor_even_if_slower() -> None:
    procs = _procs(NAMES, [0.0, 0.0, 0.0, 5.0])
    row = [(0, 1.0), (1, 30.0), (2, 10.0), (3, 8.0)]   # gpu (2) is the idle, reserved one
    # cloud never; cpu takes 30 ms (later than the gpu's 10) but is in time: it takes it; npu finishes 13: better
    assert leave_to_tighter_stream("m", row, 2, 10.0, 40.0, {"gpu": ("t", 5.0)}, procs, K) == (3, 13.0)


def test_leave_needs_the_margin_and_keeps_the_first_of_equal_finishes() -> None:
    procs = _procs(NAMES, [0.0, 0.0, 0.0, 2.0])
    row = [(1, 10.0), (3, 8.0), (2, 4.0)]
    assert leave_to_tighter_stream("m", row, 2, 4.0, 12.0, {}, procs, K) == (1, 10.0)     # 0 + 12 = target
    assert leave_to_tighter_stream("m", row, 2, 4.0, 11.9, {}, procs, K) == (3, 10.0)     # 2 + 9.6 fits
    assert leave_to_tighter_stream("m", row, 2, 4.0, 11.5, {}, procs, K) == (2, 4.0)      # nothing else fits


def test_leave_skips_processors_another_stream_reserved() -> None:
    procs = _procs(NAMES, [0.0, 0.0, 0.0, 0.0])
    row = [(1, 10.0), (3, 8.0), (2, 4.0)]
    reserved = {"gpu": ("t", 5.0), "npu": ("other", 5.0), "cpu": ("m", 50.0)}
    assert leave_to_tighter_stream("m", row, 2, 4.0, 40.0, reserved, procs, K) == (1, 10.0)
    reserved["cpu"] = ("other", 50.0)
    assert leave_to_tighter_stream("m", row, 2, 4.0, 40.0, reserved, procs, K) == (2, 4.0)


class GreenerDouble:
    """Test double for the energy choice: records the model and returns a fixed placement."""

    def __init__(self) -> None:
        self.models: list[str] = []

    def choose(self, model, row, pick, finish, procs, target, now_ms):
        self.models.append(model)
        return pick, finish


def test_idle_choice_leaves_only_with_twice_the_reserver_budget_to_spare() -> None:
    procs = _procs(NAMES, [100.0, 100.0, 100.0, 100.0])
    row = [(1, 10.0), (2, 4.0)]
    reserved = {"gpu": ("t", 10.0)}
    # target - now: 20.5 > 2 x 10 leaves for the cpu; 20 (or 15) stays on the gpu
    assert _idle_choice("m", row, 2, 104.0, 120.5, reserved, procs, K, 100.0, None) == (1, 110.0)
    assert _idle_choice("m", row, 2, 104.0, 120.0, reserved, procs, K, 100.0, None) == (2, 104.0)
    assert _idle_choice("m", row, 2, 104.0, 115.0, reserved, procs, K, 100.0, None) == (2, 104.0)
    assert _idle_choice("m", row, 2, 104.0, 125.5, reserved, procs, K, 100.0, None) == (1, 110.0)


def test_idle_choice_keeps_a_processor_reserved_for_its_own_model() -> None:
    procs = _procs(NAMES, [0.0] * 4)
    row = [(1, 10.0), (2, 4.0)]
    assert _idle_choice("m", row, 2, 4.0, 500.0, {"gpu": ("m", 10.0)}, procs, K, 0.0, None) == (2, 4.0)
    assert _idle_choice("m", row, 2, 4.0, 500.0, {"cpu": ("t", 10.0)}, procs, K, 0.0, None) == (2, 4.0)


def test_idle_choice_asks_the_energy_objective_with_the_model() -> None:
    green = GreenerDouble()
    procs = _procs(NAMES, [0.0] * 4)
    assert _idle_choice("m", [(2, 4.0)], 2, 4.0, 50.0, {}, procs, K, 0.0, green) == (2, 4.0)
    assert green.models == ["m"]


# -- a newer frame takes an older frame's slot --

def _frame(rid: int, frame: int, model: str = "m", allowed: tuple[str, ...] | None = None) -> RequestView:
    return RequestView(rid, model, 0.0, 50.0, "s", frame, 0.0, allowed)


def test_newer_frame_takes_the_slot_and_the_older_is_dropped() -> None:
    old, new = _frame(1, 3), _frame(2, 4, allowed=("cpu", "gpu"))
    out = [Assignment(1, "gpu")]
    placed = {"s": (0, 1, 20.0, old)}
    last = [None, old]
    assert take_older_slot(new, placed, out, ["cpu", "gpu"], 20.0, last)
    assert out == [Assignment(2, "gpu"), Assignment.drop(1, "superseded by frame 4 of stream 's'")]
    assert placed == {"s": (0, 1, 20.0, new)} and last == [None, new]


def test_a_claimed_older_frame_is_replaced_without_touching_other_holders() -> None:
    old, new, other = _frame(1, 3), _frame(2, 4), _frame(9, 0, model="x")
    out: list[Assignment] = []
    placed = {"s": (-1, 0, 20.0, old)}
    last = [other]
    assert take_older_slot(new, placed, out, ["cpu"], 25.0, last)
    assert out == [Assignment.drop(1, "superseded by frame 4 of stream 's'")] and last == [other]


def test_no_takeover_of_the_same_frame_a_late_finish_or_a_processor_not_allowed() -> None:
    old = _frame(1, 3)
    for new, deadline in ((_frame(2, 3), 20.0), (_frame(2, 4), 19.9), (_frame(2, 4, allowed=("cpu",)), 20.0)):
        placed = {"s": (0, 1, 20.0, old)}
        assert not take_older_slot(new, placed, [Assignment(1, "gpu")], ["cpu", "gpu"], deadline, [None, old])
        assert placed == {"s": (0, 1, 20.0, old)}
    assert not take_older_slot(_frame(2, 4), {}, [], ["cpu"], 20.0, [None])


# -- the swap --

def _swap_case(h_deadline: float = 30.0, h_down: float = 0.0, r_target: float = 12.0, h_start: float = 0.0,
               cpu_ready: float = 0.0):
    """gpu (index 0) holds H (more urgent, 10 ms on the gpu, 12 on the cpu); R needs the gpu (10 ms; 30 on the
    cpu) to make ``r_target``."""
    held = RequestView(1, "h", 0.0, h_deadline, "hs", 0, h_down, ("gpu", "cpu"))
    r = RequestView(2, "r", 0.0, r_target, "rs", 0, 0.0, None)
    out = [Assignment(1, "gpu")] if h_start <= 0.0 else []
    procs = _procs(["gpu", "cpu"], [h_start + 10.0, cpu_ready], cloud=())
    work = Claims([0.0, 0.0], out, {"hs": (0, 0, h_start + 10.0, held)}, [held, None], [h_start, 0.0],
                {"h": [(0, 10.0), (1, 12.0)], "r": [(0, 10.0), (1, 30.0)]})
    return r, held, procs, work


def test_swap_gives_the_late_request_the_holders_processor() -> None:
    r, held, procs, work = _swap_case()
    assert swap_slot(r, [(1, 30.0), (0, 10.0)], 12.0, work, procs, k_local=K, now_ms=0.0)
    assert work.out == [Assignment(2, "gpu"), Assignment(1, "cpu")]
    assert procs.ready == [10.0, 12.0]
    assert work.last == [r, held] and work.last_start == [0.0, 0.0]
    assert work.placed == {"rs": (0, 0, 10.0, r), "hs": (1, 1, 12.0, held)}


def test_swap_of_a_claim_to_a_processor_busy_until_later() -> None:
    # H was only claimed (starts at 2) and the cpu frees at 1: nothing is dispatched now, both are claims
    r, held, procs, work = _swap_case(r_target=15.0, h_start=2.0, cpu_ready=1.0)
    assert swap_slot(r, [(0, 10.0)], 15.0, work, procs, k_local=K, now_ms=0.0)
    assert work.out == [] and procs.ready == [12.0, 13.0]
    assert work.placed == {"rs": (-1, 0, 12.0, r), "hs": (-1, 1, 13.0, held)}


def test_the_holder_moves_only_in_time_for_its_own_effective_deadline() -> None:
    # H on the cpu: 0 + 1.2 x 12 = 14.4 against its deadline less its downstream time
    r, _, procs, work = _swap_case(h_deadline=20.0, h_down=5.6)
    assert swap_slot(r, [(0, 10.0)], 12.0, work, procs, k_local=K, now_ms=0.0)
    r, _, procs, work = _swap_case(h_deadline=20.0, h_down=6.0)
    assert not swap_slot(r, [(0, 10.0)], 12.0, work, procs, k_local=K, now_ms=0.0)
    assert work.out == [Assignment(1, "gpu")] and procs.ready == [10.0, 0.0]


def test_no_swap_when_the_request_would_be_late_on_the_holders_processor_too() -> None:
    r, _, procs, work = _swap_case(r_target=11.9)
    assert not swap_slot(r, [(0, 10.0)], 11.9, work, procs, k_local=K, now_ms=0.0)
    assert work.placed == {"hs": (0, 0, 10.0, work.last[0])}
