"""What any scheduler could reach in a streams overload cell: the capacity bound beside the streams bars (``benchmarks/capacity_bound.py`` is its LP for simulated request cells).

An overload bar asks several things at once of one host: the critical stream at 95 % of its frames, every
stream above a floor, and a mean over streams. This measures, on this host, what those ask of the cores and
what the cores can give, so that a bar no scheduler could meet is shown as such and not tuned at:

* **Work per frame**, for each stream of the app (the held-out streams app of ``streams_app.py``, or the XR
  demo's four ``Pipelines`` streams, their required stages only), run alone through the runtime on one
  worker, frame after frame of the moving sample scene, no other stream running: the process's CPU time per
  frame (the app's own work on the frame, the runtime's and the models' runs), beside the run time of its
  requests alone (``latency_ms − wait_ms`` of its trace lines). Alone is the cheapest a frame can be: beside other
  work it only costs more (shared caches and memory bandwidth).
* **Capacity**: two threads calling the app's models back to back directly through LiteRT / ONNX Runtime,
  for a few seconds, the larger of two tries: solo-milliseconds of work done per second of wall time. The
  best mean is also given at 2,000 (two cores each as fast as one alone), which no host of two cores exceeds.
* **The bound**, per cell: a stream served a share ``x`` of its nominal frames costs ``x · fps · work``
  ms per second. Given the floors (critical ≥ 95 %, every other stream ≥ its floor), the least demand that
  meets them, and the highest mean over streams any schedule could reach with what capacity is left
  (filling the streams cheapest per point first: a fractional knapsack, so an upper bound). It assumes
  no deadline is ever missed for want of a free worker, no frame costs more than alone, and the cores 100 %
  busy: a real schedule reaches less.

    python benchmarks/streams_bound.py [--seconds 4] [--apps held_out xr] [--target users2=81.6]

A cell whose floors alone need more than the capacity cannot meet its bar on this host, whatever the
scheduler; a cell whose best mean is below the bar's mean line cannot either.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import edgert  # noqa: E402
from _common import host_line  # noqa: E402

#: the critical stream's share the bars ask for
CRITICAL_SHARE = 0.95


@dataclass(frozen=True)
class StreamCost:
    """One stream of one user: its nominal rate, level and measured work per frame."""

    name: str
    fps: float
    level: str
    work_ms: float       # CPU ms a frame takes, every thread of the process (runtime, app and model runs)
    run_ms: float = 0.0  # of which its models' runs (ms)

    @property
    def full_ms_per_s(self) -> float:
        """Its demand at every frame (core-ms per second)."""
        return self.fps * self.work_ms


@dataclass(frozen=True)
class Bound:
    """A cell's bound: the least demand of its floors and the best mean reachable (see the module doc)."""

    floors_ms_per_s: float
    capacity_ms_per_s: float
    best_mean: float        # % (nan when the floors alone do not fit)
    shares: dict[str, float]

    @property
    def floors_fit(self) -> bool:
        return self.floors_ms_per_s <= self.capacity_ms_per_s


def bound(streams: list[StreamCost], users: int, floor: float, capacity_ms_per_s: float) -> Bound:
    """The bound of ``users`` copies of ``streams``: critical ones at :data:`CRITICAL_SHARE`, others at ``floor``
    (a share of nominal frames), then the capacity left filled cheapest per point first."""
    every = [s for _ in range(users) for s in streams]
    low = [CRITICAL_SHARE if s.level == "critical" else floor for s in every]
    need = sum(x * s.full_ms_per_s for x, s in zip(low, every))
    shares = list(low)
    left = capacity_ms_per_s - need
    if left >= 0:
        for i in sorted(range(len(every)), key=lambda i: every[i].full_ms_per_s):   # cost of a point of share
            add = min(1.0 - shares[i], left / every[i].full_ms_per_s)
            shares[i] += add
            left -= add * every[i].full_ms_per_s
            if left <= 0:
                break
    mean = 100.0 * sum(shares) / len(shares) if need <= capacity_ms_per_s else float("nan")
    per = {s.name: round(100.0 * x, 1) for s, x in zip(streams, shares[:len(streams)])}
    return Bound(need, capacity_ms_per_s, mean, per)


