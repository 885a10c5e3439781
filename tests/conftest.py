"""Shared fixtures: generated model files and the MediaPipe models."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgert import models as zoo
from edgert.testing import genmodels


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every generated network written as .onnx and .tflite (seed 0)."""
    d = tmp_path_factory.mktemp("genmodels")
    for name in genmodels.NAMES:
        genmodels.save(name, d)
    return d


@pytest.fixture(scope="session")
def mediapipe_dir() -> Path:
    """The verified MediaPipe models (downloaded from PyPI once, then cached)."""
    return next(iter(zoo.fetch("mediapipe").values())).parent
