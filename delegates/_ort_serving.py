"""Serving options for ONNX Runtime sessions: IO binding, CUDA graphs, instances per device, same-model batching.

Four options a serving path can ask for (:class:`ServingOptions`); each either applies to the session's
execution provider and model or is refused with the reason and the fix (:func:`refusals`), never ignored:

* ``io_binding``: inputs and outputs bound through ORT's ``IOBinding`` to buffers kept across calls
  (:class:`BoundRunner`): on a GPU the input tensors live in device memory allocated once per shape and
  are updated in place, and the outputs stay bound to the device buffers of the first run, so a call
  makes no allocation; on the CPU the inputs are bound without a copy and the outputs to buffers reused
  across calls (measured in ``benchmarks/serving.py``).
* ``cuda_graph``: ORT's CUDA graphs (CUDA EP ``enable_cuda_graph``; TensorRT EP ``trt_cuda_graph_enable``),
  captured on the first run and replayed as one launch afterwards. Only on those two providers, only for
  static input shapes, and only with ``io_binding`` (a graph replays fixed device addresses); ORT allows
  one thread per session with graphs, so each instance is its own session.
* ``instances``: sessions of one model per GPU, each on its own CUDA stream (a single session serialises
  its callers on one stream); :func:`choose_instances` picks the count by measured throughput. On the
  CPU the same thing is ``cpu_workers``, one single-threaded session per core: refused here.
* ``max_batch``: same-model requests that are ready together run as one batch (:func:`run_batched`)
  when every input and output has a symbolic first dimension; refused for a fixed batch dimension.

How a user asks for them: the delegate options, as for every other option of a path
(``delegates.registry.configure``)::

    configure({"ort-cuda": {"io_binding": True, "cuda_graph": True}})   # every model opened on ort-cuda
    configure({"ort-cpu": {"io_binding": True}})                        # the CPU variant (same runner)

``OrtDelegate.configure`` takes the option keys out of the EP options (:func:`pop_serving`), refuses what
cannot apply to the path at once (:func:`path_refusals`: a ``ConfigError`` naming the option and the
fix), and ``OrtDelegate.open`` refuses what cannot apply to one model (:func:`check_model`:
:class:`ServingRefused`, a ``ModelLoadError``; the runtime's loader shows it in
``rt.stats()[model]["excluded"]`` when another path took the model) and runs an IO-bound session
(``delegates._ort_bound.BoundOrtSession``) when ``io_binding`` is on.

This module is the option plumbing and the runners; ``delegates/onnxrt.py`` opens the sessions.
Nothing here reads a clock but :func:`choose_instances`'s caller's measurement.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from delegates._batching import run_requests
from delegates.base import TensorSpec
from delegates.errors import InferenceError, ModelLoadError

__all__ = ["GPU_PROVIDERS", "SERVING_KEYS", "BoundRunner", "ServingOptions", "ServingRefused", "check_model",
           "choose_instances", "device_of", "path_refusals", "pop_serving", "provider_options", "refusals",
           "run_batched"]

#: the execution providers that run on an NVIDIA GPU and take these options
GPU_PROVIDERS: tuple[str, ...] = ("CUDAExecutionProvider", "TensorrtExecutionProvider")
_DEVICE = {"CUDAExecutionProvider": "cuda", "TensorrtExecutionProvider": "cuda"}
_GPU_HINT = "pip install 'edgert[cuda]' (onnxruntime-gpu) on a host with an NVIDIA driver, CUDA 12 and cuDNN 9"


@dataclass(frozen=True, slots=True)
class ServingOptions:
    """What a serving path asks of an ORT session (see the module doc). The defaults ask for nothing.

    Raises:
        ValueError: ``instances`` or ``max_batch`` not an int >= 1, a flag that is not a bool.
    """

    io_binding: bool = False
    cuda_graph: bool = False
    instances: int = 1
    max_batch: int = 1

    def __post_init__(self) -> None:
        for label in ("io_binding", "cuda_graph"):
            if not isinstance(getattr(self, label), bool):
                raise ValueError(f"ServingOptions.{label} must be True or False, got {getattr(self, label)!r}")
        for label in ("instances", "max_batch"):
            v = getattr(self, label)
            if not (isinstance(v, int) and not isinstance(v, bool) and v >= 1):
                raise ValueError(f"ServingOptions.{label} must be an int >= 1, got {v!r}")


#: the delegate option keys that are serving options (the rest of a path's options go to its EP)
SERVING_KEYS: tuple[str, ...] = ("io_binding", "cuda_graph", "instances", "max_batch")


def device_of(provider: str) -> str:
    """The ``OrtValue`` device an EP's bound buffers live on: ``cuda`` for CUDA / TensorRT, else ``cpu``."""
    return _DEVICE.get(provider, "cpu")


