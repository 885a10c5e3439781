"""Serving options asked through the delegate options (``delegates.registry.configure``) and served by the live
runtime: IO binding on ORT's CPU EP is the CPU variant of the GPU path (the same ``BoundRunner`` code), checked
against the backend called directly; CUDA graphs and instances are refused on the CPU with the reason and the
fix; a refusal that depends on the model shows where the model landed (``rt.stats()[name]["excluded"]``).
The CUDA test runs only where ort-cuda is available (``hardware``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import edgert
from delegates._ort_bound import BoundOrtSession
from delegates._ort_serving import ServingOptions
from delegates.onnxrt import CPU_EP, OrtDelegate
from delegates.registry import configure, get
from delegates.sharing import SessionPool
from edgert.testing import genmodels
from edgert.testing.direct import contract_cases, direct_run

pytest.importorskip("onnxruntime")

GENERATED = ("mlp", "cnn", "multi_input", "stateful", "dynamic_batch")


@pytest.fixture()
def served() -> Iterator[None]:
    """Puts every ORT path's serving options back as they were (``configure`` changes process-wide paths)."""
    paths = [d for d in map(get, ("ort-cpu", "ort-cuda", "ort-tensorrt", "ort-tensorrt-dla"))
             if isinstance(d, OrtDelegate)]
    saved = [(d, d.serving) for d in paths]
    yield
    for d, s in saved:
        d.serving = s
        d.invalidate()


def _bound(s: object) -> bool:
    """The runtime's session is IO-bound: itself, or every session of its workers' pool."""
    if isinstance(s, SessionPool):
        return all(isinstance(x, BoundOrtSession) for x in s._all)
    return isinstance(s, BoundOrtSession)


@pytest.mark.parametrize("workers", [1, 2])
def test_io_binding_on_the_cpu_answers_as_the_backend_called_directly(
        served: None, tmp_path: Path, mediapipe_dir: Path, workers: int) -> None:
    configure({"ort-cpu": {"io_binding": True}})
    assert get("ort-cpu").serving == ServingOptions(io_binding=True)
    cases = [c for c in contract_cases(tmp_path, mediapipe_dir, GENERATED) if c[1].format == "onnx"]
    assert {label for label, *_ in cases} == {f"{n}.onnx" for n in GENERATED}
    with edgert.Runtime(delegates=["ort-cpu"], cpu_workers=workers) as rt:
        for label, art, feeds in cases:
            name = label.split(".")[0]
            model = rt.load(art.path, name=name, slo_ms=60_000.0)
            names, ref = direct_run(art, feeds)
            futures = [model.submit(feeds) for _ in range(6)]   # at once: both workers run it
            for f in futures:
                r = f.result()
                assert r.status == "ok", r.error
                assert list(r.outputs) == names
                for got, want in zip(r.outputs.values(), ref):
                    assert got.shape == want.shape and got.dtype == want.dtype, label
                    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=label)
            assert all(_bound(w.sessions[name][1]) for w in rt._dispatcher.workers), label


def test_io_binding_rebinds_when_the_shapes_change(served: None, tmp_path: Path) -> None:
    """Reused output buffers are per input shape: a batch of 3, then 1, then 3 again, each as direct."""
    configure({"ort-cpu": {"io_binding": True}})
    art_path = Path(genmodels.save("dynamic_batch", tmp_path)["onnx"])
    from delegates.base import Artifact

    art = Artifact("onnx", path=art_path)
    with edgert.Runtime(delegates=["ort-cpu"], cpu_workers=1) as rt:
        model = rt.load(art_path, name="db", slo_ms=60_000.0)
        for batch in (3, 1, 3, 5):
            feeds = genmodels.example_inputs("dynamic_batch", batch=batch)
            got = model(feeds)
            _, ref = direct_run(art, feeds)
            assert [g.shape[0] for g in got.values()] == [batch] * len(ref)
            for g, want in zip(got.values(), ref):
                np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("asked, option, fix", [
    ({"cuda_graph": True}, "cuda_graph=True", "pip install 'edgert[cuda]'"),
    ({"io_binding": True, "cuda_graph": True}, "cuda_graph=True", "CUDA or TensorRT execution provider"),
    ({"instances": 2}, "instances=2", "Runtime(cpu_workers=N)"),
    ({"max_batch": 4}, "max_batch=4", "leave max_batch out"),
])
def test_the_cpu_path_refuses_what_it_cannot_serve(served: None, asked: dict, option: str, fix: str) -> None:
    before = get("ort-cpu").serving
    with pytest.raises(edgert.ConfigError, match="ort-cpu cannot serve with " + option) as exc:
        configure({"ort-cpu": asked})
    assert fix in str(exc.value)
    assert get("ort-cpu").serving == before   # nothing half-applied


