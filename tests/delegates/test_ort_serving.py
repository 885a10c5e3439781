"""Serving options for ORT sessions (delegates/_ort_serving.py): what applies here, what is refused and why,
and the CPU runners (IO binding, same-model batching) against plain ``InferenceSession.run``, on generated
models. The GPU paths (device buffers, CUDA graphs, instances) need onnxruntime-gpu and a GPU: refused here.
"""

from __future__ import annotations

import numpy as np
import pytest

from delegates._ort_serving import (
    BoundRunner,
    ServingOptions,
    choose_instances,
    provider_options,
    refusals,
    run_batched,
)
from delegates.base import TensorSpec
from delegates.errors import InferenceError
from edgert.testing import genmodels
from edgert.testing.sized import cnn_at

ort = pytest.importorskip("onnxruntime")

BATCHED = (TensorSpec("x", (None, 64), np.dtype(np.float32)),)
FIXED = (TensorSpec("image", (1, 64, 64, 3), np.dtype(np.float32)),)
OUT = (TensorSpec("y", (None, 8), np.dtype(np.float32)),)


def _session(data: bytes):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("bad", [dict(instances=0), dict(max_batch=1.5), dict(io_binding=1), dict(instances=True)])
def test_options_are_checked(bad: dict) -> None:
    with pytest.raises(ValueError, match="ServingOptions"):
        ServingOptions(**bad)


def test_on_the_cpu_graphs_and_instances_are_refused_with_the_fix() -> None:
    got = refusals(ServingOptions(io_binding=True, cuda_graph=True, instances=2), "CPUExecutionProvider",
                   ["CPUExecutionProvider"], FIXED, OUT)
    assert set(got) == {"cuda_graph", "instances"}
    assert "CUDA or TensorRT" in got["cuda_graph"] and "onnxruntime-gpu" in got["cuda_graph"]
    assert "cpu_workers=N" in got["instances"]
    assert refusals(ServingOptions(io_binding=True), "CPUExecutionProvider", ["CPUExecutionProvider"], FIXED,
                    OUT) == {}   # IO binding applies on the CPU too (host buffers)


def test_on_a_gpu_provider_graphs_need_io_binding_and_static_shapes() -> None:
    cuda = "CUDAExecutionProvider"
    assert "io_binding=True" in refusals(ServingOptions(cuda_graph=True), cuda, [cuda], FIXED, OUT)["cuda_graph"]
    assert "static input shapes" in refusals(ServingOptions(io_binding=True, cuda_graph=True), cuda, [cuda],
                                             BATCHED, OUT)["cuda_graph"]
    assert refusals(ServingOptions(io_binding=True, cuda_graph=True, instances=2), cuda, [cuda], FIXED, OUT) == {}
    assert provider_options(ServingOptions(io_binding=True, cuda_graph=True), cuda) == {"enable_cuda_graph": "1"}
    assert provider_options(ServingOptions(io_binding=True, cuda_graph=True), "TensorrtExecutionProvider") == {
        "trt_cuda_graph_enable": "1"}
    assert provider_options(ServingOptions(), cuda) == {}


def test_batching_needs_a_symbolic_batch_dimension() -> None:
    why = refusals(ServingOptions(max_batch=4), "CPUExecutionProvider", [], FIXED, OUT)["max_batch"]
    assert why == ("tensor 'image' has a fixed batch dimension ([1, 64, 64, 3]): export the model with a symbolic "
                   "first dimension to batch it")
    assert refusals(ServingOptions(max_batch=4), "CPUExecutionProvider", [], BATCHED, OUT) == {}


@pytest.mark.parametrize("name", ["dynamic_batch", "cnn"])
def test_bound_runs_give_the_plain_runs_outputs_and_follow_shape_changes(name: str) -> None:
    data = genmodels.build(name, "onnx") if name != "cnn" else cnn_at(64)
    sess = _session(data)
    runner = BoundRunner(sess)
    feed_name = sess.get_inputs()[0].name
    for batch in (1, 1, 3, 1):          # the same shape twice (reused buffers), then a new one and back
        x = genmodels.example_inputs("dynamic_batch" if name == "dynamic_batch" else "cnn", seed=batch,
                                     batch=batch)
        x = next(iter(x.values())) if name == "dynamic_batch" else np.random.default_rng(batch).standard_normal(
            (batch, 64, 64, 3)).astype(np.float32)
        want = sess.run(None, {feed_name: x})
        got = runner.run([x])
        assert len(got) == len(want) and all(np.array_equal(g, w) for g, w in zip(got, want))
    first = runner.run([x])
    runner.run([x * 2.0])
    assert np.array_equal(first[0], sess.run(None, {feed_name: x})[0])   # a returned output is a copy


def test_a_failing_bound_run_raises_inference_error() -> None:
    sess = _session(genmodels.build("dynamic_batch", "onnx"))
    with pytest.raises(InferenceError, match="IO-bound run failed"):
        BoundRunner(sess).run([np.zeros((1, 3), np.float32)])


def test_run_batched_splits_back_what_one_by_one_gives() -> None:
    sess = _session(genmodels.build("dynamic_batch", "onnx"))

    def run(feeds):
        return sess.run(None, {"x": feeds[0]})

    reqs = [[np.random.default_rng(k).standard_normal((1 + k % 2, 64)).astype(np.float32)] for k in range(5)]
    got = run_batched(run, reqs)
    for r, g in zip(reqs, got):
        np.testing.assert_allclose(g[0], run(r)[0], rtol=1e-5, atol=1e-6)
    assert run_batched(run, reqs[:1])[0][0].shape == (1, 8)
    with pytest.raises(ValueError, match="same inputs"):
        run_batched(run, [[reqs[0][0]], [reqs[0][0], reqs[0][0]]])
    with pytest.raises(InferenceError, match="did not split back per request"):
        run_batched(lambda feeds: [np.zeros((1, 8))], reqs)


def test_choose_instances_takes_the_fewest_within_the_gain() -> None:
    assert choose_instances({1: 100.0, 2: 180.0, 3: 185.0, 4: 150.0}) == 2   # 3 is within 5 % of 2
    assert choose_instances({1: 100.0, 2: 101.0}) == 1
    with pytest.raises(ValueError):
        choose_instances({})
