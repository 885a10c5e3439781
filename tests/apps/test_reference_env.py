"""apps.xr.reference's plumbing: where MediaPipe's venv comes from, and the wire its answers cross."""

from __future__ import annotations

from multiprocessing import Pipe

import numpy as np
import pytest

from apps.xr import reference


def test_a_named_interpreter_that_is_no_python_is_refused_saying_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGERT_REFERENCE_PYTHON", "/bin/false")
    with pytest.raises(reference.ReferenceUnavailable, match=r"EDGERT_REFERENCE_PYTHON=/bin/false is not a Python"):
        reference.base_python()


def test_the_venv_lives_in_the_cache_named_by_version(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("EDGERT_CACHE", str(tmp_path))
    assert reference.venv_dir("3.12") == tmp_path / "reference" / "mediapipe-0.10.14-py3.12"


def test_arrays_and_the_head_cross_the_wire_unchanged() -> None:
    a, b = Pipe()
    arrays = [np.arange(63, dtype=np.float32).reshape(21, 3), np.zeros((4, 5), np.uint8)]
    try:
        reference._send(a, {"hands": 1, "handedness": ["Left"]}, arrays)
        head, got = reference._recv(b)
    finally:
        a.close()
        b.close()
    assert head == {"hands": 1, "handedness": ["Left"], "arrays": 2}
    assert all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(arrays, got))
