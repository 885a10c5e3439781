"""MLPerf LoadGen systems under test: edgert's public futures API, and the backend called directly.

LoadGen (``pip install mlcommons-loadgen``, module ``mlperf_loadgen``) issues
queries by scenario — SingleStream, MultiStream, Server, Offline — and measures
their latency from issue to ``QuerySamplesComplete``. Two SUTs answer them:

* :class:`EdgertSUT`: ``Model.submit(inputs)`` per sample; the Future's
  done-callback completes the sample (outputs' bytes as the response).
  Offline queries are fed through a bounded in-flight window, as a real
  Offline SUT would batch its own work.
* :class:`DirectSUT`: the same backend (LiteRT ``Interpreter`` or ONNX Runtime
  ``InferenceSession``, one thread each, the session options edgert uses) with no
  runtime: a queue and one worker thread per session (the pattern of MLPerf's
  reference Python SUTs), or, with ``inline``, on LoadGen's issue thread.

Both share the query sample library (:class:`Samples`: random inputs by the
model's input specs, seeded) and :func:`run_loadgen`, which returns LoadGen's
summary text and its parsed fields.
"""

from __future__ import annotations

import queue
import re
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edgert.errors import ConfigError

SCENARIOS: tuple[str, ...] = ("SingleStream", "MultiStream", "Server", "Offline")


def import_loadgen() -> Any:
    """The ``mlperf_loadgen`` module.

    Raises:
        ConfigError: it is not installed (names the pip package).
    """
    try:
        import mlperf_loadgen
    except ImportError as exc:
        raise ConfigError("MLPerf LoadGen is not installed: pip install mlcommons-loadgen "
                          "(or pip install 'edgert[loadgen]')") from exc
    return mlperf_loadgen


@dataclass(frozen=True, slots=True)
class InputSpec:
    """A model input for sample generation: name, concrete shape, numpy dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype


class Samples:
    """The query sample library: ``count`` input sets made from the input specs with a seeded RNG."""

    def __init__(self, specs: Sequence[InputSpec], count: int = 64, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.specs = tuple(specs)
        self.items: list[list[np.ndarray]] = [[_random(rng, s) for s in specs] for _ in range(count)]

    def __len__(self) -> int:
        return len(self.items)


def _random(rng: np.random.Generator, s: InputSpec) -> np.ndarray:
    dt = np.dtype(s.dtype)
    if dt.kind == "f":
        return rng.standard_normal(s.shape).astype(dt)
    if dt.kind in "iu":
        hi = 256 if dt.itemsize == 1 else 8
        lo = -128 if dt == np.int8 else 0
        return rng.integers(lo, hi, size=s.shape).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, size=s.shape).astype(dt)
    raise ConfigError(f"input {s.name!r} has dtype {dt}; loadgen samples support float, int and bool inputs")


class _Completer:
    """Completes LoadGen samples and counts statuses; keeps response buffers alive during the call."""

    def __init__(self, lg: Any) -> None:
        self.lg = lg
        self.lock = threading.Lock()
        self.status: dict[str, int] = {}

    def complete(self, sample_id: int, out: np.ndarray | None, status: str) -> None:
        if out is not None:
            resp = self.lg.QuerySampleResponse(sample_id, out.ctypes.data, out.nbytes)
        else:
            resp = self.lg.QuerySampleResponse(sample_id, 0, 0)
        self.lg.QuerySamplesComplete([resp])
        with self.lock:
            self.status[status] = self.status.get(status, 0) + 1


class EdgertSUT:
    """LoadGen SUT over ``edgert.Model.submit`` (the public futures API)."""

    name = "edgert"

    def __init__(self, model: Any, samples: Samples, lg: Any, window: int | None = None) -> None:
        self.model = model
        self.samples = samples
        self.done = _Completer(lg)
        self.window = window
        self._backlog: deque[Any] = deque()
        self._inflight = 0
        self._pumping = False   # one thread at a time drains the backlog (see _pump)
        self._lock = threading.Lock()

    def issue(self, query_samples: list[Any]) -> None:
        """LoadGen's issue callback: submit every sample (Offline: through the window)."""
        if self.window is None:
            for qs in query_samples:
                self._submit(qs)
            return
        with self._lock:
            self._backlog.extend(query_samples)
        self._pump()

    def _pump(self) -> None:
        """Submit from the backlog while the window has room.

        A future can be done before ``add_done_callback`` is reached (a microsecond model, a
        worker that started before ``submit`` returned); its callback then runs here, on this
        thread, and would pump again from inside this pump: one stack frame per sample, until
        RecursionError lost a sample. So one thread pumps at a time and the others only return:
        the pumping thread re-checks the window under the lock before it stops.
        """
        with self._lock:
            if self._pumping:
                return
            self._pumping = True
        try:
            while True:
                with self._lock:
                    if not self._backlog or self._inflight >= (self.window or 0):
                        self._pumping = False
                        return
                    qs = self._backlog.popleft()
                    self._inflight += 1
                self._submit(qs)
        except BaseException:
            with self._lock:
                self._pumping = False
            raise

    def _submit(self, qs: Any) -> None:
        fut = self.model.submit(self.samples.items[qs.index])
        fut.add_done_callback(lambda f, sid=qs.id: self._finished(sid, f))

    def _finished(self, sample_id: int, fut: Any) -> None:
        res = fut.result()
        out = next(iter(res.outputs.values())) if res.outputs else None
        self.done.complete(sample_id, out, res.status)
        if self.window is not None:
            with self._lock:
                self._inflight -= 1
            self._pump()

    def flush(self) -> None:
        """LoadGen's flush callback (nothing is buffered beyond the window)."""

    def close(self) -> None:
        """Nothing to release (the runtime is closed by its owner)."""


