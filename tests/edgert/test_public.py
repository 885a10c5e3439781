"""The public namespace is what edgert exports; models are found through edgert.models.path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import edgert

ROOT = Path(__file__).resolve().parents[2]

EXPORTS = {
    "ConfigError", "DelegateUnavailable", "EdgeRTError", "Frame", "InferenceError", "InputError", "Model",
    "ModelLoadError", "OffloadError", "RequestDropped", "Result", "Runtime", "Stream", "StreamFrame", "TraceError", "__version__",
    "errors", "models",
}


def test_the_export_list_is_the_public_namespace() -> None:
    """In a fresh interpreter (here, other tests import subpackages such as edgert.testing)."""
    assert set(edgert.__all__) == EXPORTS
    out = subprocess.run([sys.executable, "-c", "import edgert; print(' '.join(dir(edgert)))"],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout
    public = {n for n in out.split() if not n.startswith("_")}
    assert public == EXPORTS - {"__version__"}, f"unexpected public names: {public ^ (EXPORTS - {'__version__'})}"


def test_error_classes_print_their_public_path() -> None:
    for name in EXPORTS:
        obj = getattr(edgert, name)
        if isinstance(obj, type) and issubclass(obj, edgert.EdgeRTError):
            assert f"{obj.__module__}.{obj.__qualname__}" == f"edgert.{name}"


def test_public_classes_print_their_public_path() -> None:
    for name in ("Frame", "Model", "Result", "Runtime", "Stream", "StreamFrame"):
        cls = getattr(edgert, name)
        assert cls.__module__ == "edgert" and f"{cls.__module__}.{cls.__qualname__}" == f"edgert.{name}"


def test_a_result_pickles_by_its_public_path() -> None:
    import pickle

    res = edgert.Result(None, "dropped", "", "", 1.0, 1.0, None, "hand", 7)
    assert pickle.loads(pickle.dumps(res)) == res


def test_models_path_finds_a_fetched_model(mediapipe_dir: Path) -> None:
    p = edgert.models.path("palm_detection_lite", directory=mediapipe_dir)
    assert p == mediapipe_dir / "palm_detection_lite.tflite" and p.is_file()
    assert edgert.models.path("palm_detection_lite.tflite", directory=mediapipe_dir) == p
    assert "palm_detection_lite" in edgert.models.names()


def test_models_path_suggests_a_close_name() -> None:
    with pytest.raises(edgert.ConfigError, match="did you mean 'palm_detection_lite'"):
        edgert.models.path("palm_detection_lit")


def test_models_path_without_fetching_says_how_to_fetch(tmp_path: Path) -> None:
    with pytest.raises(edgert.ConfigError, match="edgert models fetch mediapipe"):
        edgert.models.path("palm_detection_lite", directory=tmp_path, fetch_missing=False)


def test_loading_a_bare_zoo_name_says_where_the_models_are(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with edgert.Runtime(delegates=["litert-xnnpack"], cpu_workers=1) as rt, \
            pytest.raises(edgert.ModelLoadError) as info:
        rt.load("palm_detection_lite.tflite")
    msg = str(info.value)
    assert str(edgert.models.default_dir()) in msg and "edgert.models.path('palm_detection_lite')" in msg
