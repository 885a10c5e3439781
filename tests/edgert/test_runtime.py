"""The runtime's public API on real backends (ORT, LiteRT) with generated models."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import ClassVar

import numpy as np
import onnxruntime as ort
import pytest
from ai_edge_litert.interpreter import Interpreter

import edgert
from delegates.base import Delegate, Session
from delegates.onnxrt import OrtDelegate
from edgert.testing import genmodels
from edgert._core._run import HANDOFF_NAP_S, HANDOFF_WAIT_MS
from scheduler.profile import DeviceProfile, ProcessorSpec
from scheduler.types import Assignment, SchedulerView


def direct_ort(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def direct_litert(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    it = Interpreter(model_path=str(path), num_threads=1)
    it.allocate_tensors()
    for d in it.get_input_details():
        it.set_tensor(d["index"], feeds[d["name"]])
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


@pytest.fixture()
def rt():
    # the backends' own CPU paths: outputs are compared bit for bit with ORT / LiteRT called directly
    # (on a GPU host "auto" would pick ort-cuda, which answers within its declared tolerance only)
    with edgert.Runtime(delegates=["litert-xnnpack", "ort-cpu"]) as r:
        yield r


@pytest.mark.parametrize("name", ["tiny", "mlp", "cnn", "multi_input", "stateful"])
@pytest.mark.parametrize("fmt", ["onnx", "tflite"])
def test_outputs_identical_to_direct_backend(rt, model_dir, name, fmt):
    path = model_dir / f"{name}.{fmt}"
    m = rt.load(path, name=name)
    feeds = genmodels.example_inputs(name)
    out = m(feeds)
    ref = (direct_ort if fmt == "onnx" else direct_litert)(path, feeds)
    assert list(out) == [o.name for o in m.outputs]
    for got, want in zip(out.values(), ref):
        np.testing.assert_array_equal(got, want)


def test_inputs_as_array_list_dict_and_python_scalar(rt, model_dir):
    tiny = rt.load(model_dir / "tiny.onnx")
    x = genmodels.example_inputs("tiny")["x"]
    a, b, c = tiny(x)["y"], tiny([x])["y"], tiny({"x": x})["y"]
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    mi = rt.load(model_dir / "multi_input.tflite")
    feeds = genmodels.example_inputs("multi_input")
    ref = mi(feeds)["y"]
    np.testing.assert_array_equal(mi([feeds["a"], feeds["b"], int(feeds["k"])])["y"], ref)


def test_dynamic_batch(rt, model_dir):
    for fmt in ("onnx", "tflite"):
        m = rt.load(model_dir / f"dynamic_batch.{fmt}", name=f"db_{fmt}")
        for n in (1, 7, 3):
            x = genmodels.example_inputs("dynamic_batch", batch=n)
            assert m(x)["y"].shape == (n, 8)


def test_stateful_model_passes_state_in_and_out(rt, model_dir):
    m = rt.load([model_dir / "stateful.onnx", model_dir / "stateful.tflite"], name="gru")
    feeds = genmodels.example_inputs("stateful")
    h = np.zeros_like(feeds["h_prev"])
    states = []
    for _ in range(4):
        out = m({"x": feeds["x"], "h_prev": h})
        h = out["h_next"]
        states.append(h)
    assert not np.allclose(states[0], states[-1])


def test_model_with_both_formats_picks_per_processor(rt, model_dir):
    m = rt.load([model_dir / "cnn.onnx", model_dir / "cnn.tflite"], name="cnn")
    res = m.submit(genmodels.example_inputs("cnn")).result()
    assert res.status in ("ok", "late") and res.delegate in ("ort-cpu", "litert-xnnpack")
    assert set(rt.estimator.as_table()["cnn"]) == set(rt.processors)


def test_submit_and_async(rt, model_dir):
    m = rt.load(model_dir / "mlp.onnx", slo_ms=1000.0)
    x = genmodels.example_inputs("mlp")
    futs = [m.submit(x) for _ in range(50)]
    results = [f.result(timeout=10) for f in futs]
    assert {r.status for r in results} == {"ok"}
    assert all(r.processor in rt.processors and r.latency_ms >= r.queued_ms >= 0 for r in results)
    out = asyncio.run(m.infer_async(x))
    np.testing.assert_array_equal(out["y"], results[0].outputs["y"])


def test_model_load_errors(rt, tmp_path):
    with pytest.raises(edgert.ModelLoadError, match="does not exist"):
        rt.load(tmp_path / "nope.tflite")
    bad = tmp_path / "corrupt.onnx"
    bad.write_bytes(b"\x00garbage" * 10)
    with pytest.raises(edgert.ModelLoadError, match="corrupt.onnx"):
        rt.load(bad)
    bad2 = tmp_path / "corrupt.tflite"
    bad2.write_bytes(b"\x00garbage" * 10)
    with pytest.raises(edgert.ModelLoadError, match="corrupt.tflite"):
        rt.load(bad2)
    with pytest.raises(edgert.ModelLoadError, match="cannot tell the format"):
        rt.load(tmp_path / "model.bin")


def test_model_raising_inside_backend_fails_alone(rt, model_dir):
    m = rt.load(model_dir / "raises.onnx")
    ok = rt.load(model_dir / "tiny.onnx")
    x = genmodels.example_inputs("raises")["x"]
    with pytest.raises(edgert.InferenceError, match="onnxruntime.*failed running.*raises.onnx"):
        m({"x": x, "fail": np.int64(3)})
    res = m.submit({"x": x, "fail": np.int64(2)}).result()
    assert res.status == "failed" and isinstance(res.error, edgert.InferenceError)
    assert m({"x": x, "fail": np.int64(0)})["y"].shape == (4, 4)
    ok(genmodels.example_inputs("tiny"))
    assert rt.stats()["raises"]["failed"] == 2


def test_unknown_names_say_did_you_mean(model_dir):
    with pytest.raises(edgert.ConfigError, match="did you mean 'round_robin'"):
        edgert.Runtime(scheduler="round_robbin")
    with pytest.raises(edgert.ConfigError, match="did you mean 'ort-cpu'"):
        edgert.Runtime(delegates=["ort-cpv"])
    with edgert.Runtime() as rt, pytest.raises(edgert.ConfigError, match="did you mean"):
        rt.load(model_dir / "tiny.onnx", delegates=["litert-xnpack"])


def test_unavailable_delegate_fails_fast(model_dir):
    from delegates.registry import describe

    # which path this host lacks comes from the probe (ort-cuda exists on a GPU host)
    missing = next(i.name for i in describe() if not i.available and "onnx" in i.formats)
    with pytest.raises(edgert.DelegateUnavailable, match=f"{missing}.*unavailable"):
        edgert.Runtime(delegates=["ort-cpu", missing])
    with edgert.Runtime() as rt:
        with pytest.raises(edgert.DelegateUnavailable):
            rt.load(model_dir / "tiny.onnx", delegates=[missing])
        m = rt.load(model_dir / "tiny.onnx", delegates=["ort-cpu"])
        m(genmodels.example_inputs("tiny"))


def test_cpu_workers_and_delegate_subset(model_dir):
    with edgert.Runtime(delegates=["litert-xnnpack"], cpu_workers=1) as rt:
        assert rt.processors == ["cpu0"]
        with pytest.raises(edgert.ModelLoadError, match="no delegate here takes onnx"):
            rt.load(model_dir / "tiny.onnx")
        m = rt.load(model_dir / "tiny.tflite")
        assert m.submit(genmodels.example_inputs("tiny")).result().delegate == "litert-xnnpack"


def test_a_frames_budget_is_a_span_and_its_deadline_an_absolute_time():
    """``budget_ms`` (or DESIGN.md's ``deadline_ms=``, or positional): now + it is the frame's absolute deadline."""
    with edgert.Runtime(delegates=["ort-cpu"], cpu_workers=1) as rt:
        for opened in (rt.frame(50.0), rt.frame(budget_ms=50.0), rt.frame(deadline_ms=50.0)):
            with opened as f:
                assert f.deadline_ms == f.t_ms + 50.0 and f.t_ms <= rt.now_ms()


def test_frame_shares_deadline_and_trace_replays(tmp_path, model_dir):
    trace = tmp_path / "t.jsonl"
    with edgert.Runtime(trace=trace) as rt:
        det = rt.load(model_dir / "mlp.onnx", name="det", then=["lm"])
        lm = rt.load(model_dir / "tiny.tflite", name="lm")
        with rt.frame(deadline_ms=500.0) as f:
            r1 = det.submit(genmodels.example_inputs("mlp")).result()
        r2 = lm.submit(genmodels.example_inputs("tiny"), after=r1).result()
        r3 = lm.submit(genmodels.example_inputs("tiny")).result()
    assert r1.deadline_ms == r2.deadline_ms == pytest.approx(f.deadline_ms)
    assert (r1.key, r2.key, r1.frame) == ("f0/det", "f0/lm", 0)
    lines = [ln for x in trace.read_text().splitlines() if "type" not in (ln := json.loads(x))]   # requests
    assert [x["id"] for x in lines] == ["f0/det", "f0/lm", r3.key]
    assert lines[1]["after"] == "f0/det" and lines[1]["t_ms"] == lines[0]["t_ms"]
    assert lines[0]["slo_ms"] == pytest.approx(500.0, abs=0.01)
    assert "slo_ms" not in lines[2] and all(x["p"] == 1.0 for x in lines)


def test_timeline_has_a_track_per_processor(tmp_path, model_dir):
    with edgert.Runtime(records=True) as rt:
        m = rt.load(model_dir / "cnn.tflite")
        for f in [m.submit(genmodels.example_inputs("cnn")) for _ in range(20)]:
            f.result()
        rt.write_timeline(tmp_path / "tl.json")
        procs = rt.processors
    ev = json.loads((tmp_path / "tl.json").read_text())["traceEvents"]
    names = {e["args"]["name"] for e in ev if e.get("name") == "thread_name"}
    assert set(procs) <= names
    assert sum(1 for e in ev if e.get("ph") == "X") == 20


class LeavesEverythingPending:
    """Test double policy: never places anything."""

    name: ClassVar[str] = "leaves_pending"

    def decide(self, view: SchedulerView, now_ms: float) -> list[Assignment]:
        return []


class Raises:
    """Test double policy: always raises."""

    name: ClassVar[str] = "raises"

    def decide(self, view: SchedulerView, now_ms: float) -> list[Assignment]:
        raise RuntimeError("boom")


@pytest.mark.bug_log_expected   # the Raises policy is a bug on purpose
def test_nothing_lost_when_policy_misbehaves(model_dir):
    x = genmodels.example_inputs("tiny")
    with edgert.Runtime(scheduler=LeavesEverythingPending()) as rt:
        m = rt.load(model_dir / "tiny.onnx")
        with pytest.raises(edgert.RequestDropped, match="left unplaced"):
            m(x)
        assert m.submit(x).result().status == "dropped"
    with edgert.Runtime(scheduler=Raises()) as rt:
        m = rt.load(model_dir / "tiny.onnx")
        res = m.submit(x).result()
        assert res.status == "failed" and "boom" in str(res.error)


def test_every_request_ends_exactly_once_under_load(model_dir):
    with edgert.Runtime() as rt:
        good = rt.load(model_dir / "cnn.onnx", slo_ms=5.0)
        bad = rt.load(model_dir / "raises.tflite")
        xr = genmodels.example_inputs("raises")
        futs = []
        for i in range(150):
            futs.append(good.submit(genmodels.example_inputs("cnn")))
            if i % 10 == 0:
                futs.append(bad.submit({"x": xr["x"], "fail": np.int64(1)}))
        results = [f.result(timeout=30) for f in futs]
        stats = rt.stats()
    assert len({r.id for r in results}) == len(futs)
    c = Counter(r.status for r in results)
    assert c["failed"] == 15 and c["ok"] + c["late"] + c["dropped"] == 150
    assert all(r.error is not None and "dropped" in str(r.error) for r in results if r.status == "dropped")
    assert sum(stats["cnn"][k] for k in ("ok", "late", "dropped", "failed")) == stats["cnn"]["requests"] == 150


def test_stats_fields_and_close(model_dir):
    rt = edgert.Runtime()
    m = rt.load(model_dir / "tiny.onnx", slo_ms=1000.0)
    for _ in range(10):
        m(genmodels.example_inputs("tiny"))
    s = rt.stats()["tiny"]
    assert {"requests", "ok", "late", "dropped", "failed", "p50_ms", "p99_ms", "slo_met_rate",
            "by_processor"} <= set(s)
    assert s["requests"] == 10 and s["slo_met_rate"] == 1.0 and sum(s["by_processor"].values()) == 10
    rt.close()
    with pytest.raises(edgert.EdgeRTError, match="closed"):
        m(genmodels.example_inputs("tiny"))


def test_duplicate_name_and_public_exports(rt, model_dir):
    rt.load(model_dir / "tiny.onnx")
    with pytest.raises(edgert.ConfigError, match="already loaded"):
        rt.load(model_dir / "tiny.tflite")
    assert set(edgert.__all__) == {
        "ConfigError", "DelegateUnavailable", "EdgeRTError", "Frame", "InferenceError", "InputError", "Model",
        "ModelLoadError", "OffloadError", "RequestDropped", "Result", "Runtime", "Stream", "StreamFrame", "TraceError",
        "__version__", "errors", "models"}


def test_profile_seeds_the_estimator_only_where_a_session_exists(tmp_path, model_dir):
    prof = DeviceProfile("host", [ProcessorSpec("cpu0", "cpu"), ProcessorSpec("gpu", "gpu")],
                         {"tiny": {"cpu0": 7.5, "gpu": 1.0}, "absent": {"cpu0": 3.0}},
                         sources={"latency_ms/*/*": "test double profile"})
    prof.save(tmp_path / "p.json")
    with edgert.Runtime(profile=tmp_path / "p.json", cpu_workers=2, delegates="cpu") as rt:   # no gpu session
        rt.load(model_dir / "tiny.onnx")
        table = rt.estimator.as_table()
    assert table == {"tiny": {"cpu0": 7.5, "cpu1": 7.5}}


def test_identical_cpu_workers_learn_one_estimate(model_dir):
    # cpu0 and cpu1 are one processor seen as two slots: a run on either moves both estimates, so
    # noise (or cache state) cannot make a policy believe one core is faster than the other
    with edgert.Runtime(cpu_workers=2, delegates="ort-cpu") as rt:
        m = rt.load(model_dir / "cnn.onnx", name="cnn")
        for w in rt._dispatcher.workers:
            rt.estimator.seed("cnn", w.name, 100.0 if w.name == "cpu0" else 50.0)
        res = m.submit(genmodels.example_inputs("cnn")).result()
        ran = res.processor
        table = rt.estimator.as_table()["cnn"]
    assert res.status == "ok" and ran in ("cpu0", "cpu1")
    # one moving average: the runner's EMA step (alpha 0.1) from its own seed with the run's measured
    # time (end - start = latency - queued), given to both
    seed = 100.0 if ran == "cpu0" else 50.0
    run_ms = res.latency_ms - res.queued_ms
    assert table["cpu0"] == table["cpu1"] == pytest.approx(seed + 0.1 * (run_ms - seed), rel=1e-9)


def test_submit_to_an_idle_worker_yields_the_gil_to_it(model_dir, monkeypatch):
    # A woken worker needs the GIL; without a yield it waits for the caller to block or for the
    # 5 ms switch interval, its processor idle. The spy (a test double around time.sleep) records
    # the caller's yields and still sleeps.
    import time as _time

    real_sleep = _time.sleep
    yields: list[float] = []

    def spy(s: float) -> None:
        yields.append(s)
        real_sleep(s)

    with edgert.Runtime(cpu_workers=2, delegates="ort-cpu") as rt:
        m = rt.load(model_dir / "cnn.onnx", name="cnn")
        feeds = genmodels.example_inputs("cnn")
        m(feeds)   # measured: later decisions place on a known estimate
        monkeypatch.setattr(_time, "sleep", spy)
        fut = m.submit(feeds)
        handed = list(yields)
        monkeypatch.setattr(_time, "sleep", real_sleep)
        res = fut.result()
    assert res.status == "ok"
    # it yielded, then napped at most HANDOFF_WAIT_MS in HANDOFF_NAP_S steps until the worker started
    assert handed and handed[0] == 0
    assert all(s <= HANDOFF_NAP_S for s in handed) and len(handed) <= 1 + HANDOFF_WAIT_MS / 1000 / HANDOFF_NAP_S

class FlakyGpuDelegate(Delegate):
    """Test double: a 'gpu' delegate that runs ORT on the CPU and fails at invoke time while ``broken``."""

    name, processor, backend, formats = "flaky-gpu-test-double", "gpu", "test", ("onnx",)

    def __init__(self) -> None:
        self.broken = False
        self._ort = OrtDelegate("ort-cpu", "cpu", "CPUExecutionProvider")

    def _probe(self) -> None:
        return None

    def open(self, artifact, threads=1):
        return FlakySession(self, self._ort.open(artifact, threads))


class FlakySession(Session):
    """Test double: forwards to a real ORT session unless its delegate is ``broken``."""

    def __init__(self, owner: FlakyGpuDelegate, inner: Session) -> None:
        self.owner, self.inner = owner, inner
        self.inputs, self.outputs = inner.inputs, inner.outputs

    def run(self, feeds):
        if self.owner.broken:
            raise edgert.InferenceError("test double: driver error on the gpu")
        return self.inner.run(feeds)


def test_accelerator_fault_is_replaced_elsewhere_and_marked_unhealthy(model_dir):
    gpu = FlakyGpuDelegate()
    prof = DeviceProfile("p", [ProcessorSpec("cpu0", "cpu"), ProcessorSpec("gpu", "gpu")],
                         {"tiny": {"cpu0": 50.0, "gpu": 0.01}})
    with edgert.Runtime(delegates=["ort-cpu", gpu], cpu_workers=1, profile=prof) as rt:
        m = rt.load(model_dir / "tiny.onnx", slo_ms=60_000.0)   # re-placing needs time left: never short of it
        x = genmodels.example_inputs("tiny")
        assert m.submit(x).result().processor == "gpu"
        gpu.broken = True
        res = m.submit(x).result()
        assert (res.status, res.processor) == ("ok", "cpu0")  # re-placed, not failed
        assert m.submit(x).result().processor == "cpu0"       # gpu kept out while unhealthy
        assert rt.stats()["tiny"]["failed"] == 0


def test_a_sync_call_whose_accelerator_faults_gets_its_outputs_from_the_re_placed_run(model_dir):
    gpu = FlakyGpuDelegate()   # (a sync caller runs the request on its own thread: no future until it is re-placed)
    prof = DeviceProfile("p", [ProcessorSpec("cpu0", "cpu"), ProcessorSpec("gpu", "gpu")],
                         {"tiny": {"cpu0": 50.0, "gpu": 0.01}})
    with edgert.Runtime(delegates=["ort-cpu", gpu], cpu_workers=1, profile=prof, records=True) as rt:
        m = rt.load(model_dir / "tiny.onnx", slo_ms=60_000.0)
        x = genmodels.example_inputs("tiny")
        first = m(x)
        gpu.broken = True
        again = m(x)
        records, stats = rt.records(), rt.stats()["tiny"]
    np.testing.assert_array_equal(again["y"], first["y"])
    assert [r.processor for r in records] == ["gpu", "cpu0"] and (stats["ok"], stats["failed"]) == (2, 0)
