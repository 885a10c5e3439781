"""Argument checks of the Python API (``Runtime``, ``load``, ``submit``): the API's input boundary.

Each check raises :class:`~edgert.errors.ConfigError` naming the argument, the value
it got and what it takes, before anything is opened, loaded or queued. Kept apart
from the runtime so the hot path only calls them where an argument enters.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from edgert._core._result import Result
from edgert.errors import ConfigError, did_you_mean

#: Largest SLO accepted (ms): about 2.8 hours; anything above is a unit mix-up.
MAX_SLO_MS = 1e7
#: Most warm-up runs per model and delegate.
MAX_WARMUP_RUNS = 1_000


def show(v: Any) -> str:
    """``v`` for a message: its repr, cut to 60 characters, and its type when that is not obvious."""
    text = repr(v)
    text = text if len(text) <= 60 else f"{text[:57]}..."
    return text if isinstance(v, (int, float, str, type(None))) else f"{type(v).__name__} {text}"


def slo_ms(v: Any, model: str | None = None) -> float | None:
    """``slo_ms=``: None, or a number of ms in (0, MAX_SLO_MS]."""
    if v is None:
        return None
    where = f"slo_ms of model {model!r}" if model else "slo_ms"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ConfigError(f"{where} must be a number of ms (e.g. slo_ms=33.3) or None, got {show(v)}")
    if not (math.isfinite(v) and 0 < v <= MAX_SLO_MS):
        raise ConfigError(f"{where} must be > 0 and <= {MAX_SLO_MS:g} ms (None: no deadline), got {v}")
    return float(v)


def name(v: Any) -> str | None:
    """``name=``: None or a non-empty string."""
    if v is not None and (not isinstance(v, str) or not v.strip()):
        raise ConfigError(f"name must be a non-empty string, got {show(v)}")
    return v


def names(v: Any, arg: str) -> tuple[str, ...]:
    """A sequence of names (``then=``, ``delegates=``): strings, not one bare string."""
    if isinstance(v, str):
        raise ConfigError(f"{arg} takes a list of names, got the string {v!r}; write {arg}=[{v!r}]")
    if not isinstance(v, Sequence) or not all(isinstance(x, str) and x for x in v):
        raise ConfigError(f"{arg} must be a list of names, got {show(v)}")
    return tuple(v)


def model_format(v: Any) -> str | None:
    """``format=``: None, ``"onnx"`` or ``"tflite"``."""
    if v not in (None, "onnx", "tflite"):
        raise ConfigError(f"format must be 'onnx', 'tflite' or None, got {show(v)}")
    return v


def then(model: str, names: Sequence[str], loaded: Any) -> str:
    """At ``model``'s first request, every name in its ``then=`` must be a loaded model; returns ``model``.

    Raises:
        ConfigError: one is not loaded (with the closest loaded name).
    """
    for n in names:
        if n not in loaded:
            raise ConfigError(f"then= of model {model!r}: {did_you_mean('model', n, loaded)} (load it before submitting)")
    return model


def after(v: Any) -> Result | None:
    """``submit(after=)``: None, a Result, or a Future of one (waited for)."""
    if isinstance(v, Future):
        v = v.result()
    if v is not None and not isinstance(v, Result):
        raise ConfigError(f"after must be the Result (or Future) of an earlier request, got {show(v)}")
    return v


def runtime_args(delegates: Any, scheduler: Any, offload: Any, trace: Any, cpu_workers: Any,
                 warmup_runs: Any, alpha: Any, urgent_workers: Any = 0) -> None:
    """The arguments of ``edgert.Runtime`` other than ``profile`` (see its docstring)."""
    if not isinstance(delegates, str) and (not isinstance(delegates, Sequence) or not delegates):
        raise ConfigError(f"delegates must be 'auto' or a non-empty list of names, got {show(delegates)}")
    if scheduler is not None and not isinstance(scheduler, str) and not hasattr(scheduler, "decide"):
        raise ConfigError(f"scheduler must be a policy name or an object with decide(view, now_ms), "
                          f"got {show(scheduler)}")
    from edgert.offload import CloudConfig, KServeConfig  # noqa: PLC0415 - config objects only (no client library)

    if offload is not None and not isinstance(offload, (str, CloudConfig, KServeConfig)):
        raise ConfigError(f"offload must be 'off', 'auto', 'mqtt://host:port' or 'kserve://host:port', "
                          f"got {show(offload)}")
    if trace is not None:
        output_file(trace, "trace")
    if cpu_workers is not None and (isinstance(cpu_workers, bool) or not isinstance(cpu_workers, int)
                                    or not 0 <= cpu_workers <= 1024):
        raise ConfigError(f"cpu_workers must be None (one per core) or an int from 0 to 1024, got {show(cpu_workers)}")
    if isinstance(urgent_workers, bool) or not isinstance(urgent_workers, int) or not 0 <= urgent_workers <= 1024:
        raise ConfigError(f"urgent_workers must be an int from 0 to 1024 (CPU workers that run only critical and "
                          f"high requests), got {show(urgent_workers)}")
    if isinstance(warmup_runs, bool) or not isinstance(warmup_runs, int) or not 0 <= warmup_runs <= MAX_WARMUP_RUNS:
        raise ConfigError(f"warmup_runs must be an int from 0 to {MAX_WARMUP_RUNS}, got {show(warmup_runs)}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha <= 1:
        raise ConfigError(f"alpha must be a number in (0, 1], got {show(alpha)}")


def output_file(v: Any, arg: str) -> Path:
    """A file to write: a path whose directory exists and that is not a directory."""
    if not isinstance(v, (str, os.PathLike)):
        raise ConfigError(f"{arg} must be a file path, got {show(v)}")
    p = Path(v)
    if p.is_dir():
        raise ConfigError(f"{arg}={str(p)!r} is a directory; give a file name")
    if not p.resolve().parent.is_dir():
        raise ConfigError(f"{arg}={str(p)!r}: directory {str(p.resolve().parent)!r} does not exist")
    return p
