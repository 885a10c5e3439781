"""What each request's Result and record say: ok vs late by the deadline, a cascade stage's inherited
deadline, the seed of an unmeasured pair, and every field of a dropped and a failed result (each test
kills a mutant that left the rest of the suite green)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import edgert
from edgert.testing import genmodels
from tests.edgert.test_runtime import LeavesEverythingPending, Raises


def test_a_request_is_ok_by_its_deadline_and_late_after_it(model_dir):
    # round_robin places whatever is not past its deadline at the decision (edgert's policy would drop a
    # request it cannot finish in time); a 1 ns SLO is still ahead at the decision, behind at the end
    with edgert.Runtime(scheduler="round_robin", delegates=["ort-cpu"], cpu_workers=1) as rt:
        x = genmodels.example_inputs("tiny")
        roomy = rt.load(model_dir / "tiny.onnx", name="roomy", slo_ms=600_000.0)
        tight = rt.load(model_dir / "tiny.onnx", name="tight", slo_ms=1e-6)
        ok, late = roomy.submit(x).result(), tight.submit(x).result()
        stats = rt.stats()
    assert (ok.status, late.status) == ("ok", "late")
    assert ok.arrival_ms + ok.latency_ms <= ok.deadline_ms and late.arrival_ms + late.latency_ms > late.deadline_ms
    assert late.ok and late.outputs is not None                      # late still delivers its outputs
    np.testing.assert_array_equal(late.outputs["y"], ok.outputs["y"])
    assert (stats["roomy"]["ok"], stats["roomy"]["late"], stats["roomy"]["slo_met_rate"]) == (1, 0, 1.0)
    assert (stats["tight"]["ok"], stats["tight"]["late"], stats["tight"]["slo_met_rate"]) == (0, 1, 0.0)


def test_a_cascade_stage_outside_a_frame_inherits_its_parents_deadline(tmp_path, model_dir):
    trace = tmp_path / "t.jsonl"
    with edgert.Runtime(trace=trace, delegates=["ort-cpu"], cpu_workers=1) as rt:
        det = rt.load(model_dir / "mlp.onnx", name="det", slo_ms=50_000.0, then=["lm"])
        lm = rt.load(model_dir / "tiny.onnx", name="lm", slo_ms=90_000.0)   # its own SLO does not apply
        r1 = det.submit(genmodels.example_inputs("mlp")).result()
        r2 = lm.submit(genmodels.example_inputs("tiny"), after=r1).result()
        r3 = lm.submit(genmodels.example_inputs("tiny")).result()             # no parent: its own SLO
    assert r1.frame == r2.frame == -1
    assert r2.deadline_ms == r1.deadline_ms == pytest.approx(r1.arrival_ms + 50_000.0)
    assert r3.deadline_ms == pytest.approx(r3.arrival_ms + 90_000.0)
    lines = [ln for x in trace.read_text().splitlines() if "type" not in (ln := json.loads(x))]   # requests
    assert [x["id"] for x in lines] == [r1.key, r2.key, r3.key]
    assert lines[1]["after"] == r1.key and lines[1]["t_ms"] == lines[0]["t_ms"]   # at the parent's arrival


def _fails_on_zeros() -> bytes:
    """ONNX: y = Reshape(x, shape) with allowzero=1, so the zero-filled warm-up (shape [0, 0]) cannot run."""
    from onnx import TensorProto, helper

    g = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], allowzero=1)], "fails_on_zeros",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def test_an_unmeasured_model_is_seeded_at_1ms_and_learns_its_first_run(model_dir):
    # zeros cannot run it, so the warm-up measures nothing: the estimate starts at a 1 ms placeholder (a
    # policy must not drop it for a made-up latency) and the first real run replaces it outright
    with edgert.Runtime(delegates=["ort-cpu"], cpu_workers=2) as rt:
        m = rt.load(_fails_on_zeros(), name="unmeasured", format="onnx", slo_ms=500.0)
        assert rt.estimator.as_table()["unmeasured"] == {"cpu0": 1.0, "cpu1": 1.0}
        x = {"x": np.arange(4, dtype=np.float32).reshape(1, 4), "shape": np.array([2, 2], np.int64)}
        res = m.submit(x).result()
        table = rt.estimator.as_table()["unmeasured"]
    assert res.status == "ok", res.error
    np.testing.assert_array_equal(res.outputs["y"], x["x"].reshape(2, 2))
    run_ms = res.latency_ms - res.queued_ms
    assert table["cpu0"] == table["cpu1"] == pytest.approx(run_ms, rel=1e-9)   # the first run, not an EMA step


def _same_times(res, rec) -> None:
    """A Result and its record agree: arrival, deadline, frame; latency ends at the record's end."""
    assert (rec.id, rec.model, rec.status, rec.frame) == (res.id, res.model, res.status, res.frame)
    assert (rec.arrival_ms, rec.deadline_ms) == (res.arrival_ms, res.deadline_ms)
    assert rec.end_ms - rec.arrival_ms == pytest.approx(res.latency_ms, abs=1e-9)


