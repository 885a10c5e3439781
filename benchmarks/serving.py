"""Serving a burst (issue 28): one at a time vs all at once vs ``auto``, admission, serving options, placement.

Four parts, each printed as a table (``--parts`` picks some):

* ``queue``: N requests of one ONNX model on ``ort-cpu``: called directly one at a time (one
  single-threaded ``InferenceSession``, the peer), through edgert one at a time (sync calls), and
  submitted at once to edgert on 1 and 2 CPU workers and on ``delegates="auto"``. Rounds alternate the
  sides; medians. Bars: at once on one worker >= 0.95x direct, on two >= 1.5x.
* ``admission``: ``--rounds`` rounds of N at once with a 60 s deadline (bar: none dropped), then N at
  once with a deadline that fits about half (the estimate x 10.5): kept ok / late, dropped on arrival,
  dropped later, and how long a drop on arrival took.
* ``options``: ORT serving options (``delegates/_ort_serving.py``) on this host: plain ``run`` vs IO
  binding, one at a time vs same-model batches of 2/4/8 (a batched model: the CNN with a symbolic batch
  dimension, and ``dynamic_batch``), and the options a GPU needs, refused here with their reason.
* ``runtime``: the same options asked the way a user asks them (``delegates.registry.configure``) and served
  by ``edgert.Runtime``: sync calls one at a time on one worker, plain vs ``io_binding`` on ``ort-cpu`` (the
  CPU variant of the GPU path), and on ``ort-cuda`` / ``ort-tensorrt`` plain vs IO binding vs IO binding with
  CUDA graphs, static-shape models; a path this host lacks prints "not run: <reason>", an option a path
  refuses "refused: <reason>".
* ``placement``: the simulator (``scheduler/sim/burst.py``): a burst on a device whose GPU is 5-50x
  faster than its CPU, edgert and round_robin on both processors vs each processor alone (makespan, ms).

The model: ``edgert.testing.sized.cnn_at(256)``, genmodels' CNN at 256x256 (about 28 ms a run on one
core here, the cost of PP-OCRv4 det at 320x320 that the issue measured) and genmodels' 2 ms ``cnn``.

    python benchmarks/serving.py [--parts queue admission options runtime placement] [--requests 60] [--small-requests 400]
                                 [--rounds 3]
                                 [--markdown benchmarks/results/serving.md]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # the repo, when edgert is not installed
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import host_line, markdown_doc, median  # noqa: E402

import edgert  # noqa: E402
from delegates.registry import configure, get  # noqa: E402
from delegates._ort_serving import BoundRunner, ServingOptions, refusals, run_batched  # noqa: E402
from delegates.onnxrt import OrtSession  # noqa: E402
from edgert.testing import genmodels  # noqa: E402
from edgert.testing.sized import DET_HW, cnn_at  # noqa: E402
from scheduler.policies.edgert import BEHIND_REASON  # noqa: E402
from scheduler.sim.burst import compare_alone, unequal_profile  # noqa: E402


def _session(data: bytes):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def models() -> dict[str, tuple[bytes, np.ndarray]]:
    """name -> (ONNX bytes, one input): the det-sized CNN and the 2 ms CNN, both with a batch dimension."""
    rng = np.random.default_rng(0)
    return {f"cnn{DET_HW}": (cnn_at(DET_HW), rng.standard_normal((1, DET_HW, DET_HW, 3)).astype(np.float32)),
            "cnn64": (cnn_at(64), rng.standard_normal((1, 64, 64, 3)).astype(np.float32))}


def onnx_case(spec: str) -> tuple[str, bytes, np.ndarray, int]:
    """``NAME=PATH:1x3x48x192:N`` (``--onnx``): a model file, its input shape (random float32 input) and N."""
    name, rest = spec.split("=", 1)
    path, shape, n = rest.rsplit(":", 2)
    x = np.random.default_rng(0).standard_normal(tuple(int(d) for d in shape.split("x"))).astype(np.float32)
    return name, Path(path).read_bytes(), x, int(n)


def queue_part(n_by_model: dict[str, int], rounds: int,
               extra: dict[str, tuple[bytes, np.ndarray]] | None = None) -> list[list[str]]:
    """Direct one at a time vs edgert (sync one at a time; at once on 1, 2 workers and auto): ms per request."""
    rows = []
    for name, (data, x) in {**models(), **(extra or {})}.items():
        n = n_by_model[name]
        sess = _session(data)
        feed = sess.get_inputs()[0].name
        sess.run(None, {feed: x})
        sides: dict[str, list[float]] = {"direct": [], "edgert sync": [], "at once, 1 worker": [],
                                         "at once, 2 workers": [], "at once, auto": []}
        runs: dict[str, list[float]] = {k: [] for k in sides}
        gaps: dict[str, list[float]] = {k: [] for k in sides}
        rts = {"edgert sync": edgert.Runtime(delegates=["ort-cpu"], cpu_workers=1, records=True),
               "at once, 1 worker": edgert.Runtime(delegates=["ort-cpu"], cpu_workers=1, records=True),
               "at once, 2 workers": edgert.Runtime(delegates=["ort-cpu"], cpu_workers=2, records=True),
               "at once, auto": edgert.Runtime(delegates="auto", records=True)}
        try:
            ms = {k: rt.load(data, name=name, slo_ms=60_000.0) for k, rt in rts.items()}
            for _ in range(rounds):
                t = time.perf_counter()
                for _ in range(n):
                    sess.run(None, {feed: x})
                sides["direct"].append(time.perf_counter() - t)
                t = time.perf_counter()
                for _ in range(n):
                    ms["edgert sync"](x)
                sides["edgert sync"].append(time.perf_counter() - t)
                for k in ("at once, 1 worker", "at once, 2 workers", "at once, auto"):
                    t = time.perf_counter()
                    res = [f.result() for f in [ms[k].submit(x) for _ in range(n)]]
                    sides[k].append(time.perf_counter() - t)
                    bad = [r for r in res if r.status != "ok"]
                    if bad:
                        raise SystemExit(f"{k}: {len(bad)} of {n} not ok: {bad[0].status} {bad[0].error}")
                    _runs_and_gaps(rts[k].records()[-n:], runs[k], gaps[k])
        finally:
            for rt in rts.values():
                rt.close()
        direct = median(sides["direct"])
        for k, v in sides.items():
            rows.append([name, str(n), k, f"{median(v) / n * 1e3:.2f}", f"{direct / median(v):.2f}x",
                         f"{median(runs[k]):.2f}" if runs[k] else "-",
                         f"{median(gaps[k]) * 1e3:.0f}" if gaps[k] else "-"])
    return rows


def _runs_and_gaps(records, runs: list[float], gaps: list[float]) -> None:
    """Each run's ms (start to end) and, per processor, the idle ms between one run's end and the next start:
    on a GPU host this tells a slower run (device or launch-thread contention) from a slower hand-off."""
    by_proc: dict[str, list] = {}
    for r in records:
        if r.processor:
            runs.append(r.end_ms - r.start_ms)
            by_proc.setdefault(r.processor, []).append(r)
    for recs in by_proc.values():
        recs.sort(key=lambda r: r.start_ms)
        gaps.extend(max(0.0, b.start_ms - a.end_ms) for a, b in zip(recs, recs[1:]))


def admission_part(n: int, rounds: int) -> list[list[str]]:
    """Rounds of a burst with 60 s to spare, then one with a deadline that fits about half, on one worker."""
    data, x = models()[f"cnn{DET_HW}"]
    rows = []
    with edgert.Runtime(delegates=["ort-cpu"], cpu_workers=1) as rt:
        det = rt.load(data, name="det", slo_ms=60_000.0)
        for r in range(rounds):
            res = [f.result() for f in [det.submit(x) for _ in range(n)]]
            rows.append([f"60 s, run {r + 1}", str(n), str(sum(q.status == "ok" for q in res)),
                         str(sum(q.status == "late" for q in res)), str(sum(q.status == "dropped" for q in res)),
                         "-", "-"])
        run_ms = rt.estimator.expected_ms("det", "cpu0") or 0.0
        half = rt.load(data, name="half", slo_ms=10.5 * run_ms)
        for r in range(rounds):
            res = [f.result() for f in [half.submit(x) for _ in range(2 * 10)]]
            arrival = [q for q in res if q.status == "dropped" and BEHIND_REASON in str(q.error)]
            later = [q for q in res if q.status == "dropped" and q not in arrival]
            rows.append([f"{10.5 * run_ms:.0f} ms (10.5 runs), run {r + 1}", "20",
                         str(sum(q.status == "ok" for q in res)), str(sum(q.status == "late" for q in res)),
                         f"{len(arrival)} on arrival + {len(later)} later",
                         f"{max((q.latency_ms for q in arrival), default=0.0):.2f}",
                         f"{max((q.latency_ms for q in res if q.status == 'ok'), default=0.0):.0f}"])
    return rows


def _per_request_us(fn, n: int, per_call: int = 1) -> float:
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / (n * per_call) * 1e6


def options_part(rounds: int) -> list[list[str]]:
    """Plain run vs IO binding vs same-model batches, µs per request (medians of ``rounds``), and refusals."""
    rows = []
    cases = {name: (data, x) for name, (data, x) in models().items()}
    cases["dynamic_batch"] = (genmodels.build("dynamic_batch", "onnx"), genmodels.example_inputs("dynamic_batch")["x"])
    for name, (data, x) in cases.items():
        sess = _session(data)
        feed = sess.get_inputs()[0].name
        bound = BoundRunner(sess)
        n = {"dynamic_batch": 4000, "cnn64": 200}.get(name, 16)

        def plain() -> None:
            sess.run(None, {feed: x})

        def run(feeds):
            return sess.run(None, {feed: feeds[0]})

        fns = {"plain run": (plain, 1), "io binding": (lambda: bound.run([x]), 1)}
        for b in (2, 4, 8):
            reqs = [[x]] * b
            fns[f"batch of {b}"] = ((lambda reqs=reqs: run_batched(run, reqs)), b)
        got: dict[str, list[float]] = {k: [] for k in fns}
        for fn, _ in fns.values():
            fn()
        for _ in range(rounds):
            for k, (fn, per) in fns.items():
                got[k].append(_per_request_us(fn, max(1, n // per), per))
        base = median(got["plain run"])
        for k, v in got.items():
            rows.append([name, k, f"{median(v):.1f}", f"{base / median(v):.2f}x"])
    info = OrtSession(_session(cnn_at(64)), "cnn64")
    asked = ServingOptions(io_binding=True, cuda_graph=True, instances=2)
    for opt, why in refusals(asked, "CPUExecutionProvider", ort.get_available_providers(), info.inputs,
                             info.outputs).items():
        rows.append(["cnn64", f"{opt} (refused)", "-", why])
    return rows


#: the options ``runtime_part`` asks of each path (label -> delegate options)
RUNTIME_OPTIONS: dict[str, dict[str, list[tuple[str, dict[str, object]]]]] = {
    "cpu": {"ort-cpu": [("plain", {}), ("io_binding", {"io_binding": True}),
                        ("cuda_graph", {"io_binding": True, "cuda_graph": True}), ("instances=2", {"instances": 2})]},
    "gpu": {name: [("plain", {}), ("io_binding", {"io_binding": True}),
                   ("io_binding + cuda_graph", {"io_binding": True, "cuda_graph": True}),
                   ("instances=2", {"instances": 2})] for name in ("ort-cuda", "ort-tensorrt")},
}
_RESET = {"io_binding": False, "cuda_graph": False, "instances": 1}


def runtime_part(rounds: int, n_by_model: dict[str, int]) -> list[list[str]]:
    """Each path's options served by edgert.Runtime (sync calls on one worker): µs per request, vs plain."""
    cases = {"cnn64 static": cnn_at(64, batched=False), "mlp": genmodels.build("mlp", "onnx")}
    feeds = {"cnn64 static": np.random.default_rng(0).standard_normal((1, 64, 64, 3)).astype(np.float32),
             "mlp": genmodels.example_inputs("mlp")["x"]}
    rows = []
    for kind, paths in RUNTIME_OPTIONS.items():
        for path, options in paths.items():
            why = get(path).probe()
            if why is not None:
                rows.extend([path, label, "-", "-", f"not run: {why}"] for label, _ in options)
                continue
            rts: dict[str, edgert.Runtime] = {}
            models: dict[str, dict[str, edgert.Model]] = {}
            try:
                for label, opts in options:
                    try:
                        configure({path: opts})
                    except edgert.ConfigError as exc:
                        rows.append([path, label, "-", "-", f"refused: {exc}"])
                        continue
                    try:
                        rts[label] = edgert.Runtime(delegates=[path], cpu_workers=1 if kind == "cpu" else 0)
                        models[label] = {name: rts[label].load(data, name=name, slo_ms=60_000.0)
                                         for name, data in cases.items()}
                    finally:
                        configure({path: _RESET})
                rows.extend(_served(models, _direct(path, cases), feeds, n_by_model, rounds, path))
            finally:
                for rt in rts.values():
                    rt.close()
    return rows