class DirectSUT:
    """LoadGen SUT calling LiteRT / ONNX Runtime directly: ``sessions`` sessions, one thread each."""

    name = "direct"

    def __init__(self, path: Path, samples: Samples, lg: Any, sessions: int, inline: bool) -> None:
        self.samples = samples
        self.done = _Completer(lg)
        self.runners = [open_direct(path) for _ in range(max(1, sessions))]
        self.inline = inline
        self._q: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._threads = [] if inline else [
            threading.Thread(target=self._loop, args=(r,), name=f"direct-{i}", daemon=True)
            for i, r in enumerate(self.runners)]
        for t in self._threads:
            t.start()

    def issue(self, query_samples: list[Any]) -> None:
        """LoadGen's issue callback: run inline (SingleStream) or queue for the session threads."""
        if self.inline:
            run = self.runners[0]
            for qs in query_samples:
                out = run(self.samples.items[qs.index])
                self.done.complete(qs.id, out, "ok")
            return
        for qs in query_samples:
            self._q.put(qs)

    def _loop(self, run: Callable[[list[np.ndarray]], np.ndarray]) -> None:
        while True:
            qs = self._q.get()
            if qs is None:
                return
            try:
                out, status = run(self.samples.items[qs.index]), "ok"
            except Exception:  # noqa: BLE001 - a failed sample is completed and counted, never lost
                out, status = None, "failed"
            self.done.complete(qs.id, out, status)

    def flush(self) -> None:
        """LoadGen's flush callback."""

    def close(self) -> None:
        """Stop the session threads."""
        for _ in self._threads:
            self._q.put(None)
        for t in self._threads:
            t.join(timeout=5)


def open_direct(path: Path) -> Callable[[list[np.ndarray]], np.ndarray]:
    """A function running ``path`` (.tflite via LiteRT, .onnx via ONNX Runtime CPU) on one thread.

    Session settings match edgert's: LiteRT ``num_threads=1`` (XNNPACK by default); ORT one
    intra-op thread, sequential execution. Returns the first output.
    """
    if path.suffix == ".tflite":
        from delegates.litert import import_interpreter

        interp = import_interpreter().Interpreter(model_path=str(path), num_threads=1)
        interp.allocate_tensors()
        ins = [d["index"] for d in interp.get_input_details()]
        out = interp.get_output_details()[0]["index"]
        set_t, invoke, get_t = interp.set_tensor, interp.invoke, interp.get_tensor

        def run_tflite(feeds: list[np.ndarray]) -> np.ndarray:
            for i, a in zip(ins, feeds):
                set_t(i, a)
            invoke()
            return get_t(out)
        return run_tflite
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    first = [sess.get_outputs()[0].name]

    def run_onnx(feeds: list[np.ndarray]) -> np.ndarray:
        return sess.run(first, dict(zip(names, feeds)))[0]
    return run_onnx


def direct_specs(path: Path) -> list[InputSpec]:
    """Input specs of a model file, read with the backend itself (dynamic dims become 1)."""
    if path.suffix == ".tflite":
        from delegates.litert import import_interpreter

        interp = import_interpreter().Interpreter(model_path=str(path), num_threads=1)
        return [InputSpec(d["name"], tuple(int(x) for x in d["shape"]), np.dtype(d["dtype"]))
                for d in interp.get_input_details()]
    import onnxruntime as ort

    types = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int64)": np.int64,
             "tensor(int32)": np.int32, "tensor(uint8)": np.uint8, "tensor(int8)": np.int8,
             "tensor(bool)": np.bool_, "tensor(double)": np.float64}
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return [InputSpec(i.name, tuple(d if isinstance(d, int) else 1 for d in i.shape), np.dtype(types[i.type]))
            for i in sess.get_inputs()]


