"""Same-model requests run as one batched invocation: the checks and the run behind ``Session.run_batch``.

Several XR users run the same models; when requests of one model are ready together, one invocation
on a batch of them can cost less than one invocation each (``benchmarks/batching.py`` measures where).
A session batches only when its answer for each request is the one a run of that request alone gives,
so whether a model batches is established on the model itself, once per session (:func:`batch_check`):

1. every input has a batch dimension first (a leading 1 or a symbolic dim);
2. a batch of two distinct deterministic requests runs on the session's own ``run`` (LiteRT resizes
   the inputs' leading dim to 2; ONNX Runtime takes a symbolic one as given);
3. every output comes back with the batch as its leading dim: MediaPipe's detectors reshape their
   anchors to ``[1, N, 16]``, so a batch of two comes back as ``[1, 2N, 16]`` with the two requests'
   anchors interleaved by feature map, which cannot be split back;
4. each request's slice of the batched outputs equals its own run within the session precision's
   tolerance (:data:`delegates.base.TOLERANCE`), names, shapes and dtypes identical: MediaPipe's
   ``hand_recrop`` passes 3 and fails here (its answer for one request depends on the other).

The check costs three runs of the model at batch 1, 1 and 2; a batch of more than two is assumed to
behave as a batch of two does (its outputs' leading dims are still checked on every run).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from delegates._specs import TOLERANCE, TensorSpec
from delegates.errors import EdgeRTError, InferenceError, InputError

__all__ = ["batch_check", "check_requests", "probe_requests", "run_requests"]

Run = Callable[[list[np.ndarray]], list[np.ndarray]]


def probe_requests(inputs: Sequence[TensorSpec], k: int = 2, seed: int = 0) -> list[list[np.ndarray]]:
    """``k`` distinct deterministic requests of batch 1 for ``inputs``: floats uniform in [0, 1) (seeded per
    request), integers and booleans zero (an index input's valid range is unknown)."""
    out = []
    for r in range(k):
        rng = np.random.default_rng(seed + r)
        feeds = []
        for s in inputs:
            shape = s.concrete_shape(1)
            feeds.append(rng.random(shape).astype(s.dtype) if np.issubdtype(s.dtype, np.floating)
                         else np.zeros(shape, s.dtype))
        out.append(feeds)
    return out


def _no_batch_dim(inputs: Sequence[TensorSpec]) -> str:
    for s in inputs:
        if not s.shape:
            return f"input {s.name!r} ({s.describe()}) has no batch dimension"
        if s.shape[0] not in (1, None):
            return (f"input {s.name!r} ({s.describe()}) has a leading dimension of {s.shape[0]}, "
                    "not a batch of 1")
    return ""


def _differs(single: list[np.ndarray], part: list[np.ndarray], outputs: Sequence[TensorSpec],
             tolerance: float) -> str:
    """What makes a request's slice of a batched run differ from its own run ("" when it does not)."""
    for spec, a, b in zip(outputs, single, part):
        if a.shape != b.shape or a.dtype != b.dtype:
            return (f"output {spec.name!r} of a batched request is {b.dtype}{list(b.shape)}, "
                    f"its own run gives {a.dtype}{list(a.shape)}")
        if a.size == 0 or not np.issubdtype(a.dtype, np.number):
            continue
        af, bf = a.astype(np.float64), b.astype(np.float64)
        finite = np.isfinite(af)
        if not np.array_equal(finite, np.isfinite(bf)):
            return f"output {spec.name!r} of a batched request is non-finite where its own run is not (or back)"
        if not finite.any():
            continue
        span = float(np.max(af[finite]) - np.min(af[finite])) or max(float(np.abs(af[finite]).max()), 1.0)
        err = float(np.abs(af[finite] - bf[finite]).max()) / span
        if err > tolerance:
            return (f"output {spec.name!r} of a request in a batch differs from its own run by {err:.3g} of its "
                    f"range (> {tolerance:g}): the graph mixes requests across the batch")
    return ""


def batch_check(run: Run, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec],
                precision: str = "fp32") -> str:
    """"" when a session whose single run is ``run`` answers a batch of requests as it answers each alone,
    else the reason it does not (the steps in the module doc). Runs the model three times."""
    why = _no_batch_dim(inputs)
    if why:
        return why
    reqs = probe_requests(inputs, 2)
    try:
        singles = [[np.array(o, copy=True) for o in run(list(r))] for r in reqs]
    except EdgeRTError as exc:
        return f"the batch check's single run failed: {exc}"
    try:
        batched = run([np.concatenate([r[i] for r in reqs], axis=0) for i in range(len(inputs))])
    except EdgeRTError as exc:
        return f"the backend cannot run a batch of 2: {exc}"
    for spec, o in zip(outputs, batched):
        if np.shape(o)[:1] != (2,):
            return (f"at a batch of 2, output {spec.name!r} comes back {list(np.shape(o))} (declared "
                    f"{spec.describe()}): the graph folds the batch into another dimension (or drops it)")
    parts = [[o[i:i + 1] for o in batched] for i in range(2)]
    tol = TOLERANCE.get(precision, TOLERANCE["fp32"])
    for single, part in zip(singles, parts):
        why = _differs(single, part, outputs, tol)
        if why:
            return why
    return ""