def _direct(path: str, cases: dict[str, bytes]) -> dict[str, ort.InferenceSession]:
    """The peer: one plain single-threaded InferenceSession per model on the path's EP, called directly."""
    d = get(path)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    providers = [(d.provider, dict(getattr(d, "provider_options", {})))] + (
        [] if d.provider == "CPUExecutionProvider" else ["CPUExecutionProvider"])
    return {name: ort.InferenceSession(data, so, providers=providers) for name, data in cases.items()}


def _served(models: dict[str, dict[str, edgert.Model]], direct: dict[str, ort.InferenceSession],
            feeds: dict[str, np.ndarray], n_by_model: dict[str, int], rounds: int, path: str) -> list[list[str]]:
    """Alternating the sides round by round: µs per sync call of each model, and the speed-up vs edgert's plain
    sessions; the first side is the EP's plain session called directly, without edgert."""
    rows = []
    for name, x in feeds.items():
        sess = direct[name]
        feed = sess.get_inputs()[0].name
        fns = {"direct (no edgert)": lambda s=sess, k=feed: s.run(None, {k: x})}
        fns.update({label: (lambda f=m[name]: f(x)) for label, m in models.items()})
        ran = {label: m[name].submit(x).result().delegate for label, m in models.items()}   # also warms up
        ran["direct (no edgert)"] = "InferenceSession.run"
        sess.run(None, {feed: x})
        got: dict[str, list[float]] = {label: [] for label in fns}
        for _ in range(rounds):
            for label, fn in fns.items():
                got[label].append(_per_request_us(fn, n_by_model[name]))
        base = median(got["plain"])
        for label, v in got.items():
            rows.append([path, label, name, f"{median(v):.1f}", f"{base / median(v):.2f}x ({ran[label]})"])
    return rows


