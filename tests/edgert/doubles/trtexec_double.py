#!/usr/bin/env python3
"""Test double of NVIDIA ``trtexec`` — not the real tool.

Reads ``--onnx=``, ``--useDLACore=``, ``--saveEngine=`` and answers from the
``jetson`` section of ``EDGERT_DOUBLE_CONFIG`` (``latency_ms``: ``{model:
{gpu|dla0|dla1: ms}}``, ``dla_cores``, ``version``) in trtexec's real format:
the ``&&&& RUNNING TensorRT.trtexec [TensorRT v8502] # ...`` banner, the
``=== Performance summary ===`` block with ``GPU Compute Time: min = .. ms,
max = .., mean = .., median = .., percentile(90%) = ..`` and ``&&&& PASSED``;
or ``Cannot create DLA engine, N not available`` and ``&&&& FAILED`` when the
device has no such DLA core. Relative paths are relative to the working directory.
While the ssh double's tegrastats log is open (``jetson.power_mw`` set), it
appends tegrastats lines in the Orin Nano format (``VDD_IN 5123mW/5001mW ...``):
idle samples for the engine build, ``--duration`` seconds of the path's power at
100 ms, and two idle samples after the run (before ``tegrastats --stop``).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common_double import config, g, log_call

STAMP = "[11/22/2026-10:00:00]"


def main(argv: list[str], prog: str = "trtexec") -> int:
    log_call("trtexec", argv)
    jet = config()["jetson"]
    version = jet.get("version", "v8502")
    cmdline = " ".join([prog, *argv])
    flags = dict(a[2:].split("=", 1) if "=" in a else (a[2:], "") for a in argv if a.startswith("--"))
    out = [f"&&&& RUNNING TensorRT.trtexec [TensorRT {version}] # {cmdline}",
           f"{STAMP} [I] === Model Options ===", f"{STAMP} [I] Format: ONNX", f"{STAMP} [I] Model: {flags.get('onnx')}",
           f"{STAMP} [I] Output:", f"{STAMP} [I] === Build Options ===",
           f"{STAMP} [I] Precision: FP32{'+FP16' if 'fp16' in flags else ''}",
           f"{STAMP} [I] === System Options ===",
           f"{STAMP} [I] DLACore: {flags.get('useDLACore', '')}{'(With GPU fallback)' if 'allowGPUFallback' in flags else ''}"]

    def failed(*errors: str) -> int:
        print("\n".join(out + [f"{STAMP} [E] {e}" for e in errors]
                        + [f"&&&& FAILED TensorRT.trtexec [TensorRT {version}] # {cmdline}"]))
        return 1

    onnx = Path(flags.get("onnx", ""))
    if not onnx.is_file():
        return failed(f"Cannot open ONNX file {onnx}", "Failed to parse onnx file", "Parsing model failed",
                      "Failed to create engine from model or file.", "Engine set up failed")
    processor = "gpu"
    if "useDLACore" in flags:
        core = int(flags["useDLACore"])
        if core >= int(jet.get("dla_cores", 0)):
            return failed(f"Cannot create DLA engine, {core} not available", "Engine could not be created from network",
                          "Building engine failed", "Failed to create engine from model or file.",
                          "Engine set up failed")
        processor = f"dla{core}"
    ms = jet["latency_ms"].get(onnx.stem, {}).get(processor)
    if ms is None:
        return failed(f"Error[10]: Could not find any implementation for node {onnx.stem}_node_0.",
                      "Engine could not be created from network", "Building engine failed")
    if "saveEngine" in flags:
        Path(flags["saveEngine"]).parent.mkdir(parents=True, exist_ok=True)
        Path(flags["saveEngine"]).write_bytes(b"test-double engine, not a TensorRT plan\n")
        out.append(f"{STAMP} [I] Engine saved to {flags['saveEngine']}")

    tegrastats(jet, processor, float(flags.get("duration", "3")))

    def stats(x: float) -> str:
        return (f"min = {g(x * 0.97)} ms, max = {g(x * 1.4)} ms, mean = {g(x * 1.01)} ms, median = {g(x)} ms, "
                f"percentile(90%) = {g(x * 1.05)} ms, percentile(95%) = {g(x * 1.08)} ms, "
                f"percentile(99%) = {g(x * 1.2)} ms")
    out += [f"{STAMP} [I] === Trace details ===", f"{STAMP} [I] Trace averages of 10 runs:",
            f"{STAMP} [I] Average on 10 runs - GPU latency: {g(ms)} ms - Host latency: {g(ms + 0.1)} ms",
            f"{STAMP} [I] ", f"{STAMP} [I] === Performance summary ===",
            f"{STAMP} [I] Throughput: {g(1000.0 / ms)} qps",
            f"{STAMP} [I] Latency: {stats(ms + 0.1)}",
            f"{STAMP} [I] Enqueue Time: {stats(0.05)}",
            f"{STAMP} [I] H2D Latency: {stats(0.03)}",
            f"{STAMP} [I] GPU Compute Time: {stats(ms)}",
            f"{STAMP} [I] D2H Latency: {stats(0.02)}",
            f"{STAMP} [I] Total Host Walltime: 5.00186 s",
            f"{STAMP} [I] Total GPU Compute Time: 4.70264 s",
            f"{STAMP} [I] Explanations of the performance metrics are printed in the verbose logs.",
            f"{STAMP} [I] ",
            f"&&&& PASSED TensorRT.trtexec [TensorRT {version}] # {cmdline}"]
    print("\n".join(out))
    return 0


IDLE_MW = 4200


def tegrastats(jet: dict, processor: str, duration_s: float) -> None:
    """Append tegrastats lines of this run to the open log (see module doc), if tegrastats was started."""
    marker = Path(jet["root"]) / ".tegrastats"
    if not marker.exists():
        return
    load = int(jet["power_mw"][processor])

    def line(i: int, mw: int) -> str:
        gpu = 99 if mw != IDLE_MW else 0
        return (f"11-22-2026 10:00:{i % 60:02d} RAM 2448/7620MB (lfb 2x4MB) SWAP 0/3810MB (cached 0MB) "
                f"CPU [12%@1510,3%@1510,0%@1510,1%@1510,off,off] EMC_FREQ 0%@2133 GR3D_FREQ {gpu}%@[624] "
                f"cpu@48.5C soc2@47.1C VDD_IN {mw}mW/{mw}mW VDD_CPU_GPU_CV {mw // 3}mW/{mw // 3}mW "
                f"VDD_SOC {mw // 4}mW/{mw // 4}mW")
    n = int(duration_s * 10)
    rows = [line(i, IDLE_MW) for i in range(20)] + [line(20 + i, load) for i in range(n)]
    rows += [line(20 + n + i, IDLE_MW) for i in range(2)]
    with open(marker.read_text(), "a") as fh:
        fh.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