def pop_serving(options: dict[str, Any]) -> dict[str, Any]:
    """Take the :data:`SERVING_KEYS` out of a path's ``options`` (in place) and return them."""
    return {k: options.pop(k) for k in SERVING_KEYS if k in options}


class ServingRefused(ModelLoadError):
    """A serving option asked of a path cannot apply to one model (``option``, ``reason``: the why and the fix)."""

    def __init__(self, path: str, label: str, option: str, reason: str) -> None:
        super().__init__(f"{path} cannot serve {label} with {option}: {reason}")
        self.path = path
        self.option = option
        self.reason = reason


def path_refusals(options: ServingOptions, provider: str, available: Sequence[str]) -> dict[str, str]:
    """``{option: reason}`` for what ``options`` asks that no model could get on a path of ``provider``:
    :func:`refusals` without the model, plus what the live runtime cannot give a session yet.

    * ``instances`` > 1: the runtime's worker of a processor runs one invocation at a time (its
      ``capacity`` is 1 for a local processor), so a second session would sit idle; ``edgert profile``
      measures the count a GPU would want and records it in the device profile.
    * ``max_batch`` > 1: batching requests that are ready together is decided where they queue, not by
      the session a path opens; a path option would be ignored.
    """
    out = refusals(options, provider, available, (), ())
    if options.instances > 1 and "instances" not in out:
        out["instances"] = ("the runtime's worker of a processor runs one invocation at a time (capacity 1), so "
                            f"{options.instances - 1} of {options.instances} sessions would sit idle; serve with "
                            "instances=1 (edgert profile records the count a GPU would want in the device profile)")
    if options.max_batch > 1:
        out["max_batch"] = ("same-model batching is not a session option: requests that are ready together are "
                            "batched where they queue; leave max_batch out of the path's options")
    return out


def check_model(options: ServingOptions, provider: str, available: Sequence[str], inputs: Sequence[TensorSpec],
                outputs: Sequence[TensorSpec], path: str, label: str) -> None:
    """Raise :class:`ServingRefused` for the first option that cannot apply to this model on this path."""
    for option, why in refusals(options, provider, available, inputs, outputs).items():
        raise ServingRefused(path, label, f"{option}={getattr(options, option)!r}", why)


def batchable(specs: Sequence[TensorSpec]) -> str:
    """'' when every tensor has a symbolic first dimension, else the reason (naming the first that has not)."""
    for s in specs:
        if not s.shape or s.shape[0] is not None:
            shown = "[" + ", ".join("N" if d is None else str(d) for d in s.shape) + "]"
            return (f"tensor {s.name!r} has {'no batch dimension' if not s.shape else 'a fixed batch dimension'} "
                    f"({shown}): export the model with a symbolic first dimension to batch it")
    return ""


def refusals(options: ServingOptions, provider: str, available: Sequence[str], inputs: Sequence[TensorSpec],
             outputs: Sequence[TensorSpec]) -> dict[str, str]:
    """``{option: reason}`` for every option asked that cannot apply to a session on ``provider`` (with
    ``available``, the providers this onnxruntime build has) for a model with these inputs and outputs."""
    out: dict[str, str] = {}
    gpu = provider in GPU_PROVIDERS
    if options.cuda_graph:
        if not gpu:
            have = [p for p in available if p in GPU_PROVIDERS]
            out["cuda_graph"] = (f"CUDA graphs need ORT's CUDA or TensorRT execution provider; this session runs on "
                                 f"{provider}" + (f" (this build also has {have})" if have else
                                                  f", and this onnxruntime build has neither: {_GPU_HINT}"))
        elif not options.io_binding:
            out["cuda_graph"] = "a CUDA graph replays fixed device addresses: ask for io_binding=True too"
        else:
            dynamic = [s.name for s in inputs if any(d is None for d in s.shape)]
            if dynamic:
                out["cuda_graph"] = (f"CUDA graphs need static input shapes; {dynamic} have a symbolic dimension "
                                     "(export with fixed shapes, or serve this model without graphs)")
    if options.instances > 1 and not gpu:
        out["instances"] = (f"instances per device apply to a GPU (one CUDA stream each); on {provider} run more "
                            "CPU workers instead: Runtime(cpu_workers=N), one single-threaded session per core")
    if options.max_batch > 1:
        why = batchable(list(inputs) + list(outputs))
        if why:
            out["max_batch"] = why
    return out


def provider_options(options: ServingOptions, provider: str) -> dict[str, str]:
    """The execution provider's options for ``options`` (CUDA graphs: ``enable_cuda_graph`` on CUDA,
    ``trt_cuda_graph_enable`` on TensorRT); {} when it asks for none. Check :func:`refusals` first."""
    if not options.cuda_graph:
        return {}
    if provider == "CUDAExecutionProvider":
        return {"enable_cuda_graph": "1"}
    if provider == "TensorrtExecutionProvider":
        return {"trt_cuda_graph_enable": "1"}
    return {}


