"""Dispatch cost: a sync call through edgert vs calling the backend directly, side by side.

Bar (issue 2): a tiny model, single stream, adds <= 30 µs per request (aim <= 10).
Bar (issue 29): the tiny model on ORT adds at most 2x the direct call. Beside it, the policy's
``decide`` alone on the snapshot the runtime builds for one such request (what any path that lets the
policy decide every request pays).
Rounds alternate direct / runtime so both see the same machine state; the
median of the rounds is reported.

    python benchmarks/dispatch.py [--calls 5000] [--rounds 7] [--scheduler fixed_worker]
    python benchmarks/dispatch.py --steps [--scheduler fixed_worker]   # where a sync call's µs go

``--steps`` times each step of the tiny model's sync call on ORT inside the real path (each step's
function wrapped with a clock; the wrappers add ~0.3 µs each, so the steps sum above the plain call).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import timeit
from pathlib import Path

import numpy as np
import onnxruntime as ort
from ai_edge_litert.interpreter import Interpreter

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # the repo, when edgert is not installed
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import host_line, median, per_call_us  # noqa: E402

import edgert  # noqa: E402
from edgert.testing import genmodels  # noqa: E402


def direct_ort(path: Path, feeds: dict[str, np.ndarray]):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return lambda: sess.run(None, feeds)


def direct_litert(path: Path, feeds: dict[str, np.ndarray]):
    it = Interpreter(model_path=str(path), num_threads=1)
    it.allocate_tensors()
    ins = [(d["index"], feeds[d["name"]]) for d in it.get_input_details()]
    outs = [d["index"] for d in it.get_output_details()]

    def run():
        for i, x in ins:
            it.set_tensor(i, x)
        it.invoke()
        return [it.get_tensor(o) for o in outs]
    return run


def decide_us(rt: edgert.Runtime, model: str, calls: int = 5000) -> float:
    """µs of the runtime's policy deciding one new request of ``model`` with every worker idle (best of 5)."""
    from scheduler.types import RequestView, SchedulerView

    pol, est = rt._dispatcher.decider.policy, rt.estimator
    procs = tuple(w.idle_view for w in rt._dispatcher.workers)
    n = [10**9]

    def one() -> object:
        n[0] += 1
        t = n[0] * 0.05   # a request every 50 µs of the policy's clock, as a sync loop sends them
        return pol.decide(SchedulerView((RequestView(n[0], model, t, float("inf"), model, -1, 0.0, None),),
                                        procs, est), t)
    return min(timeit.repeat(one, number=calls, repeat=5)) / calls * 1e6


def steps(scheduler: str | None, calls: int) -> None:
    """Print µs per sync call spent in each step of the request's walk (see the module doc)."""
    import time

    from edgert._core import _run

    acc: dict[str, int] = {}

    def wrap(cls: type, name: str, label: str) -> None:
        orig = getattr(cls, name)
        acc[label] = 0   # printed in this order

        def timed(*a, **k):
            t = time.perf_counter_ns()
            try:
                return orig(*a, **k)
            finally:
                acc[label] = acc.get(label, 0) + time.perf_counter_ns() - t
        setattr(cls, name, timed)

    with tempfile.TemporaryDirectory() as d:
        paths = genmodels.save("tiny", d)
        feeds = genmodels.example_inputs("tiny")
        fn_direct = direct_ort(paths["onnx"], feeds)
        with edgert.Runtime(delegates=["ort-cpu", "litert-xnnpack"], scheduler=scheduler) as rt:
            m = rt.load(paths["onnx"], name="tiny")
            per_call_us(lambda: m(feeds), calls // 5)
            direct, plain = per_call_us(fn_direct, calls), per_call_us(lambda: m(feeds), calls)
            w = rt._dispatcher.workers[0]
            session = type(w.sessions["tiny"][1])
            for cls, name, label in ((type(m._loaded), "feeds", "input validation (LoadedModel.feeds)"),
                                     (_run.Dispatcher, "_admit_locked", "admission (_admit_locked)"),
                                     (_run.Decider, "lone", "decision (Decider.lone: one request, idle workers)"),
                                     (type(rt._dispatcher.decider.policy), "decide", "  of which the policy's decide"),
                                     (_run.Dispatcher, "_run", "run and completion (_run)"),
                                     (session, "run", "  of which the delegate's run (ORT inside)"),
                                     (_run.Dispatcher, "_observe", "  of which the estimator (_observe)"),
                                     (_run.Ends, "record", "  of which its record (stats fold from them)"),
                                     (_run.Dispatcher, "call", "Dispatcher.call in all")):
                wrap(cls, name, label)
            t = time.perf_counter_ns()
            for _ in range(calls):
                m(feeds)
            total = (time.perf_counter_ns() - t) / calls / 1e3
    print(f"tiny on ORT, policy {rt.scheduler}: direct {direct:.1f} µs, sync call {plain:.1f} µs "
          f"(added {plain - direct:.1f} µs); wrapped {total:.1f} µs, per step:")
    for label, ns in acc.items():
        print(f"{ns / calls / 1e3:8.2f} µs  {label}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--models", nargs="+", default=["tiny", "mlp"])
    ap.add_argument("--scheduler", default=None, help="the runtime's policy (default: edgert's default)")
    ap.add_argument("--steps", action="store_true", help="where a sync call's µs go, per step (tiny on ORT)")
    args = ap.parse_args()
    print(host_line())
    if args.steps:
        steps(args.scheduler, args.calls)
        return 0
    print(f"{'model':<8} {'backend':<8} {'direct µs':>10} {'edgert µs':>10} {'added µs':>9} {'ratio':>6}")
    worst = 0.0
    tiny_ort: tuple[float, float, float] | None = None   # direct, added, decide alone (µs)
    with tempfile.TemporaryDirectory() as d:
        for name in args.models:
            paths = genmodels.save(name, d)
            feeds = genmodels.example_inputs(name)
            for fmt, direct in (("onnx", direct_ort), ("tflite", direct_litert)):
                fn_direct = direct(paths[fmt], feeds)
                with edgert.Runtime(delegates=["ort-cpu", "litert-xnnpack"], scheduler=args.scheduler) as rt:
                    m = rt.load(paths[fmt], name=name)
                    fn_rt = lambda: m(feeds)  # noqa: E731
                    for f in (fn_direct, fn_rt):
                        per_call_us(f, args.calls // 5)  # warm
                    d_us, r_us = [], []
                    for _ in range(args.rounds):
                        d_us.append(per_call_us(fn_direct, args.calls))
                        r_us.append(per_call_us(fn_rt, args.calls))
                    dec = decide_us(rt, name)
                dm, rm = median(d_us), median(r_us)
                worst = max(worst, rm - dm)
                if name == "tiny" and fmt == "onnx":
                    tiny_ort = (dm, rm - dm, dec)
                print(f"{name:<8} {('ort' if fmt == 'onnx' else 'litert'):<8} {dm:>10.1f} {rm:>10.1f} "
                      f"{rm - dm:>9.1f} {rm / dm:>6.2f}")
    verdict = "PASS" if worst <= 30 else "FAIL"
    print(f"bar: added <= 30 µs per request -> worst {worst:.1f} µs: {verdict}")
    if tiny_ort is not None:
        dm, added, dec = tiny_ort
        print(f"bar (issue 29): tiny on ORT adds {added:.1f} µs = {added / dm:.2f}x the direct call ({dm:.1f} µs), "
              f"bar <= 2x: {'PASS' if added <= 2 * dm else 'FAIL'}; the policy's decide alone: {dec:.1f} µs "
              f"= {dec / dm:.2f}x the direct call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
