"""A model's accuracy tolerance, checked once at load per candidate path against the fp32 CPU answer.

``rt.load(path, tolerance=1e-3)`` runs one sample (the caller's ``sample=``, or a deterministic
one) through an fp32 CPU session of the model, opened directly on its backend, and through every
session the runtime is about to use. A path whose answer differs from the reference by more than
``tolerance`` (a share of each output's range, max - min of the reference; the same measure the
delegates declare, :data:`delegates.base.TOLERANCE`), or whose outputs differ in name, shape or
dtype, is not used for that model: :class:`AccuracyCheck` says why, and the runtime shows the
reason beside the model's placement (``rt.stats()[name]["excluded"]``).

No peer runtime (Band, MediaPipe, LiteRT, ONNX Runtime) checks this: an fp16 GPU path that moves a
landmark by a few pixels is fine for one model and ruins another, and only the model's owner knows.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from delegates.base import Artifact, Delegate, Session, TensorSpec
from delegates.registry import all_delegates
from edgert.errors import ConfigError, EdgeRTError, ModelLoadError, OffloadError

#: The fp32 CPU path that gives the reference answer, per artifact format.
REFERENCE: dict[str, str] = {"tflite": "litert-xnnpack", "onnx": "ort-cpu"}


def check_tolerance(tolerance: Any) -> float | None:
    """``rt.load(tolerance=…)``: None, or a finite number > 0 (a share of each output's range).

    Raises:
        ConfigError: anything else, with an example.
    """
    if tolerance is None:
        return None
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not math.isfinite(tolerance) \
            or tolerance <= 0:
        raise ConfigError(f"tolerance must be a number > 0 (a share of each output's range, e.g. 1e-3), "
                          f"got {tolerance!r}")
    return float(tolerance)


def deterministic_sample(specs: tuple[TensorSpec, ...], seed: int = 0) -> list[np.ndarray]:
    """One feed per input: floats uniform in [0, 1) from ``seed``, integers and bools zero, dynamic dims 1."""
    rng = np.random.default_rng(seed)
    out = []
    for s in specs:
        shape = s.concrete_shape()
        if np.issubdtype(s.dtype, np.floating):
            out.append(rng.random(shape).astype(s.dtype))
        else:
            out.append(np.zeros(shape, s.dtype))
    return out


def max_error(got: list[np.ndarray], ref: list[np.ndarray], specs: tuple[TensorSpec, ...]) -> tuple[float, str]:
    """Largest |got - ref| over the outputs as a share of each reference output's range, and what broke
    the contract ("" when shapes and dtypes match). Shapes are compared explicitly: never broadcast."""
    if len(got) != len(ref):
        return math.inf, f"{len(got)} outputs, the reference has {len(ref)}"
    worst = 0.0
    for g, r, s in zip(got, ref, specs):
        g, r = np.asarray(g), np.asarray(r)
        if g.shape != r.shape:
            return math.inf, f"output {s.name!r} has shape {list(g.shape)}, the reference {list(r.shape)}"
        if g.dtype != r.dtype:
            return math.inf, f"output {s.name!r} is {g.dtype}, the reference {r.dtype}"
        if r.size == 0 or not np.issubdtype(r.dtype, np.number):
            continue
        rf, gf = r.astype(np.float64), g.astype(np.float64)
        finite = np.isfinite(rf)
        if not np.array_equal(finite, np.isfinite(gf)):
            return math.inf, f"output {s.name!r} has non-finite values where the reference has none (or back)"
        if not finite.any():
            continue
        span = float(rf[finite].max() - rf[finite].min()) or max(float(np.abs(rf[finite]).max()), 1.0)
        worst = max(worst, float(np.abs(gf[finite] - rf[finite]).max()) / span)
    return worst, ""


class AccuracyCheck:
    """Checks each candidate (delegate, session) of one model once against the fp32 CPU reference.

    Args:
        name: the model's name (for messages).
        artifacts: its artifacts; the reference opens the first one with an fp32 CPU path.
        tolerance: largest accepted error, a share of each output's range.
        sample: the caller's sample input (array, list or dict; validated by ``feeds``) or None.
        feeds: the model's input validator (``LoadedModel.feeds``), used once specs are known.
    """

    def __init__(self, name: str, artifacts: list[Artifact], tolerance: float, sample: Any,
                 feeds: Any) -> None:
        self.name = name
        self.artifacts = artifacts
        self.tolerance = tolerance
        self.sample = sample
        self._feeds_of = feeds
        self._ref: list[np.ndarray] | None = None
        self._inputs: list[np.ndarray] | None = None
        #: delegate name -> None (within tolerance) or the reason it is excluded; one check per path.
        self.verdicts: dict[str, str | None] = {}
        #: delegate name -> measured error (share of range).
        self.errors: dict[str, float] = {}

    def _reference(self, specs: tuple[TensorSpec, ...]) -> tuple[list[np.ndarray], list[np.ndarray]]:
        if self._ref is not None and self._inputs is not None:
            return self._inputs, self._ref
        feeds = self._feeds_of(self.sample) if self.sample is not None else deterministic_sample(specs)
        known = all_delegates()
        for art in self.artifacts:
            ref_d = known.get(REFERENCE.get(art.format, ""))
            if ref_d is None or ref_d.probe() is not None:
                continue
            session = ref_d.open(art, threads=1)
            try:
                self._ref = [np.asarray(o) for o in session.run(feeds)]
            finally:
                session.close()
            self._inputs = feeds
            return feeds, self._ref
        raise ModelLoadError(f"cannot check model {self.name!r} against a tolerance: no fp32 CPU path "
                             f"({', '.join(REFERENCE.values())}) is available for its "
                             f"{'/'.join(a.format for a in self.artifacts)} artifact")

    def __call__(self, d: Delegate, s: Session) -> str | None:
        """None when ``d``'s session answers within the tolerance, else why ``d`` is excluded for the model."""
        if d.name in self.verdicts:
            return self.verdicts[d.name]
        feeds, ref = self._reference(s.inputs)
        try:
            got = s.run(list(feeds))
        except OffloadError:
            # the cloud did not answer this once (a broker hiccup): not a wrong answer, so not excluded;
            # asked again on the next load
            return None
        except EdgeRTError as exc:
            verdict: str | None = f"failed on the sample: {exc}"
        else:
            err, broke = max_error(got, ref, s.outputs)
            self.errors[d.name] = err
            precision = getattr(s, "precision", "fp32")
            verdict = (f"{broke} (compared with the fp32 CPU answer)" if broke else
                       f"error {err:.2g} of the output range > tolerance {self.tolerance:g} "
                       f"({precision} arithmetic; force_fp32 may help)" if err > self.tolerance else None)
        self.verdicts[d.name] = verdict
        return verdict


def accuracy_check(lm: Any, tolerance: Any, sample: Any) -> AccuracyCheck | None:
    """The check ``rt.load(tolerance=…, sample=…)`` asks for, or None without a tolerance.

    Raises:
        ConfigError: a bad ``tolerance``, or a ``sample`` without one.
    """
    tol = check_tolerance(tolerance)
    if tol is None:
        if sample is not None:
            raise ConfigError("sample= is the input a tolerance is checked on; pass tolerance= too "
                              "(e.g. rt.load(path, tolerance=1e-3, sample=x))")
        return None
    return AccuracyCheck(lm.name, lm.artifacts, tol, sample, lm.feeds)
