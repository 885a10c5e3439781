"""ONNX Runtime CPU path on real generated models; placement and foreign-exception mapping."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from delegates._probe_models import onnx_probe
from delegates.base import Artifact
from delegates.onnxrt import OrtDelegate
from delegates.registry import get
from edgert.errors import DelegateUnavailable, InferenceError, ModelLoadError


def _reference(x: np.ndarray) -> np.ndarray:
    init = {t.name: numpy_helper.to_array(t) for t in onnx.load_from_string(onnx_probe()).graph.initializer}
    return np.tanh(np.maximum(x @ init["W1"], 0) @ init["W2"])


def test_cpu_session_runs_and_matches_numpy() -> None:
    s = get("ort-cpu").open(Artifact("onnx", data=onnx_probe()))
    x = np.random.default_rng(1).standard_normal((1, 16)).astype(np.float32)
    (y,) = s.run([x])
    np.testing.assert_allclose(y, _reference(x), rtol=1e-5, atol=1e-6)
    assert s.inputs[0].name == "x" and s.inputs[0].shape == (1, 16)
    assert s.coverage == 1.0
    assert s.placement() and set(s.placement()) == {"CPUExecutionProvider"}


def test_generated_models_run_on_cpu() -> None:
    genmodels = pytest.importorskip("edgert.testing.genmodels")
    for name in ("tiny", "mlp", "multi_input", "stateful"):
        s = get("ort-cpu").open(Artifact("onnx", data=genmodels.build(name, "onnx")))
        feeds = genmodels.example_inputs(name)
        outs = s.run([feeds[i.name] for i in s.inputs])
        assert [o.shape for o in outs] == [tuple(d or 1 for d in o.shape) for o in s.outputs]
        assert all(np.isfinite(o).all() for o in outs)


def test_load_errors_are_model_load_errors(tmp_path) -> None:
    d = get("ort-cpu")
    with pytest.raises(ModelLoadError, match="does not exist"):
        d.open(Artifact("onnx", path=tmp_path / "missing.onnx"))
    with pytest.raises(ModelLoadError, match="could not load") as exc:
        d.open(Artifact("onnx", data=b"not an onnx model"))
    assert exc.value.__cause__ is not None


def test_run_errors_are_inference_errors() -> None:
    s = get("ort-cpu").open(Artifact("onnx", data=onnx_probe()))
    with pytest.raises(InferenceError, match="CPUExecutionProvider") as exc:
        s.run([np.zeros((1, 3), np.float32)])
    assert exc.value.__cause__ is not None


def test_unavailable_provider_open_raises_delegate_unavailable() -> None:
    d = OrtDelegate("t-fake-ep", "gpu", "NoSuchExecutionProvider")
    assert "not in this onnxruntime" in (d.probe() or "")
    with pytest.raises(DelegateUnavailable):
        d.open(Artifact("onnx", data=onnx_probe()))


#: An EP in every onnxruntime wheel that takes none of an ordinary model's nodes (it serves remote calls):
#: the real case of an accelerator EP whose session starts but runs nothing.
NO_NODES_EP = "AzureExecutionProvider"


def _no_nodes_ep() -> str:
    import onnxruntime as ort

    if NO_NODES_EP not in ort.get_available_providers():
        pytest.skip(f"this onnxruntime build has no {NO_NODES_EP}")
    return NO_NODES_EP


def test_an_accelerator_ep_that_takes_no_probe_node_is_unavailable() -> None:
    d = OrtDelegate("t-no-nodes", "gpu", _no_nodes_ep())
    assert "took none of the probe model's nodes" in (d.probe() or "")
    with pytest.raises(DelegateUnavailable, match="took none"):
        d.open(Artifact("onnx", data=onnx_probe()))


def test_a_session_whose_accelerator_ep_took_zero_nodes_is_refused() -> None:
    # the probe skipped: the per-model guard alone must refuse a "gpu" session that is all CPU
    d = OrtDelegate("t-no-nodes", "gpu", _no_nodes_ep(), probe_session=False)
    assert d.probe() is None
    with pytest.raises(ModelLoadError, match=r"took none of the \d+ nodes .* run this model on a cpu delegate"):
        d.open(Artifact("onnx", data=onnx_probe()))