def check_requests(inputs: Sequence[TensorSpec], feeds_list: Sequence[Sequence[np.ndarray]]) -> None:
    """Every request has one feed per input, each a shape the input accepts, and all requests share each
    input's dtype and trailing dims (the leading one, the batch, may differ where it is symbolic).

    Raises:
        InputError: names the request, the input, what it got and what the batch needs.
    """
    first = feeds_list[0]
    for r, feeds in enumerate(feeds_list):
        if len(feeds) != len(inputs):
            raise InputError(f"run_batch: request {r} has {len(feeds)} feeds, the model takes {len(inputs)} "
                             f"({', '.join(s.name for s in inputs)})")
        for s, x, x0 in zip(inputs, feeds, first):
            x = np.asarray(x)
            if not s.accepts_shape(tuple(x.shape)) or x.dtype != s.dtype:
                raise InputError(f"run_batch: request {r}'s input {s.name!r} is {x.dtype}{list(x.shape)}, "
                                 f"the model takes {s.describe()}")
            if x.ndim == 0 or x.shape[1:] != np.shape(x0)[1:]:
                raise InputError(f"run_batch: request {r}'s input {s.name!r} has shape {list(x.shape)}, request 0's "
                                 f"{list(np.shape(x0))}: a batch takes requests of one shape (bar the batch dim)")


def run_requests(run: Run, feeds_list: Sequence[Sequence[np.ndarray]], label: str) -> list[list[np.ndarray]]:
    """Run checked requests as one batch on ``run``: each input concatenated along axis 0, one call, each
    output split back by the requests' batch sizes. (As ``delegates._ort_serving.run_batched``, which the
    LiteRT family may not import: that module is ONNX Runtime's.)

    Raises:
        InferenceError: the backend failed, or an output did not come back with the batch first.
    """
    sizes = [int(np.shape(r[0])[0]) for r in feeds_list]
    outs = run([np.concatenate([r[i] for r in feeds_list], axis=0) for i in range(len(feeds_list[0]))])
    total = sum(sizes)
    cuts = np.cumsum(sizes)[:-1]
    split: list[list[np.ndarray]] = [[] for _ in feeds_list]
    for o in outs:
        if np.shape(o)[:1] != (total,):
            raise InferenceError(f"{label}: a batch of {len(feeds_list)} did not split back per request: an output "
                                 f"came back {list(np.shape(o))}, without the batch of {total} first")
        for k, part in enumerate(np.split(o, cuts, axis=0)):
            split[k].append(part)
    return split