def demand_for_mean(streams: list[StreamCost], users: int, floor: float, mean_pct: float) -> float:
    """The least demand (core-ms/s) that meets the floors of :func:`bound` and a mean over streams of ``mean_pct``
    (filling the streams cheapest per point first; inf when even every frame of every stream falls short)."""
    every = [s for _ in range(users) for s in streams]
    shares = [CRITICAL_SHARE if s.level == "critical" else floor for s in every]
    need = sum(x * s.full_ms_per_s for x, s in zip(shares, every))
    points = mean_pct / 100.0 * len(every) - sum(shares)   # share points still to add
    for i in sorted(range(len(every)), key=lambda i: every[i].full_ms_per_s):
        if points <= 0:
            break
        add = min(1.0 - shares[i], points)
        need += add * every[i].full_ms_per_s
        points -= add
    return need if points <= 1e-9 else math.inf


def _trace_work_per_frame(trace: Path, frames: int) -> float:
    """Run ms of every request a trace recorded, per frame."""
    run = 0.0
    for line in trace.open():
        o = json.loads(line)
        if "type" not in o and o.get("status") == "ok":
            run += o["latency_ms"] - o["wait_ms"]
    return run / frames


def held_out_costs(seconds: float) -> tuple[list[StreamCost], list[Path]]:
    """The held-out app's streams, each alone on a one-worker runtime: work per frame (ms)."""
    from streams_app import APP, inputs_for, model_files  # noqa: PLC0415
    from xr_users import load_frames  # noqa: PLC0415

    frames = load_frames(None)[:60]
    tmp = Path(tempfile.mkdtemp())
    files = model_files(tmp)
    out = []
    for name, (fps, level, chain) in APP.items():
        trace = tmp / f"{name}.jsonl"
        n = max(10, int(seconds * fps))
        with edgert.Runtime(cpu_workers=1, trace=trace) as rt:
            models = {m: rt.load(files[m], name=m) for m in chain}
            feeds = [[inputs_for(tuple(models[m].inputs[0].shape), np.dtype(models[m].inputs[0].dtype), f)
                      for f in frames] for m in chain]
            cpu0 = time.process_time()
            for k in range(n):
                prev = None
                for m, feed in zip(chain, feeds):
                    prev = models[m].submit(feed[k % len(frames)], after=prev).result()
            cpu_ms = (time.process_time() - cpu0) * 1e3 / n
        out.append(StreamCost(name, fps, level, cpu_ms, _trace_work_per_frame(trace, n)))
    return out, [files[m] for _, _, chain in APP.values() for m in chain]


def xr_costs(seconds: float) -> tuple[list[StreamCost], list[Path]]:
    """The XR demo's four streams (one user, tracking on), each alone on a one-worker runtime: the work per frame
    of its required stages (the optional search for a second hand left out, as a strained runtime leaves it)."""
    from apps.xr import Pipelines, assets  # noqa: PLC0415
    from scheduler import streams as controller  # noqa: PLC0415
    from xr_users import EDGERT_CONFIG, STREAMS, load_frames, source_index  # noqa: PLC0415

    controller.OPTIONAL_BUSY_MAX = -1.0   # (optional work never runs: what a frame costs at the least)

    frames = load_frames(None)
    levels = {"hands": "critical", "face": "high", "pose": "normal", "segmentation": "low"}
    tmp = Path(tempfile.mkdtemp())
    out = []
    used: set[str] = set()
    for name, fps in STREAMS:
        trace = tmp / f"{name}.jsonl"
        n = max(10, int(seconds * fps))
        with edgert.Runtime(cpu_workers=1, trace=trace) as rt:
            px = Pipelines(rt, tracking=True, **EDGERT_CONFIG[name])
            ran = 0
            cpu0 = time.process_time()
            for k in range(n):   # (alone, every frame is taken at its nominal rate)
                r = px.process(frames[source_index(k / fps, 0, len(frames))], deadline_ms=1000.0 / fps)
                ran += not (r.shed or r.rate_skipped)
            cpu_ms = (time.process_time() - cpu0) * 1e3 / ran
        out.append(StreamCost(name, fps, levels[name], cpu_ms, _trace_work_per_frame(trace, ran)))
        used |= {json.loads(x).get("model", "") for x in trace.open()} - {""}
    paths = dict(assets.model_paths())
    return out, [Path(paths[m]) for m in sorted(used) if m in paths]


