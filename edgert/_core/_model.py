"""Models: what ``rt.load`` returns, and input validation (before anything is queued)."""

from __future__ import annotations

import asyncio
import difflib
import os
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from delegates.base import Artifact, TensorSpec
from edgert._core._result import Result, unwrap
from edgert.errors import (
    ConfigError,
    InputError,
    ModelLoadError,
    RequestDropped,
)

if TYPE_CHECKING:
    from edgert._core._run import Dispatcher

_SUFFIX_FORMATS = {".tflite": "tflite", ".onnx": "onnx"}


def artifacts_of(source: Any, fmt: str | None) -> list[Artifact]:
    """Turn a load source into artifacts.

    Raises:
        ConfigError: ``source`` is not a path, bytes or a list of paths.
        ModelLoadError: a missing, empty or unnamed-format file, or a directory.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        if not len(source):
            raise ModelLoadError("rt.load() got 0 bytes of model")
        if fmt not in ("onnx", "tflite"):
            fmt = _sniff(bytes(source[:16]))
        return [Artifact(fmt, data=bytes(source))]
    if isinstance(source, (str, os.PathLike)):
        source = [source]
    if not isinstance(source, (list, tuple)) or not all(isinstance(s, (str, os.PathLike)) for s in source):
        raise ConfigError("rt.load() takes a .tflite/.onnx path, model bytes, or a list of paths of one "
                          f"network, got {_show(source)}")
    out = [_artifact(Path(item), fmt) for item in source]
    if not out:
        raise ModelLoadError("rt.load() needs at least one model file")
    return out


def _artifact(p: Path, fmt: str | None) -> Artifact:
    f = fmt or _SUFFIX_FORMATS.get(p.suffix.lower())
    if f is None:
        raise ModelLoadError(f"cannot tell the format of {str(p)!r}: name it .tflite or .onnx, or pass format=")
    if not p.exists():
        from edgert.models import missing_file_hint  # noqa: PLC0415 - only on this error path

        raise ModelLoadError(f"model file {str(p)!r} does not exist; {missing_file_hint(p)}")
    if not p.is_file():
        raise ModelLoadError(f"model file {str(p)!r} is a directory, not a .{f} file")
    if p.stat().st_size == 0:
        raise ModelLoadError(f"model file {str(p)!r} is empty (0 bytes); re-export or re-download it")
    return Artifact(f, path=p)


def _show(v: Any) -> str:
    text = repr(v)
    return f"{type(v).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def _sniff(head: bytes) -> str:
    if head[4:8] == b"TFL3":
        return "tflite"
    return "onnx"


@dataclass(eq=False, slots=True)
class LoadedModel:
    """A model the runtime knows (internal): specs, artifacts, its SLO and allowed processors."""

    name: str
    artifacts: list[Artifact]
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    slo_ms: float | None
    allowed: tuple[str, ...] | None = None
    output_names: tuple[str, ...] = field(default=())
    then: tuple[str, ...] = ()
    #: its requests' importance outside a frame that declares one (``rt.load(priority=)``)
    priority: str = "normal"
    #: MB the process's resident set grew by while it was loaded (None: unknown; edgert._core._memory)
    resident_mb: float | None = None
    #: (name, dtype, shape) per input when every input's shape is static, for :meth:`feeds`' inline check;
    #: None otherwise (set with the specs: :meth:`set_specs`)
    static_inputs: tuple[tuple[str, np.dtype, tuple[int, ...]], ...] | None = None

    def set_specs(self, inputs: tuple[TensorSpec, ...], outputs: tuple[TensorSpec, ...]) -> None:
        """Adopt the model's input and output specs (from its first session), and what is derived from them."""
        self.inputs, self.outputs = inputs, outputs
        self.output_names = tuple(o.name for o in outputs)
        static = all(type(s) is TensorSpec and None not in s.shape for s in inputs)   # (an any-rank spec is not)
        self.static_inputs = tuple((s.name, s.dtype, s.shape) for s in inputs) if static else None  # type: ignore[misc]

    def feeds(self, inputs: Any) -> list[np.ndarray]:
        """Validate ``inputs`` (array, list in input order, or dict by name) into arrays in input order.

        Raises:
            InputError: wrong count, unknown name, wrong dtype or shape — naming the input,
                what it expects and what it got.
        """
        static = self.static_inputs
        if static is not None and type(inputs) is dict and len(inputs) == len(static):
            out = []   # the common case, checked inline (a sync call's every request): else the full check
            for name, dtype, shape in static:
                v = inputs.get(name)
                if type(v) is not np.ndarray or v.dtype is not dtype or v.shape != shape or not v.flags.c_contiguous:
                    break
                out.append(v)
            else:
                return out
        specs = self.inputs
        if type(inputs) is dict or isinstance(inputs, Mapping):   # the exact type first: an ABC check costs 0.1 µs
            try:
                values = [inputs[s.name] for s in specs]
            except KeyError:
                values = []
            if len(values) != len(specs) or len(inputs) != len(specs):   # one missing, or one more (names are unique)
                self._mismatch(inputs)
        elif isinstance(inputs, (list, tuple)):
            if len(inputs) != len(specs):
                raise InputError(f"model {self.name!r} takes {len(specs)} input(s) "
                                 f"({', '.join(s.name for s in specs)}), got {len(inputs)}")
            values = list(inputs)
        else:
            if len(specs) != 1:
                raise InputError(f"model {self.name!r} takes {len(specs)} inputs "
                                 f"({', '.join(s.name for s in specs)}); pass a list or a dict")
            values = [inputs]
        out = []
        for spec, v in zip(specs, values):   # the common case inline (a call per input costs ~1 % of a call)
            if type(v) is np.ndarray and v.dtype == spec.dtype and v.flags.c_contiguous and spec.accepts_shape(v.shape):
                out.append(v)
            else:
                out.append(_array(self.name, spec, v))
        return out

    def _mismatch(self, inputs: Mapping[Any, Any]) -> NoReturn:
        """The InputError for a dict of inputs whose names do not match the model's."""
        names = [s.name for s in self.inputs]
        unknown = [k for k in inputs if k not in names]
        if unknown:
            lower = {n.lower(): n for n in names}
            close = difflib.get_close_matches(str(unknown[0]).lower(), list(lower), n=1, cutoff=0.5)
            hint = f"; did you mean {lower[close[0]]!r}?" if close else ""
            raise InputError(f"model {self.name!r} has no input {unknown[0]!r}{hint} (inputs: {', '.join(names)})")
        missing = [n for n in names if n not in inputs]
        raise InputError(f"model {self.name!r} is missing input(s) {', '.join(map(repr, missing))}")


