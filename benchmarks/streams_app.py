"""An app with its own models under overload: edgert's streams (``rt.stream``) beside plain threads, side by side.

The app is not built on ``apps.xr``: five streams of real models, written only against the streams API
(``docs/streams.md``), each frame a chain of requests:

=============  =====  ========  ==================================================================
stream         fps    level     chain
=============  =====  ========  ==================================================================
hands          30     critical  palm_detection_full → hand_landmark_full (LiteRT, MediaPipe's)
face           30     high      face_detection_short_range → face_landmark (LiteRT)
pose           30     normal    pose_detection → pose_landmark_full (LiteRT)
text           10     normal    a text-detector-sized ONNX CNN (1×3×320×320 → 1×1×80×80; generated)
segmentation   15     low       selfie_segmentation (LiteRT)
=============  =====  ========  ==================================================================

Its peer is the same app on plain threads calling the backends directly (LiteRT's ``Interpreter``, ONNX
Runtime's ``InferenceSession``, one thread each, as edgert's workers run them), one thread per stream that
drops a frame while the previous one still runs (MediaPipe's FlowLimiter). Both get the same camera ticks
(latest-frame pacing), the same inputs (crops of the moving sample scene) and the same models.

Cells: ``hog1`` (one user beside a busy process), ``users2`` (two users, ten streams, idle host). Per
stream and run: ``on time %`` (frames whose whole chain ended within the period it ran at, out of
``seconds × fps`` expected) and ``late %`` (frames taken whose chain ran to its end after their deadline,
out of those taken; a frame whose request edgert dropped, as it could no longer end in time, is neither on
time nor late: ``-v`` counts them); per cell the mean over streams, the median of the runs. ``--unprivileged`` runs edgert
without ``CAP_SYS_NICE`` (``capsh --drop``; where it is missing the runtime reports thread priorities off).

    python benchmarks/streams_app.py --cells hog1 users2 --runs 2 --seconds 10 [--unprivileged]

``--replay`` (edgert only): each run writes a trace (``trace=``), which becomes this host's profile
(``edgert profile --from-trace``) and is replayed on it with the same frames offered to the same controller
(``edgert simulate --trace``); per stream, the on-time share of the frames offered live (from the trace's
frame records) and replayed, whether each replay lies within the live runs' range widened by 5 points, and
the median over runs of the mean over streams, live and replayed::

    python benchmarks/streams_app.py --cells users2 --runs 3 --seconds 10 --systems edgert --replay [--seeds 4]

``--measured-runs`` replays each request that ran live for as long as it ran (``edgert simulate --measured-runs``),
rather than drawing its time from the profile's p50 and p90. ``--keep DIR`` keeps the live runs' traces;
``--traces DIR/users2-*.jsonl`` replays them again without running live (the replay alone is simulated: it does
not depend on the host).
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import edgert  # noqa: E402
from _common import host_line  # noqa: E402
from xr_users import _hog, load_frames  # noqa: E402

#: stream -> (fps, level, models of its chain in order)
APP: dict[str, tuple[float, str, tuple[str, ...]]] = {
    "hands": (30.0, "critical", ("palm_detection_full", "hand_landmark_full")),
    "face": (30.0, "high", ("face_detection_short_range", "face_landmark")),
    "pose": (30.0, "normal", ("pose_detection", "pose_landmark_full")),
    "text": (10.0, "normal", ("text_detector",)),
    "segmentation": (15.0, "low", ("selfie_segmentation",)),
}
CELLS: dict[str, tuple[int, bool]] = {"hog1": (1, True), "users2": (2, False)}
#: --verbose: 1 prints each stream's sheds by reason and its rate steps after a run, 2 also every frame not taken
VERBOSE = 0


def text_detector(path: Path) -> Path:
    """A text detector's size of ONNX CNN (EAST-like stem on 320×320, about 0.4 GFLOP), random weights."""
    import onnx  # noqa: PLC0415
    from onnx import TensorProto, helper, numpy_helper  # noqa: PLC0415

    rng = np.random.default_rng(0)
    layers = [(3, 16, 2), (16, 32, 2), (32, 64, 1), (64, 64, 1), (64, 64, 1), (64, 1, 1)]
    nodes, inits, prev = [], [], "image"
    for i, (cin, cout, stride) in enumerate(layers):
        w = numpy_helper.from_array((rng.standard_normal((cout, cin, 3, 3)) * 0.1).astype(np.float32), f"w{i}")
        inits.append(w)
        nodes.append(helper.make_node("Conv", [prev, f"w{i}"], [f"c{i}"], strides=[stride, stride],
                                      pads=[1, 1, 1, 1]))
        prev = f"c{i}"
        if i < len(layers) - 1:
            nodes.append(helper.make_node("Relu", [prev], [f"r{i}"]))
            prev = f"r{i}"
    nodes.append(helper.make_node("Sigmoid", [prev], ["score"]))
    graph = helper.make_graph(nodes, "text_detector",
                              [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 320, 320])],
                              [helper.make_tensor_value_info("score", TensorProto.FLOAT, [1, 1, 80, 80])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def model_files(tmp: Path) -> dict[str, Path]:
    """Each model of the app by name."""
    from apps.xr import assets  # noqa: PLC0415

    paths = dict(assets.model_paths())
    paths["text_detector"] = text_detector(tmp / "text_detector.onnx")
    return paths


def inputs_for(shape: tuple[int, ...], dtype: np.dtype, frame: np.ndarray) -> np.ndarray:
    """The frame resized to a model's input (NHWC for LiteRT, NCHW for the ONNX detector), in [0, 1]."""
    import cv2  # noqa: PLC0415

    nchw = shape[1] == 3
    h, w = (shape[2], shape[3]) if nchw else (shape[1], shape[2])
    x = cv2.resize(frame.astype(np.float32) / 255.0 if frame.dtype == np.uint8 else frame, (w, h))
    x = x.transpose(2, 0, 1) if nchw else x
    return np.ascontiguousarray(x[None].astype(dtype))


@dataclass
class Tally:
    """One stream's frames in one run."""

    frames: int = 0
    taken: int = 0
    on_time: int = 0
    late: int = 0
    dropped: int = 0      # frames taken whose request edgert dropped or failed (it could no longer end in time)
    probes: int = 0       # frames taken lean (edgert's probes after a streak of skips)
    probes_late: int = 0
    #: edgert's frames taken with a prediction: (predicted finish, end, deadline), ms on the runtime's clock
    predictions: list[tuple[float, float, float]] = field(default_factory=list)


@dataclass
class Camera:
    """The camera clock every stream thread of a run shares: ``t0`` (perf_counter s), set before they start."""

    t0: float = 0.0


def _paced(stop: threading.Event, fps: float, camera: Camera, offset_s: float, step) -> None:
    """Call ``step(tick_s)`` on the camera ticks of a ``fps`` stream (latest-frame pacing: ticks missed while a
    frame ran are skipped)."""
    period = 1.0 / fps
    t0 = camera.t0
    k = 0
    while not stop.is_set():
        tick = t0 + offset_s + k * period
        delay = tick - time.perf_counter()
        if delay > 0 and stop.wait(delay):
            return
        step(tick)
        k = max(k + 1, int((time.perf_counter() - t0 - offset_s) / period) + 1)


def run_plain(files: dict[str, Path], frames: list[np.ndarray], users: int, seconds: float) -> dict[str, Tally]:
    """The peer: one thread per stream calling LiteRT / ONNX Runtime directly; a frame while busy is dropped."""
    import onnxruntime as ort  # noqa: PLC0415
    from ai_edge_litert.interpreter import Interpreter  # noqa: PLC0415

    def runner(name: str):
        if files[name].suffix == ".onnx":
            so = ort.SessionOptions()
            so.intra_op_num_threads = so.inter_op_num_threads = 1
            sess = ort.InferenceSession(str(files[name]), so, providers=["CPUExecutionProvider"])
            inp = sess.get_inputs()[0]
            return (tuple(inp.shape), np.float32), lambda x: sess.run(None, {inp.name: x})
        it = Interpreter(model_path=str(files[name]), num_threads=1)
        it.allocate_tensors()
        d = it.get_input_details()[0]

        def call(x: np.ndarray) -> None:
            it.set_tensor(d["index"], x)
            it.invoke()
        return (tuple(d["shape"]), d["dtype"]), call

    tallies: dict[str, Tally] = {}
    stop, camera = threading.Event(), Camera()
    threads = []
    for u in range(users):
        for i, (stream, (fps, _, chain)) in enumerate(APP.items()):
            name = stream if users == 1 else f"{stream}#{u}"
            tally = tallies[name] = Tally()
            calls = [runner(m) for m in chain]
            feeds = [[inputs_for(shape, dt, f) for f in frames] for (shape, dt), _ in calls]

            def step(tick: float, calls=calls, feeds=feeds, tally=tally, fps=fps) -> None:
                k = int(tick * 30.0) % len(frames)
                tally.frames += 1
                tally.taken += 1
                for (_, call), feed in zip(calls, feeds):
                    call(feed[k])
                done = time.perf_counter() - tick <= 1.0 / fps
                tally.on_time += done
                tally.late += not done
            threads.append(threading.Thread(target=_paced, args=(stop, fps, camera, (i + u) / 150.0, step),
                                            daemon=True))
    _run_for(threads, stop, camera, seconds)
    return tallies


def _run_for(threads: list[threading.Thread], stop: threading.Event, camera: Camera, seconds: float) -> None:
    """Start the stream threads on one camera clock for ``seconds``, then stop them and wait for them."""
    camera.t0 = time.perf_counter() + 0.2
    for t in threads:
        t.start()
    time.sleep(max(0.0, camera.t0 + seconds - time.perf_counter()))
    stop.set()
    for t in threads:
        t.join()


def run_edgert(files: dict[str, Path], frames: list[np.ndarray], users: int, seconds: float,
               trace: Path | None = None) -> tuple[dict[str, Tally], str]:
    """edgert: the same app as runtime streams; the runtime takes or skips each frame and steps rates."""
    tallies: dict[str, Tally] = {}
    with edgert.Runtime(urgent_workers=1, trace=trace) as rt:
        models = {m: rt.load(files[m], name=m) for _, _, chain in APP.values() for m in chain}
        stop, camera = threading.Event(), Camera()
        base_ms = rt.now_ms() - time.perf_counter() * 1e3   # perf_counter s -> runtime ms
        threads, streams = [], []
        for u in range(users):
            for i, (stream, (fps, level, chain)) in enumerate(APP.items()):
                name = stream if users == 1 else f"{stream}#{u}"
                s = rt.stream(name, fps, priority=level)
                streams.append(s)
                tally = tallies[name] = Tally()
                feeds = [[inputs_for(tuple(models[m].inputs[0].shape), np.dtype(models[m].inputs[0].dtype), f)
                          for f in frames] for m in chain]

                def step(tick: float, s=s, chain=chain, feeds=feeds, tally=tally) -> None:
                    k = int(tick * 30.0) % len(frames)
                    tally.frames += 1
                    with s.frame(at_ms=base_ms + tick * 1e3) as f:
                        if not f:
                            if VERBOSE >= 2 and f.reason != "rate":
                                print(f"      {s.name} {rt.now_ms():.0f}: {f.reason}: {f.detail}")
                            return
                        tally.taken += 1
                        prev, statuses = None, []
                        for m, feed in zip(chain, feeds):
                            prev = models[m].submit(feed[k], after=prev).result()
                            statuses.append(prev.status)
                    end_ms = rt.now_ms()
                    ok = all(st == "ok" for st in statuses)
                    served = all(st in ("ok", "late") for st in statuses)   # every stage ran to its end
                    tally.on_time += ok and end_ms <= f.deadline_ms
                    tally.late += served and end_ms > f.deadline_ms
                    tally.dropped += not served
                    if not math.isnan(f.decision.predicted_ms):
                        tally.predictions.append((f.decision.predicted_ms, end_ms, f.deadline_ms))
                    tally.probes += f.lean
                    tally.probes_late += f.lean and end_ms > f.deadline_ms
                threads.append(threading.Thread(target=_paced, args=(stop, fps, camera, (i + u) / 150.0, step),
                                                daemon=True))
        _run_for(threads, stop, camera, seconds)
        steps = sum(len(s.stats()["steps"]) for s in streams)
        if VERBOSE >= 1:
            for s in streams:
                st = s.stats()
                t = tallies[s.name]
                print(f"    {s.name}: taken {t.taken} late {t.late} dropped {t.dropped} (probes {t.probes}, late "
                      f"{t.probes_late}); "
                      f"{error_tail(t.predictions)}; "
                      f"shed {st['frames_shed_by']} rung {st['rung_fps']:g} chain {st['chain_ms']} ms; "
                      + "; ".join(f"{x['from_fps']:g}->{x['to_fps']:g} {x['why']}" for x in st["steps"]))
        return tallies, f"thread priorities {rt.thread_priority}; {steps} rate steps"


def error_tail(predictions: list[tuple[float, float, float]]) -> str:
    """The prediction errors of a stream's frames (end − predicted finish, ms), and what a margin of the largest
    of its last N errors would have done: frames it would have taken, and the share of those late (taking the
    run as it went, without the margin's feedback on it)."""
    if len(predictions) < 8:
        return "errors: too few"
    errors = sorted(end - p for p, end, _ in predictions)
    q = {k: errors[int(k * (len(errors) - 1))] for k in (0.5, 0.9, 0.99)}
    out = [f"errors p50 {q[0.5]:.1f} p90 {q[0.9]:.1f} p99 {q[0.99]:.1f} max {errors[-1]:.1f} ms"]
    for n in (8, 32):
        taken = late = 0
        for i, (p, end, deadline) in enumerate(predictions):
            before = [e - q for q, e, _ in predictions[max(0, i - n):i]]
            if p + (max(0.0, *before) if len(before) >= 4 else 0.0) <= deadline:
                taken += 1
                late += end > deadline
        out.append(f"max of last {n}: {late}/{taken} late")
    return ", ".join(out)


def cell(system: str, files: dict[str, Path], frames: list[np.ndarray], users: int, hog: bool,
         seconds: float, trace: Path | None = None) -> tuple[dict[str, float], dict[str, float], str]:
    """One run: per stream on-time % of expected and late % of taken, and a note."""
    stop = mp.Event()
    proc = mp.Process(target=_hog, args=(stop,), daemon=True) if hog else None
    if proc is not None:
        proc.start()
    try:
        if system == "plain":
            tallies, note = run_plain(files, frames, users, seconds), ""
        else:
            tallies, note = run_edgert(files, frames, users, seconds, trace)
    finally:
        if proc is not None:
            stop.set()
            proc.join()
    fps = {n: APP[n.split("#")[0]][0] for n in tallies}
    on = {n: 100.0 * t.on_time / (seconds * fps[n]) for n, t in tallies.items()}
    late = {n: 100.0 * t.late / t.taken if t.taken else 0.0 for n, t in tallies.items()}
    return on, late, note


def replay_shares(trace: Path, seed: int, measured: bool) -> dict[str, float]:
    """Per stream, the on-time % of the frames offered when ``trace`` is replayed on the profile made from it
    (``edgert profile --from-trace``, then ``edgert simulate --trace``), with ``seed``; with ``measured`` each
    request that ran live runs as long as it did (``edgert simulate --measured-runs``)."""
    from edgert._replay import host_profile, read_outcomes  # noqa: PLC0415
    from edgert.sweep import sim_config  # noqa: PLC0415
    from scheduler.sim import run_simulation  # noqa: PLC0415

    outcomes = read_outcomes(trace)
    cfg = sim_config(scenario=None, trace=trace, device="host", scheduler=None, objective=None, load=1.0,
                     duration_s=None, seed=seed, burst=None, live=outcomes, measured=measured)
    cfg.profile, cfg.offload = host_profile(outcomes), False
    per = run_simulation(cfg).summary()["per_stream"]
    return {k: 100.0 * v["on_time"] / max(1, v["frames"]) for k, v in per.items()}


def live_shares(trace: Path) -> dict[str, float]:
    """Per stream, the on-time % of the frames offered in the live run that wrote ``trace``."""
    from sim_fidelity import live_streams  # noqa: PLC0415

    return {k: 100.0 * on / n for k, (n, on, _, _) in live_streams(trace).items()}


def replayed(traces: list[Path], seeds: int = 1, measured: bool = False) -> None:
    """Each run replayed from its own trace on the profile made from it (see the module doc), set beside it;
    with ``seeds`` > 1 the replays again with seeds 1 .. seeds - 1, summed up (the replay's own spread); with
    ``measured`` each request that ran live runs as long as it did (``edgert simulate --measured-runs``)."""
    live = [live_shares(trace) for trace in traces]
    streams = sorted(live[0])
    ranges = {st: (min(x[st] for x in live), max(x[st] for x in live)) for st in streams}
    ml = statistics.median(statistics.fmean(x.values()) for x in live)
    checks, medians = 0, []
    for seed in range(seeds):
        sim = [replay_shares(trace, seed, measured) for trace in traces]
        inside = {st: all(ranges[st][0] - 5 <= y[st] <= ranges[st][1] + 5 for y in sim) for st in streams}
        ms = statistics.median(statistics.fmean(y.values()) for y in sim)
        checks += sum(inside.values())
        medians.append(ms - ml)
        if seed == 0:
            print(f"\nreplayed{' with the run times measured live' if measured else ''}: per stream, on-time % of frames "
                  "offered, live | replay per run; live range +- 5 holds it?")
            for st in streams:
                lo, hi = ranges[st]
                print(f"  {st:16s} " + "  ".join(f"{x[st]:5.1f} | {y[st]:5.1f}" for x, y in zip(live, sim))
                      + f"  spread {hi - lo:4.1f}  {'yes' if inside[st] else 'no'}")
            print(f"  {sum(inside.values())} of {len(streams)} streams within the live range +- 5; median mean over "
                  f"streams: live {ml:.1f} %, replay {ms:.1f} % ({ms - ml:+.1f} points)")
    if seeds > 1:
        print(f"  seeds 0-{seeds - 1}: {checks} of {seeds * len(streams)} stream checks within the live range +- 5; "
              f"replay median - live median {min(medians):+.1f} .. {max(medians):+.1f} points")


def live_ceiling(traces: list[Path], seeds: int = 1, measured: bool = False) -> None:
    """The replay bar's checks on every triple of the live runs, for the replays and for live runs standing in for
    a perfect simulator's replays.

    For every three of the runs (the references), a stream holds when each of three "replays" lies within the
    references' range widened by 5 points, and the medians of the means over streams are compared: as the bar asks
    of the replays of those three runs (seeds 0 .. ``seeds`` - 1), and of three other live runs of the same build.
    A simulator whose replays were draws from the live runs' own distribution would score the latter, on average.
    """
    import itertools  # noqa: PLC0415

    live = [live_shares(trace) for trace in traces]
    sims = [[replay_shares(trace, seed, measured) for trace in traces] for seed in range(seeds)]
    streams = sorted(live[0])
    tally = {"stand-ins": [0, 0, 0, 0], "replays": [0, 0, 0, 0]}   # stream checks held, every stream, means, cases
    per_stream = {kind: dict.fromkeys(streams, 0) for kind in tally}

    def check(kind: str, ref: tuple[int, ...], others: list[dict[str, float]]) -> None:
        row = tally[kind]
        held = [all(min(live[i][st] for i in ref) - 5 <= o[st] <= max(live[i][st] for i in ref) + 5 for o in others)
                for st in streams]
        means = (statistics.median(statistics.fmean(live[i].values()) for i in ref),
                 statistics.median(statistics.fmean(o.values()) for o in others))
        row[0] += sum(held)
        for st, ok in zip(streams, held):
            per_stream[kind][st] += ok
        row[1] += all(held)
        row[2] += abs(means[0] - means[1]) <= 5
        row[3] += 1

    for ref in itertools.combinations(range(len(live)), 3):
        for sim in sims:
            check("replays", ref, [sim[i] for i in ref])
        rest = [i for i in range(len(live)) if i not in ref]
        for others in itertools.combinations(rest, 3):
            check("stand-ins", ref, [live[i] for i in others])
    print(f"\nthe replay bar on every three of {len(live)} live runs (live on-time %: "
          + "; ".join(f"{st} {min(x[st] for x in live):.1f}-{max(x[st] for x in live):.1f}" for st in streams) + ")")
    for kind, (held, every, means, cases) in tally.items():
        what = (f"replays{' (run times measured live)' if measured else ''}, seeds 0-{seeds - 1}"
                if kind == "replays" else "three other live runs (a perfect simulator)")
        print(f"  {what}: {held} of {cases * len(streams)} stream checks ({held / (cases * len(streams)):.1%}); "
              f"every stream in {every} of {cases} ({every / cases:.1%}); median means within 5 points in "
              f"{means} of {cases}")
        print("    per stream: " + ", ".join(f"{st} {n / cases:.0%}" for st, n in per_stream[kind].items()))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (see the module doc)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", nargs="+", default=list(CELLS), choices=list(CELLS))
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--systems", nargs="+", default=["plain", "edgert"], choices=["plain", "edgert"])
    ap.add_argument("--unprivileged", action="store_true",
                    help="run it again as a process without CAP_SYS_NICE (capsh --drop=cap_sys_nice)")
    ap.add_argument("--no-privileged", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--replay", action="store_true", help="replay each edgert run from its trace (see the doc)")
    ap.add_argument("--seeds", type=int, default=1, help="--replay: replay with seeds 0 .. N-1 (default 1)")
    ap.add_argument("--measured-runs", action="store_true",
                    help="--replay: run each request as long as it ran live (edgert simulate --measured-runs)")
    ap.add_argument("--keep", type=Path, metavar="DIR",
                    help="--replay: write the live runs' traces to DIR (CELL-RUN.jsonl) and keep them")
    ap.add_argument("--traces", type=Path, nargs="+", metavar="TRACE",
                    help="replay these traces (written by --keep) instead of running live")
    ap.add_argument("--ceiling", action="store_true",
                    help="with --traces (six or more): the replay checks on every three runs, replays and live runs")
    ap.add_argument("--verbose", "-v", action="count", default=0,
                    help="after each edgert run, each stream's sheds and steps (-vv: every frame not taken, why)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    global VERBOSE
    VERBOSE = args.verbose
    if args.unprivileged and os.geteuid() == 0:
        cmd = ["capsh", "--drop=cap_sys_nice", "--", "-c",
               " ".join([sys.executable, __file__, "--cells", *args.cells, "--runs", str(args.runs), "--seconds",
                         str(args.seconds), "--systems", "edgert"])]
        return subprocess.call(cmd)
    if args.traces and args.ceiling:
        live_ceiling(args.traces, args.seeds, args.measured_runs)
        return 0
    if args.traces:
        replayed(args.traces, args.seeds, args.measured_runs)
        return 0
    frames = load_frames(None)[:60]
    print(host_line(), f"; {args.seconds:.0f} s per run")
    with tempfile.TemporaryDirectory() as tmp:
        files = model_files(Path(tmp))
        for name in args.cells:
            users, hog = CELLS[name]
            results: dict[str, list[tuple[dict[str, float], dict[str, float]]]] = {s: [] for s in args.systems}
            traces: list[Path] = []
            for r in range(args.runs):
                for system in args.systems:   # alternating, so both see the same host over the run
                    trace = (args.keep or Path(tmp)) / f"{name}-{r}.jsonl" \
                        if args.replay and system == "edgert" else None
                    on, late, note = cell(system, files, frames, users, hog, args.seconds, trace)
                    if trace is not None:
                        traces.append(trace)
                    results[system].append((on, late))
                    print(f"{name} run {r + 1} {system:7s} mean {statistics.fmean(on.values()):5.1f}  " +
                          "  ".join(f"{n} {on[n]:.0f}/{late[n]:.0f}" for n in on) + (f"  ({note})" if note else ""),
                          flush=True)
            print(f"\n{name}: per stream, on time % (median of {args.runs} runs) / worst late % of those taken")
            for system, runs in results.items():
                streams = list(runs[0][0])
                med = {n: statistics.median(r[0][n] for r in runs) for n in streams}
                worst_late = {n: max(r[1][n] for r in runs) for n in streams}
                means = [statistics.fmean(r[0].values()) for r in runs]
                print(f"  {system:7s} mean {statistics.median(means):5.1f} (runs {', '.join(f'{m:.1f}' for m in means)}): " +
                      ", ".join(f"{n} {med[n]:.1f}/{worst_late[n]:.1f}" for n in streams))
            if traces:
                replayed(traces, args.seeds, args.measured_runs)
            if set(results) == {"plain", "edgert"}:
                mp_mean = statistics.median(statistics.fmean(r[0].values()) for r in results["plain"])
                ed_mean = statistics.median(statistics.fmean(r[0].values()) for r in results["edgert"])
                print(f"  edgert - plain: {ed_mean - mp_mean:+.1f} points (ratio {ed_mean / mp_mean:.2f}x)\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