@pytest.mark.parametrize("bad", [{"io_binding": "yes"}, {"instances": 0}])
def test_a_serving_option_of_the_wrong_type_is_a_config_error(served: None, bad: dict) -> None:
    with pytest.raises(edgert.ConfigError, match="ort-cpu: ServingOptions"):
        configure({"ort-cpu": bad})


def test_gpu_paths_take_graphs_but_not_instances_the_worker_cannot_run(served: None) -> None:
    """Asked of ort-cuda (available here or not) graphs with IO binding are taken; a second instance is refused
    because the runtime's GPU worker runs one invocation at a time (the hook is the worker's capacity)."""
    configure({"ort-cuda": {"io_binding": True, "cuda_graph": True}})
    assert get("ort-cuda").serving == ServingOptions(io_binding=True, cuda_graph=True)
    with pytest.raises(edgert.ConfigError, match="one invocation at a time"):
        configure({"ort-cuda": {"instances": 2}})


class GraphsOnCpuDouble(OrtDelegate):
    """Test double: a path whose options already hold CUDA graphs (as ort-cuda's would) but whose EP is the CPU
    one, so opening a model reaches the per-model check on this host. Named as a double; not a GPU."""

    def __init__(self) -> None:
        super().__init__("graphs-on-cpu-double", "cpu", CPU_EP)
        self.serving = ServingOptions(io_binding=True, cuda_graph=True)


def test_a_per_model_refusal_shows_where_the_model_landed() -> None:
    data = genmodels.build("cnn", "onnx")
    double = GraphsOnCpuDouble()
    with edgert.Runtime(delegates=[double, "ort-cpu"], cpu_workers=1) as rt:
        rt.load(data, name="cnn")
        why = rt.stats()["cnn"]["excluded"]["graphs-on-cpu-double"]
        assert "cannot serve" in why and "cuda_graph=True" in why and "CUDA or TensorRT" in why
    with edgert.Runtime(delegates=[double], cpu_workers=1) as rt:
        with pytest.raises(edgert.ModelLoadError, match="cuda_graph=True"):
            rt.load(data, name="cnn")


@pytest.mark.hardware
def test_cuda_graphs_with_io_binding_on_a_gpu(served: None, tmp_path: Path) -> None:
    """Needs ort-cuda (onnxruntime-gpu, an NVIDIA GPU). Static shapes: graphs captured on the first run, every
    answer within tf32's tolerance of the CPU backend; a symbolic batch dimension: refused with the reason."""
    why = get("ort-cuda").probe()
    if why is not None:
        pytest.skip(f"ort-cuda is unavailable here: {why}")
    configure({"ort-cuda": {"io_binding": True, "cuda_graph": True}})
    from delegates.base import TOLERANCE, Artifact

    paths = {n: Path(genmodels.save(n, tmp_path / n)["onnx"]) for n in ("cnn", "dynamic_batch")}
    with edgert.Runtime(delegates=["ort-cuda"], cpu_workers=0) as rt:
        cnn = rt.load(paths["cnn"], name="cnn")
        feeds = genmodels.example_inputs("cnn")
        _, ref = direct_run(Artifact("onnx", path=paths["cnn"]), feeds)
        for _ in range(3):   # capture, then replays
            got = list(cnn(feeds).values())
            for g, want in zip(got, ref):
                span = float(want.max() - want.min()) or 1.0
                assert float(np.abs(g - want).max()) / span <= TOLERANCE["tf32"]
        with pytest.raises(edgert.ModelLoadError, match="static input shapes"):
            rt.load(paths["dynamic_batch"], name="db")


def test_a_refused_option_beside_serving_keys_changes_nothing(served: None) -> None:
    dla = get("ort-tensorrt-dla")
    assert isinstance(dla, OrtDelegate)
    before = (dla.serving, dict(dla.provider_options))
    with pytest.raises(edgert.ConfigError):
        configure({"ort-tensorrt-dla": {"io_binding": True, "force_fp32": True}})   # DLA has no fp32
    assert (dla.serving, dla.provider_options) == before