class BoundRunner:
    """Runs an ``onnxruntime.InferenceSession`` through one ``IOBinding`` kept across calls.

    On ``device="cpu"`` each input is bound in place (no copy) and each output to an ``OrtValue`` kept
    from the previous call of the same input shapes, which ORT fills again instead of allocating. On a GPU
    (``device="cuda"``) each input is an ``OrtValue`` in device memory, allocated once per shape and
    updated in place, and the outputs stay bound to their device buffers; this is what CUDA graphs need.
    ``run`` returns host copies of the outputs (the bound buffers are overwritten by the next call).
    Not thread-safe: one caller at a time, like the session's worker.

    Raises (``run``):
        InferenceError: ORT failed; the original error is chained.
    """

    def __init__(self, sess: Any, device: str = "cpu", device_id: int = 0) -> None:
        import onnxruntime as ort  # noqa: PLC0415 - lazy, as every ORT import here

        self._ort = ort
        self._session = sess
        self._device = device
        self._device_id = device_id
        self._in_names = [i.name for i in sess.get_inputs()]
        self._out_names = [o.name for o in sess.get_outputs()]
        self._binding = sess.io_binding()
        self._shapes: tuple[tuple[int, ...], ...] | None = None
        self._in_values: list[Any] = []
        self._out_values: list[Any] | None = None

    def run(self, feeds: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Run once on ``feeds`` (input order); returns the outputs as numpy arrays (output order)."""
        b = self._binding
        cpu = self._device == "cpu"
        shapes = tuple(np.shape(x) for x in feeds)
        try:
            if shapes != self._shapes:
                self._rebind(feeds, shapes)
            elif not cpu:
                for v, x in zip(self._in_values, feeds):
                    v.update_inplace(np.ascontiguousarray(x))
            if cpu:   # host buffers: bound in place, nothing to synchronise
                for name, x in zip(self._in_names, feeds):
                    b.bind_cpu_input(name, np.ascontiguousarray(x))
                self._session.run_with_iobinding(b)
            else:
                b.synchronize_inputs()
                self._session.run_with_iobinding(b)
                b.synchronize_outputs()
            if self._out_values is None:   # keep the buffers of this shape's first run bound
                self._out_values = list(b.get_outputs())
                for name, v in zip(self._out_names, self._out_values):
                    b.bind_ortvalue_output(name, v)
            return list(b.copy_outputs_to_cpu())   # fresh host arrays: the bound buffers are reused
        except Exception as exc:  # noqa: BLE001 - mapped at this boundary
            raise InferenceError(f"IO-bound run failed: {exc}") from exc

    def _rebind(self, feeds: Sequence[np.ndarray], shapes: tuple[tuple[int, ...], ...]) -> None:
        """New input shapes: fresh device inputs (GPU) and outputs bound to the device, buffers made by ORT."""
        b = self._binding
        b.clear_binding_inputs()
        b.clear_binding_outputs()
        self._in_values = []
        if self._device != "cpu":
            for name, x in zip(self._in_names, feeds):
                v = self._ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(x), self._device, self._device_id)
                self._in_values.append(v)
                b.bind_ortvalue_input(name, v)
        for name in self._out_names:
            b.bind_output(name, self._device, self._device_id)
        self._out_values = None
        self._shapes = shapes


def run_batched(run: Callable[[list[np.ndarray]], list[np.ndarray]],
                requests: Sequence[Sequence[np.ndarray]]) -> list[list[np.ndarray]]:
    """Run same-model ``requests`` (each a feed list in input order, batch dimension first) as one call.

    The feeds are concatenated along axis 0 input by input, ``run`` is called once, and each output is
    split back by each request's batch size. One request is passed through unchanged.

    Raises:
        ValueError: the requests have different numbers of inputs.
        InferenceError: an output's first dimension is not the total batch (the model does not batch
            along axis 0), or ``run`` failed.
    """
    if len(requests) == 1:
        return [run(list(requests[0]))]
    n_in = len(requests[0])
    if any(len(r) != n_in for r in requests):
        raise ValueError("run_batched: every request needs the same inputs")
    return run_requests(run, requests, "run_batched")


def choose_instances(throughput: Mapping[int, float], gain: float = 1.05) -> int:
    """The instance count to record: the fewest instances within ``gain`` of the best measured throughput
    (requests per s by instance count), so an extra session (device memory, a stream) must earn its keep.

    Raises:
        ValueError: no measurement.
    """
    if not throughput:
        raise ValueError("choose_instances: no measurement")
    best = max(throughput.values())
    return min(k for k, v in throughput.items() if v * gain >= best)