def two_thread_capacity(files: list[Path], seconds: float) -> tuple[float, float]:
    """(Solo-ms of work two threads do per wall second, calling ``files``' models back to back; one thread's
    figure). Each model's solo time is measured first, alone."""
    import onnxruntime as ort  # noqa: PLC0415
    from ai_edge_litert.interpreter import Interpreter  # noqa: PLC0415

    def caller(path: Path):
        if path.suffix == ".onnx":
            so = ort.SessionOptions()
            so.intra_op_num_threads = so.inter_op_num_threads = 1
            sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
            i = sess.get_inputs()[0]
            x = np.random.default_rng(0).random([d if isinstance(d, int) else 1 for d in i.shape]).astype(np.float32)
            return lambda: sess.run(None, {i.name: x})
        it = Interpreter(model_path=str(path), num_threads=1)
        it.allocate_tensors()
        d = it.get_input_details()[0]
        x = np.random.default_rng(0).random(d["shape"]).astype(d["dtype"])

        def call() -> None:
            it.set_tensor(d["index"], x)
            it.invoke()
        return call

    unique = list(dict.fromkeys(files))
    solo = []
    for p in unique:
        call = caller(p)
        for _ in range(3):
            call()
        ts = []
        for _ in range(15):
            t = time.perf_counter()
            call()
            ts.append(time.perf_counter() - t)
        solo.append(float(np.median(ts)) * 1e3)

    def rate(threads: int) -> float:
        calls = [[caller(p) for p in unique] for _ in range(threads)]
        done = [0.0] * threads
        stop = threading.Event()

        def loop(k: int) -> None:
            while not stop.is_set():
                for j, c in enumerate(calls[k]):
                    c()
                    done[k] += solo[j]
        ts = [threading.Thread(target=loop, args=(k,)) for k in range(threads)]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        time.sleep(seconds)
        stop.set()
        for t in ts:
            t.join()
        return sum(done) / (time.perf_counter() - t0)

    return max(rate(2), rate(2)), max(rate(1), rate(1))   # (the larger of two: an upper bound on what they give)


def report(app: str, costs: list[StreamCost], capacity: float, one: float, targets: dict[str, float]) -> None:
    print(f"\n{app}: work per frame, each stream alone (CPU ms, every thread) and its demand at every frame (core-ms/s)")
    for s in costs:
        print(f"  {s.name:13s} {s.level:8s} {s.fps:4.0f} fps  {s.work_ms:6.2f} ms/frame of CPU ({s.run_ms:5.2f} in model "
              f"runs)  {s.full_ms_per_s:6.0f} ms/s")
    print(f"  capacity: two threads do {capacity:.0f} solo-ms of work a second ({capacity / one:.2f}x one thread's "
          f"{one:.0f})")
    cells = ([("hog1", 1, 0.25), ("users2", 2, 0.25)] if app == "held-out app"
             else [("hog1", 1, 0.25), ("users2", 2, 0.25), ("users3", 3, 0.20)])
    for cell, users, floor in cells:
        cap = capacity   # (beside a busy process, hog1, the app has less: the bound holds all the more)
        b = bound(costs, users, floor, cap)
        verdict = ("floors fit" if b.floors_fit else "floors alone exceed the capacity: no scheduler meets them")
        best = f"best mean {b.best_mean:.1f} %" if b.floors_fit else "best mean: none"
        busy = [bound(costs, users, floor, share * cap).best_mean for share in (0.9, 0.8)]
        ideal = bound(costs, users, floor, 2000.0).best_mean   # two cores each as fast as one alone
        print(f"  {cell:7s} critical >= {100 * CRITICAL_SHARE:.0f} %, others >= {100 * floor:.0f} %: floors need "
              f"{b.floors_ms_per_s:.0f} of {cap:.0f} ms/s ({100 * b.floors_ms_per_s / cap:.0f} %), {verdict}; {best}"
              + (f" (user 1: {b.shares}); with the cores 90 / 80 % busy: {busy[0]:.1f} / {busy[1]:.1f} %"
                 if b.floors_fit else "") + f"; at 2,000 ms/s: {ideal:.1f} %")
        if cell in targets:
            need = demand_for_mean(costs, users, floor, targets[cell])
            print(f"          and a mean of {targets[cell]:.1f} %: {need:.0f} ms/s, {100 * need / cap:.0f} % of the capacity "
                  f"busy on frames that end on time")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=4.0, help="frames per stream: this many seconds' worth")
    ap.add_argument("--apps", nargs="+", default=["held_out", "xr"], choices=["held_out", "xr"])
    ap.add_argument("--target", nargs="*", default=[], metavar="CELL=MEAN",
                    help="also the demand a bar's mean line asks in a cell (e.g. users2=81.6: plain threads' + 10)")
    args = ap.parse_args(argv)
    targets = {k: float(v) for k, v in (t.split("=", 1) for t in args.target)}
    print(host_line())
    for app in args.apps:
        costs, files = held_out_costs(args.seconds) if app == "held_out" else xr_costs(args.seconds)
        capacity, one = two_thread_capacity(files, max(2.0, args.seconds / 2))
        report("held-out app" if app == "held_out" else "XR demo", costs, capacity, one, targets)
    return 0


if __name__ == "__main__":
    sys.exit(main())
