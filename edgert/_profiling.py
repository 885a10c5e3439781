"""On-host profiling: measure (model, delegate) latencies into a device profile.

``edgert profile`` (:mod:`edgert.cli._profile`) uses :func:`measure` and
:func:`build_profile`; the runtime reads a profile back with
:func:`edgert._profile_seed.seed_from_profile`.

Processor names in a written profile follow the runtime's worker names: the
CPU column is ``cpu0`` (the runtime's CPU workers are ``cpu0``, ``cpu1``, …,
identical single-threaded workers), the others are the kind itself (``gpu``,
``dsp``, ``npu``). When several delegates of one kind were measured for a
model, the column holds the fastest p50 and ``sources`` names all of them;
``sources["delegate/<model>/<processor>"]`` names the one the number is from.

Instances per GPU: for a path that serves several sessions of one model on one GPU (ORT's
CUDA / TensorRT EPs: ``serves_instances``), :func:`measure_instances` runs 1, 2, 4 sessions from as
many threads and :func:`record_instances` writes the count :func:`~delegates._ort_serving.choose_instances`
picks into the profile's ``instances[model][processor]`` (top-level JSON key; :func:`save_profile`) with
the measured throughputs in ``sources["instances/<model>/<processor>"]``. :func:`instances_of` reads it back.
"""

from __future__ import annotations

import json
import platform
import re
import socket
import statistics
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import numpy as np

from delegates._host import host_summary
from delegates._ort_serving import choose_instances
from delegates.base import FORMATS, Artifact, Delegate, Session
from edgert._board import board_facts
from edgert._core._memory import ResidentGrowth, give_back_freed
from edgert.errors import ConfigError, ModelLoadError
from scheduler.profile import DeviceProfile, ProcessorSpec


@dataclass(frozen=True, slots=True)
class Measurement:
    """Latencies (ms) of one model on one delegate, and how much of it ran on the delegate."""

    model: str
    delegate: str
    processor: str  # kind: cpu, gpu, dsp, npu
    p50_ms: float
    p90_ms: float
    mean_ms: float
    runs: int
    warmup: int
    coverage: float = 1.0
    placement: dict[str, int] = field(default_factory=dict)
    #: MB the process's resident set grew by while one session was opened and run (None: unknown)
    memory_mb: float | None = None


@dataclass(frozen=True, slots=True)
class Failure:
    """A (model, delegate) pair that could not be measured, and why."""

    model: str
    delegate: str
    reason: str


def artifact_for(path: str | Path) -> Artifact:
    """The Artifact of a ``.tflite`` / ``.onnx`` file; its model name is the file stem.

    Raises:
        ModelLoadError: the file does not exist.
        ConfigError: the suffix is not a model format edgert runs.
    """
    p = Path(path)
    fmt = p.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise ConfigError(f"{p}: unknown model format {p.suffix!r}; expected one of "
                          f"{', '.join('.' + f for f in FORMATS)}")
    if not p.is_file():
        raise ModelLoadError(f"model file {p} does not exist")
    return Artifact(fmt, path=p)


def example_feeds(session: Session, seed: int = 0) -> list[np.ndarray]:
    """Random inputs matching the session's specs (dynamic dims = 1), reproducible by ``seed``."""
    rng = np.random.default_rng(seed)
    feeds = []
    for spec in session.inputs:
        shape = spec.concrete_shape()
        if spec.dtype.kind == "f":
            arr = rng.standard_normal(shape).astype(spec.dtype)
        elif spec.dtype.kind in "iu":
            hi = 256 if spec.dtype.itemsize == 1 else 10
            arr = rng.integers(0, hi, size=shape).astype(spec.dtype)
        else:
            arr = np.zeros(shape, spec.dtype)
        feeds.append(arr)
    return feeds


