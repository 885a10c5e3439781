"""Fixtures for the XR pipeline tests: real photos from PyPI wheels (cached), one runtime per module."""

from __future__ import annotations

import numpy as np
import pytest

import edgert
from apps.xr import assets


@pytest.fixture(scope="session")
def photos() -> dict[str, np.ndarray]:
    """The pinned photos (uint8 RGB) plus the zidane.jpg hand crop."""
    imgs = {n: assets.read_rgb(p) for n, p in assets.fetch_photos().items()}
    imgs["zidane_hand"] = assets.hand_photo()
    return imgs


@pytest.fixture(scope="module")
def rt():
    """A runtime with the default processors (closed after the module)."""
    with edgert.Runtime() as r:
        yield r
