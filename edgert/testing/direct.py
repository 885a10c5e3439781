"""The backend called directly, without edgert: the reference of the output contract.

The contract test (``tests/delegates/test_contract.py``) and ``benchmarks/accelerators.py`` compare
every delegate path with this answer: the same output names, shapes, dtypes and values within the
path's declared precision.
"""

from __future__ import annotations

import numpy as np

from delegates.base import Artifact


def direct_run(art: Artifact, feeds: dict[str, np.ndarray]) -> tuple[list[str], list[np.ndarray]]:
    """Output names and arrays (model order) of one single-threaded CPU run of ``art`` on ``feeds``.

    A ``.tflite`` runs on LiteRT's ``Interpreter`` (inputs resized to the feeds' shapes where they
    differ), an ``.onnx`` on ONNX Runtime's ``CPUExecutionProvider``.
    """
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
