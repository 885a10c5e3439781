"""Simulator fidelity: a live run of edgert.Runtime on this host vs its replay in the simulator.

1. Live: real MediaPipe models (``edgert models fetch mediapipe``) run by
   ``edgert.Runtime(trace=...)`` under a policy, fed by periodic XR streams
   with per-frame deadlines (``rt.frame``) and cascades (``submit(after=...)``):

   ============  ===  =============================================
   stream        fps  cascade
   ============  ===  =============================================
   hand          30   palm_detection_lite -> hand_landmark_lite
   face          30   face_detection_short_range -> face_landmark
   segmentation  15   selfie_segmentation
   ============  ===  =============================================

2. Host profile, from what the runtime measured during the run (its
   estimator's inputs): ``latency_ms`` = mean service time (start to end) per
   model and processor kind, pooled over the identical CPU workers, written
   as ``edgert profile`` does: ``latency_ms`` = p50, ``latency_p90_ms`` = p90
   (the simulator draws from the log-normal through both). ``--profile-from estimator`` takes ``rt.estimator.as_table()``
   at the end of the run instead (an EMA with alpha 0.1: it follows the
   last ~10 runs, so on a shared host it is noisier); ``--profile-from F.json``
   takes a profile written by ``edgert profile``.
   The runtime's hand-off delay (arrival to start on a worker that was idle:
   thread wake-up, the GIL) is taken from the run as samples, one per such
   request, and the simulator draws each request's from them (seeded):
   mostly ~0.2 ms with a tail of a few ms, and the tail moves a 1.5 ms
   model's median (``--dispatch-ms`` sets one number instead).
3. Replay the runtime's trace (docs/design.md §6 JSONL, as written) on that
   profile under the same policy, and print live vs simulated deadline-met %
   and p50 latency per model. Bars (issue 4): within 3 points and 15 %.

Usage::

    python benchmarks/sim_fidelity.py [--seconds 20] [--scheduler edgert] [--cpu-workers 2] [--out DIR]
                                      [--feeder-yield]

Overload cells (``--overload``): the XR demo with ``--users 2`` (every stream through the stream controller)
runs live ``--runs`` times with a trace; each trace becomes this host's profile (``edgert profile
--from-trace``) and is replayed on it (``edgert simulate --trace``'s configuration: the same frames offered
to the same controller, closed-loop). Per stream: the on-time share of the frames offered (live, from the
trace: a frame taken whose every request ended ``ok``; replayed: the controller's ``on_time / frames``) and
the ladder's direction (the stream's last rung below, at or above its first). The live run-to-run spread is
printed beside it. With ``--hog`` the live runs have a busy process beside them, and the replay runs on the
first idle run's profile with ``background`` declared (``--background`` share of each CPU worker), so the
busy-process cell is simulated from an idle profile::

    flock /tmp/edgert-bench.lock python benchmarks/sim_fidelity.py --overload --runs 3 --seconds 20 [--hog]

Timings on a shared 2-core host are noisy; the live side runs in real time.
It also prints the live policy's wall time per decision: live, a decision
holds the GIL (a worker that was just given a request waits for it), while
the simulator's decisions take no virtual time.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import TimedPolicy  # noqa: E402

import edgert  # noqa: E402
from edgert import models as zoo  # noqa: E402
from scheduler.profile import DeviceProfile, ProcessorSpec  # noqa: E402
from scheduler.registry import make_policy  # noqa: E402
from scheduler.sim import SimConfig, run_simulation  # noqa: E402
from scheduler.timeline import RequestRecord  # noqa: E402

STREAMS: tuple[tuple[str, float, tuple[str, ...]], ...] = (
    ("hand", 30.0, ("palm_detection_lite", "hand_landmark_lite")),
    ("face", 30.0, ("face_detection_short_range", "face_landmark")),
    ("segmentation", 15.0, ("selfie_segmentation",)),
)
BAR_POINTS, BAR_P50 = 3.0, 0.15


def _inputs(model: edgert.Model, rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for spec in model.inputs:
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in spec.shape]
        dt = np.dtype(spec.dtype)
        arr = rng.random(shape).astype(dt) if dt.kind == "f" else rng.integers(0, 255, shape).astype(dt)
        out.append(arr)
    return out



def live_run(seconds: float, scheduler: str | None, cpu_workers: int | None, trace: Path,
             models_dir: Path | None, profile_from: str = "records", feeder_yield: bool = False
             ) -> tuple[list[RequestRecord], DeviceProfile, list[str], TimedPolicy]:
    """Run the streams live for ``seconds``; return the records, a host profile, the processors and the
    policy (with its time spent deciding).

    ``feeder_yield``: after each submit the feeding thread yields the GIL (``time.sleep(0)``), as an
    app whose sensors call back from their own threads would, so a worker given a request starts it
    without waiting for the feeder to finish issuing the rest of the frame (the simulator has no GIL:
    its hand-off delay is drawn from samples). Off by default: the live side is then the plain feeder.
    """
    paths = zoo.mediapipe_paths(models_dir)
    rng = np.random.default_rng(0)
    timed = TimedPolicy(make_policy(scheduler))
    with edgert.Runtime(scheduler=timed, trace=trace, cpu_workers=cpu_workers, records=True) as rt:
        models: dict[str, edgert.Model] = {}
        feeds: dict[str, list[np.ndarray]] = {}
        for _, _, stages in STREAMS:
            for name in stages:
                models[name] = rt.load(str(paths[name]), name=name)
                feeds[name] = _inputs(models[name], rng)

        def chain(stages: Sequence[str], i: int, parent: Future) -> None:
            def next_stage(fut: Future) -> None:
                res = fut.result()
                if res.status in ("ok", "late"):
                    f = models[stages[i]].submit(feeds[stages[i]], after=res)
                    if i + 1 < len(stages):
                        chain(stages, i + 1, f)
            parent.add_done_callback(next_stage)

        t0 = time.perf_counter()
        ticks = sorted((k * 1000.0 / fps, si) for si, (_, fps, _) in enumerate(STREAMS)
                       for k in range(int(seconds * fps)))
        for t_ms, si in ticks:
            delay = t0 + t_ms / 1000.0 - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            _, fps, stages = STREAMS[si]
            with rt.frame(deadline_ms=1000.0 / fps):
                fut = models[stages[0]].submit(feeds[stages[0]])
            if len(stages) > 1:
                chain(stages, 1, fut)
            if feeder_yield:
                time.sleep(0)
        deadline = time.perf_counter() + 30
        while rt._dispatcher.ends.inflight and time.perf_counter() < deadline:   # let cascades finish before close
            time.sleep(0.05)
        records = rt.records()
        table = rt.estimator.as_table()
        procs = rt.processors
        kinds = {w.name: w.kind for w in rt._dispatcher.workers}
        policy = rt.scheduler
    processors = [ProcessorSpec(p, kinds[p]) for p in procs]
    if profile_from == "estimator":
        prof = DeviceProfile(
            name="this-host", processors=processors,
            latency_ms={m: {p: round(v, 4) for p, v in row.items()} for m, row in table.items()},
            description=f"edgert.Runtime's estimator at the end of a {seconds:.0f} s live run ({policy})",
            sources={"latency_ms/*": "measured on this host: edgert.Runtime estimator (EMA, alpha 0.1) after the run"})
    elif profile_from == "records":
        mean, p90 = _service_tables(records, kinds)
        prof = DeviceProfile(
            name="this-host", processors=processors, latency_ms=mean, latency_p90_ms=p90,
            description=f"service times measured by edgert.Runtime during a {seconds:.0f} s live run ({policy})",
            sources={"latency_ms/*": "measured on this host: p50 start-to-end time of the live run's requests, "
                                     "pooled over workers of one kind",
                     "latency_p90_ms/*": "measured on this host: p90 of the same"})
    else:
        prof = DeviceProfile.load(profile_from)
    return records, prof, procs, timed


def _service_tables(records: list[RequestRecord], kinds: dict[str, str]
                    ) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """p50 and p90 service time (ms) per model and processor, pooled over processors of one kind."""
    svc: dict[tuple[str, str], list[float]] = {}
    for r in records:
        if r.processor and r.status in ("ok", "late"):
            svc.setdefault((r.model, kinds.get(r.processor, r.processor)), []).append(r.end_ms - r.start_ms)
    mean: dict[str, dict[str, float]] = {}
    p90: dict[str, dict[str, float]] = {}
    for (m, kind), xs in svc.items():
        for p, k in kinds.items():
            if k == kind:
                mean.setdefault(m, {})[p] = round(float(np.median(xs)), 4)
                p90.setdefault(m, {})[p] = round(float(np.percentile(xs, 90)), 4)
    return mean, p90


def handoff_samples(records: list[RequestRecord]) -> list[float]:
    """Hand-off delays (ms) of the live run: start minus arrival of every request that ran on a
    processor that was idle when it arrived (its previous run had ended), i.e. the time the runtime took
    to start it on a free processor (thread wake-up, the GIL), with no queueing in it."""
    last: dict[str, float] = {}
    out: list[float] = []
    for r in sorted((r for r in records if r.processor and r.status in ("ok", "late")), key=lambda r: r.start_ms):
        if last.get(r.processor, -np.inf) <= r.arrival_ms:
            out.append(round(r.start_ms - r.arrival_ms, 4))
        last[r.processor] = r.end_ms
    return out


def per_model(records: list[RequestRecord]) -> dict[str, tuple[int, float, float, float, float]]:
    """``{model: (requests, deadline-met %, p50 latency, p50 wait, p50 service)}``, times in ms."""
    out: dict[str, tuple[int, float, float, float, float]] = {}
    for m in sorted({r.model for r in records}):
        rows = [r for r in records if r.model == m]
        ran = [r for r in rows if r.status in ("ok", "late")]
        met = 100.0 * sum(r.status == "ok" for r in rows) / len(rows)
        med = (lambda xs: float(np.median(xs)) if xs else float("nan"))
        out[m] = (len(rows), met, med([r.end_ms - r.arrival_ms for r in ran]),
                  med([r.start_ms - r.arrival_ms for r in ran]), med([r.end_ms - r.start_ms for r in ran]))
    return out


def live_streams(trace: Path) -> dict[str, tuple[int, int, float, float]]:
    """Per stream of a live trace: (frames offered, on time, first rung fps, last rung fps), from its records."""
    import json  # noqa: PLC0415

    frames: dict[int, tuple[str, bool]] = {}
    status: dict[int, bool] = {}
    for line in trace.open():
        o = json.loads(line)
        if o.get("type") == "frame":
            frames[o["frame"]] = (o["stream"], o["taken"])
        elif "type" not in o and "frame" in o:
            status[o["frame"]] = status.get(o["frame"], True) and o.get("status") == "ok"
    out: dict[str, list[int]] = {}
    for n, (stream, taken) in frames.items():
        row = out.setdefault(stream, [0, 0])
        row[0] += 1
        row[1] += bool(taken and status.get(n, False))
    return {k: (v[0], v[1], math.nan, math.nan) for k, v in out.items()}


def _direction(steps: list[dict], key_from: str = "from_fps", key_to: str = "to_fps") -> str:
    """Where the ladder left a stream: "down", "up" or "=" (its last rung against its first)."""
    if not steps:
        return "="
    first, last = steps[0][key_from], steps[-1][key_to]
    return "down" if last < first else "up" if last > first else "="


def overload_cells(args: argparse.Namespace) -> int:
    """The XR demo, two users, live then replayed (see the module doc): per-stream on-time share and ladder."""
    import json  # noqa: PLC0415
    import multiprocessing as mp  # noqa: PLC0415
    import subprocess  # noqa: PLC0415

    from edgert._replay import host_profile, read_outcomes  # noqa: PLC0415
    from edgert.sweep import sim_config  # noqa: PLC0415

    out = args.out or Path(tempfile.mkdtemp(prefix="edgert-fidelity-"))
    out.mkdir(parents=True, exist_ok=True)
    root = Path(__file__).resolve().parent.parent
    cells: list[tuple[str, dict, dict]] = []   # (label, live per stream, replay per stream)
    idle_profile = None
    for hog in ([False, True] if args.hog else [False]):
        for i in range(args.runs):
            tag = f"{'hog' if hog else 'idle'}{i + 1}"
            trace, js = out / f"{tag}.jsonl", out / f"{tag}.json"
            stop = mp.Event()
            proc = mp.Process(target=_busy, args=(stop,), daemon=True) if hog else None
            if proc is not None:
                proc.start()
            try:
                subprocess.run([sys.executable, "-m", "edgert.cli", "run", "xr-demo", "--users", str(args.users),
                                "--seconds", f"{args.seconds:g}", "--quiet", "--trace", str(trace), "--json", str(js)],
                               check=True, cwd=root, stdout=subprocess.DEVNULL)
            finally:
                if proc is not None:
                    stop.set()
                    proc.join()
            outcomes = read_outcomes(trace)
            prof = host_profile(outcomes)
            if not hog and idle_profile is None:
                idle_profile = prof
            if hog:
                assert idle_profile is not None
                prof = idle_profile
                prof.background = {p.name: args.background for p in prof.processors if p.kind == "cpu"}
            cfg = sim_config(scenario=None, trace=trace, device="host", scheduler=None, objective=None, load=1.0,
                             duration_s=None, seed=args.seed, burst=None, live=outcomes)
            cfg.profile = prof
            cfg.offload = False
            replay = run_simulation(cfg).summary()["per_stream"]
            live_steps = json.loads(js.read_text())["per_stream"]
            live = {k: (n, on, _direction(live_steps.get(k, {}).get("ladder") or []))
                    for k, (n, on, _, _) in live_streams(trace).items()}
            cells.append((tag, live, replay))
            print(f"{tag}: {trace}", flush=True)
    for hog in ([False, True] if args.hog else [False]):
        runs = [c for c in cells if c[0].startswith("hog" if hog else "idle")]
        print(f"\n{'beside a busy process (replay: idle profile + background ' + str(args.background) + ')' if hog else 'idle host'}"
              f": on-time share of frames offered, live | replay (ladder direction live/replay)")
        streams = sorted(runs[0][1])
        print(f"{'stream':16s} " + " ".join(f"{c[0]:>22s}" for c in runs) + f" {'live spread':>11s} {'in range+5':>10s}")
        live_means, sim_means = [], []
        inside = 0
        for st in streams:
            shares = []
            cols = []
            for _, live, replay in runs:
                n, on, d_live = live[st]
                r = replay[st]
                ls, rs = 100 * on / n, 100 * r["on_time"] / r["frames"] if r["frames"] else 0.0
                shares.append((ls, rs))
                cols.append(f"{ls:5.1f} | {rs:5.1f} ({d_live[:2]}/{_direction(r['steps'])[:2]})")
            lo, hi = min(s[0] for s in shares), max(s[0] for s in shares)
            ok = all(lo - 5 <= s[1] <= hi + 5 for s in shares)
            inside += ok
            print(f"{st:16s} " + " ".join(f"{c:>22s}" for c in cols) + f" {hi - lo:10.1f}  {'yes' if ok else 'no':>10s}")
        for _, live, replay in runs:
            live_means.append(np.mean([100 * live[s][1] / live[s][0] for s in streams]))
            sim_means.append(np.mean([100 * replay[s]["on_time"] / max(1, replay[s]["frames"]) for s in streams]))
        print(f"streams within the live range widened by 5 points: {inside} of {len(streams)}; median mean over "
              f"streams: live {np.median(live_means):.1f}%, replay {np.median(sim_means):.1f}% "
              f"({np.median(sim_means) - np.median(live_means):+.1f} points)")
    return 0


def _busy(stop: object) -> None:
    """A busy neighbour: one process that keeps a core busy until ``stop`` is set."""
    while not stop.is_set():   # type: ignore[attr-defined]
        sum(range(10_000))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--overload", action="store_true", help="the XR demo's overload cells (see the module doc)")
    ap.add_argument("--users", type=int, default=2, help="--overload: XR users (default 2)")
    ap.add_argument("--runs", type=int, default=3, help="--overload: live runs per cell (default 3)")
    ap.add_argument("--hog", action="store_true", help="--overload: also the cell beside a busy process")
    ap.add_argument("--background", type=float, default=1 / 3,
                    help="--overload --hog: the share of each CPU worker the busy process takes in the replay's "
                         "profile (default 1/3: three runnable threads on two cores)")
    ap.add_argument("--seconds", type=float, default=20.0, help="live run length (default 20 s)")
    ap.add_argument("--scheduler", default=None, help="policy (default: edgert's own)")
    ap.add_argument("--cpu-workers", type=int, default=None, help="CPU workers (default: one per core)")
    ap.add_argument("--models-dir", type=Path, default=None, help="MediaPipe models (default: the user cache)")
    ap.add_argument("--out", type=Path, default=None, help="keep trace.jsonl and host-profile.json here")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dispatch-ms", default="auto",
                    help="simulated hand-off delay (ms), or auto: samples measured in the live run (default)")
    ap.add_argument("--feeder-yield", action=argparse.BooleanOptionalAction, default=False,
                    help="the live feeder yields the GIL after each submit (see live_run; default: no)")
    ap.add_argument("--profile-from", default="records",
                    help="records (default): the run's service times; estimator: rt.estimator at the end; "
                         "or a profile JSON from `edgert profile`")
    args = ap.parse_args(argv)
    if args.overload:
        return overload_cells(args)
    out = args.out or Path(tempfile.mkdtemp(prefix="edgert-fidelity-"))
    out.mkdir(parents=True, exist_ok=True)
    trace = out / "trace.jsonl"
    print(f"live run: {args.seconds:.0f} s, streams {', '.join(f'{n}@{f:g}fps' for n, f, _ in STREAMS)}")
    live, prof, procs, pol = live_run(args.seconds, args.scheduler, args.cpu_workers, trace, args.models_dir,
                                      args.profile_from, args.feeder_yield)
    prof.save(out / "host-profile.json")
    dispatch: float | tuple[float, ...]
    if args.dispatch_ms == "auto":
        dispatch = tuple(handoff_samples(live)) or 0.0
    else:
        dispatch = float(args.dispatch_ms)
    res = run_simulation(SimConfig(trace=trace, profile=prof, scheduler=args.scheduler, offload=False,
                                   seed=args.seed, dispatch_ms=dispatch))
    sim = res.records
    lv, sv = per_model(live), per_model(sim)
    hand = np.atleast_1d(dispatch)
    print(f"simulated hand-off delay: {hand.size} sample(s), p50 {np.median(hand):.3f} ms, p90 "
          f"{np.percentile(hand, 90):.3f} ms ({args.dispatch_ms}); live policy {pol.name!r}: "
          f"{pol.calls} decisions, {1e6 * pol.spent_s / max(1, pol.calls):.0f} us each (GIL held; the "
          f"simulator's decisions take no virtual time); feeder yields after each submit: {args.feeder_yield}")
    print(f"processors {procs}; trace {trace} ({sum(1 for _ in trace.open())} lines); profile "
          f"{out / 'host-profile.json'}")
    print(f"{'model':28s} {'n live':>7s} {'n sim':>6s} {'met live':>9s} {'met sim':>8s} {'diff pt':>8s} "
          f"{'p50 live':>9s} {'p50 sim':>8s} {'diff %':>7s}  within bars   (p50 wait / run ms: live | sim)")
    ok_all = True
    for m in lv:
        n_l, met_l, p_l, w_l, r_l = lv[m]
        n_s, met_s, p_s, w_s, r_s = sv.get(m, (0,) + (float("nan"),) * 4)
        dpt = met_s - met_l
        dp = (p_s - p_l) / p_l if p_l > 0 else float("nan")
        ok = abs(dpt) <= BAR_POINTS and abs(dp) <= BAR_P50
        ok_all &= ok
        print(f"{m:28s} {n_l:7d} {n_s:6d} {met_l:8.1f}% {met_s:7.1f}% {dpt:+8.1f} {p_l:9.2f} {p_s:8.2f} "
              f"{100 * dp:+6.1f}%  {'yes' if ok else 'NO ':11s}   {w_l:.2f} / {r_l:.2f} | {w_s:.2f} / {r_s:.2f}")
    from collections import Counter  # noqa: PLC0415

    from scheduler.sim.metrics import reason_kind  # noqa: PLC0415

    for side, recs in (("live", live), ("sim", sim)):
        kinds = Counter(f"{r.model}: {reason_kind(r.reason)}" for r in recs if r.status == "dropped")
        print(f"drops {side}: " + ("; ".join(f"{n} x {k}" for k, n in kinds.most_common(5)) or "none"))
    print(f"bars: deadline-met within {BAR_POINTS:g} points and p50 within {100 * BAR_P50:.0f}% per model: "
          f"{'all met' if ok_all else 'NOT all met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