def _array(model: str, spec: TensorSpec, v: Any) -> np.ndarray:
    """One input as a C-contiguous array of ``spec``'s dtype and shape, or InputError."""
    if type(v) is not np.ndarray:
        if not (isinstance(v, (np.generic, list, tuple)) or np.isscalar(v)):
            raise InputError(f"input {spec.name!r} of model {model!r} must be a numpy array "
                             f"({spec.describe()}), got {type(v).__name__}")
        try:
            v = np.asarray(v, dtype=spec.dtype)
        except (ValueError, TypeError, OverflowError) as exc:
            raise InputError(f"input {spec.name!r} of model {model!r} must be a numpy array "
                             f"({spec.describe()}); {_show(v)} does not convert: {exc}") from None
    if v.dtype != spec.dtype:
        raise InputError(
            f"input {spec.name!r} of model {model!r} expects {spec.describe()}, got "
            f"{v.dtype.name}{list(v.shape)}; convert with arr.astype(np.{spec.dtype.name})")
    if not spec.accepts_shape(v.shape):
        raise InputError(
            f"input {spec.name!r} of model {model!r} expects shape {spec.describe()}, got "
            f"{list(v.shape)}")
    return v if v.flags.c_contiguous else np.ascontiguousarray(v)


class Model:
    """A loaded model: call it (sync), ``submit`` it (Future) or ``await infer_async`` it.

    Sync and async calls return ``dict[str, np.ndarray]`` in model output order; a
    ``late`` result is returned (and counted late); a dropped request raises
    ``RequestDropped``, a failed one ``InferenceError``.
    """

    __slots__ = ("_dispatcher", "_loaded")

    def __init__(self, dispatcher: Dispatcher, loaded: LoadedModel) -> None:
        self._dispatcher = dispatcher   # its runtime's: every request's life starts there
        self._loaded = loaded

    @property
    def name(self) -> str:
        """The model's name in the runtime."""
        return self._loaded.name

    @property
    def slo_ms(self) -> float | None:
        """Per-request latency objective (ms), or None."""
        return self._loaded.slo_ms

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        """Input specs in input order."""
        return self._loaded.inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        """Output specs in output order."""
        return self._loaded.outputs

    def __call__(self, inputs: Any) -> dict[str, np.ndarray]:
        """Run synchronously; returns outputs (ok or late) or raises RequestDropped / InferenceError."""
        return self._dispatcher.call(self._loaded, inputs)

    def submit(self, inputs: Any, after: Result | Future[Result] | None = None) -> Future[Result]:
        """Queue a request; the Future always resolves to a :class:`Result` (never raises).

        ``after`` marks a cascade stage: the request inherits its parent's frame deadline
        and is recorded in the trace as waiting for it.

        When it wakes an idle worker, it returns once that worker has started the request
        (typically ~0.1 ms, at most ``edgert._core._run.HANDOFF_WAIT_MS``), napping meanwhile so
        the worker gets the GIL; otherwise the worker could wait up to CPython's 5 ms switch
        interval while this thread runs Python (:mod:`edgert._core._run`, the hand-off). ``infer_async`` pauses
        its event loop as long.

        Raises:
            InputError: before anything is queued.
        """
        return self._dispatcher.submit(self._loaded, inputs, after)

    async def infer_async(self, inputs: Any) -> dict[str, np.ndarray]:
        """``await`` a request from asyncio; outputs like the sync call."""
        return unwrap(await asyncio.wrap_future(self.submit(inputs)))

    def __repr__(self) -> str:
        ins = ", ".join(f"{s.name}: {s.describe()}" for s in self.inputs)
        return f"<edgert.Model {self.name!r} ({ins})>"


__all__ = ["LoadedModel", "Model", "RequestDropped", "artifacts_of", "unwrap"]
