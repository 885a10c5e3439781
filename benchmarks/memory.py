"""Peak resident memory: edgert vs worker count, vs users, per backend, and beside MediaPipe (issue #32).

Every figure is one fresh Python process's peak resident set (``VmHWM``), measured inside it; the
parts run one after another:

* ``demo``: ``edgert run xr-demo --seconds S --quiet --cpu-workers N`` for each N, on the sample scene
  and on ``--frames DIR`` (the sample scene's 150 frames written as PNGs), peak from its ``--json``.
* ``users``: K users' four pipelines on one runtime with 2 CPU workers (the API; ``--users`` of the
  demo is another issue's), user k's camera 40·k frames behind the source, S seconds.
* ``backends``: per backend, a runtime with N CPU workers and only that backend's CPU path, its
  models loaded, then N threads running every model for a second (so runs overlap as much as they
  can): LiteRT XNNPACK on MediaPipe's eight XR models; ONNX Runtime's CPU EP on generated networks
  (a 32 MB MLP and the CNN). The per-worker cost is (peak at the most workers - peak at 1) / (N - 1).
* ``ort_threads``: ONNX Runtime throughput of one single-threaded session run by two threads vs two
  sessions each run by its own thread, vs one thread (runs/s): sharing one session must not cost speed.
* ``mediapipe``: MediaPipe 0.10.14's four solutions (face mesh with iris, hands, pose, selfie
  segmentation) in video mode, one thread each at its rate, on the same 150 frames held in memory; they
  run in MediaPipe's own process and venv (``apps.xr.reference``), whose peak this is.

    flock -x /tmp/edgert-cpu.lock python benchmarks/memory.py [--seconds 5] [--workers 1 2 4] [--baseline CHECKOUT]

Writes benchmarks/results/memory.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import host_line, markdown_doc  # noqa: E402

_PEAK = """
def _peak_mb():
    for line in open('/proc/self/status'):
        if line.startswith('VmHWM:'):
            return int(line.split()[1]) * 1024 / 1e6
