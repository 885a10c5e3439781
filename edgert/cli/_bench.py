"""``edgert bench loadgen``: MLPerf LoadGen against edgert, the backend directly, or both side by side.

    edgert bench loadgen --scenario SingleStream --model hand_landmark_lite.tflite
    edgert bench loadgen --scenario Server --model cnn --direct
    edgert bench loadgen --scenario SingleStream --model cnn --compare --repeat 3

``--model`` is a .tflite / .onnx path, or the name of a generated model
(``edgert.testing.genmodels``: tiny, mlp, cnn, ...) built on the fly in ``--format``.
The default delegate is the CPU path of the model's format (``litert-xnnpack`` /
``ort-cpu``) so that edgert and ``--direct`` run the same backend. LoadGen's
summary is printed as LoadGen wrote it, then a table of the runs that fits the
terminal (80 columns piped); progress goes to stderr for runs of a second or
more. Errors print one line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

from edgert.cli._progress import Progress
from edgert.tables import Column, render, width
from edgert.errors import ConfigError, EdgeRTError

DEFAULT_DELEGATE = {".tflite": "litert-xnnpack", ".onnx": "ort-cpu"}
#: Default Server/Offline target QPS is half the measured capacity, at most this (Python issues the queries).
MAX_DEFAULT_QPS = 1000.0


def register(subparsers: Any) -> None:
    """Add ``bench loadgen`` to the main parser's subparsers."""
    from edgert.bench.loadgen import SCENARIOS  # light: numpy only

    p = subparsers.add_parser("bench", help="benchmarks: MLPerf LoadGen over edgert or the backend directly")
    p.set_defaults(func=lambda a: _usage(p))
    sub = p.add_subparsers(dest="bench_command", metavar="{loadgen}")
    lgp = sub.add_parser("loadgen", help="run MLPerf LoadGen (pip install mlcommons-loadgen) and print its summary",
                         description="Run an MLPerf LoadGen scenario against edgert's futures API "
                                     "(Model.submit), or the backend directly (--direct), or both (--compare).")
    lgp.add_argument("--scenario", required=True, choices=SCENARIOS)
    lgp.add_argument("--model", required=True, metavar="M",
                     help=".tflite/.onnx path, or a generated model name (tiny, mlp, cnn, ...)")
    mode = lgp.add_mutually_exclusive_group()
    mode.add_argument("--direct", action="store_true", help="call LiteRT / ONNX Runtime directly, no edgert")
    mode.add_argument("--compare", action="store_true", help="run direct and edgert alternately; print the ratio")
    lgp.add_argument("--repeat", type=int, default=1, help="with --compare: pairs of runs (default 1)")
    lgp.add_argument("--inline", action="store_true",
                     help="direct SingleStream runs the backend on LoadGen's issue thread (default: a worker "
                          "thread per session, the MLPerf reference-SUT pattern)")
    lgp.add_argument("--format", choices=("tflite", "onnx"), default="tflite", help="format of a generated model")
    lgp.add_argument("--duration-s", type=float, default=10.0, help="LoadGen min duration per run (default 10 s)")
    lgp.add_argument("--min-queries", type=int, default=100, help="LoadGen min query count (default 100)")
    lgp.add_argument("--samples", type=int, default=64, help="query sample library size (default 64)")
    lgp.add_argument("--target-qps", type=float, default=None,
                     help="Server/Offline target QPS (default Server: half the measured capacity, at most 1000; "
                          "Offline: the measured capacity)")
    lgp.add_argument("--target-latency-ms", type=float, default=None,
                     help="Server latency bound (default: 10x the measured single-run latency)")
    lgp.add_argument("--delegates", default=None, help="comma-separated delegates for edgert "
                                                       "(default: the CPU path of the model's format)")
    lgp.add_argument("--cpu-workers", type=int, default=None, help="CPU workers / direct sessions (default: cores)")
    lgp.add_argument("--log-dir", default=None, help="keep LoadGen's logs here (default: a temp dir)")
    lgp.add_argument("--json", default=None, metavar="F", help="write the results as JSON")
    lgp.set_defaults(func=run)


