"""Loading a model onto the runtime's workers: open, check, warm up, pick the fastest delegate.

Kept apart from :mod:`edgert._core._runtime` (the request lifecycle): nothing here
touches scheduling state, and everything here runs before a model is visible
to the policy.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Sequence

import numpy as np

from delegates.base import Delegate, Session
from delegates.registry import all_delegates, resolve
from delegates.sharing import shared_session
from edgert._core._memory import ResidentGrowth, give_back_freed
from edgert._core._model import LoadedModel
from edgert._core._result import note_precision
from edgert._core._run import Worker
from edgert.errors import (
    ConfigError,
    DelegateUnavailable,
    EdgeRTError,
    ModelLoadError,
    did_you_mean,
)
from scheduler.estimator import LatencyEstimator
from scheduler.host import cores
from scheduler.profile import DeviceProfile

#: (worker, delegate, session, warm-up median ms or None when zeros cannot run it)
Opened = tuple[Worker, Delegate, Session, "float | None"]


def open_on_workers(lm: LoadedModel, workers: Sequence[Worker], allowed: tuple[str, ...] | None,
                    delegates: Sequence[Delegate], warmup_runs: int,
                    accept: Callable[[Delegate, Session], str | None] | None = None,
                    excluded: dict[str, str] | None = None) -> list[Opened]:
    """Open ``lm`` on every worker that can run it, keeping per worker the delegate that warmed up fastest.

    Identical workers (same kind and delegates, e.g. cpu0 and cpu1) reuse the first one's choice and
    timing, and share its session: one copy of the model however many of them run it
    (:func:`delegates.sharing.shared_session`). Fills ``lm.inputs``/``lm.outputs`` from the first
    session opened, and ``lm.resident_mb`` with what the process's resident set grew by meanwhile.
    ``accept`` (the model's accuracy check, :class:`edgert._core._accuracy.AccuracyCheck`) may refuse a
    path: its reason lands in ``excluded`` (delegate name -> reason) and the path is not used for
    this model; so does a serving option the path cannot apply to this model
    (:class:`delegates._ort_serving.ServingRefused`), seen even where another path took the model.

    Raises:
        ModelLoadError: no worker could open it (every delegate's reason, or "no delegate takes it").
    """
    give_back_freed()
    with ResidentGrowth() as grew:
        opened = _open(lm, workers, allowed, delegates, warmup_runs, accept, excluded)
    lm.resident_mb = grew.mb
    return opened


def _open(lm: LoadedModel, workers: Sequence[Worker], allowed: tuple[str, ...] | None,
          delegates: Sequence[Delegate], warmup_runs: int,
          accept: Callable[[Delegate, Session], str | None] | None,
          excluded: dict[str, str] | None) -> list[Opened]:
    errors: dict[tuple[str, str], list[str]] = {}   # (delegate, message) -> workers: one line each
    chosen: dict[tuple[str, ...], tuple[Delegate, Session, float | None]] = {}
    opened: list[Opened] = []
    keys = [_identity(w, lm, allowed) for w in workers]
    for w, key in zip(workers, keys):
        if key is None:
            continue
        if key in chosen:   # an identical worker opened it already: share its session
            d0, s0, ms0 = chosen[key]
            opened.append((w, d0, s0, ms0))
            continue
        best: tuple[Delegate, Session, float | None] | None = None
        for d in w.candidates(lm, allowed):
            try:
                s = w.open_model(lm, d)
                check_specs(lm, s, d)
            except ModelLoadError as exc:
                errors.setdefault((d.name, str(exc)), []).append(w.name)
                if excluded is not None and getattr(exc, "option", None):   # a serving option refused the model
                    excluded[d.name] = str(exc)
                continue
            note_precision(d.name, getattr(s, "precision", "fp32"))
            if accept is not None and (why := accept(d, s)) is not None:
                s.close()
                give_back_freed()   # an excluded path holds no memory (a GPU session frees ~50-160 MB here)
                if excluded is not None:
                    excluded[d.name] = why
                errors.setdefault((d.name, f"excluded by the model's tolerance: {why}"), []).append(w.name)
                continue
            ms = warmup_ms(s, warmup_runs)
            if best is None or (ms is not None and (best[2] is None or ms < best[2])):
                if best is not None:
                    best[1].close()
                best = (d, s, ms)
            else:
                s.close()
        if best is not None:
            d, s, ms = best
            users = keys.count(key)
            s = shared_session(s, functools.partial(w.open_model, lm, d), users)
            chosen[key] = (d, s, ms)
            opened.append((w, d, s, ms))
    if not opened:
        detail = "; ".join(f"{d} on {', '.join(ws)}: {msg}" for (d, msg), ws in errors.items()) if errors else (
            f"no delegate here takes {'/'.join(a.format for a in lm.artifacts)} "
            f"(delegates: {', '.join(d.name for d in delegates)})")
        raise ModelLoadError(f"cannot load model {lm.name!r}: {detail}")
    return opened


def _identity(w: Worker, lm: LoadedModel, allowed: tuple[str, ...] | None) -> tuple[str, ...] | None:
    """What makes two workers interchangeable for ``lm`` (kind, class and candidate delegates); None when
    ``w`` cannot run it."""
    cands = w.candidates(lm, allowed)
    if not cands:
        return None
    return (w.kind, type(w).__qualname__, *(d.name for d in cands))


def check_specs(lm: LoadedModel, s: Session, d: Delegate) -> None:
    """Take the first session's specs as the model's; later artifacts must be the same network."""
    if not lm.inputs:
        lm.set_specs(tuple(s.inputs), tuple(s.outputs))
        return
    if len(s.inputs) != len(lm.inputs) or len(s.outputs) != len(lm.outputs):
        raise ModelLoadError(
            f"the {d.formats[0]} artifact of {lm.name!r} has {len(s.inputs)} inputs / {len(s.outputs)} "
            f"outputs but another artifact has {len(lm.inputs)} / {len(lm.outputs)}: they must be one network")


def warmup_ms(s: Session, runs: int) -> float | None:
    """Median ms of ``runs`` runs after one untimed run on zero inputs; None if zeros cannot run it."""
    feeds = [np.zeros(spec.concrete_shape(), spec.dtype) for spec in s.inputs]
    try:
        s.run(feeds)
        times = []
        for _ in range(max(1, runs)):
            t = time.perf_counter()
            s.run(feeds)
            times.append((time.perf_counter() - t) * 1e3)
    except EdgeRTError:
        return None
    return float(np.median(times))


def profiled_ms(profile: DeviceProfile | None, model: str, workers: Sequence[Worker]) -> dict[str, float]:
    """The profile's latency (ms) of ``model`` per worker name (same name, else same kind)."""
    if profile is None:
        return {}
    from edgert._profile_seed import seed_from_profile  # noqa: PLC0415 - only with a profile

    tmp = LatencyEstimator()
    seed_from_profile(tmp, profile, {w.name: w.kind for w in workers})
    return {w.name: ms for w in workers if (ms := tmp.expected_ms(model, w.name)) is not None}


def check_delegate_names(names: Sequence[str] | str | None, mine: Sequence[Delegate]) -> tuple[str, ...] | None:
    """Validate ``rt.load(delegates=…)``: known, available here, and among the runtime's own.

    Raises:
        ConfigError: unknown name ("did you mean") or one the runtime was created without.
        DelegateUnavailable: the delegate cannot run on this host.
    """
    if names is None:
        return None
    if isinstance(names, str):
        names = [names]
    known = all_delegates()
    own = {d.name for d in mine}
    for n in names:
        if n not in known and n not in own:
            raise did_you_mean("delegate", n, known)
        if n in known:
            reason = known[n].probe()
            if reason is not None:
                raise DelegateUnavailable(n, reason)
        if n not in own:
            raise ConfigError(f"delegate {n!r} is available but this runtime was created without it; "
                              f"pass delegates=[..., {n!r}] to edgert.Runtime")
    return tuple(names)


def cpu_slots(delegates: Sequence[Delegate], cpu_workers: int | None) -> int | None:
    """The CPU workers to make: ``cpu_workers`` when given; by default (None: one per core) one fewer per
    processor kind whose paths all run on a software adapter (:attr:`Delegate.software`, e.g. lavapipe
    named explicitly), since that processor computes on the same cores: the runtime then runs at most
    one invocation per core. At least one CPU worker stays where there are cpu paths."""
    if cpu_workers is not None:
        return cpu_workers
    software = {k for k in {d.processor for d in delegates if d.processor != "cpu"}
                if all(getattr(d, "software", False) for d in delegates if d.processor == k)}
    if not software or not any(d.processor == "cpu" for d in delegates):
        return None
    return max(1, cores() - len(software))


def name_software_workers(workers: Sequence[Worker]) -> None:
    """Rename a worker whose every path runs on a software adapter from its kind (``gpu``) to
    ``<kind>-sw`` (``gpu-sw``): ``Runtime.processors`` says ``gpu`` only for a hardware GPU. Its kind
    stays, so policies and profiles treat it as the GPU code path it is."""
    for w in workers:
        if w.kind != "cpu" and w.delegates and all(getattr(d, "software", False) for d in w.delegates):
            w.name = f"{w.kind}-sw"
            w.peers = (w.name,)
            w.idle_view = dataclasses.replace(w.idle_view, name=w.name)


def resolve_delegates(spec: str | Sequence[str | Delegate]) -> list[Delegate]:
    """Registry names resolved (ConfigError / DelegateUnavailable), Delegate objects kept as given."""
    if isinstance(spec, str):
        return resolve(spec)
    out: list[Delegate] = []
    for item in spec:
        out.extend([item] if isinstance(item, Delegate) else resolve([item]))
    return out
