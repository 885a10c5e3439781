"""What a user gets from offload over TLS, case by case, and how long it takes: a markdown table.

A real mosquitto with a listener per case (a CA made here, a password file: the test helpers of
tests/edgert/test_tls_support.py), one ``edgert cloud serve`` worker on it, and per case
``Runtime(offload=URL, cpu_workers=0)`` loading a model and running one request; the time is the
median of ``--repeat`` tries, from the constructor to the result or the error. The last row is a
worker given the wrong CA (how it ends, or that it still runs after ``--worker-timeout`` s).

    python tools/tls_errors.py                   # needs mosquitto and the cryptography package
    python tools/tls_errors.py --repeat 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3, help="tries per case (the median is printed)")
    ap.add_argument("--worker-timeout", type=float, default=20.0, help="how long the wrong-CA worker may run (s)")
    args = ap.parse_args()

    import numpy as np

    import edgert
    from tests.edgert.test_cloud_support import WorkerProc, make_models
    from tests.edgert.test_tls_support import TlsBroker, make_pki

    tmp = Path(tempfile.mkdtemp(prefix="edgert-tls-"))
    pki = make_pki(tmp / "pki")
    broker = TlsBroker(tmp, pki)
    models = make_models(tmp / "models", ("tiny",))
    worker = WorkerProc(broker.url("tls", ca=pki.ca), models, tmp / "worker.log")
    rows = {"right CA and password": broker.url("tls", ca=pki.ca),
            "wrong password": broker.url("tls", password="wrong", ca=pki.ca),
            "wrong CA (`?ca=` another CA)": broker.url("tls", ca=pki.other_ca),
            "no `?ca=` (system store)": broker.url("tls"),
            "`mqtt://` to the TLS port": broker.url("tls", scheme="mqtt"),
            "`mqtts://` to a plain port": broker.url("plain", ca=pki.ca),
            "expired broker certificate": broker.url("expired", ca=pki.ca),
            "certificate for another host": broker.url("other_host", ca=pki.ca),
            "mutual TLS, the CA's device certificate": broker.url("mtls", ca=pki.ca, cert=pki.client,
                                                                  key=pki.client_key),
            "mutual TLS, no client certificate": broker.url("mtls", ca=pki.ca),
            "mutual TLS, a certificate of another CA": broker.url("mtls", ca=pki.ca, cert=pki.stranger,
                                                                  key=pki.stranger_key)}
    print("| case | time | what the user gets |\n|---|---|---|")
    try:
        worker.ready()
        for row, url in rows.items():
            times, got = [], ""
            for _ in range(args.repeat):
                t = time.monotonic()
                try:
                    with edgert.Runtime(offload=url, cpu_workers=0) as rt:
                        m = rt.load(models / "tiny.onnx", name="tiny")
                        res = m.submit({"x": np.ones((1, 64), np.float32)}).result(10)
                        got = f"`{res.status}` on `{res.processor}`"
                except edgert.EdgeRTError as exc:
                    got = f"`{type(exc).__name__}`: {str(exc).replace(str(tmp), '…')}"
                times.append(time.monotonic() - t)
            print(f"| {row} | {statistics.median(times):.2f} s | {got} |", flush=True)
        t = time.monotonic()
        cmd = [sys.executable, "-m", "edgert.cli", "cloud", "serve", "--broker", broker.url("tls", ca=pki.other_ca),
               "--models", str(models)]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.worker_timeout, env=env)
            last = (p.stderr.strip().splitlines() or [""])[-1].replace(str(tmp), "…")
            print(f"| `edgert cloud serve`, wrong CA | {time.monotonic() - t:.2f} s | exit {p.returncode}: {last} |")
        except subprocess.TimeoutExpired:
            print(f"| `edgert cloud serve`, wrong CA | - | still running after {args.worker_timeout:g} s |")
    finally:
        worker.stop()
        broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
