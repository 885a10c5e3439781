"""Cloud offload bars (issue 6), each run side by side with its peer in one run, printing the ratio.

1. ``rtt``: a 150 KB float32 tensor through mosquitto on loopback to one
   ``edgert cloud serve`` worker: p50 of (round trip - the worker's compute
   time), bar <= 1.5 ms. Peer: a bare paho echo of the same bytes (no edgert,
   no .npy), the floor MQTT itself sets.
2. ``scale``: requests per second of two workers (one shared subscription)
   over one, closed loop with 8 in flight; bar >= 1.8x.
3. ``burst``: a burst at 1.7x what one local CPU worker serves, ``cpu_workers=1``
   plus one cloud worker (its own core): share of deadlines met with offload,
   bar >= 90 % and >= 20 points over the same runtime without offload.

Usage: ``python benchmarks/cloud.py [--bars rtt,scale,burst] [--seconds S] [--json F]``.
Needs mosquitto (``apt-get install mosquitto``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import edgert  # noqa: E402
from delegates.base import Artifact  # noqa: E402
from edgert.offload import parse_broker_url  # noqa: E402
from edgert.offload._client import CloudDelegate  # noqa: E402
from edgert.offload._link import MqttLink  # noqa: E402
from tests.edgert.test_cloud_support import Mosquitto, WorkerProc, make_models  # noqa: E402

N_150KB = 150 * 1024 // 4

_PEER = """
import socket, sys, paho.mqtt.client as mqtt
c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="peer-echo", protocol=mqtt.MQTTv311)
c.on_socket_open = lambda cl, u, s: s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
c.on_connect = lambda cl, u, f, rc, p: cl.subscribe("peer/req", qos=1)
c.on_message = lambda cl, u, m: cl.publish("peer/res", m.payload[:64], qos=1)
c.connect("127.0.0.1", int(sys.argv[1])); c.loop_forever()
"""


def big_model(path: Path) -> Path:
    """ONNX: x float32[1, 38400] (150 KB) -> ReduceMean -> y [1, 1]."""
    import onnx
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("ReduceMean", ["x"], ["y"], keepdims=1)], "big",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, N_150KB])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def bar_rtt(broker: Mosquitto, models: Path, tmp: Path, n: int) -> dict:
    worker = WorkerProc(broker.url, models, tmp / "rtt.log")
    peer = subprocess.Popen([sys.executable, "-c", _PEER, str(broker.port)])
    link = MqttLink(parse_broker_url(broker.url))
    try:
        worker.ready()
        s = CloudDelegate(link).open_named(Artifact("onnx", path=models / "big.onnx"), "big")
        x = [np.random.default_rng(0).standard_normal((1, N_150KB)).astype(np.float32)]
        over, total, compute = [], [], []
        for i in range(n + 20):
            t = time.perf_counter()
            s.run(x)
            ms = (time.perf_counter() - t) * 1e3
            if i >= 20:
                total.append(ms)
                compute.append(s.last_compute_ms)
                over.append(ms - s.last_compute_ms)
        # the peer: the same 150 KB through the same broker, echoed by bare paho
        import paho.mqtt.client as mqtt
        got = threading.Event()
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="peer-client", protocol=mqtt.MQTTv311)
        c.on_socket_open = lambda cl, u, sk: sk.setsockopt(6, 1, 1)
        c.on_message = lambda cl, u, m: got.set()
        c.connect("127.0.0.1", broker.port)
        c.subscribe("peer/res", qos=1)
        c.loop_start()
        time.sleep(0.3)
        payload = x[0].tobytes()
        peer_ms = []
        for i in range(n + 20):
            got.clear()
            t = time.perf_counter()
            c.publish("peer/req", payload, qos=1)
            if not got.wait(5):
                raise RuntimeError("the peer echo did not answer")
            if i >= 20:
                peer_ms.append((time.perf_counter() - t) * 1e3)
        c.loop_stop()
        c.disconnect()
    finally:
        link.close()
        peer.terminate()
        worker.stop()
    p50 = float(np.median(over))
    return {"payload_kb": N_150KB * 4 / 1024, "n": n, "p50_total_ms": float(np.median(total)),
            "p50_compute_ms": float(np.median(compute)), "p50_over_compute_ms": p50,
            "p90_over_compute_ms": float(np.percentile(over, 90)), "peer_bare_mqtt_p50_ms": float(np.median(peer_ms)),
            "ratio_ours_over_peer": p50 / float(np.median(peer_ms)), "bar_ms": 1.5, "pass": p50 <= 1.5}


def _closed_loop(url: str, models: Path, seconds: float, inflight: int = 8) -> tuple[float, dict]:
    link = MqttLink(parse_broker_url(url + f"?capacity={inflight}"))
    try:
        s = CloudDelegate(link).open_named(Artifact("onnx", path=models / "cnn.onnx"), "cnn")
        x = [np.zeros((1, 64, 64, 3), np.float32)]
        for _ in range(10):
            s.run(x)
        stop = time.perf_counter() + seconds
        counts: dict = {}

        def loop(_: int) -> int:
            k = 0
            while time.perf_counter() < stop:
                s.run(x, 10_000)
                counts[s.last_worker] = counts.get(s.last_worker, 0) + 1
                k += 1
            return k

        t = time.perf_counter()
        with ThreadPoolExecutor(inflight) as ex:
            done = sum(ex.map(loop, range(inflight)))
        return done / (time.perf_counter() - t), counts
    finally:
        link.close()


def bar_scale(broker: Mosquitto, models: Path, tmp: Path, seconds: float) -> dict:
    w1 = WorkerProc(broker.url, models, tmp / "s1.log")
    try:
        w1.ready()
        one, _ = _closed_loop(broker.url, models, seconds)
        w2 = WorkerProc(broker.url, models, tmp / "s2.log")
        try:
            w2.ready()
            two, split = _closed_loop(broker.url, models, seconds)
        finally:
            w2.stop()
    finally:
        w1.stop()
    return {"one_worker_rps": one, "two_workers_rps": two, "ratio": two / one, "split": split,
            "bar": 1.8, "pass": two / one >= 1.8}


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _burst(offload: str | None, models: Path, seconds: float, factor: float,
           pids: dict[str, int] | None = None) -> dict:
    """One burst; ``pids`` ({label: pid}) are the processes whose cores used are reported beside ours."""
    pids = {"client": os.getpid(), **(pids or {})}
    x = np.zeros((1, 64, 64, 3), np.float32)
    with edgert.Runtime(cpu_workers=1, offload=offload) as rt:
        m = rt.load(models / "cnn.onnx", name="cnn", slo_ms=None)
        lat = [0.0] * 30
        for i in range(30):  # one CPU worker's service time, measured here and now
            t = time.perf_counter()
            m(x)
            lat[i] = (time.perf_counter() - t) * 1e3
        service_ms = float(np.median(lat))
        slo_ms = 4.0 * service_ms + 4.0
        period_ms = service_ms / factor
        n = int(seconds * 1e3 / period_ms)
        futs = []
        cpu0 = {k: _cpu_s(p) for k, p in pids.items()}
        t0 = time.perf_counter()
        for i in range(n):
            delay = t0 + i * period_ms / 1e3 - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            with rt.frame(deadline_ms=slo_ms):
                futs.append(m.submit(x))
        results = [f.result(60) for f in futs]
        wall = time.perf_counter() - t0
        cores = {k: round((_cpu_s(p) - cpu0[k]) / wall, 2) for k, p in pids.items()}
    status: dict = {}
    where: dict = {}
    for r in results:
        status[r.status] = status.get(r.status, 0) + 1
        if r.ok:
            where[r.processor] = where.get(r.processor, 0) + 1
    cores["total"] = round(sum(cores.values()), 2)
    return {"requests": n, "service_ms": service_ms, "slo_ms": slo_ms, "period_ms": period_ms,
            "met": status.get("ok", 0) / n, "status": status, "by_processor": where, "cores_used": cores}


def bar_burst(broker: Mosquitto, models: Path, tmp: Path, seconds: float, factor: float = 1.7,
              capacity: int = 1) -> dict:
    w = WorkerProc(broker.url, models, tmp / "b.log")
    try:
        w.ready()
        pids = {"cloud worker": w.proc.pid, "broker": broker.proc.pid}
        without = _burst(None, models, seconds, factor, pids)
        with_ = _burst(broker.url + f"?capacity={capacity}", models, seconds, factor, pids)
    finally:
        w.stop()
    gain = with_["met"] - without["met"]
    return {"factor": factor, "with_offload": with_, "without_offload": without, "points_gained": 100 * gain,
            "bar": ">= 90 % met and >= 20 points more", "pass": with_["met"] >= 0.9 and gain >= 0.2}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bars", default="rtt,scale,burst")
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--n", type=int, default=300, help="round trips for the rtt bar")
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--capacity", type=int, default=1,
                    help="requests in flight to the cloud in the burst bar (one worker with one slot; 2 lets the "
                         "next one travel while the worker computes, which measured no better on 2 cores)")
    args = ap.parse_args()
    out: dict = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        broker = Mosquitto(tmp)
        models = make_models(tmp / "models", ("cnn",))
        big_model(models / "big.onnx")
        try:
            bars = args.bars.split(",")
            if "rtt" in bars:
                r = out["rtt"] = bar_rtt(broker, models, tmp, args.n)
                print(f"rtt   150 KB p50 over compute {r['p50_over_compute_ms']:.3f} ms (total {r['p50_total_ms']:.3f}, "
                      f"compute {r['p50_compute_ms']:.3f}); bare paho echo {r['peer_bare_mqtt_p50_ms']:.3f} ms; "
                      f"ratio {r['ratio_ours_over_peer']:.2f}x; bar <= 1.5 ms: {'PASS' if r['pass'] else 'FAIL'}")
            if "scale" in bars:
                r = out["scale"] = bar_scale(broker, models, tmp, args.seconds)
                print(f"scale one worker {r['one_worker_rps']:.0f} req/s, two {r['two_workers_rps']:.0f} req/s "
                      f"(split {r['split']}); ratio {r['ratio']:.2f}x; bar >= 1.8x: {'PASS' if r['pass'] else 'FAIL'}")
            if "burst" in bars:
                r = out["burst"] = bar_burst(broker, models, tmp, args.seconds, capacity=args.capacity)
                w, wo = r["with_offload"], r["without_offload"]
                print(f"burst 1.7x one CPU worker ({wo['service_ms']:.2f} ms/req, slo {w['slo_ms']:.1f} ms): met "
                      f"{100 * w['met']:.1f} % with offload {w['by_processor']} vs {100 * wo['met']:.1f} % without; "
                      f"+{r['points_gained']:.1f} points; bar: {'PASS' if r['pass'] else 'FAIL'}")
                print(f"      cores used with offload {w['cores_used']} of {os.cpu_count()}; without "
                      f"{wo['cores_used']}")
        finally:
            broker.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