def _usage(p: argparse.ArgumentParser) -> int:
    print("edgert bench: say which benchmark: `edgert bench loadgen ...`", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    """Run ``bench loadgen``; 0 on success, 2 on an error (one line on stderr)."""
    try:
        return _run(args)
    except EdgeRTError as exc:
        print(f"edgert bench loadgen: error: {exc}", file=sys.stderr)
        return 2


def _resolve_model(spec: str, fmt: str, tmp: Path) -> Path:
    p = Path(spec)
    if p.suffix in DEFAULT_DELEGATE:
        if not p.is_file():
            raise ConfigError(f"model {spec!r} not found")
        return p
    from edgert.testing import genmodels

    if spec not in genmodels.NAMES:
        from edgert.errors import did_you_mean

        raise did_you_mean("model (a .tflite/.onnx path or a generated model)", spec, genmodels.NAMES)
    return genmodels.save(spec, tmp, formats=[fmt])[fmt]


def _run(args: argparse.Namespace) -> int:
    from edgert.bench import loadgen as L

    L.import_loadgen()
    workers = args.cpu_workers if args.cpu_workers is not None else (os.cpu_count() or 1)
    total = width()
    with tempfile.TemporaryDirectory(prefix="edgert-bench-") as tmp:
        path = _resolve_model(args.model, args.format, Path(tmp))
        samples = L.Samples(L.direct_specs(path), args.samples)
        single_ms = _calibrate(L.open_direct(path), samples.items[0])
        settings = L.LoadGenSettings(
            scenario=args.scenario, duration_ms=args.duration_s * 1e3, min_queries=args.min_queries,
            expected_latency_ms=single_ms / 2,  # LoadGen pre-generates queries for this; err on more
            target_qps=args.target_qps or _default_qps(args.scenario, workers, single_ms),
            target_latency_ms=args.target_latency_ms or max(10 * single_ms, 1.0))
        print("\n".join(textwrap.wrap(
            f"model {path.name}: {single_ms:.3f} ms a run (direct, median of 30); scenario {args.scenario}; "
            f"{workers} worker(s); target {settings.target_qps} qps, {settings.target_latency_ms:.1f} ms bound",
            total, subsequent_indent="  ")), flush=True)
        sides = ["direct"] if args.direct else ["direct", "edgert"] * max(1, args.repeat) if args.compare \
            else ["edgert"]
        reports = []
        with RunProgress(f"loadgen {args.scenario}", len(sides), args.duration_s) as bar:
            for i, side in enumerate(sides):
                bar.start(i, side)
                log_dir = Path(args.log_dir) / f"{i:02d}-{side}" if args.log_dir else None
                reports.append(_one(L, side, path, samples, settings, workers, args.delegates, log_dir, args.inline))
        if not args.compare:
            for rep in reports:
                print(_summary_block(rep.summary))
        print(_runs_table(reports, total), flush=True)
    if args.compare:
        print(_ratio(reports, args.scenario, total))
    if args.json:
        Path(args.json).write_text(json.dumps([_as_json(r) for r in reports], indent=2) + "\n")
    return 0


class RunProgress:
    """Progress on stderr (edgert.cli._progress) across ``runs`` LoadGen runs of about ``run_s`` each.

    A ticker thread moves the bar within a run by its elapsed time; shown only when the whole
    benchmark is expected to take a second or more.
    """

    def __init__(self, label: str, runs: int, run_s: float, tick_s: float = 0.2) -> None:
        self.runs, self.run_s, self.tick_s = runs, max(run_s, 1e-3), tick_s
        self.bar = Progress(label, enabled=runs * run_s >= 1.0)
        self._i, self._note, self._t0 = 0, "", time.perf_counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, daemon=True, name="edgert-bench-progress")

    def start(self, i: int, side: str) -> None:
        """Run ``i`` (0-based), on ``side`` (direct or edgert), begins now."""
        self._i, self._note, self._t0 = i, f"run {i + 1}/{self.runs} {side}", time.perf_counter()
        self.bar.update(i / self.runs, self._note)

    def _tick(self) -> None:
        while not self._stop.wait(self.tick_s):
            within = min((time.perf_counter() - self._t0) / self.run_s, 0.99)
            self.bar.update((self._i + within) / self.runs, self._note)

    def __enter__(self) -> RunProgress:
        if self.bar.enabled:
            self._thread.start()
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if exc_type is None:
            self.bar.update(1.0, f"{self.runs} run(s)")
        self.bar.close()


def _default_qps(scenario: str, workers: int, single_ms: float) -> float:
    """Offline: the calibrated capacity (LoadGen sizes its one query by it). Server: half of it, at most 1000."""
    capacity = workers * 1e3 / single_ms
    return round(capacity if scenario == "Offline" else min(0.5 * capacity, MAX_DEFAULT_QPS), 1)


