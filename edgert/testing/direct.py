"""The backend called directly, without edgert: the reference of the output contract.

The contract test (``tests/delegates/test_contract.py``) and ``benchmarks/accelerators.py`` compare
every delegate path with this answer: the same output names, shapes, dtypes and values within the
path's declared precision.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from delegates._native_capture import native_quiet
from delegates.base import TOLERANCE, Artifact, Session
from edgert._core._accuracy import max_error
from edgert.testing import genmodels

#: The XR demo's MediaPipe models the contract is checked on.
XR_MODELS = ("palm_detection_full", "hand_landmark_full", "face_detection_short_range", "face_landmark",
             "iris_landmark", "pose_detection", "pose_landmark_full", "selfie_segmentation")
#: The generated networks (both formats) it is checked on.
GENERATED = ("tiny", "mlp", "cnn", "multi_input", "stateful", "dynamic_batch")


def direct_run(art: Artifact, feeds: dict[str, np.ndarray]) -> tuple[list[str], list[np.ndarray]]:
    """Output names and arrays (model order) of one single-threaded CPU run of ``art`` on ``feeds``.

    A ``.tflite`` runs on LiteRT's ``Interpreter`` (inputs resized to the feeds' shapes where they
    differ), an ``.onnx`` on ONNX Runtime's ``CPUExecutionProvider``; native log lines go to logging.
    """
    with native_quiet():
        return _direct(art, feeds)


def _direct(art: Artifact, feeds: dict[str, np.ndarray]) -> tuple[list[str], list[np.ndarray]]:
    if art.format == "tflite":
        from ai_edge_litert.interpreter import Interpreter  # noqa: PLC0415 - only for .tflite

        it = Interpreter(model_path=str(art.path), num_threads=1)
        for d in it.get_input_details():
            x = feeds[d["name"]]
            if tuple(x.shape) != tuple(d["shape"]):
                it.resize_tensor_input(d["index"], list(x.shape), strict=False)
        it.allocate_tensors()
        for d in it.get_input_details():
            it.set_tensor(d["index"], feeds[d["name"]])
        it.invoke()
        outs = it.get_output_details()
        return [o["name"] for o in outs], [it.get_tensor(o["index"]).copy() for o in outs]
    import onnxruntime as ort  # noqa: PLC0415 - only for .onnx

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    sess = ort.InferenceSession(str(art.path), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return names, list(sess.run(names, feeds))


def contract_cases(tmp: Path, mediapipe_dir: Path, generated: tuple[str, ...] = GENERATED,
                   ) -> list[tuple[str, Artifact, dict[str, np.ndarray]]]:
    """(label, artifact, one deterministic input) for ``generated`` (written under ``tmp`` in both formats)
    and :data:`XR_MODELS` (from ``mediapipe_dir``): floats uniform in [0, 1) seeded per model, integers zero."""
    from ai_edge_litert.interpreter import Interpreter  # noqa: PLC0415

    out: list[tuple[str, Artifact, dict[str, np.ndarray]]] = []
    for name in generated:
        feeds = genmodels.example_inputs(name, batch=3 if name == "dynamic_batch" else None)
        for fmt, p in genmodels.save(name, tmp / name).items():
            out.append((f"{name}.{fmt}", Artifact(fmt, path=Path(p)), feeds))
    for name in XR_MODELS:
        p = Path(mediapipe_dir) / f"{name}.tflite"
        rng = np.random.default_rng(0)
        feeds = {d["name"]: (rng.random(tuple(d["shape"])).astype(d["dtype"])
                             if np.issubdtype(d["dtype"], np.floating) else np.zeros(tuple(d["shape"]), d["dtype"]))
                 for d in Interpreter(model_path=str(p)).get_input_details()}
        out.append((f"{name}.tflite", Artifact("tflite", path=p), feeds))
    return out


def contract_break(s: Session, got: list[np.ndarray], art: Artifact, feeds: dict[str, np.ndarray]) -> tuple[float, str]:
    """How ``got`` (session ``s``'s answer on ``feeds``) keeps the output contract against the backend
    called directly: (largest error as a share of each output's range, what broke it or "").

    Broken: other output names; a shape or dtype other than the backend's (compared as tuples,
    never broadcast) or than the session declares where static; an error beyond the path's
    declared precision (:data:`delegates.base.TOLERANCE`)."""
    names, ref = direct_run(art, feeds)
    if [o.name for o in s.outputs] != names:
        return math.inf, f"output names {[o.name for o in s.outputs]} != the backend's {names}"
    for spec, g in zip(s.outputs, got):
        if None not in spec.shape and tuple(g.shape) != spec.shape:
            return math.inf, f"{spec.name} came back {list(g.shape)} but is declared {list(spec.shape)}"
    err, broke = max_error(got, ref, s.outputs)
    if broke:
        return math.inf, broke
    tol = TOLERANCE[s.precision]
    return err, (f"error {err:.3g} of the output range > {tol:g} declared for {s.precision}" if err > tol else "")
