"""Generated models for tests and benchmarks: one network, two formats, no TensorFlow or torch.

Each network is built from numpy-seeded random weights as an ONNX graph
(``onnx.helper``) and as a ``.tflite`` flatbuffer (the schema ai_edge_litert
ships). Both forms take the same input tensors (names, shapes, dtypes) and
give the same outputs to ~1e-5.

============== ============================================== ==============================
name           what it is                                     inputs -> outputs
============== ============================================== ==============================
tiny           FC 64->64 + ReLU; about 10 us a run            x [1,64] -> y [1,64]
mlp            MLP 256-512-256-10, ReLU / tanh / sigmoid      x [1,256] -> y [1,10]
cnn            6 conv3x3+ReLU (3->256 ch), mean, FC 10;       image [1,64,64,3] NHWC
               about 2 ms a run on one x86 core               -> logits [1,10]
multi_input    (FC(a) + FC(b)) * float(k)                     a [1,32], b [1,32], k int64 []
                                                              -> y [1,16]
dynamic_batch  FC 64->32 + ReLU, FC 32->8; batch symbolic     x [N,64] -> y [N,8]
stateful       GRU cell, state passed in and out              x [1,16], h_prev [1,32]
                                                              -> y [1,8], h_next [1,32]
raises         Reshape(x, [4, 4 + fail]): fails inside the    x [1,16], fail int64 []
               backend for any fail != 0 (zeros run fine)     -> y [4,4]
============== ============================================== ==============================

>>> from edgert.testing import genmodels
>>> onnx_bytes = genmodels.build("cnn", "onnx", seed=0)
>>> paths = genmodels.save("stateful", "/tmp/models")   # {"onnx": .../stateful.onnx, "tflite": ...}
>>> feeds = genmodels.example_inputs("dynamic_batch", batch=7)
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from edgert.testing.genmodels._nets import NAMES, NetSpec, TensorInfo, example_inputs, spec, weights
from edgert.errors import did_you_mean

__all__ = ["FORMATS", "NAMES", "NetSpec", "TensorInfo", "build", "example_inputs", "save", "spec", "weights"]

#: The formats :func:`build` writes.
FORMATS: tuple[str, ...] = ("onnx", "tflite")


def build(name: str, fmt: str, seed: int = 0) -> bytes:
    """The serialized model ``name`` in format ``fmt`` ("onnx" or "tflite"), weights seeded by ``seed``.

    Raises:
        ConfigError: unknown model name or format (with "did you mean").
    """
    spec(name)
    if fmt == "onnx":
        from edgert.testing.genmodels.onnx_models import build_onnx  # noqa: PLC0415 - onnx imported on demand

        return build_onnx(name, seed).SerializeToString()
    if fmt == "tflite":
        from edgert.testing.genmodels.tflite_writer import build_tflite  # noqa: PLC0415

        return build_tflite(name, seed)
    raise did_you_mean("model format", fmt, FORMATS)


def save(name: str, dir: str | Path, formats: Iterable[str] = FORMATS, seed: int = 0) -> dict[str, Path]:  # noqa: A002
    """Write model ``name`` into directory ``dir`` as ``<name>.<fmt>`` for each format.

    Returns:
        ``{fmt: path}`` for every format written. The directory is created if missing.

    Raises:
        ConfigError: unknown model name or format.
    """
    out_dir = Path(dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for fmt in formats:
        data = build(name, fmt, seed)
        path = out_dir / f"{name}.{fmt}"
        path.write_bytes(data)
        paths[fmt] = path
    return paths