"""


def _python(code: str, timeout_s: float = 300.0, root: Path = ROOT) -> dict:
    """Run ``code`` in a fresh interpreter (checkout ``root`` on its path); it prints one JSON line last."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run([sys.executable, "-c", _PEAK + textwrap.dedent(code)], cwd=root, env=env,
                          capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        raise RuntimeError(f"measurement failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


_LAUNCH = """
import json, runpy, sys
sys.argv = ["edgert"] + sys.argv[1:]
try:
    runpy.run_module("edgert.cli", run_name="__main__")
finally:
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            print("PEAK " + str(int(line.split()[1]) * 1024 / 1e6), file=sys.stderr)
"""


def demo_peak(workers: int, seconds: float, frames: Path | None, root: Path = ROOT) -> dict:
    """``edgert run xr-demo`` of the checkout ``root`` in a fresh process: its peak (VmHWM at exit, read the
    same way for any checkout) and each stream's frames on time."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "summary.json"
        cmd = [sys.executable, "-c", _LAUNCH, "run", "xr-demo", "--seconds", str(seconds), "--quiet",
               "--cpu-workers", str(workers), "--json", str(out)]
        if frames is not None:
            cmd += ["--frames", str(frames)]
        env = {**os.environ, "PYTHONPATH": str(root)}
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=seconds + 300)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[3:])} failed in {root}:\n{proc.stderr[-2000:]}")
        s = json.loads(out.read_text())
    peak = float(next(x for x in proc.stderr.splitlines() if x.startswith("PEAK "))[5:])
    copies = sum(m["copies"] for m in s["memory"]["per_model"].values()) if "memory" in s else None
    return {"peak_mb": round(peak, 1), "on_time": {k: round(v["on_time_pct"]) for k, v in s["per_stream"].items()},
            "copies": copies}


def write_frames(directory: Path, count: int = 150) -> Path:
    """The sample scene's first ``count`` frames as PNGs (what ``--frames`` reads)."""
    import cv2

    from apps.xr import assets

    directory.mkdir(parents=True, exist_ok=True)
    for i, f in zip(range(count), assets.sample_frames()):
        cv2.imwrite(str(directory / f"{i:05d}.png"), f[..., ::-1])
    return directory


def users_peak(users: int, seconds: float, workers: int = 2) -> dict:
    """K users' four pipelines on one runtime (the API), each at its rate on the sample frames."""
    return _python(f"""
        import json, threading, time
        import edgert
        from apps.xr import Pipelines, assets
        import itertools
        clip = list(itertools.islice(assets.sample_frames(), 150))
        STREAMS = (("face", 30.0, dict(max_hands=0, max_faces=1, pose=False, segmentation=False)),
                   ("hands", 30.0, dict(max_hands=2, max_faces=0, pose=False, segmentation=False)),
                   ("pose", 30.0, dict(max_hands=0, max_faces=0, pose=True, segmentation=False)),
                   ("segmentation", 15.0, dict(max_hands=0, max_faces=0, pose=False, segmentation=True)))
        with edgert.Runtime(cpu_workers={workers}) as rt:
            jobs = []
            for u in range({users}):
                for name, fps, cfg in STREAMS:
                    jobs.append((Pipelines(rt, **cfg), fps, 40 * u))
            t0 = time.perf_counter()
            def loop(px, fps, lag):
                k = 0
                while (now := time.perf_counter() - t0) < {seconds}:
                    f = clip[(int(now * 30) - lag) % len(clip)]
                    px.process(f, deadline_ms=1000.0 / fps)
                    k = max(k + 1, int((time.perf_counter() - t0) * fps))
                    time.sleep(max(0.0, k / fps - (time.perf_counter() - t0)))
            ts = [threading.Thread(target=loop, args=j) for j in jobs]
            [t.start() for t in ts]
            [t.join() for t in ts]
            mem = rt.memory()
        print(json.dumps({{"peak_mb": round(_peak_mb(), 1),
                          "copies": sum(m["copies"] for m in mem["per_model"].values())}}))
    """)


def backend_peak(backend: str, workers: int, root: Path = ROOT) -> dict:
    """A runtime with only ``backend``'s CPU path and ``workers`` CPU workers, its models loaded and run
    from ``workers`` threads at once for a second."""
    return _python(f"""
        import json, threading, time
        import numpy as np
        import edgert
        from pathlib import Path
        import tempfile
        if {backend!r} == "litert":
            from apps.xr import assets
            from apps.xr.pipelines import CASCADES
            paths = assets.model_paths(None)
            models = [paths[n] for c in CASCADES.values() for n in c]
            delegate = "litert-xnnpack"
        else:
            import onnx
            from onnx import helper, numpy_helper, TensorProto
            from edgert.testing import genmodels
            d = Path(tempfile.mkdtemp())
            rng = np.random.default_rng(0)
            w = [numpy_helper.from_array(rng.standard_normal((2048, 2048)).astype(np.float32) * 0.02, f"w{{i}}")
                 for i in range(2)]
            nodes = [helper.make_node("MatMul", ["x", "w0"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
                     helper.make_node("MatMul", ["r", "w1"], ["y"])]
            g = helper.make_graph(nodes, "wide", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2048])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2048])], initializer=w)
            m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
            m.ir_version = 8
            onnx.save(m, d / "wide.onnx")
            genmodels.save("cnn", d, formats=["onnx"])
            models = [d / "wide.onnx", d / "cnn.onnx"]
            delegate = "ort-cpu"
        with edgert.Runtime(delegates=[delegate], cpu_workers={workers}) as rt:
            loaded = [rt.load(p, name=p.stem) for p in models]
            feeds = [[np.zeros(s.shape, s.dtype) for s in m.inputs] for m in loaded]
            end = time.perf_counter() + 1.0
            def hammer(k):
                i = k
                while time.perf_counter() < end:
                    loaded[i % len(loaded)](feeds[i % len(loaded)])
                    i += 1
            ts = [threading.Thread(target=hammer, args=(k,)) for k in range({workers})]
            [t.start() for t in ts]
            [t.join() for t in ts]
            mem = rt.memory() if hasattr(rt, "memory") else None
        print(json.dumps({{"peak_mb": round(_peak_mb(), 1), "models": len(models),
                          "copies": None if mem is None else sum(m["copies"] for m in mem["per_model"].values())}}))
    """, root=root)


def ort_threads(seconds: float = 2.0) -> dict:
    """Runs/s of the generated CNN on ONNX Runtime's CPU EP (one intra-op thread): one thread on one
    session, two threads on one shared session, two threads on two sessions."""
    return _python(f"""
        import json, threading, time, tempfile
        from pathlib import Path
        import numpy as np
        from delegates.registry import get
        from delegates.base import Artifact
        from edgert.testing import genmodels
        d = Path(tempfile.mkdtemp())
        path = genmodels.save("cnn", d, formats=["onnx"])["onnx"]
        ort = get("ort-cpu")
        s1, s2 = ort.open(Artifact("onnx", path=path)), ort.open(Artifact("onnx", path=path))
        x = [np.random.default_rng(0).standard_normal(s1.inputs[0].shape).astype(np.float32)]
        for s in (s1, s2):
            for _ in range(20):
                s.run(x)
        def rate(sessions):
            counts = [0] * len(sessions)
            end = time.perf_counter() + {seconds}
            def go(i, s):
                while time.perf_counter() < end:
                    s.run(x)
                    counts[i] += 1
            ts = [threading.Thread(target=go, args=(i, s)) for i, s in enumerate(sessions)]
            [t.start() for t in ts]
            [t.join() for t in ts]
            return sum(counts) / {seconds}
        out = {{}}
        for rep in range(2):   # alternate, twice: the host is shared
            for key, sessions in (("one_thread", [s1]), ("shared_2_threads", [s1, s1]), ("two_sessions", [s1, s2])):
                out.setdefault(key, []).append(rate(sessions))
        print(json.dumps({{k: max(v) for k, v in out.items()}}))
    """)


def mediapipe_peak(seconds: float, held: bool) -> dict:
    """MediaPipe 0.10.14's four solutions, one user, on the sample frames, in MediaPipe's own process
    (``apps.xr.reference.Peer``; its peak): the 150 of a cycle held in that process's memory (``held``), or
    each made when the camera (30 fps) needs it, as the demo's camera does, and sent with the call."""
    return _python(f"""
        import json, threading, time, itertools
        from apps.xr import assets, reference
        source = assets.sample_frames()
        clip = list(itertools.islice(source, 150)) if {held!r} else None
        peer = reference.Peer(clip)
        off = dict(max_hands=0, max_faces=0, pose=False, segmentation=False)
        sols = [(peer.solutions(static=False, **{{**off, "max_faces": 1}}), 30.0),
                (peer.solutions(static=False, **{{**off, "max_hands": 2}}), 30.0),
                (peer.solutions(static=False, **{{**off, "pose": True}}), 30.0),
                (peer.solutions(static=False, **{{**off, "segmentation": True}}), 15.0)]
        latest = [next(source)]
        t0 = time.perf_counter()
        def camera():
            k = 0
            while time.perf_counter() - t0 < {seconds}:
                latest[0] = next(source)
                k += 1
                time.sleep(max(0.0, t0 + k / 30 - time.perf_counter()))
        def frame(now):
            return int(now * 30) % len(clip) if clip is not None else latest[0]
        def loop(sol, fps):
            k = 0
            while (now := time.perf_counter() - t0) < {seconds}:
                sol.process(frame(now))
                k = max(k + 1, int((time.perf_counter() - t0) * fps))
                time.sleep(max(0.0, k / fps - (time.perf_counter() - t0)))
        ts = [threading.Thread(target=loop, args=x) for x in sols]
        if clip is None:
            ts.append(threading.Thread(target=camera))
        [t.start() for t in ts]
        [t.join() for t in ts]
        hwm = [l for l in open(f"/proc/{{peer.pid}}/status") if l.startswith("VmHWM:")]
        print(json.dumps({{"peak_mb": round(int(hwm[0].split()[1]) * 1024 / 1e6, 1)}}))
        [s.close() for s, _ in sols]
        peer.close()
    """)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="seconds per demo / users / MediaPipe run")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--users", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--parts", nargs="+", default=["demo", "users", "backends", "ort_threads", "mediapipe"])
    ap.add_argument("--baseline", type=Path, default=None, metavar="CHECKOUT",
                    help="also run the demo of another checkout (e.g. an older commit), alternating with this one")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "memory.md"))
    args = ap.parse_args()
    host = host_line()
    rows: list[str] = []
    notes: list[str] = []
    t_start = time.perf_counter()
    base: dict[tuple[str, int], float] = {}
    if "demo" in args.parts:
        with tempfile.TemporaryDirectory() as tmp:
            frames = write_frames(Path(tmp) / "frames")
            for n in args.workers:
                for label, src in (("sample scene", None), ("--frames (150 PNGs)", frames)):
                    for who, root in (("baseline", args.baseline), ("edgert", ROOT)):
                        if root is None:
                            continue
                        r = demo_peak(n, args.seconds, src, root)
                        key = (who, n)
                        if src is None:
                            base[key] = r["peak_mb"]
                        first = base.get((who, args.workers[0]))
                        extra = (f"{r['peak_mb'] / first:.2f}x of {args.workers[0]} worker(s)" if src is None and first
                                 else f"{r['peak_mb'] - base[key]:+.0f} MB over the sample scene")
                        name = "demo" if who == "edgert" else f"demo of {root}"
                        rows.append(f"| {name}, {label} | {n} | 1 | {r['peak_mb']:.0f} | {extra} | "
                                    f"{'-' if r['copies'] is None else r['copies']} | "
                                    f"{' / '.join(str(v) for v in r['on_time'].values())} |")
                        print(rows[-1], flush=True)
    if "users" in args.parts:
        first = None
        for u in args.users:
            r = users_peak(u, args.seconds)
            first = first if first is not None else (u, r["peak_mb"])
            per = "" if u == first[0] else f"{(r['peak_mb'] - first[1]) / (u - first[0]):+.0f} MB per added user"
            rows.append(f"| users on one runtime (API) | 2 | {u} | {r['peak_mb']:.0f} | {per} | {r['copies']} | |")
            print(rows[-1], flush=True)
    if "backends" in args.parts:
        for backend in ("litert", "ort"):
            for who, root in (("baseline", args.baseline), ("edgert", ROOT)):
                if root is None:
                    continue
                first = None
                for n in args.workers:
                    r = backend_peak(backend, n, root)
                    first = first if first is not None else (n, r["peak_mb"])
                    per = "" if n == first[0] else f"{(r['peak_mb'] - first[1]) / (n - first[0]):+.1f} MB per added worker"
                    label = ("LiteRT XNNPACK, MediaPipe's 8 models" if backend == "litert"
                             else "ORT CPU EP, 32 MB MLP + CNN") + ("" if who == "edgert" else f", {root}")
                    rows.append(f"| {label}, every thread runs every model | {n} | - | {r['peak_mb']:.0f} | {per} | "
                                f"{'-' if r['copies'] is None else r['copies']} | |")
                    print(rows[-1], flush=True)
    if "ort_threads" in args.parts:
        r = ort_threads()
        notes.append(f"ONNX Runtime CPU EP, generated CNN, one intra-op thread: one thread {r['one_thread']:.0f} runs/s; "
                     f"two threads on one shared session: {r['shared_2_threads']:.0f} runs/s "
                     f"({r['shared_2_threads'] / r['one_thread']:.2f}x); two threads on two sessions: "
                     f"{r['two_sessions']:.0f} runs/s ({r['two_sessions'] / r['one_thread']:.2f}x). "
                     f"Shared / separate = {r['shared_2_threads'] / r['two_sessions']:.2f}.")
        print(notes[-1], flush=True)
    if "mediapipe" in args.parts:
        for held in (False, True):
            r = mediapipe_peak(args.seconds, held)
            two = base.get(("edgert", 2))
            cmp = f"edgert demo at 2 workers / MediaPipe = {two / r['peak_mb']:.2f}" if two and not held else ""
            label = "150 frames in memory" if held else "frames made as the camera needs them (as the demo)"
            rows.append(f"| MediaPipe 0.10.14, four solutions, {label} | - | 1 | {r['peak_mb']:.0f} | {cmp} | - | |")
            print(rows[-1], flush=True)
    notes = [f"{host}; {time.perf_counter() - t_start:.0f} s in all. Peak = VmHWM of a fresh process, MB (10^6 bytes); "
             f"{args.seconds:g} s per run. copies = sessions (interpreters) open over all workers at the end; "
             "on time = share of each stream's frames (hands / face / pose / segmentation) whose whole cascade met "
             "its deadline. The demo's sample scene makes each frame as the camera needs it; --frames streams the "
             "same frames from PNGs (a few decoded ahead); the users runs hold the 150 frames of a cycle "
             "(480x480 uint8, 104 MB) for their lagged cameras.", *notes,
             "Command: `flock -x /tmp/edgert-cpu.lock python benchmarks/memory.py`"]
    doc = markdown_doc("Peak resident memory (benchmarks/memory.py)", notes,
                       ["run", "CPU workers", "users", "peak MB", "vs", "copies", "on time %"], rows, range(1, 4))
    Path(args.out).write_text(doc)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