def measure(delegate: Delegate, artifact: Artifact, runs: int = 50, warmup: int = 5,
            threads: int = 1, model: str | None = None) -> Measurement:
    """Open ``artifact`` on ``delegate``, run ``warmup`` untimed then ``runs`` timed invocations.

    Raises:
        DelegateUnavailable, ModelLoadError, InferenceError: from the delegate.
        ValueError: ``runs`` < 1 or ``warmup`` < 0.
    """
    if runs < 1 or warmup < 0:
        raise ValueError(f"runs must be >= 1 and warmup >= 0 (got runs={runs}, warmup={warmup})")
    name = model or (artifact.path.stem if artifact.path is not None else "model")
    give_back_freed()   # what earlier sessions freed must not be counted as reused here
    grew = ResidentGrowth().start()   # the model's resident share: one session opened and run (edgert._core._memory)
    session = delegate.open(artifact, threads=threads)
    try:
        feeds = example_feeds(session)
        for _ in range(warmup):
            session.run(feeds)
        times: list[float] = []
        for _ in range(runs):
            t0 = time.perf_counter()
            session.run(feeds)
            times.append((time.perf_counter() - t0) * 1e3)
        placement = session.placement()
        coverage = float(session.coverage)
        memory = grew.read()   # with the session still open
    finally:
        session.close()
    p90 = float(np.percentile(times, 90)) if len(times) > 1 else times[0]
    return Measurement(name, delegate.name, delegate.processor, statistics.median(times), p90,
                       statistics.fmean(times), runs, warmup, coverage, placement,
                       None if memory is None else round(memory, 1))


def processor_name(kind: str) -> str:
    """The profile column for a processor kind: ``cpu0`` for the CPU, else the kind."""
    return "cpu0" if kind == "cpu" else kind


def versions() -> str:
    """Installed versions of the runtimes edgert measures with, e.g. ``onnxruntime 1.31.1, ai-edge-litert 2.3.0``."""
    parts = []
    for dist in ("onnxruntime", "onnxruntime-gpu", "onnxruntime-qnn", "onnxruntime-openvino",
                 "ai-edge-litert", "tflite-runtime", "numpy"):
        try:
            parts.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            continue
    return ", ".join(parts)


def _placement_text(m: Measurement) -> str:
    if not m.placement:
        return ""
    return " (" + ", ".join(f"{k} {v}" for k, v in sorted(m.placement.items(), key=lambda kv: -kv[1])) + " nodes)"


def build_profile(measurements: Iterable[Measurement], failures: Iterable[Failure] = (),
                  name: str | None = None, description: str = "") -> DeviceProfile:
    """A docs/design.md §6 device profile of this host from measurements (fastest delegate per processor column).

    ``sources`` carries ``host``, ``versions``, the board (``board``, ``arch``, ``kernel``, and
    ``emulation`` when measured under an emulator: :mod:`edgert._board`), and per (model, processor):
    ``latency_ms/…`` (how it was measured, with coverage when partial),
    ``delegate/…`` (the delegate of the number), ``coverage/…``; failed pairs
    are under ``unmeasured/<model>/<delegate>``.
    """
    host = socket.gethostname()
    best: dict[tuple[str, str], Measurement] = {}
    others: dict[tuple[str, str], list[Measurement]] = {}
    kinds: dict[str, str] = {}
    for m in measurements:
        col = processor_name(m.processor)
        kinds.setdefault(col, m.processor)
        key = (m.model, col)
        others.setdefault(key, []).append(m)
        if key not in best or m.p50_ms < best[key].p50_ms:
            best[key] = m
    latency: dict[str, dict[str, float]] = {}
    p90: dict[str, dict[str, float]] = {}
    memory: dict[str, dict[str, float]] = {}
    sources: dict[str, str] = {"host": f"{host}: {host_summary()}", "versions": versions(),
                               "tool": "edgert profile (random inputs, one single-threaded session per pair)"}
    for (model, col), m in sorted(best.items()):
        latency.setdefault(model, {})[col] = round(m.p50_ms, 6)
        p90.setdefault(model, {})[col] = round(m.p90_ms, 6)
        partial = "" if m.coverage >= 1.0 else f"; PARTIAL: {m.coverage:.0%} of nodes on {m.delegate}, rest on the CPU"
        also = [f"{o.delegate} {o.p50_ms:.3f} ms" for o in others[(model, col)] if o is not m]
        sources[f"latency_ms/{model}/{col}"] = (
            f"measured on {host} with {m.delegate}: p50 of {m.runs} runs after {m.warmup} warm-up"
            + partial + (f"; also measured: {', '.join(also)}" if also else ""))
        sources[f"delegate/{model}/{col}"] = m.delegate
        if m.memory_mb is not None:
            memory.setdefault(model, {})[col] = m.memory_mb
            sources[f"memory_mb/{model}/{col}"] = (
                f"measured on {host} with {m.delegate}: growth of the process's resident set (VmRSS) while one "
                "session was opened and run")
        sources[f"coverage/{model}/{col}"] = f"{m.coverage:.3f}{_placement_text(m)}"
    for f in failures:
        sources[f"unmeasured/{f.model}/{f.delegate}"] = f.reason
    order = {"cpu0": 0, "gpu": 1, "dsp": 2, "npu": 3}
    procs = [ProcessorSpec(c, kinds[c]) for c in sorted(kinds, key=lambda c: (order.get(c, 9), c))]
    board = board_facts()
    sources.update(board.sources())
    emulated = " UNDER EMULATION (not the board's speed)" if board.emulation else ""
    return DeviceProfile(name=name or _slug(host), processors=procs, latency_ms=latency,
                         latency_p90_ms=p90, sources=sources, memory_mb=memory,
                         description=description or f"measured{emulated} on {host} ({platform.machine()}) by edgert profile")


