"""Real MediaPipe XR models through the runtime give exactly LiteRT's outputs."""

from __future__ import annotations

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter

import edgert
from edgert import models as zoo

RUNNABLE = sorted(n for n in zoo.MEDIAPIPE_MODELS if n not in zoo.CUSTOM_OP_MODELS)


def test_fetch_is_verified_and_cached(mediapipe_dir):
    assert set(zoo.verified(mediapipe_dir)) == set(zoo.MEDIAPIPE_MODELS)
    assert zoo.fetch("mediapipe", mediapipe_dir) == zoo.verified(mediapipe_dir)  # no second download
    with pytest.raises(edgert.ConfigError, match="did you mean 'mediapipe'"):
        zoo.fetch("mediapip")


def test_every_mediapipe_model_matches_litert_directly(mediapipe_dir):
    # bit for bit: pinned to LiteRT's own CPU path (a GPU path answers within its declared tolerance
    # instead: tests/delegates/test_contract.py)
    rng = np.random.default_rng(0)
    with edgert.Runtime(delegates=["litert-xnnpack"]) as rt:
        for name in RUNNABLE:
            path = mediapipe_dir / name
            m = rt.load(path)
            spec = m.inputs[0]
            x = rng.random(spec.concrete_shape(), dtype=np.float32)
            got = m(x)
            it = Interpreter(model_path=str(path), num_threads=1)
            it.allocate_tensors()
            it.set_tensor(it.get_input_details()[0]["index"], x)
            it.invoke()
            want = [it.get_tensor(d["index"]) for d in it.get_output_details()]
            assert len(got) == len(want), name
            for g, w in zip(got.values(), want):
                assert g.shape == w.shape and g.dtype == w.dtype, name   # no broadcasting
                np.testing.assert_array_equal(g, w, err_msg=name)


def test_custom_op_model_is_a_clear_load_error(mediapipe_dir):
    with edgert.Runtime() as rt, pytest.raises(edgert.ModelLoadError, match="face_landmark_with_attention"):
        rt.load(mediapipe_dir / "face_landmark_with_attention.tflite")
