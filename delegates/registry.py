"""Discovers the delegate paths of this host, one backend family per module, imported lazily.

Every path edgert knows is listed, available here or not (``describe()``);
``resolve("auto")`` returns the available ones, and asking for a path by
name that cannot run here raises ``DelegateUnavailable`` with the probe's
reason. Probes are cached per delegate; :func:`reprobe` forgets one (the
runtime calls it to re-check a path it marked unhealthy after an
invoke-time fault).

Options are passed through from configuration, keyed by delegate name::

    configure({"ort-cuda": {"device_id": 1}, "litert-gpu": {"library": "/data/local/tmp/libgpu.so"}})
    resolve(["ort-qnn-htp"], options={"ort-qnn-htp": {"htp_performance_mode": "burst"}})
"""

from __future__ import annotations

import importlib
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from delegates.base import Delegate, DelegateInfo
from delegates.errors import DelegateUnavailable
from scheduler.errors import ConfigError, did_you_mean

#: Backend family modules; each has ``delegates() -> list[Delegate]``.
FAMILIES: tuple[str, ...] = (
    "delegates.litert",           # LiteRT XNNPACK (cpu)
    "delegates.litert_accel",     # LiteRT load_delegate: GPU, QNN TFLite (htp/gpu/dsp), Hexagon
    "delegates.litert_compiled",  # LiteRT CompiledModel GPU / NPU flags
    "delegates.onnxrt",           # ORT CPU, XNNPACK, CUDA, TensorRT(+DLA), NNAPI, CoreML, OpenVINO
    "delegates.ort_qnn",          # ORT QNN (htp as npu, gpu), plugin or built-in form
    "delegates.ort_webgpu",       # ORT WebGPU plugin EP (Dawn)
)

#: Processor kinds that name every available path of that kind in :func:`resolve`.
PROCESSOR_KINDS: tuple[str, ...] = ("cpu", "gpu", "dsp", "npu")

_cache: dict[str, Delegate] | None = None
_lock = threading.Lock()


def all_delegates() -> dict[str, Delegate]:
    """Every delegate path edgert knows, available here or not, by name (created once per process)."""
    global _cache
    with _lock:
        if _cache is None:
            found: dict[str, Delegate] = {}
            for mod in FAMILIES:
                for d in importlib.import_module(mod).delegates():
                    found[d.name] = d
            _cache = found
        return _cache


def get(name: str) -> Delegate:
    """The delegate called ``name``, available or not.

    Raises:
        ConfigError: an unknown name (with "did you mean").
    """
    known = all_delegates()
    d = known.get(name)
    if d is None:
        raise did_you_mean("delegate", name, known)
    return d


def configure(options: Mapping[str, Mapping[str, Any]]) -> None:
    """Pass options to delegates by name (EP options for ORT, delegate options for LiteRT).

    Raises:
        ConfigError: an unknown delegate name, or options a delegate does not take.
    """
    for name, opts in options.items():
        d = get(name)
        conf = getattr(d, "configure", None)
        if conf is None:
            raise ConfigError(f"delegate {name!r} takes no options (got {sorted(opts)})")
        conf(dict(opts))


def reprobe(name: str) -> str | None:
    """Forget ``name``'s cached probe and probe again: None when it can run now, else the reason."""
    d = get(name)
    inv = getattr(d, "invalidate", None)
    if inv is not None:
        inv()
    return d.probe()


def describe() -> list[DelegateInfo]:
    """Probe every delegate path: name, processor, backend, available, reason."""
    return [d.info() for d in all_delegates().values()]


def _why_not(d: Delegate) -> str:
    """Why ``d`` is not in ``"auto"``, shortened (a software adapter says so without probing it)."""
    if getattr(d, "software", False):
        return f"a software adapter ({d.adapter or 'unnamed'}) that computes on the CPU cores; name it to use it"
    return re.split(r" [(]|; ", d.probe() or "not in auto")[0]


def resolve(spec: str | Iterable[str] = "auto",
            options: Mapping[str, Mapping[str, Any]] | None = None) -> list[Delegate]:
    """The delegates to use: ``"auto"`` = every available one that is neither emulated nor on a software
    adapter (:attr:`Delegate.software`), but for second paths to one engine (``in_auto = False``);
    ``"cpu"`` / ``"gpu"`` / ``"npu"`` / ``"dsp"`` = those of ``"auto"`` on that processor kind; or the
    named ones (in order).

    Args:
        spec: ``"auto"``, one name, or names from ``edgert devices``.
        options: per-delegate options applied first (see :func:`configure`).

    Raises:
        ConfigError: an unknown name (with "did you mean").
        DelegateUnavailable: a named delegate cannot run on this host (with the reason).
    """
    if options:
        configure(options)
    known = all_delegates()
    if spec == "auto":
        # An emulated accelerator (the QNN HTP emulator on x86) runs on the host CPU: it is real and
        # usable by name, but "auto" must not count it as a processor of its own.
        # A second path to an engine another path already gives (litert-compiled-cpu is XNNPACK, as
        # litert-xnnpack is) says in_auto = False: usable by name, not warmed up twice per model.
        # A software adapter (lavapipe) is asked first, before a probe would load its driver here.
        return [d for d in known.values() if not getattr(d, "software", False) and d.probe() is None
                and not getattr(d, "emulated", False) and getattr(d, "in_auto", True)]
    if isinstance(spec, str) and spec in PROCESSOR_KINDS:
        kind = [d for d in resolve("auto") if d.processor == spec]
        if not kind:
            why = "; ".join(f"{d.name}: {_why_not(d)}" for d in known.values() if d.processor == spec)
            raise DelegateUnavailable(spec, f"no {spec} path is available here ({why}); "
                                            "edgert devices --verbose says why in full")
        return kind
    names = [spec] if isinstance(spec, str) else list(spec)
    out: list[Delegate] = []
    for name in names:
        d = get(name)
        reason = d.probe()
        if reason is not None:
            raise DelegateUnavailable(name, reason)
        out.append(d)
    return out