@dataclass(frozen=True, slots=True)
class LoadGenSettings:
    """What to ask LoadGen for. Times in ms; ``expected_latency_ms`` seeds SingleStream/MultiStream."""

    scenario: str
    duration_ms: float = 10_000.0
    min_queries: int = 100
    expected_latency_ms: float = 5.0
    target_qps: float | None = None
    target_latency_ms: float | None = None
    samples_per_query: int = 8


@dataclass(frozen=True, slots=True)
class LoadGenReport:
    """LoadGen's summary (``mlperf_log_summary.txt``) as text and parsed ``key: value`` fields."""

    sut: str
    scenario: str
    summary: str
    fields: dict[str, str]
    status: dict[str, int]
    wall_s: float

    @property
    def valid(self) -> bool:
        """LoadGen's verdict: ``Result is : VALID``."""
        return self.fields.get("Result is", "").strip() == "VALID"

    def unsatisfied(self) -> list[str]:
        """LoadGen's failed validity checks, e.g. ``["Early stopping satisfied"]`` (empty when VALID)."""
        return [ln.split(":")[0].strip() for ln in self.summary.splitlines()
                if "satisfied" in ln and ln.rstrip().endswith("NO")]

    def latency_ms(self, pct: str = "90.00") -> float | None:
        """A latency percentile from "Additional Stats" (``"90.00 percentile latency (ns)"``), in ms."""
        v = self.fields.get(f"{pct} percentile latency (ns)")
        return float(v) / 1e6 if v else None

    def qps(self) -> float | None:
        """Completed samples per second (``Completed samples per second`` or ``Samples per second``)."""
        for k in ("Completed samples per second", "Samples per second", "QPS w/o loadgen overhead"):
            if self.fields.get(k):
                return float(self.fields[k])
        return None


def parse_summary(text: str) -> dict[str, str]:
    """``key : value`` / ``key: value`` lines of LoadGen's summary (the first occurrence of a key wins)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"^\s*([^:*]+?)\s*:\s+(\S.*)$", line)  # "Key : v" and "Key: v" (Offline's rate line)
        if m:
            out.setdefault(m[1], m[2].strip())
    return out


def run_loadgen(sut: EdgertSUT | DirectSUT, samples: Samples, settings: LoadGenSettings,
                log_dir: str | Path | None = None) -> LoadGenReport:
    """Run one LoadGen test (performance mode) against ``sut``; returns its parsed summary.

    Raises:
        ConfigError: unknown scenario, or LoadGen missing.
    """
    lg = import_loadgen()
    if settings.scenario not in SCENARIOS:
        from edgert.errors import did_you_mean

        raise did_you_mean("LoadGen scenario", settings.scenario, SCENARIOS)
    ts = lg.TestSettings()
    ts.scenario = getattr(lg.TestScenario, settings.scenario)
    ts.mode = lg.TestMode.PerformanceOnly
    ts.min_duration_ms = int(settings.duration_ms)
    ts.max_duration_ms = int(settings.duration_ms * 4 + 60_000)
    ts.min_query_count = settings.min_queries
    exp_ns = int(settings.expected_latency_ms * 1e6)
    ts.single_stream_expected_latency_ns = exp_ns
    ts.multi_stream_expected_latency_ns = exp_ns * settings.samples_per_query
    ts.multi_stream_samples_per_query = settings.samples_per_query
    if settings.target_qps:
        ts.server_target_qps = settings.target_qps
        ts.offline_expected_qps = settings.target_qps
    if settings.target_latency_ms:
        ts.server_target_latency_ns = int(settings.target_latency_ms * 1e6)
    with tempfile.TemporaryDirectory(prefix="edgert-loadgen-") as tmp:
        outdir = Path(log_dir) if log_dir is not None else Path(tmp)
        outdir.mkdir(parents=True, exist_ok=True)
        log = lg.LogSettings()
        log.log_output.outdir = str(outdir)
        log.log_output.copy_summary_to_stdout = False
        log.enable_trace = False
        n = len(samples)
        qsl = lg.ConstructQSL(n, n, lambda idx: None, lambda idx: None)
        handle = lg.ConstructSUT(sut.issue, sut.flush)
        t0 = time.perf_counter()
        try:
            lg.StartTestWithLogSettings(handle, qsl, ts, log, "")
        finally:
            wall = time.perf_counter() - t0
            lg.DestroySUT(handle)
            lg.DestroyQSL(qsl)
        summary = (outdir / "mlperf_log_summary.txt").read_text()
    return LoadGenReport(sut.name, settings.scenario, summary, parse_summary(summary), dict(sut.done.status), wall)
