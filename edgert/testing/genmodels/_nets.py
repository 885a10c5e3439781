"""The generated networks as plain data: tensor specs, seeded weights, example inputs.

Both writers (``onnx_models`` and ``tflite_writer``) draw their weights from
:func:`weights`, so one ``(name, seed)`` gives the same numbers in both
formats. Canonical weight layouts are the TFLite ones:

- fully connected: ``W`` is ``[out, in]`` (``y = x @ W.T + b``; ONNX ``Gemm`` with ``transB=1``);
- convolution: ``W`` is ``[out, kh, kw, in]`` (OHWI); the ONNX writer transposes it to OIHW.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgert.errors import did_you_mean

#: The CNN's convolutions as ``(out_channels, kernel, stride)``; padding is TF "SAME", ReLU after each.
#: Sized so one run costs about 2 ms on one x86 core with onnxruntime (see the package docstring).
CNN_LAYERS: tuple[tuple[int, int, int], ...] = (
    (32, 3, 2),
    (64, 3, 1),
    (96, 3, 2),
    (160, 3, 1),
    (160, 3, 2),
    (256, 3, 1),
)
CNN_HW = 64          # input height = width
CNN_CLASSES = 10
MLP_SIZES = (256, 512, 256, 10)
TINY_SIZE = 64
GRU_X, GRU_H, GRU_Y = 16, 32, 8
DYN_SIZES = (64, 32, 8)
MULTI_IN, MULTI_OUT = 32, 16
RAISES_SIZE = 16     # x [1,16] reshaped to [4, 4 + fail]


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """One graph input or output: name, shape (``None`` = dynamic dimension), numpy dtype name."""

    name: str
    shape: tuple[int | None, ...]
    dtype: str


@dataclass(frozen=True, slots=True)
class NetSpec:
    """What a generated network takes and gives, identical for its ONNX and TFLite forms."""

    name: str
    summary: str
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    formats: tuple[str, ...] = ("onnx", "tflite")


def _f(name: str, *shape: int | None) -> TensorInfo:
    return TensorInfo(name, tuple(shape), "float32")


SPECS: dict[str, NetSpec] = {
    "tiny": NetSpec(
        "tiny", f"[1,{TINY_SIZE}] @ [{TINY_SIZE},{TINY_SIZE}] + b, ReLU (about 10 us)",
        (_f("x", 1, TINY_SIZE),), (_f("y", 1, TINY_SIZE),)),
    "mlp": NetSpec(
        "mlp", "MLP 256-512-256-10: FC+ReLU, FC+tanh, FC, sigmoid",
        (_f("x", 1, MLP_SIZES[0]),), (_f("y", 1, MLP_SIZES[-1]),)),
    "cnn": NetSpec(
        "cnn", f"NHWC [1,{CNN_HW},{CNN_HW},3] -> {len(CNN_LAYERS)} conv3x3+ReLU -> mean -> FC {CNN_CLASSES} "
        "(about 2 ms on one core)",
        (_f("image", 1, CNN_HW, CNN_HW, 3),), (_f("logits", 1, CNN_CLASSES),)),
    "multi_input": NetSpec(
        "multi_input", "y = (FC(a) + FC(b)) * float(k); k is an int64 scalar",
        (_f("a", 1, MULTI_IN), _f("b", 1, MULTI_IN), TensorInfo("k", (), "int64")),
        (_f("y", 1, MULTI_OUT),)),
    "dynamic_batch": NetSpec(
        "dynamic_batch", "[N,64] -> FC 32 + ReLU -> FC 8; batch dimension N is symbolic",
        (_f("x", None, DYN_SIZES[0]),), (_f("y", None, DYN_SIZES[-1]),)),
    "stateful": NetSpec(
        "stateful", f"GRU cell: (x [1,{GRU_X}], h_prev [1,{GRU_H}]) -> (y [1,{GRU_Y}], h_next [1,{GRU_H}])",
        (_f("x", 1, GRU_X), _f("h_prev", 1, GRU_H)), (_f("y", 1, GRU_Y), _f("h_next", 1, GRU_H))),
    "raises": NetSpec(
        "raises", "y = Reshape(x, [4, 4 + fail]): runs (y [4,4]) when the int64 scalar `fail` is 0, "
        "fails inside the backend for any other value",
        (_f("x", 1, RAISES_SIZE), TensorInfo("fail", (), "int64")), (_f("y", 4, None),)),
}

#: Every generated network, in a stable order.
NAMES: tuple[str, ...] = tuple(SPECS)


def spec(name: str) -> NetSpec:
    """The :class:`NetSpec` of ``name``.

    Raises:
        ConfigError: ``name`` is not a generated network (with "did you mean").
    """
    try:
        return SPECS[name]
    except KeyError:
        raise did_you_mean("generated model", name, NAMES) from None


def _dense(rng: np.random.Generator, n_out: int, n_in: int) -> tuple[np.ndarray, np.ndarray]:
    w = rng.standard_normal((n_out, n_in)) * np.sqrt(2.0 / n_in)
    b = rng.standard_normal(n_out) * 0.1
    return w.astype(np.float32), b.astype(np.float32)


def weights(name: str, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded random weights of network ``name`` (float32, canonical TFLite layouts).

    Keys are ``W<i>``/``b<i>`` per layer (``W_z``, ``U_z``, ... for the GRU cell).
    Deterministic: the same ``(name, seed)`` always gives the same arrays.
    """
    spec(name)
    rng = np.random.default_rng([seed, NAMES.index(name)])
    out: dict[str, np.ndarray] = {}
    if name == "tiny":
        out["W0"], out["b0"] = _dense(rng, TINY_SIZE, TINY_SIZE)
    elif name == "mlp":
        for i, (n_in, n_out) in enumerate(zip(MLP_SIZES, MLP_SIZES[1:])):
            out[f"W{i}"], out[f"b{i}"] = _dense(rng, n_out, n_in)
    elif name == "cnn":
        c_in = 3
        for i, (c_out, k, _stride) in enumerate(CNN_LAYERS):
            w = rng.standard_normal((c_out, k, k, c_in)) * np.sqrt(2.0 / (k * k * c_in))
            out[f"W{i}"] = w.astype(np.float32)
            out[f"b{i}"] = (rng.standard_normal(c_out) * 0.1).astype(np.float32)
            c_in = c_out
        out["W_fc"], out["b_fc"] = _dense(rng, CNN_CLASSES, c_in)
    elif name == "multi_input":
        out["W_a"], out["b_a"] = _dense(rng, MULTI_OUT, MULTI_IN)
        out["W_b"], out["b_b"] = _dense(rng, MULTI_OUT, MULTI_IN)
    elif name == "dynamic_batch":
        for i, (n_in, n_out) in enumerate(zip(DYN_SIZES, DYN_SIZES[1:])):
            out[f"W{i}"], out[f"b{i}"] = _dense(rng, n_out, n_in)
    elif name == "stateful":
        for g in ("z", "r", "n"):
            out[f"W_{g}"], out[f"b_{g}"] = _dense(rng, GRU_H, GRU_X)
            out[f"U_{g}"], _ = _dense(rng, GRU_H, GRU_H)
        out["W_y"], out["b_y"] = _dense(rng, GRU_Y, GRU_H)
    # "raises" has no weights.
    return out


def example_inputs(name: str, seed: int = 0, batch: int | None = None) -> dict[str, np.ndarray]:
    """Random valid inputs for network ``name``, keyed by input name.

    Args:
        name: a generated network.
        seed: numpy seed for the values.
        batch: the batch size for a symbolic batch dimension (default 1).

    For ``multi_input`` the scalar ``k`` is drawn from 1..4; for ``raises``
    ``fail`` is 0 (runs): pass ``np.array(1, np.int64)`` to make it fail.
    """
    net = spec(name)
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for t in net.inputs:
        if t.dtype == "int64":
            value = 0 if name == "raises" else rng.integers(1, 5)
            feeds[t.name] = np.array(value, dtype=np.int64).reshape(())
            continue
        shape = tuple((batch or 1) if d is None else d for d in t.shape)
        feeds[t.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds
