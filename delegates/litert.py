"""LiteRT (TensorFlow Lite) interpreter: the XNNPACK CPU path and the session every LiteRT delegate uses.

The CPU path is the interpreter's default XNNPACK delegate, single-threaded
per worker. The interpreter comes from ``ai_edge_litert`` (works with numpy
2), falling back to ``tflite_runtime`` on device images that only have that;
both are imported lazily. Accelerator delegates (GPU, QNN, Hexagon) are in
:mod:`delegates.litert_accel`, the ``CompiledModel`` accelerators in
:mod:`delegates.litert_compiled`.

Partial support is measured, not assumed: a delegate replaces the nodes it
takes with ``DELEGATE`` kernel nodes, and :func:`interpreter_placement`
walks each kernel's partition back from its outputs to its inputs to count
the original nodes it covers. Nodes no delegate took run on the builtin CPU
kernels.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from delegates._foreign import LITERT_ERRORS
from delegates._native_capture import native_quiet
from delegates.base import Artifact, Delegate, Session, TensorSpec
from delegates.errors import DelegateUnavailable, InferenceError, ModelLoadError


def import_interpreter() -> Any:
    """The ``interpreter`` module of ai_edge_litert, or of tflite_runtime as a fallback.

    Raises:
        ImportError: neither is installed.
    """
    try:
        from ai_edge_litert import interpreter  # noqa: PLC0415
    except ImportError:
        from tflite_runtime import interpreter  # noqa: PLC0415
    return interpreter


class LiteRTSession(Session):
    """A LiteRT ``Interpreter`` behind the Session interface; resizes dynamic inputs on demand."""

    def __init__(self, interp: Any, label: str, placement: dict[str, int] | None = None,
                 engine: str = "xnnpack") -> None:
        self._interp = interp
        self._label = label
        self._placement = dict(placement) if placement is not None else interpreter_placement(interp, [])
        total = sum(self._placement.values())
        #: Share of nodes on ``engine`` (this session's delegate); the rest run on other CPU paths.
        self.coverage = self._placement.get(engine, 0) / total if total else 1.0
        self.engine = engine
        ins = interp.get_input_details()
        outs = interp.get_output_details()
        self.inputs = tuple(_spec(d) for d in ins)
        self.outputs = tuple(_spec(d) for d in outs)
        self._in_idx = [d["index"] for d in ins]
        self._out_idx = [d["index"] for d in outs]
        self._shapes = [tuple(int(x) for x in d["shape"]) for d in ins]
        self._set = interp.set_tensor
        self._get = interp.get_tensor
        self._invoke = interp.invoke

    def run(self, feeds: list[np.ndarray]) -> list[np.ndarray]:
        """Set inputs (resizing dynamic ones), invoke, copy outputs out."""
        try:
            for i, (idx, arr) in enumerate(zip(self._in_idx, feeds)):
                if arr.shape != self._shapes[i]:
                    self._resize(i, arr.shape)
                self._set(idx, arr)
            self._invoke()
            return [self._get(idx) for idx in self._out_idx]
        except LITERT_ERRORS as exc:   # anything else is a bug of ours: it propagates
            raise InferenceError(f"LiteRT failed running {self._label}: {exc}") from exc

    def _resize(self, i: int, shape: tuple[int, ...]) -> None:
        self._interp.resize_tensor_input(self._in_idx[i], list(shape), strict=False)
        with native_quiet():   # XNNPACK re-applies itself and logs at INFO
            self._interp.allocate_tensors()
        self._shapes = [tuple(int(x) for x in d["shape"]) for d in self._interp.get_input_details()]

    def _check_batch(self) -> str:
        """A batch resizes the inputs' leading dim to its size (in place: after the first time, a resize
        between sizes costs about 0.1 ms, an interpreter per size another copy of the packed weights;
        ``benchmarks/batching.py``); whether the model's answers survive it is checked on the model."""
        from delegates._batching import batch_check  # noqa: PLC0415 - only where batching is asked

        return batch_check(self.run, self.inputs, self.outputs, self.precision)

    def placement(self) -> dict[str, int]:
        """Original graph nodes per engine, e.g. ``{"gpu": 40, "xnnpack": 2, "cpu": 1}`` (``cpu`` = builtin kernels)."""
        return dict(self._placement)

    def close(self) -> None:
        """Drop the interpreter."""
        self._interp = None


#: The one private attribute of a dependency that the product reads (``tests/test_layering.py`` allows it here and
#: nowhere else): LiteRT's ``Interpreter`` keeps its native interpreter there, and only that object lists the
#: nodes (``NumNodes``, ``NodeName``, ``NodeInputs``, ``NodeOutputs``) that say which delegate took which op; no
#: public API of ai-edge-litert 2.x does. Without it (another LiteRT version) the fallback holds: placement is
#: empty, ``coverage`` unknown, and the load-time check that an accelerator took any node is skipped.
NATIVE_INTERPRETER = "_interpreter"


def native_interpreter(interp: Any) -> Any | None:
    """LiteRT's native interpreter behind ``interp`` (see :data:`NATIVE_INTERPRETER`), or None when it is not there."""
    raw = getattr(interp, NATIVE_INTERPRETER, None)
    return raw if raw is not None and hasattr(raw, "NumNodes") else None


def node_count(interp: Any) -> int:
    """How many nodes ``interp`` holds now (after its delegates were applied); 0 when it cannot say."""
    raw = native_interpreter(interp)
    return raw.NumNodes() if raw is not None else 0


def interpreter_placement(interp: Any, first_nodes: Sequence[tuple[str, int]]) -> dict[str, int]:
    """Count the original nodes each delegate took, by engine label.

    Args:
        interp: an allocated LiteRT Interpreter.
        first_nodes: ``(label, node_count)`` checkpoints: the node count right
            after each explicit delegate was applied, in order; delegate nodes
            beyond the last checkpoint (the lazily applied default XNNPACK
            delegate) are labelled ``xnnpack``.

    Returns:
        ``{label: original nodes}``, with ``cpu`` for nodes left on builtin kernels.
        Empty when the interpreter cannot list its nodes.
    """
    raw = native_interpreter(interp)
    if raw is None:
        return {}
    n = raw.NumNodes()
    names = [raw.NodeName(i) for i in range(n)]
    ins = [[int(t) for t in raw.NodeInputs(i)] for i in range(n)]
    outs = [[int(t) for t in raw.NodeOutputs(i)] for i in range(n)]
    kernels = [i for i in range(n) if names[i] == "DELEGATE"]
    originals = [i for i in range(n) if names[i] != "DELEGATE"]
    producer = {t: i for i in originals for t in outs[i]}
    owner: dict[int, str] = {}
    for k in kernels:
        label = next((lab for lab, upto in first_nodes if k < upto), "xnnpack")
        stop = set(ins[k])
        stack = [t for t in outs[k]]
        while stack:
            p = producer.get(stack.pop())
            if p is None or p in owner:
                continue
            owner[p] = label
            stack.extend(t for t in ins[p] if t >= 0 and t not in stop)
    counts: dict[str, int] = {}
    for i in originals:
        lab = owner.get(i, "cpu")
        counts[lab] = counts.get(lab, 0) + 1
    return counts


def _spec(d: dict[str, Any]) -> TensorSpec:
    sig = d.get("shape_signature")
    dims = sig if sig is not None and len(sig) == len(d["shape"]) else d["shape"]
    return TensorSpec(d["name"], tuple(None if int(x) < 0 else int(x) for x in dims), np.dtype(d["dtype"]))


class LiteRTDelegate(Delegate):
    """The LiteRT interpreter with its built-in XNNPACK CPU delegate.

    Subclasses (:mod:`delegates.litert_accel`) add an explicit delegate
    through :meth:`_session_delegates`; ``options`` are extra ``Interpreter``
    keyword arguments here and delegate options there (:meth:`configure`).
    """

    backend = "litert"
    formats = ("tflite",)
    #: Engine label this delegate's nodes get in ``placement()``.
    engine = "xnnpack"

    def __init__(self, name: str = "litert-xnnpack", processor: str = "cpu",
                 options: dict[str, Any] | None = None) -> None:
        self.name = name
        self.processor = processor
        self.options: dict[str, Any] = dict(options or {})

    def configure(self, options: dict[str, Any]) -> None:
        """Merge options and forget the cached probe."""
        self.options.update(options)
        self.invalidate()



    def _probe(self) -> str | None:
        try:
            import_interpreter()
        except ImportError as exc:
            return f"neither ai_edge_litert nor tflite_runtime is installed ({exc}); pip install ai-edge-litert"
        return None

    def _session_delegates(self) -> list[Any]:
        """Delegate objects to apply to a new interpreter (none: XNNPACK is applied by default)."""
        return []

    def _interpreter_kwargs(self) -> dict[str, Any]:
        return dict(self.options)

    def open(self, artifact: Artifact, threads: int = 1) -> LiteRTSession:
        """Build and allocate an Interpreter; load errors become ModelLoadError.

        Raises:
            DelegateUnavailable: this path cannot run on this host (the probe's reason).
            ModelLoadError: the file is missing or invalid, or the delegate rejected it.
        """
        if (reason := self.probe()) is not None:
            raise DelegateUnavailable(self.name, reason)
        interpreter = import_interpreter()
        if artifact.path is not None and not artifact.path.exists():
            raise ModelLoadError(f"model file {artifact.label} does not exist")
        kwargs: dict[str, Any] = {"num_threads": threads, **self._interpreter_kwargs()}
        if artifact.path is not None:
            kwargs["model_path"] = str(artifact.path)
        else:
            kwargs["model_content"] = artifact.data
        delegates_ = self._session_delegates()
        if delegates_:
            kwargs["experimental_delegates"] = delegates_
        try:
            with native_quiet():   # "Created TensorFlow Lite XNNPACK delegate for CPU." goes to logging
                interp = interpreter.Interpreter(**kwargs)
                applied = node_count(interp) if delegates_ else 0
                interp.allocate_tensors()
        except LITERT_ERRORS as exc:
            raise ModelLoadError(
                f"LiteRT could not load {artifact.label} on {self.name}: {exc}"
                " (is it a valid .tflite file? a model with custom ops needs its op resolver)") from exc
        checkpoints = [(self.engine, applied)] if delegates_ else []
        session = LiteRTSession(interp, artifact.label, interpreter_placement(interp, checkpoints), self.engine)
        if delegates_ and session.placement() and session.coverage == 0.0:
            raise ModelLoadError(
                f"{self.name} took none of the {sum(session.placement().values())} nodes of {artifact.label}: "
                "it would run entirely on the CPU; run this model on a cpu delegate instead")
        return session




def delegates() -> list[Delegate]:
    """The LiteRT CPU path (accelerators: :mod:`delegates.litert_accel`, :mod:`delegates.litert_compiled`)."""
    return [LiteRTDelegate()]
