"""Accuracy-checked placement: each candidate path below fp32 is checked once at load against the fp32
CPU answer, on by default.

``rt.load(path)`` runs one sample (the caller's ``sample=``, or a deterministic one) through an fp32 CPU
session of the model, opened directly on its backend (:data:`REFERENCE`), and through every session the
runtime is about to use whose arithmetic is below fp32 (fp16, int8, mixed, tf32). A path whose answer
differs from the reference by more than the tolerance, or whose outputs differ in name, shape or dtype,
is not used for that model: :class:`AccuracyCheck` says why, and the runtime shows the reason beside the
model's placement (``rt.stats()[name]["excluded"]``).

- The tolerance is a share of each output's range (max - min of the reference on the sample), the same
  measure the delegates declare (:data:`delegates.base.TOLERANCE`). Without ``tolerance=`` it is
  :data:`DEFAULT_TOLERANCE` (1 % of the range), stricter than the fp16 bound a path declares (5 %): what
  the check sees on one sample must leave room for other inputs. ``tolerance=`` sets the bound and then
  checks every path, fp32 ones too.
- A flat output (its reference range on the sample within :data:`FLAT` of its size, such as a
  segmentation mask on noise, or a single score) cannot be measured against its range: it is held to
  its absolute error against max(1, |reference|), and it never decides a verdict alone. A path below
  fp32 whose every output is flat on the sample is excluded ("cannot be judged": pass a real
  ``sample=``), since nothing showed that its arithmetic is good enough.
- ``rt.load(path, check_accuracy=False)`` turns the check off.
- The check costs, per model with a candidate below fp32, one reference session opened and run once,
  and one more run of each such candidate; models whose every candidate computes in fp32 cost nothing.

No peer runtime (Band, MediaPipe, LiteRT, ONNX Runtime) checks this: an fp16 GPU path that moves a
landmark by a few pixels is fine for one model and ruins another, and only the model's owner knows.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from delegates.base import Artifact, Delegate, Session, TensorSpec
from delegates.registry import all_delegates
from edgert.errors import ConfigError, EdgeRTError, ModelLoadError, OffloadError

#: The fp32 CPU path that gives the reference answer, per artifact format.
REFERENCE: dict[str, str] = {"tflite": "litert-xnnpack", "onnx": "ort-cpu"}

#: The tolerance of the default check (no ``tolerance=``): a share of each output's range.
DEFAULT_TOLERANCE = 0.01

#: An output is flat on a sample when its reference range is at most this share of max(1, |reference|).
FLAT = 1e-3


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


def output_errors(got: list[np.ndarray], ref: list[np.ndarray], specs: tuple[TensorSpec, ...],
                  ) -> tuple[list[tuple[str, float, bool]], str]:
    """Per output: (name, error, measured on its range): |got - ref| as a share of the reference's range,
    or, for a flat output (range within :data:`FLAT` of max(1, |ref|)), against max(1, |ref|) with the
    flag False. Also what broke the contract ("" when names, shapes and dtypes match); shapes are
    compared explicitly, never broadcast. Non-numeric and empty outputs are left out."""
    if len(got) != len(ref):
        return [], f"{len(got)} outputs, the reference has {len(ref)}"
    out: list[tuple[str, float, bool]] = []
    for g, r, s in zip(got, ref, specs):
        g, r = np.asarray(g), np.asarray(r)
        if g.shape != r.shape:
            return [], f"output {s.name!r} has shape {list(g.shape)}, the reference {list(r.shape)}"
        if g.dtype != r.dtype:
            return [], f"output {s.name!r} is {g.dtype}, the reference {r.dtype}"
        if r.size == 0 or not np.issubdtype(r.dtype, np.number):
            continue
        rf, gf = r.astype(np.float64), g.astype(np.float64)
        finite = np.isfinite(rf)
        if not np.array_equal(finite, np.isfinite(gf)):
            return [], f"output {s.name!r} has non-finite values where the reference has none (or back)"
        if not finite.any():
            continue
        size = max(1.0, float(np.abs(rf[finite]).max()))
        span = float(np.max(rf[finite]) - np.min(rf[finite]))
        on_range = span > FLAT * size
        out.append((s.name, float(np.abs(gf[finite] - rf[finite]).max()) / (span if on_range else size), on_range))
    return out, ""


def max_error(got: list[np.ndarray], ref: list[np.ndarray], specs: tuple[TensorSpec, ...]) -> tuple[float, str]:
    """Largest |got - ref| over the outputs as a share of each reference output's range (a flat output's
    against max(1, |ref|): :func:`output_errors`), and what broke the contract ("" when shapes and dtypes
    match)."""
    errs, broke = output_errors(got, ref, specs)
    if broke:
        return math.inf, broke
    return max((e for _, e, _ in errs), default=0.0), ""


class AccuracyCheck:
    """Checks each candidate (delegate, session) of one model once against the fp32 CPU reference.

    Args:
        name: the model's name (for messages).
        artifacts: its artifacts; the reference opens the first one with an fp32 CPU path.
        tolerance: largest accepted error, a share of each output's range.
        sample: the caller's sample input (array, list or dict; validated by ``feeds``) or None.
        feeds: the model's input validator (``LoadedModel.feeds``), used once specs are known.
        every_path: check fp32 paths too (a caller's ``tolerance=``); else only paths below fp32.
    """

    def __init__(self, name: str, artifacts: list[Artifact], tolerance: float, sample: Any,
                 feeds: Any, every_path: bool = True) -> None:
        self.name = name
        self.artifacts = artifacts
        self.tolerance = tolerance
        self.sample = sample
        self.every_path = every_path
        self._feeds_of = feeds
        self._ref: list[np.ndarray] | None = None
        self._inputs: list[np.ndarray] | None = None
        #: delegate name -> None (within tolerance) or the reason it is excluded; one check per path.
        self.verdicts: dict[str, str | None] = {}
        #: delegate name -> measured error (share of range).
        self.errors: dict[str, float] = {}
        #: Wall-clock ms the checks took (the reference's open and run, the candidates' runs).
        self.cost_ms = 0.0

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
        """None when ``d``'s session answers within the tolerance (or is not checked: fp32 under the
        default check), else why ``d`` is excluded for the model."""
        precision = getattr(s, "precision", "fp32")
        if not self.every_path and precision == "fp32":
            return None
        if d.name in self.verdicts:
            return self.verdicts[d.name]
        t0 = time.perf_counter()
        try:
            verdict = self._judge(d.name, s, precision)
        except OffloadError:
            # the cloud did not answer this once (a broker hiccup): not a wrong answer, so not excluded;
            # asked again on the next load
            return None
        finally:
            self.cost_ms += (time.perf_counter() - t0) * 1e3
        self.verdicts[d.name] = verdict
        return verdict

    def summary(self) -> dict[str, Any] | None:
        """``rt.stats()[name]["accuracy"]``: tolerance, ``errors`` (path -> share of the range) and
        ``check_ms`` (what the check added to the load); None when no path was compared."""
        if not self.verdicts:
            return None
        return {"tolerance": self.tolerance, "errors": {k: round(v, 6) for k, v in self.errors.items()},
                "check_ms": round(self.cost_ms, 1)}

    def _judge(self, name: str, s: Session, precision: str) -> str | None:
        """Run the sample on ``s`` and compare: None when within the tolerance, else the reason."""
        feeds, ref = self._reference(s.inputs)
        try:
            got = s.run(list(feeds))
        except OffloadError:
            raise
        except EdgeRTError as exc:
            return f"failed on the sample: {exc}"
        errs, broke = output_errors(got, ref, s.outputs)
        if broke:
            return f"{broke} (compared with the fp32 CPU answer)"
        err = max((e for _, e, _ in errs), default=0.0)
        self.errors[name] = err
        hint = "; force_fp32 may help" if precision != "fp32" else ""
        if err > self.tolerance:
            worst = max(errs, key=lambda t: t[1])
            return (f"error {err:.2g} of the output range > tolerance {self.tolerance:g} on output {worst[0]!r} "
                    f"({precision} arithmetic{hint})")
        if precision != "fp32" and errs and not any(on_range for _, _, on_range in errs):
            flat = ", ".join(n for n, _, _ in errs[:3])
            return (f"cannot be judged: every output is flat on the sample ({flat}: its range is within "
                    f"{FLAT:g} of its size), so nothing shows its {precision} arithmetic is good enough; "
                    "pass a real input as sample=, or check_accuracy=False to use the path unchecked")
        return None


def accuracy_check(lm: Any, tolerance: Any, sample: Any, enabled: bool = True) -> AccuracyCheck | None:
    """The check ``rt.load(tolerance=…, sample=…, check_accuracy=…)`` asks for: by default every path
    below fp32 at :data:`DEFAULT_TOLERANCE`; with ``tolerance=`` every path at that bound; None when
    ``enabled`` is False.

    Raises:
        ConfigError: a bad ``tolerance``, ``check_accuracy`` not a bool, or ``tolerance`` / ``sample``
            with the check turned off.
    """
    if not isinstance(enabled, bool):
        raise ConfigError(f"check_accuracy must be True or False, got {enabled!r}")
    tol = check_tolerance(tolerance)
    if not enabled:
        if tol is not None or sample is not None:
            raise ConfigError("check_accuracy=False turns the accuracy check off, so tolerance= and sample= "
                              "would be ignored; drop them, or keep the check (rt.load(path, tolerance=1e-3))")
        return None
    return AccuracyCheck(lm.name, lm.artifacts, DEFAULT_TOLERANCE if tol is None else tol, sample, lm.feeds,
                         every_path=tol is not None)
