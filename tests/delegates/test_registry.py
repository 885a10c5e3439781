"""Registry: every delegate path listed with a reason when unavailable; names resolve or fail clearly."""

from __future__ import annotations

import os

import pytest

from delegates import registry
from delegates._libraries import find_library
from delegates._native_capture import capture_native_stderr
from delegates.litert_accel import ExternalDelegate
from edgert.errors import ConfigError, DelegateUnavailable

#: Every path of docs/design.md §3 / issue 3 that must be listed on any host.
EXPECTED = {
    "litert-xnnpack": "cpu", "litert-gpu": "gpu", "litert-qnn-htp": "npu", "litert-qnn-gpu": "gpu",
    "litert-qnn-dsp": "dsp", "litert-hexagon": "dsp", "litert-compiled-cpu": "cpu", "litert-compiled-gpu": "gpu",
    "litert-compiled-npu": "npu",
    "ort-cpu": "cpu", "ort-xnnpack": "cpu", "ort-cuda": "gpu", "ort-tensorrt": "gpu", "ort-tensorrt-dla": "npu",
    "ort-nnapi": "npu", "ort-coreml": "gpu", "ort-coreml-ane": "npu", "ort-openvino-cpu": "cpu",
    "ort-openvino-gpu": "gpu", "ort-openvino-npu": "npu", "ort-qnn-htp": "npu", "ort-qnn-gpu": "gpu",
    "ort-webgpu": "gpu",
}


def test_every_path_is_listed_with_processor_backend_and_reason() -> None:
    infos = {i.name: i for i in registry.describe()}
    assert set(EXPECTED) <= set(infos)
    for name, kind in EXPECTED.items():
        info = infos[name]
        assert info.processor == kind, name
        assert info.backend in ("litert", "onnxruntime")
        d = info.as_dict()
        assert set(d) >= {"name", "processor", "backend", "available", "reason"}
        if not info.available:
            assert len(info.reason) > 15, f"{name} is unavailable without a concrete reason"
    assert {i.processor for i in infos.values()} >= {"cpu", "gpu", "dsp", "npu"}
    assert infos["ort-cpu"].available and infos["litert-xnnpack"].available and infos["litert-compiled-cpu"].available


def test_unavailable_by_name_raises_quickly_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    unavailable = [i for i in registry.describe() if not i.available]
    assert unavailable, "this test expects at least one path this host lacks"
    for info in unavailable:
        # quickly = from the cached probe (no new probe, which may open a model on a device): a
        # test double in place of the real probe fails the test if it is called
        d = registry.get(info.name)
        monkeypatch.setattr(d, "_probe", lambda name=info.name: pytest.fail(f"{name} was probed again"))
        with pytest.raises(DelegateUnavailable) as exc:
            registry.resolve([info.name])
        assert exc.value.name == info.name and exc.value.reason == info.reason
        assert info.name in str(exc.value)


def test_unknown_name_gets_did_you_mean() -> None:
    with pytest.raises(ConfigError, match="did you mean 'ort-cuda'"):
        registry.resolve(["ort-cdua"])
    with pytest.raises(ConfigError, match="unknown delegate"):
        registry.configure({"litert-gpuu": {"x": 1}})


def test_auto_returns_only_available_paths() -> None:
    auto = registry.resolve("auto")
    names = {d.name for d in auto}
    assert {"ort-cpu", "litert-xnnpack"} <= names
    assert all(d.probe() is None for d in auto)
    assert not any(getattr(d, "emulated", False) for d in auto), "an emulator must not pose as a processor"


def test_configure_passes_options_and_reprobes() -> None:
    d = registry.get("ort-cuda")
    before = dict(d.provider_options)
    try:
        registry.configure({"ort-cuda": {"device_id": 3, "arena_extend_strategy": "kSameAsRequested"}})
        assert d.provider_options["device_id"] == 3
        assert d.provider_options["arena_extend_strategy"] == "kSameAsRequested"
        assert registry.reprobe("ort-cuda") == d.probe()
    finally:
        d.provider_options.clear()
        d.provider_options.update(before)
        d.invalidate()


def test_external_delegate_reasons_name_the_library() -> None:
    missing = ExternalDelegate("t-missing", "gpu", "libedgert_no_such_delegate.so")
    reason = missing.probe()
    assert reason is not None and "libedgert_no_such_delegate.so not found" in reason
    with pytest.raises(DelegateUnavailable):
        missing.open(None)  # type: ignore[arg-type] - the probe fails before the artifact is looked at
    libm = find_library("libm.so.6") or find_library("libm.so")
    if libm is None:
        pytest.skip("no libm to stand in for a library that is not a delegate")
    not_a_delegate = ExternalDelegate("t-libm", "gpu", "libedgert_no_such_delegate.so", {"library": libm})
    assert "not a TFLite external delegate" in (not_a_delegate.probe() or "")


def test_capture_native_stderr_sees_fd_writes() -> None:
    with capture_native_stderr() as log:
        os.write(2, b"ERROR: [x.cc:1] backend exploded\n")
        os.write(1, b"chatter on stdout\n")
    assert "backend exploded" in log.errors()
    assert "chatter on stdout" in log.text