def test_a_dropped_result_and_its_record_carry_every_field(model_dir):
    with edgert.Runtime(scheduler=LeavesEverythingPending(), delegates=["ort-cpu"], cpu_workers=1,
                        records=True) as rt:
        m = rt.load(model_dir / "tiny.onnx", name="tiny")
        with rt.frame(deadline_ms=10_000.0) as f:
            res = m.submit(genmodels.example_inputs("tiny")).result()
        (rec,) = rt.records()
    assert (res.status, res.outputs, res.processor, res.delegate, res.ok) == ("dropped", None, "", "", False)
    assert (res.model, res.id, res.frame, res.key) == ("tiny", 0, f.index, f"f{f.index}/tiny")
    assert res.deadline_ms == f.deadline_ms and 0 <= res.arrival_ms <= res.arrival_ms + res.latency_ms
    assert res.queued_ms == res.latency_ms >= 0                      # never ran: all of it was waiting
    assert isinstance(res.error, edgert.RequestDropped) and res.error.model == "tiny"
    assert "left unplaced by scheduler 'leaves_pending'" in res.error.reason
    _same_times(res, rec)
    assert rec.processor == "" and rec.reason == str(res.error)


@pytest.mark.bug_log_expected   # the second runtime's policy raises on purpose
def test_a_failed_result_and_its_record_carry_every_field(model_dir):
    with edgert.Runtime(delegates=["ort-cpu"], cpu_workers=1, records=True) as rt:
        m = rt.load(model_dir / "raises.onnx", name="raises", slo_ms=60_000.0)
        x = genmodels.example_inputs("raises")
        res = m.submit({"x": x["x"], "fail": np.int64(1)}).result()
        (rec,) = rt.records()
    assert (res.status, res.outputs, res.processor, res.delegate) == ("failed", None, "cpu0", "")
    assert (res.model, res.id, res.frame, res.key) == ("raises", 0, -1, "r0/raises")
    assert res.deadline_ms == pytest.approx(res.arrival_ms + 60_000.0)
    assert 0 <= res.queued_ms <= res.latency_ms                      # it started, then failed
    assert res.queued_ms == pytest.approx(rec.start_ms - rec.arrival_ms, abs=1e-9)
    assert isinstance(res.error, edgert.InferenceError) and "raises" in str(res.error)
    _same_times(res, rec)
    assert rec.processor == "cpu0" and rec.reason == str(res.error)
    with edgert.Runtime(scheduler=Raises(), delegates=["ort-cpu"], cpu_workers=1, records=True) as rt:  # never placed
        res = rt.load(model_dir / "tiny.onnx", name="tiny").submit(genmodels.example_inputs("tiny")).result()
        (rec,) = rt.records()
    assert (res.status, res.processor, res.queued_ms) == ("failed", "", res.latency_ms)
    assert type(res.error) is edgert.EdgeRTError and "scheduler 'raises' raised" in str(res.error)  # a bug of
    assert isinstance(res.error.__cause__, RuntimeError)                # ours, not a backend InferenceError
    _same_times(res, rec)


def test_a_completed_result_and_its_record_carry_every_field(model_dir):
    with edgert.Runtime(delegates=["ort-cpu"], cpu_workers=1, records=True) as rt:
        m = rt.load(model_dir / "tiny.onnx", name="tiny", slo_ms=60_000.0)
        with rt.frame(deadline_ms=50_000.0) as f:
            res = m.submit(genmodels.example_inputs("tiny")).result()
        (rec,) = [r for r in rt.records() if r.id == res.id]
    assert (res.status, res.processor, res.delegate, res.error, res.ok) == ("ok", "cpu0", "ort-cpu", None, True)
    assert list(res.outputs) == ["y"] and res.outputs["y"].shape == (1, 64)
    assert (res.model, res.frame, res.key, res.deadline_ms) == ("tiny", f.index, f"f{f.index}/tiny", f.deadline_ms)
    assert 0 <= res.queued_ms <= res.latency_ms and res.arrival_ms >= 0
    assert res.queued_ms == pytest.approx(rec.start_ms - rec.arrival_ms, abs=1e-9)
    _same_times(res, rec)
    assert (rec.model, rec.status, rec.processor, rec.frame, rec.reason) == ("tiny", "ok", "cpu0", f.index, "")