#: instance counts ``edgert profile`` measures on a GPU path
INSTANCE_COUNTS: tuple[int, ...] = (1, 2, 4)


def measure_instances(delegate: Delegate, artifact: Artifact, counts: Iterable[int] = INSTANCE_COUNTS,
                      runs: int = 50, warmup: int = 3) -> dict[int, float]:
    """Throughput (requests per s) of ``k`` sessions of ``artifact`` on ``delegate`` run by ``k`` threads at
    once, for each ``k`` in ``counts``: each thread makes ``warmup`` untimed then ``runs`` timed runs on its
    own session; the throughput is ``k * runs`` over the wall time from a common start to the last end.

    Raises:
        DelegateUnavailable, ModelLoadError, InferenceError: from the delegate (a failed run in a thread is
            re-raised here).
        ValueError: ``runs`` < 1, ``warmup`` < 0 or a count < 1.
    """
    ks = sorted(set(counts))
    if runs < 1 or warmup < 0 or not ks or ks[0] < 1:
        raise ValueError(f"runs must be >= 1, warmup >= 0 and counts >= 1 (got {runs}, {warmup}, {ks})")
    sessions: list[Session] = []
    try:
        for _ in range(ks[-1]):
            sessions.append(delegate.open(artifact, threads=1))
        feeds = example_feeds(sessions[0])
        for s in sessions:
            for _ in range(warmup):
                s.run(feeds)
        return {k: _throughput(sessions[:k], feeds, runs) for k in ks}
    finally:
        for s in sessions:
            s.close()


def _throughput(sessions: list[Session], feeds: list[np.ndarray], runs: int) -> float:
    start = threading.Barrier(len(sessions) + 1)
    errors: list[BaseException] = []

    def work(s: Session) -> None:
        start.wait()
        try:
            for _ in range(runs):
                s.run(feeds)
        except BaseException as exc:  # noqa: BLE001 - re-raised on the measuring thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s,), name=f"edgert-instance{i}", daemon=True)
               for i, s in enumerate(sessions)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return len(sessions) * runs / wall


def record_instances(profile: DeviceProfile, instances: dict[str, dict[str, int]], model: str, kind: str,
                     delegate: str, throughput: Mapping[int, float]) -> int:
    """Choose the instance count of ``model`` on ``kind``'s column from measured ``throughput`` (requests per
    s by count; :func:`~delegates._ort_serving.choose_instances`), put it in ``instances[model][column]``
    and the figures in ``profile.sources["instances/<model>/<column>"]``; returns the count."""
    col = processor_name(kind)
    chosen = choose_instances(throughput)
    instances.setdefault(model, {})[col] = chosen
    figures = ", ".join(f"{k}: {v:.1f}" for k, v in sorted(throughput.items()))
    profile.sources[f"instances/{model}/{col}"] = (
        f"{chosen}: measured on {socket.gethostname()} with {delegate}, requests per s by sessions run at once "
        f"({figures}); the fewest within 5 % of the best")
    return chosen


def save_profile(profile: DeviceProfile, path: str | Path, instances: Mapping[str, Mapping[str, int]]) -> None:
    """Write ``profile`` as :meth:`DeviceProfile.save` does, with ``instances[model][processor]`` when any."""
    obj = profile.to_json()
    if instances:
        obj = {**{k: v for k, v in obj.items() if k != "sources"}, "instances": instances,
               "sources": obj["sources"]}
    Path(path).write_text(json.dumps(obj, indent=2, sort_keys=False) + "\n")


def instances_of(path: str | Path) -> dict[str, dict[str, int]]:
    """The ``instances[model][processor]`` a profile written by ``edgert profile`` records ({} when none)."""
    raw = json.loads(Path(path).read_text()).get("instances", {})
    return {m: {p: int(n) for p, n in row.items()} for m, row in raw.items()} if isinstance(raw, dict) else {}


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "host"