def placement_part() -> list[list[str]]:
    """Simulated bursts on a GPU 5-50x faster than the CPU: makespan on both vs each alone (ms)."""
    rows = []
    for ratio in (50.0, 20.0, 5.0):
        for n in (20, 60, 200):
            for sched in ("edgert", "round_robin"):
                both, alone = compare_alone(unequal_profile(1.0, ratio), n=n, slo_ms=60_000.0, scheduler=sched,
                                            noise=0.1, seed=0)
                best = min(a.makespan_ms for a in alone.values())
                rows.append([f"{ratio:g}x", str(n), sched, f"{both.makespan_ms:.1f}", f"{alone['gpu'].makespan_ms:.1f}",
                             f"{alone['cpu'].makespan_ms:.0f}", str(both.by_processor.get("cpu", 0)),
                             f"{both.makespan_ms / best:.3f}"])
    return rows


TABLES = {
    "queue": ("N requests of one model on ort-cpu, ms per request (median of the rounds); speed-up vs direct",
              ["model", "N", "side", "ms / request", "vs direct", "run ms (median)", "gap µs (median)"]),
    "admission": ("A burst on one CPU worker (the ~28 ms CNN): rounds with 60 s to spare, then a deadline that "
                  "fits about half", ["deadline", "N", "ok", "late", "dropped", "drop on arrival took ms",
                                      "last ok ms"]),
    "options": ("Serving options on ort-cpu: µs per request (median of the rounds), speed-up vs a plain run; "
                "what a GPU needs, refused", ["model", "option", "µs / request", "speed-up / reason"]),
    "runtime": ("Serving options asked through configure() and served by edgert.Runtime, sync calls on one worker: "
                "µs per request (median of the rounds), speed-up vs the path's plain sessions",
                ["path", "option", "model", "µs / request", "speed-up (path) / reason"]),
    "placement": ("Simulated burst (scheduler/sim/burst.py, 10 % run noise, seed 0): GPU 1 ms, CPU ratio x "
                  "slower; makespan ms", ["cpu slower", "N", "policy", "both", "gpu alone", "cpu alone",
                                          "to cpu", "vs best alone"]),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", nargs="+", choices=list(TABLES), default=list(TABLES))
    ap.add_argument("--requests", type=int, default=60, help="N of the ~28 ms model")
    ap.add_argument("--small-requests", type=int, default=400, help="N of the ~2 ms model")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--markdown", metavar="OUT.md")
    ap.add_argument("--onnx", action="append", default=[], metavar="NAME=PATH:SHAPE:N",
                    help="a held-out ONNX model for the queue part, e.g. "
                         "cls=ch_ppocr_mobile_v2.0_cls_infer.onnx:1x3x48x192:300 (repeatable)")
    args = ap.parse_args()
    extra = {name: (data, x, n) for name, data, x, n in map(onnx_case, args.onnx)}
    host = host_line()
    print(host)
    docs = []
    for part in args.parts:
        if part == "queue":
            rows = queue_part({f"cnn{DET_HW}": args.requests, "cnn64": args.small_requests,
                               **{k: v[2] for k, v in extra.items()}}, args.rounds,
                              {k: (v[0], v[1]) for k, v in extra.items()})
        elif part == "admission":
            rows = admission_part(60, args.rounds)
        elif part == "options":
            rows = options_part(args.rounds)
        elif part == "runtime":
            rows = runtime_part(args.rounds, {"cnn64 static": args.small_requests, "mlp": 20 * args.small_requests})
        else:
            rows = placement_part()
        title, cols = TABLES[part]
        print(f"\n{title}\n" + " | ".join(cols))
        for r in rows:
            print(" | ".join(r))
        docs.append(markdown_doc(f"{part}: {title}", [host], cols, ["| " + " | ".join(r) + " |" for r in rows],
                                 range(1, len(cols))))
        if part == "queue":
            ratio = {(r[0], r[2]): float(r[4][:-1]) for r in rows}
            one = min(v for (m, k), v in ratio.items() if k == "at once, 1 worker")
            two = min(v for (m, k), v in ratio.items() if k == "at once, 2 workers")
            print(f"bar: at once on 1 worker >= 0.95x direct -> {one:.2f}x {'PASS' if one >= 0.95 else 'FAIL'}; "
                  f"on 2 workers >= 1.5x -> {two:.2f}x {'PASS' if two >= 1.5 else 'FAIL'}")
        if part == "admission":
            dropped = sum(int(r[4]) for r in rows if r[0].startswith("60 s"))
            print(f"bar: no request with 60 s to spare dropped -> {dropped} {'PASS' if dropped == 0 else 'FAIL'}")
    if args.markdown:
        Path(args.markdown).write_text("\n".join(docs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
