"""Same-model requests as one batched invocation (issue 30): ``Session.max_batch``, ``batch_refusal`` and
``run_batch`` on LiteRT (XNNPACK) and ONNX Runtime (CPU EP) sessions.

The contract: a session that batches answers each request of a batch as a run of that request alone
does (names, shapes and dtypes identical, values within fp32 tolerance); one that does not reports
``max_batch == 1`` with the reason, and refuses a batch instead of running it one by one. Checked on the
MediaPipe models of the XR demo (held out: found by probing which batch, listed below) and on the
generated networks, which need no download.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from delegates._batching import run_requests
from delegates.base import BATCH_LIMIT, TOLERANCE, Artifact, Session
from delegates.errors import InferenceError, InputError
from delegates.litert import LiteRTDelegate
from delegates.onnxrt import CPU_EP, OrtDelegate
from delegates.sharing import SessionPool
from edgert.testing import genmodels

#: MediaPipe models whose graphs keep the batch first and each request to itself.
MP_BATCH = ("face_landmark", "hand_landmark_full", "hand_landmark_lite", "pose_landmark_full",
            "selfie_segmentation", "selfie_segmentation_landscape")
#: Those that do not, and the refusal's words: the detectors and iris reshape the batch into their
#: anchors; hand_recrop's answer for one request depends on the others.
MP_REFUSE = {"palm_detection_full": "folds the batch", "palm_detection_lite": "folds the batch",
             "pose_detection": "folds the batch", "face_detection_short_range": "folds the batch",
             "face_detection_full_range_sparse": "folds the batch", "iris_landmark": "folds the batch",
             "hand_recrop": "mixes requests across the batch"}
#: Generated networks (format -> which batch; the others' reason).
GEN_BATCH = {"tflite": ("tiny", "mlp", "cnn", "stateful", "dynamic_batch"), "onnx": ("dynamic_batch",)}
GEN_REFUSE = {("multi_input", "tflite"): "input 'k' (int64[]) has no batch dimension",
              ("raises", "tflite"): "input 'fail' (int64[]) has no batch dimension",
              ("cnn", "onnx"): "tensor 'image' has a fixed batch dimension ([1, 64, 64, 3]): export the model "
                               "with a symbolic first dimension to batch it"}


def _open(path: Path) -> Session:
    if path.suffix == ".onnx":
        pytest.importorskip("onnxruntime")
        return OrtDelegate("ort-cpu", "cpu", CPU_EP).open(Artifact("onnx", path=path), threads=1)
    return LiteRTDelegate().open(Artifact("tflite", path=path), threads=1)


def _requests(s: Session, k: int, seed: int = 10) -> list[list[np.ndarray]]:
    """``k`` distinct requests of batch 1 (other seeds than the session's own batch check)."""
    out = []
    for r in range(k):
        rng = np.random.default_rng(seed + r)
        out.append([rng.random(spec.concrete_shape(1), dtype=np.float32).astype(spec.dtype) for spec in s.inputs])
    return out


def assert_batch_keeps_contract(s: Session, reqs: list[list[np.ndarray]]) -> None:
    """``run_batch`` gives each request what its own ``run`` gives: same count, shapes, dtypes; values
    within fp32 tolerance of each output's range."""
    singles = [[np.array(o, copy=True) for o in s.run(r)] for r in reqs]
    batched = s.run_batch(reqs)
    assert len(batched) == len(reqs)
    for one, got in zip(singles, batched):
        assert len(got) == len(one) == len(s.outputs)
        for spec, a, b in zip(s.outputs, one, got):
            assert (b.shape, b.dtype) == (a.shape, a.dtype), f"{spec.name}: {b.dtype}{b.shape} != {a.dtype}{a.shape}"
            span = float(np.ptp(a)) or 1.0
            assert float(np.abs(a.astype(np.float64) - b).max()) / span <= TOLERANCE["fp32"], spec.name


@pytest.mark.parametrize("name", MP_BATCH)
def test_mediapipe_models_that_batch_answer_each_request_as_alone(mediapipe_dir: Path, name: str) -> None:
    s = _open(mediapipe_dir / f"{name}.tflite")
    try:
        assert (s.max_batch, s.batch_refusal) == (BATCH_LIMIT, "")
        for k in (2, 3):
            assert_batch_keeps_contract(s, _requests(s, k, seed=10 * k))
        assert_batch_keeps_contract(s, _requests(s, 1))   # back to batch 1 after a batch
    finally:
        s.close()


@pytest.mark.parametrize("name", sorted(MP_REFUSE))
def test_mediapipe_models_that_do_not_batch_say_why(mediapipe_dir: Path, name: str) -> None:
    s = _open(mediapipe_dir / f"{name}.tflite")
    try:
        assert s.max_batch == 1
        assert MP_REFUSE[name] in s.batch_refusal
        with pytest.raises(ValueError, match="takes one at a time: .*" + MP_REFUSE[name]):
            s.run_batch(_requests(s, 2))
        assert len(s.run_batch(_requests(s, 1))) == 1   # one request is a plain run
    finally:
        s.close()


@pytest.mark.parametrize(("name", "fmt"), [(n, f) for f, ns in GEN_BATCH.items() for n in ns])
def test_generated_models_that_batch(model_dir: Path, name: str, fmt: str) -> None:
    s = _open(model_dir / f"{name}.{fmt}")
    try:
        assert s.max_batch == BATCH_LIMIT, s.batch_refusal
        assert_batch_keeps_contract(s, _requests(s, 3))
        assert_batch_keeps_contract(s, _requests(s, BATCH_LIMIT, seed=3))
    finally:
        s.close()


@pytest.mark.parametrize(("name", "fmt"), sorted(GEN_REFUSE))
def test_generated_models_that_do_not_batch_say_why(model_dir: Path, name: str, fmt: str) -> None:
    s = _open(model_dir / f"{name}.{fmt}")
    try:
        assert (s.max_batch, s.batch_refusal) == (1, GEN_REFUSE[(name, fmt)])
    finally:
        s.close()


def test_a_dynamic_batch_takes_requests_of_several_rows(model_dir: Path) -> None:
    for fmt in ("tflite", "onnx"):
        s = _open(model_dir / f"dynamic_batch.{fmt}")
        reqs = [list(genmodels.example_inputs("dynamic_batch", seed=r, batch=1 + r).values()) for r in range(3)]
        got = s.run_batch(reqs)
        assert [g[0].shape for g in got] == [(1, 8), (2, 8), (3, 8)]
        assert_batch_keeps_contract(s, reqs)


def test_a_batch_past_the_limit_or_of_mixed_shapes_is_refused_naming_the_request(model_dir: Path) -> None:
    s = _open(model_dir / "mlp.tflite")
    with pytest.raises(ValueError, match=f"at most {BATCH_LIMIT} in one run; check Session.max_batch"):
        s.run_batch(_requests(s, BATCH_LIMIT + 1))
    ok = _requests(s, 1)[0]
    with pytest.raises(InputError, match=r"request 1's input 'x' is float32\[1, 3\], the model takes float32\[1,256\]"):
        s.run_batch([ok, [np.zeros((1, 3), np.float32)]])
    with pytest.raises(InputError, match="request 1 has 2 feeds, the model takes 1"):
        s.run_batch([ok, [ok[0], ok[0]]])
    d = _open(model_dir / "dynamic_batch.tflite")
    x = np.zeros((1, 64), np.float32)
    with pytest.raises(InputError, match="is float64"):
        d.run_batch([[x], [x.astype(np.float64)]])
    assert s.run_batch([]) == []


def test_a_session_kind_that_does_not_batch_refuses_by_default() -> None:
    class OneByOne(Session):
        """A test double: a session that implements run only."""

        inputs = ()
        outputs = ()

        def run(self, feeds: list[np.ndarray]) -> list[np.ndarray]:
            return [np.zeros(1)]

    s = OneByOne()
    assert (s.max_batch, s.batch_refusal) == (1, "OneByOne does not run batches (LiteRT and ONNX Runtime sessions do)")
    with pytest.raises(ValueError, match="takes one at a time: OneByOne does not run batches"):
        s.run_batch([[], []])


def test_a_pooled_session_batches_on_a_borrowed_interpreter(model_dir: Path) -> None:
    path = model_dir / "cnn.tflite"
    first = _open(path)
    pool = SessionPool(first, lambda: _open(path), limit=2)
    assert pool.max_batch == BATCH_LIMIT and pool.batch_refusal == ""
    assert_batch_keeps_contract(pool, _requests(pool, 2))
    refusing = SessionPool(_open(model_dir / "multi_input.tflite"), lambda: _open(path), limit=2)
    assert refusing.max_batch == 1 and "no batch dimension" in refusing.batch_refusal
    pool.close()
    refusing.close()


def test_an_output_that_does_not_split_back_is_an_inference_error() -> None:
    def folds(feeds: list[np.ndarray]) -> list[np.ndarray]:   # a test double: reshapes the batch away
        return [feeds[0].reshape(1, -1)]

    with pytest.raises(InferenceError, match="a batch of 2 did not split back per request"):
        run_requests(folds, [[np.zeros((1, 4), np.float32)], [np.ones((1, 4), np.float32)]], "folds")
