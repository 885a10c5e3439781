"""A model's inputs: what passes the inline check as given, what the full check converts, and the errors that
name the input and the fix, raised before anything is queued."""

from __future__ import annotations

import numpy as np
import pytest

import edgert
from edgert.testing import genmodels


@pytest.fixture()
def rt():
    with edgert.Runtime(delegates=["litert-xnnpack", "ort-cpu"]) as r:
        yield r


def test_bad_inputs_raise_before_queueing(rt, model_dir):
    m = rt.load(model_dir / "tiny.tflite")
    x = genmodels.example_inputs("tiny")["x"]
    with pytest.raises(edgert.InputError, match=r"expects shape float32\[1,64\], got \[1, 63\]"):
        m(np.zeros((1, 63), np.float32))
    with pytest.raises(edgert.InputError, match=r"astype\(np.float32\)"):
        m(x.astype(np.float64))
    with pytest.raises(edgert.InputError, match="has no input 'X'; did you mean 'x'"):
        m({"X": x})
    with pytest.raises(edgert.InputError, match="takes 1 input"):
        m([x, x])
    with pytest.raises(edgert.InputError, match="is missing input"):   # an empty dict names what is missing
        m({})
    assert rt.stats()["tiny"]["requests"] == 0
    np.testing.assert_array_equal(m(x)["y"], m(x)["y"])  # still serving


def test_inputs_the_inline_check_passes_go_as_given_and_the_rest_get_the_full_check(rt, model_dir):
    m = rt.load(model_dir / "tiny.onnx")
    x = genmodels.example_inputs("tiny")["x"]
    assert m._loaded.feeds({"x": x})[0] is x   # ready: no copy
    strided = np.zeros((1, 128), np.float32)[:, ::2]   # the right shape and dtype, not contiguous: copied
    strided[:] = x
    fed = m._loaded.feeds({"x": strided})[0]
    assert fed.flags.c_contiguous and fed is not strided
    np.testing.assert_array_equal(m({"x": strided})["y"], m({"x": x})["y"])
    with pytest.raises(edgert.InputError, match=r"astype\(np.float32\)"):
        m({"x": x.astype(">f4")})   # float32 in the other byte order is another dtype
    with pytest.raises(edgert.InputError, match=r"expects shape float32\[1,64\], got \[64\]"):
        m({"x": x[0]})
    with pytest.raises(edgert.InputError, match="has no input 'z'"):
        m({"x": x, "z": x})
    with pytest.raises(edgert.InputError, match="must be a numpy array"):
        m({"x": "x"})
    np.testing.assert_array_equal(m({"x": x.tolist()})["y"], m(x)["y"])   # a nested list converts
