"""LiteRT CPU path, partition coverage, and the CompiledModel accelerator paths."""

from __future__ import annotations

import numpy as np
import pytest

from delegates._probe_models import tflite_probe
from delegates.base import Artifact
from delegates.registry import get
from edgert.errors import DelegateUnavailable, InferenceError, ModelLoadError


def _fc_weights() -> np.ndarray:
    rng = np.random.default_rng(0)  # the probe model's weights, drawn the same way
    return (rng.standard_normal((8, 16)) * 0.2).astype(np.float32)


def test_xnnpack_session_runs_and_matches_numpy() -> None:
    s = get("litert-xnnpack").open(Artifact("tflite", data=tflite_probe()))
    x = np.random.default_rng(2).standard_normal((1, 16)).astype(np.float32)
    (y,) = s.run([x])
    np.testing.assert_allclose(y, np.tanh(x @ _fc_weights().T), rtol=1e-5, atol=1e-6)
    assert s.placement() == {"xnnpack": 2} and s.coverage == 1.0


def test_partition_is_reported_when_xnnpack_takes_part_of_the_graph() -> None:
    s = get("litert-xnnpack").open(Artifact("tflite", data=tflite_probe(unsupported_op=True)))
    assert s.placement() == {"xnnpack": 2, "cpu": 1}
    assert s.coverage == pytest.approx(2 / 3)
    x = np.random.default_rng(3).standard_normal((1, 16)).astype(np.float32)
    (y,) = s.run([x])
    np.testing.assert_allclose(y, np.tanh(np.cumsum(x @ _fc_weights().T, axis=1)), rtol=1e-5, atol=1e-6)


def test_generated_models_run_on_litert() -> None:
    genmodels = pytest.importorskip("edgert.testing.genmodels")
    for name in ("tiny", "mlp", "stateful"):
        s = get("litert-xnnpack").open(Artifact("tflite", data=genmodels.build(name, "tflite")))
        feeds = genmodels.example_inputs(name)
        outs = s.run([feeds[i.name] for i in s.inputs])
        assert all(np.isfinite(o).all() for o in outs)
        assert sum(s.placement().values()) > 0


def test_litert_errors_are_mapped() -> None:
    d = get("litert-xnnpack")
    with pytest.raises(ModelLoadError):
        d.open(Artifact("tflite", data=b"TFL3 but not really"))
    s = d.open(Artifact("tflite", data=tflite_probe()))
    with pytest.raises(InferenceError):
        s.run([np.zeros((2, 2, 2), np.float32)])


@pytest.mark.parametrize("name", ["litert-compiled-cpu", "litert-compiled-gpu", "litert-compiled-npu"])
def test_compiled_model_paths_run_or_say_why(name: str) -> None:
    d = get(name)
    reason = d.probe()
    if reason is not None:
        assert d.processor in ("gpu", "npu") and d.processor.upper() in reason
        with pytest.raises(DelegateUnavailable):
            d.open(Artifact("tflite", data=tflite_probe()))
        return
    s = d.open(Artifact("tflite", data=tflite_probe()))
    x = np.ones((1, 16), np.float32)
    (y,) = s.run([x])
    want = np.tanh(x @ _fc_weights().T)
    assert y.shape == want.shape == s.outputs[0].shape and y.dtype == want.dtype   # no broadcasting
    np.testing.assert_allclose(y, want, rtol=1e-2, atol=1e-2)


def test_a_compiled_run_that_comes_back_early_sleeps_before_its_read_one_that_ran_does_not(monkeypatch) -> None:
    # a GPU's run returns at once and LiteRT's output read then waits holding the GIL: the worker sleeps through
    # most of the run first (the GIL released); a CPU run ends inside the call, and nothing is slept
    import delegates.litert_compiled as compiled

    slept: list[float] = []
    monkeypatch.setattr(compiled.time, "sleep", slept.append)
    s = get("litert-compiled-cpu").open(Artifact("tflite", data=tflite_probe()))
    x = np.ones((1, 16), np.float32)
    s.run([x])
    assert slept == []   # nothing known of its runs yet
    s._run_s.clear()
    s._run_s.append(10.0)   # as if its runs took 10 s and this one came back at once
    s.run([x])
    assert len(slept) == 1 and 7.9 < slept[0] <= compiled.YIELD_SHARE * 10.0
    s._run_s.clear()
    s._run_s.append(1e-9)   # runs shorter than the call itself: it ran inside it
    s.run([x])
    assert len(slept) == 1