def _calibrate(run: Any, feeds: list[Any], n: int = 30) -> float:
    """Median ms of ``n`` direct runs after 5 warm-ups (seeds LoadGen's expected latency and targets)."""
    for _ in range(5):
        run(feeds)
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        run(feeds)
        times.append((time.perf_counter() - t0) * 1e3)
    return float(statistics.median(times))


def _one(L: Any, side: str, path: Path, samples: Any, settings: Any, workers: int,
         delegates: str | None, log_dir: Path | None, inline: bool = False) -> Any:
    lg = L.import_loadgen()
    window = 4 * workers if settings.scenario == "Offline" else None
    if side == "direct":
        sut = L.DirectSUT(path, samples, lg, sessions=workers, inline=inline and settings.scenario == "SingleStream")
        try:
            for r in sut.runners:
                for _ in range(3):
                    r(samples.items[0])
            return L.run_loadgen(sut, samples, settings, log_dir)
        finally:
            sut.close()
    import edgert

    names = delegates.split(",") if delegates else [DEFAULT_DELEGATE[path.suffix]]
    with edgert.Runtime(delegates=names, cpu_workers=workers) as rt:
        model = rt.load(path, name=path.stem)
        return L.run_loadgen(L.EdgertSUT(model, samples, lg, window=window), samples, settings, log_dir)


def _summary_block(text: str) -> str:
    """LoadGen's summary up to (not including) its settings dump."""
    cut = text.find("Test Parameters Used")
    body = text[:cut] if cut > 0 else text
    return body.rstrip().rstrip("=").rstrip()


def _runs_table(reports: list[Any], total: int) -> str:
    """One row per LoadGen run: verdict, latency percentiles (ms), samples/s, statuses, wall time (s)."""
    cols = [Column("run", "<"), Column("verdict", "<"), Column("p50"), Column("p90"), Column("p99"),
            Column("samples/s"), Column("ok"), Column("other"), Column("wall s")]
    rows, notes = [], []
    for i, r in enumerate(reports, 1):
        qps = r.qps()
        other = sum(n for k, n in r.status.items() if k != "ok")
        rows.append([f"{i} {r.sut}", "VALID" if r.valid else "INVALID",
                     *(_fmt(r.latency_ms(p)) for p in ("50.00", "90.00", "99.00")),
                     f"{qps:.1f}" if qps is not None else "-", str(r.status.get("ok", 0)), str(other),
                     f"{r.wall_s:.1f}"])
        if not r.valid:
            notes.append(f"run {i} INVALID: {', '.join(r.unsatisfied()) or 'see the summary'}: NO")
        if other:
            notes.append(f"run {i} statuses: " + ", ".join(f"{k} {n}" for k, n in r.status.items()))
    return render(cols, rows, title=f"{reports[0].scenario}: LoadGen runs (latency p50/p90/p99 in ms)",
                  total=total, footer=notes)


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _ratio(reports: list[Any], scenario: str, total: int = 80) -> str:
    """Median per side of each figure, and edgert/direct."""
    def med(side: str, f: Any) -> float | None:
        vals = [f(r) for r in reports if r.sut == side and f(r) is not None]
        return statistics.median(vals) if vals else None
    rows = []
    for label, f in (("p50 ms", lambda r: r.latency_ms("50.00")), ("p90 ms", lambda r: r.latency_ms("90.00")),
                     ("p99 ms", lambda r: r.latency_ms("99.00")), ("samples/s", lambda r: r.qps())):
        d, e = med("direct", f), med("edgert", f)
        if d and e:
            rows.append([label, f"{d:.3f}", f"{e:.3f}", f"{e / d:.3f}"])
    cols = [Column("", "<"), Column("direct"), Column("edgert"), Column("edgert/direct")]
    n = sum(r.sut == "edgert" for r in reports)
    return render(cols, rows, title=f"{scenario}, median over {n} run(s) per side:", total=total)


def _as_json(r: Any) -> dict[str, Any]:
    return {"sut": r.sut, "scenario": r.scenario, "valid": r.valid, "p50_ms": r.latency_ms("50.00"),
            "p90_ms": r.latency_ms("90.00"), "p99_ms": r.latency_ms("99.00"), "samples_per_s": r.qps(),
            "status": r.status, "wall_s": r.wall_s, "fields": r.fields}
