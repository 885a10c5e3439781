"""A model's tensors and the precisions a path computes in: what every part of ``delegates`` shares
(:mod:`delegates.base` re-exports them; :mod:`delegates._batching` needs them without the session classes)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Numeric precisions a path may compute in.
PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "fp16", "int8", "mixed")

#: Largest |path - fp32 reference| a path of each precision is held to, as a share of each output's
#: range (max - min of the reference): what the contract test and ``edgert devices`` declare.
#: fp32 paths may differ only by summation order; tf32 keeps 10 mantissa bits in matmuls; fp16
#: 10 bits throughout, and accumulated error over a deep net reaches a few percent of the range.
TOLERANCE: dict[str, float] = {"fp32": 1e-4, "tf32": 1e-2, "fp16": 5e-2, "int8": 1e-1, "mixed": 5e-2}


@dataclass(frozen=True, slots=True)
class TensorSpec:
    """An input or output of a model: name, shape (None = dynamic dim) and dtype."""

    name: str
    shape: tuple[int | None, ...]
    dtype: np.dtype

    def accepts_shape(self, shape: tuple[int, ...]) -> bool:
        """True when ``shape`` matches, treating None dims as wildcards."""
        if shape == self.shape:  # the common case: a static shape, given right
            return True
        return len(shape) == len(self.shape) and all(e is None or e == g for e, g in zip(self.shape, shape))

    def concrete_shape(self, dynamic: int = 1) -> tuple[int, ...]:
        """The shape with every dynamic dim replaced by ``dynamic`` (for warm-up feeds)."""
        return tuple(dynamic if d is None else d for d in self.shape)

    def describe(self) -> str:
        """Like ``float32[1,224,224,3]`` with ``?`` for dynamic dims."""
        dims = ",".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.dtype.name}[{dims}]"