def test_completed_builds_the_same_frozen_result():
    from dataclasses import FrozenInstanceError

    from edgert._core._result import Result, completed

    values = ({"y": np.zeros(2)}, "late", "gpu", "litert-gpu", 3.5, 0.25, "m", 9, 7.0, 1.0, 4, "f4/m")
    fast = completed(*values)
    slow = Result(*values[:6], None, *values[6:])
    assert type(fast) is Result and repr(fast) == repr(slow)
    assert all(getattr(fast, f) == getattr(slow, f) for f in Result.__dataclass_fields__ if f != "outputs")
    with pytest.raises(FrozenInstanceError):
        fast.status = "ok"  # type: ignore[misc]


class RecordsDownstream:
    """Test double policy: places every request on the first processor, noting each model's downstream_ms."""

    name = "records_downstream"

    def __init__(self) -> None:
        self.seen: dict[str, float] = {}

    def decide(self, view, now_ms):   # noqa: ANN001
        from scheduler.types import Assignment

        for r in view.pending:
            self.seen[r.model] = r.downstream_ms
        return [Assignment(r.id, view.processors[0].name) for r in view.pending]


def test_a_stage_with_a_cascade_after_it_tells_the_policy_the_fastest_time_that_cascade_needs(model_dir):
    pol = RecordsDownstream()
    with edgert.Runtime(scheduler=pol, delegates=["ort-cpu"], cpu_workers=2) as rt:
        rt.load(model_dir / "tiny.onnx", name="lm")
        det = rt.load(model_dir / "mlp.onnx", name="det", then=["lm"])
        solo = rt.load(model_dir / "mlp.onnx", name="solo")
        rt.estimator.seed("lm", "cpu0", 7.0)
        rt.estimator.seed("lm", "cpu1", 3.0)
        assert det.submit(genmodels.example_inputs("mlp")).result().status == "ok"
        assert solo.submit(genmodels.example_inputs("mlp")).result().status == "ok"
    assert pol.seen == {"det": 3.0, "solo": 0.0}   # the fastest processor's estimate for lm; none after solo


def test_sync_calls_end_without_a_result_yet_every_end_is_counted_and_recorded(model_dir):
    # a sync call that ran on the caller's thread hands back its outputs with no Result, and stats fold from the
    # records every FOLD_EVERY ends: more than two folds here, then a read between folds, then submitted ones
    from edgert._core._run import FOLD_EVERY

    n = 2 * FOLD_EVERY + 3
    with edgert.Runtime(scheduler="round_robin", delegates=["ort-cpu"], cpu_workers=1, records=True) as rt:
        x = genmodels.example_inputs("tiny")
        roomy = rt.load(model_dir / "tiny.onnx", name="roomy", slo_ms=600_000.0)
        tight = rt.load(model_dir / "tiny.onnx", name="tight", slo_ms=1e-6)
        outs = [roomy(x) for _ in range(n)]
        late = tight(x)   # late: still its outputs
        between = rt.stats()
        submitted = [f.result() for f in [roomy.submit(x) for _ in range(5)]]
        stats, records = rt.stats(), rt.records()
    np.testing.assert_array_equal(late["y"], outs[0]["y"])
    np.testing.assert_array_equal(submitted[0].outputs["y"], outs[-1]["y"])
    assert (between["roomy"]["requests"], between["roomy"]["ok"], between["tight"]["late"]) == (n, n, 1)
    assert (stats["roomy"]["requests"], stats["roomy"]["ok"], stats["tight"]["requests"]) == (n + 5, n + 5, 1)
    assert sorted(r.id for r in records) == list(range(n + 6))   # every request once
    assert {r.status for r in records if r.model == "roomy"} == {"ok"} and records[n].status == "late"
    lat = [r.end_ms - r.arrival_ms for r in records if r.model == "roomy"]   # what the stats' percentiles are of
    assert stats["roomy"]["p50_ms"] == pytest.approx(float(np.percentile(lat, 50)))
    assert stats["roomy"]["p99_ms"] == pytest.approx(float(np.percentile(lat, 99)))
