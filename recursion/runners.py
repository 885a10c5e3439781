"""Where cells run: through an ``edgert.Runtime`` (the default) or straight on ONNX Runtime.

A *runner* loads a cell (ONNX bytes with a dynamic batch dimension) and
returns a :class:`CellHandle` whose ``submit(inputs)`` gives a
``concurrent.futures.Future``; ``unwrap`` turns that future's result into the
cell's outputs, raising on a failed request. The executor only talks to this
small interface.

* :class:`RuntimeRunner` goes through the public edgert API — ``rt.load(bytes,
  name=…, format="onnx")`` and ``Model.submit`` — so recursive models share
  processors and the scheduler with every other model of the app.
* :class:`OrtRunner` runs cells directly on single-threaded ONNX Runtime
  sessions in a thread pool (one thread per worker). It bypasses the
  scheduler; it exists for tools and benchmarks that want the bare backend.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from delegates._foreign import ort_errors
from edgert.errors import EdgeRTError, InferenceError, RequestDropped

__all__ = ["CellHandle", "OrtRunner", "Runner", "RuntimeRunner", "as_runner", "default_runtime"]


@dataclass(frozen=True, slots=True)
class CellHandle:
    """A loaded cell.

    ``submit(inputs) -> Future``; ``unwrap(future.result()) -> outputs``;
    ``call(inputs) -> outputs`` runs it synchronously (the executor uses it
    when a single group is ready and nothing else is in flight, saving the
    thread hand-offs).
    """

    name: str
    submit: Callable[[Mapping[str, np.ndarray]], Future]
    unwrap: Callable[[Any], Mapping[str, np.ndarray]]
    call: Callable[[Mapping[str, np.ndarray]], Mapping[str, np.ndarray]]


class Runner(Protocol):
    """What the executor needs from a backend."""

    @property
    def parallelism(self) -> int:
        """How many cell calls can run at the same time (workers)."""

    def load_cell(self, name: str, model: bytes) -> CellHandle:
        """Load ONNX ``model`` bytes under ``name``; raises ModelLoadError if it cannot run."""


_names = itertools.count()


def unique_name(base: str) -> str:
    """``base`` plus a process-wide counter, so two model instances never collide in one runtime."""
    return f"{base}#{next(_names)}"


class OrtRunner:
    """Cells on ONNX Runtime CPU, ``workers`` threads, single-threaded sessions (no scheduler).

    ``InferenceSession.run`` releases the GIL, so ``workers=2`` runs two cells
    at once on two cores. Close it (or use ``with``) to stop the threads.
    """

    def __init__(self, workers: int = 1) -> None:
        import onnxruntime as ort  # lazily: only this runner needs it directly

        self._ort = ort
        self._workers = max(1, int(workers))
        self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="recursion-ort")

    @property
    def parallelism(self) -> int:
        """Number of worker threads."""
        return self._workers

    def load_cell(self, name: str, model: bytes) -> CellHandle:
        """Create one session for ``model`` (shared by the workers; ``run`` is thread-safe)."""
        from edgert.errors import ModelLoadError

        opts = self._ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        opts.execution_mode = self._ort.ExecutionMode.ORT_SEQUENTIAL
        try:
            sess = self._ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
        except ort_errors() as exc:  # onnxruntime's own types; anything else is our bug and propagates
            raise ModelLoadError(f"cell {name!r}: ONNX Runtime could not load it: {exc}") from exc
        out_names = [o.name for o in sess.get_outputs()]

        def run(inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
            try:
                return dict(zip(out_names, sess.run(out_names, dict(inputs))))
            except ort_errors() as exc:
                raise InferenceError(f"cell {name!r} failed in ONNX Runtime: {exc}") from exc

        def submit(inputs: Mapping[str, np.ndarray]) -> Future:
            return self._pool.submit(run, inputs)

        return CellHandle(name, submit, lambda out: out, run)

    def close(self) -> None:
        """Stop the worker threads (waits for running cells)."""
        self._pool.shutdown(wait=True)

    def __enter__(self) -> OrtRunner:  # noqa: PYI034 - final class in practice
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RuntimeRunner:
    """Cells as models of an ``edgert.Runtime``: each group is one request, scheduled like any other."""

    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime

    @property
    def parallelism(self) -> int:
        """Processors the runtime can run cells on at once (its CPU workers and accelerators)."""
        rt = self.runtime
        for attr in ("parallelism", "n_workers", "num_workers"):
            v = getattr(rt, attr, None)
            if isinstance(v, int) and v > 0:
                return v
        procs = getattr(rt, "processors", None)
        if procs is not None:
            try:
                return max(1, len([p for p in procs if getattr(p, "kind", "cpu") != "cloud"]))
            except TypeError:
                pass
        return os.cpu_count() or 1

    def load_cell(self, name: str, model: bytes) -> CellHandle:
        """``rt.load(model, name=name, format="onnx")``; the handle submits through ``Model.submit``."""
        m = self.runtime.load(model, name=name, format="onnx")

        def unwrap(result: Any) -> Mapping[str, np.ndarray]:
            status = getattr(result, "status", "ok")
            if status in ("ok", "late"):
                return result.outputs
            err = getattr(result, "error", None)
            if status == "dropped":
                raise RequestDropped(name, str(err or "dropped by the scheduler"))
            if isinstance(err, EdgeRTError):
                raise err
            raise InferenceError(f"cell {name!r} ended {status}: {err}")

        return CellHandle(name, m.submit, unwrap, m)


_default_lock = threading.Lock()
_default_rt: Any = None


def default_runtime() -> Any:
    """The process-wide ``edgert.Runtime()`` recursive models use when given none (closed at exit)."""
    global _default_rt
    with _default_lock:
        if _default_rt is None:
            import atexit

            import edgert

            _default_rt = edgert.Runtime()
            atexit.register(_default_rt.close)
        return _default_rt


def as_runner(runtime: Any) -> Runner:
    """A Runner for ``runtime``: None → the default edgert runtime; an edgert.Runtime; or a Runner."""
    if runtime is None:
        return RuntimeRunner(default_runtime())
    if hasattr(runtime, "load_cell"):
        return runtime
    if hasattr(runtime, "load"):
        return RuntimeRunner(runtime)
    raise TypeError(f"expected an edgert.Runtime or a recursion Runner, got {type(runtime).__name__}")
