"""Generated ONNX models at a chosen cost, for serving tests and benchmarks.

:func:`cnn_at` is :mod:`~edgert.testing.genmodels`' ``cnn`` (six conv3x3+ReLU, a global mean, a
dense layer; seeded weights) with a larger square input and a symbolic batch dimension: the
convolutions and the mean take any spatial size, so only the graph's declared input and output
shapes change. ``cnn_at(256)`` costs about 30 ms a run on one x86 core with onnxruntime, the cost
of a text detector such as PP-OCRv4 det at 320x320 (about 28 ms on the same host), which this
project does not ship.

>>> from edgert.testing.sized import cnn_at
>>> open("det.onnx", "wb").write(cnn_at(256))   # doctest: +SKIP
"""

from __future__ import annotations

from edgert.errors import ConfigError
from edgert.testing.genmodels import _nets

#: input height = width of the detector-sized CNN the serving benchmark uses (about 30 ms a run)
DET_HW = 256


def cnn_at(hw: int, seed: int = 0, batched: bool = True) -> bytes:
    """The serialized ONNX ``cnn`` with input ``image`` [N, hw, hw, 3] NHWC and output ``logits`` [N, 10].

    Args:
        hw: input height = width; a multiple of 8 (the three stride-2 layers then pad as at 64).
        seed: weight seed (the same weights as ``genmodels.build("cnn", "onnx", seed)``).
        batched: a symbolic batch dimension ``batch`` (else 1).

    Raises:
        ConfigError: ``hw`` is not a positive multiple of 8.
    """
    if not (isinstance(hw, int) and hw > 0 and hw % 8 == 0):
        raise ConfigError(f"cnn_at: hw must be a positive multiple of 8, got {hw!r}")
    import onnx  # noqa: PLC0415 - onnx only where models are generated

    from edgert.testing.genmodels.onnx_models import build_onnx  # noqa: PLC0415

    m = build_onnx("cnn", seed)
    for vi, dims in ((m.graph.input[0], [hw, hw, 3]), (m.graph.output[0], [_nets.CNN_CLASSES])):
        shape = vi.type.tensor_type.shape
        batch = shape.dim[0]
        batch.Clear()
        if batched:
            batch.dim_param = "batch"
        else:
            batch.dim_value = 1
        for d, v in zip(shape.dim[1:], dims):
            d.Clear()
            d.dim_value = v
    m.doc_string = f"genmodels cnn at [{'N' if batched else 1},{hw},{hw},3]"
    onnx.checker.check_model(m)
    return m.SerializeToString()
