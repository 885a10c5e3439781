"""The output contract, on every path this host has: a session answers as the backend itself does.

Every available delegate path (``litert-compiled-cpu`` among them on any host) runs real models
of both formats — the MediaPipe ``.tflite`` models (held out: nothing in edgert was tuned on their
outputs) and the generated ONNX / TFLite networks — on one deterministic input, and is compared
with the backend called directly (``ai_edge_litert.interpreter.Interpreter``, or
``onnxruntime.InferenceSession`` on its CPU EP): identical output names, shapes and dtypes
(compared as tuples, never through numpy broadcasting, which let flat (N,) outputs pass as (1, N)),
and values within the path's declared tolerance of each output's range
(:data:`delegates.base.TOLERANCE`: 1e-4 for fp32). Which paths run comes from the probe, so the
same test checks ``litert-compiled-gpu`` and ``ort-cuda`` on a GPU host.

A path may refuse a model at load (``ModelLoadError`` with a reason: ops its accelerator does not
take, dynamic shapes), and a path below fp32 is refused a model at load by the runtime's default
accuracy check (:mod:`edgert._core._accuracy`) when its answer is off; a path that loads a model must
keep the contract.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from delegates.base import Artifact, Delegate
from delegates.errors import ModelLoadError
from delegates.registry import all_delegates
from edgert._core._accuracy import DEFAULT_TOLERANCE, AccuracyCheck, max_error
from edgert.testing import genmodels
from edgert.testing.direct import contract_break, contract_cases

GENERATED = ("mlp", "cnn", "multi_input", "stateful", "dynamic_batch")


def available(fmt: str) -> list[Delegate]:
    """Every path this host can run that opens ``fmt`` (the probe decides, emulators included)."""
    return [d for d in all_delegates().values() if fmt in d.formats and d.probe() is None]


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Path]]:
    root = tmp_path_factory.mktemp("contract")
    return {n: genmodels.save(n, root / n) for n in GENERATED}


def check(d: Delegate, label: str, art: Artifact, feeds: dict[str, np.ndarray]) -> str | None:
    """None when ``d`` keeps the contract on the model, "refused: …" when it refused it at load;
    fails the test when it answers differently from the backend."""
    try:
        s = d.open(art, threads=1)
    except ModelLoadError as exc:
        assert str(exc), f"{d.name} refused {label} without a reason"
        return f"refused: {exc}"
    if s.precision != "fp32":   # what rt.load does by default: the check refuses the path, saying why
        why = AccuracyCheck(label, [art], DEFAULT_TOLERANCE, None, None, every_path=False)(d, s)
        if why is not None:
            s.close()
            assert why, f"{d.name} was refused {label} without a reason"
            return f"refused by the accuracy check: {why}"
    try:
        got = s.run([feeds[spec.name] for spec in s.inputs])
    finally:
        s.close()
    err, broke = contract_break(s, got, art, feeds)
    assert not broke, f"{d.name} on {label}: {broke}"
    return None


def test_every_available_path_keeps_the_output_contract_on_both_formats(tmp_path: Path, mediapipe_dir: Path) -> None:
    all_cases = contract_cases(tmp_path, mediapipe_dir, GENERATED)
    assert {a.format for _, a, _ in all_cases} == {"tflite", "onnx"}
    ran: dict[str, int] = {}
    refused: list[str] = []
    for label, art, feeds in all_cases:
        for d in available(art.format):
            why = check(d, label, art, feeds)
            if why is None:
                ran[d.name] = ran.get(d.name, 0) + 1
            else:
                refused.append(f"{d.name} on {label}: {why}")
    paths = {d.name for fmt in ("tflite", "onnx") for d in available(fmt)}
    assert {"litert-xnnpack", "litert-compiled-cpu", "ort-cpu"} <= paths
    assert set(ran) == paths, f"paths that kept no model: {paths - set(ran)}; refusals: {refused}"


def test_the_shape_comparison_does_not_broadcast() -> None:
    """The bug this suite exists for: a flat (N,) output against a (1, N) reference. A value
    comparison that broadcasts passes it; the contract's shape check fails it."""
    ref = [np.arange(6, dtype=np.float32).reshape(1, 6)]
    flat = [np.arange(6, dtype=np.float32)]
    assert np.allclose(flat[0], ref[0])   # broadcasting: (6,) against (1, 6) compares equal
    from delegates.base import TensorSpec

    err, broke = max_error(flat, ref, (TensorSpec("y", (1, 6), np.dtype(np.float32)),))
    assert broke and "shape [6]" in broke and err == np.inf


def test_flat_buffers_are_reshaped_and_wrong_sizes_refused() -> None:
    from delegates.base import TensorSpec, conform
    from delegates.errors import InferenceError

    spec = (TensorSpec("y", (1, 2, 3), np.dtype(np.float32)),)
    (y,) = conform([np.zeros(6, np.float32)], spec, "t")
    assert y.shape == (1, 2, 3)
    with pytest.raises(InferenceError, match="shape \\[5\\]"):
        conform([np.zeros(5, np.float32)], spec, "t")
    with pytest.raises(InferenceError, match="float64"):
        conform([np.zeros(6, np.float64)], spec, "t")


@pytest.mark.hardware
def test_gpu_paths_keep_the_contract_and_run_on_the_gpu(tmp_path: Path, mediapipe_dir: Path) -> None:
    """Where a GPU path exists: it loads at least one MediaPipe model with every node on the GPU
    and answers within its declared tolerance (the contract above checks the values)."""
    gpu = [d for d in all_delegates().values() if d.processor == "gpu" and d.probe() is None]
    if not gpu:
        pytest.skip("no GPU path on this host (edgert devices says why)")
    for d in gpu:
        kept = 0
        for label, art, feeds in contract_cases(tmp_path, mediapipe_dir, GENERATED):
            if art.format not in d.formats:
                continue
            if check(d, label, art, feeds) is None:
                s = d.open(art)
                mine = {d.processor, getattr(d, "provider", ""), getattr(d, "engine", "")}
                placed = {k: v for k, v in s.placement().items() if k in mine}
                assert s.coverage > 0 and placed and all(v > 0 for v in placed.values()), (d.name, s.placement())
                s.close()
                kept += 1
        assert kept, f"{d.name} took none of the models"


@pytest.mark.hardware
def test_the_runtime_places_work_on_the_gpu_and_says_its_precision(generated) -> None:
    """Where a GPU path exists, ``delegates="gpu"`` runs a model there and each Result carries the
    path's declared precision; outputs keep the declared shapes."""
    import edgert

    gpu = [d for d in all_delegates().values()
           if d.processor == "gpu" and not d.software and d.probe() is None and d.in_auto]
    if not gpu:
        pytest.skip("no hardware GPU path on this host (edgert devices says why; a software adapter is "
                    "tested by name in test_software_gpu.py)")
    x = genmodels.example_inputs("cnn")
    with edgert.Runtime(delegates="gpu", cpu_workers=0) as rt:
        m = rt.load([generated["cnn"]["onnx"], generated["cnn"]["tflite"]], name="cnn", tolerance=5e-2)
        res = [m.submit(x).result(30) for _ in range(5)]
    by_name = {d.name: d for d in gpu}
    for r in res:
        assert r.status in ("ok", "late") and r.processor == "gpu", r
        assert r.precision == by_name[r.delegate].precision
        assert r.outputs["logits"].shape == (1, 10)
