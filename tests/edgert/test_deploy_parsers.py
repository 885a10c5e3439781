"""The real parsers of benchmark_model / trtexec / getprop / nv_tegra_release output.

Samples are in the tools' real formats (TensorFlow Lite benchmark_model's
OnBenchmarkEnd line, benchmark_tflite_model.cc's delegate lines, trtexec's
performance summary)."""

from __future__ import annotations

import pytest

from edgert.deploy.parsers import (
    ParseError,
    benchmark_delegate_status,
    parse_benchmark_model,
    parse_getprop,
    parse_nv_tegra_release,
    parse_trtexec,
)

XNNPACK_RUN = """\
INFO: STARTING!
INFO: Log parameter values verbosely: [0]
INFO: Num threads: [4]
INFO: Graph: [/usr/share/models/ssd_mobilenet_v2_coco.tflite]
INFO: #threads used for CPU inference: [4]
INFO: Use xnnpack: [1]
INFO: Loaded model /usr/share/models/ssd_mobilenet_v2_coco.tflite
INFO: Created TensorFlow Lite XNNPACK delegate for CPU.
INFO: XNNPACK delegate created.
INFO: Explicitly applied XNNPACK delegate, and the model graph will be partially executed by the delegate w/ 1 delegate kernels.
INFO: The input model file size (MB): 67.3128
INFO: Initialized session in 592.232ms.
INFO: Running benchmark for at least 1 iterations and at least 0.5 seconds but terminate if exceeding 150 seconds.
INFO: count=1 curr=633430

INFO: Running benchmark for at least 50 iterations and at least 1 seconds but terminate if exceeding 150 seconds.
INFO: count=50 first=605745 curr=618849 min=568228 max=722188 avg=602943 std=27690

INFO: Inference timings in us: Init: 592232, First inference: 633430, Warmup (avg): 633430, Inference (avg): 602943
INFO: Note: as the benchmark tool itself affects memory footprint, the following is only APPROXIMATE to the actual memory footprint of the model at runtime. Take the information at your discretion.
INFO: Memory footprint delta from the start of the tool (MB): init=133.086 overall=133.086
"""

GPU_UNSUPPORTED = """\
STARTING!
Use gpu: [1]
Use xnnpack: [1]
Loaded model m.model
The GPU delegate compile options are only supported on Android or iOS platforms or when the tool was built with -DCL_DELEGATE_NO_GL.
GPU acceleration is unsupported on this platform.
XNNPACK delegate created.
Explicitly applied XNNPACK delegate, and the model graph will be partially executed by the delegate w/ 22 delegate kernels.
Initialized session in 18.738ms.
count=6 first=140706 curr=74599 min=74599 max=140706 avg=85791.2 std=24559

count=50 first=74456 curr=74516 min=73909 max=75323 avg=74481.6 std=268

Inference timings in us: Init: 18738, First inference: 140706, Warmup (avg): 85791.2, Inference (avg): 74481.6
"""

TRTEXEC_85 = """\
&&&& RUNNING TensorRT.trtexec [TensorRT v8502] # /usr/src/tensorrt/bin/trtexec --onnx=m.onnx --fp16
[09/02/2024-17:14:34] [I] === Performance summary ===
[09/02/2024-17:14:34] [I] Throughput: 1099.65 qps
[09/02/2024-17:14:34] [I] Latency: min = 1.12085 ms, max = 5.30969 ms, mean = 1.17602 ms, median = 1.17322 ms, percentile(90%) = 1.18164 ms, percentile(95%) = 1.18457 ms, percentile(99%) = 1.20386 ms
[09/02/2024-17:14:34] [I] Enqueue Time: min = 0.697998 ms, max = 5.14844 ms, mean = 0.865324 ms, median = 0.88208 ms, percentile(90%) = 0.89624 ms, percentile(95%) = 0.901215 ms, percentile(99%) = 0.947876 ms
[09/02/2024-17:14:34] [I] H2D Latency: min = 0.202148 ms, max = 0.24292 ms, mean = 0.219057 ms, median = 0.221542 ms, percentile(90%) = 0.225708 ms, percentile(95%) = 0.227783 ms, percentile(99%) = 0.236572 ms
[09/02/2024-17:14:34] [I] GPU Compute Time: min = 0.803711 ms, max = 4.93372 ms, mean = 0.818735 ms, median = 0.809937 ms, percentile(90%) = 0.811035 ms, percentile(95%) = 0.811035 ms, percentile(99%) = 0.812012 ms
[09/02/2024-17:14:34] [I] D2H Latency: min = 0.112061 ms, max = 0.168457 ms, mean = 0.138235 ms, median = 0.142334 ms, percentile(90%) = 0.147095 ms, percentile(95%) = 0.149506 ms, percentile(99%) = 0.15715 ms
&&&& PASSED TensorRT.trtexec [TensorRT v8502] # /usr/src/tensorrt/bin/trtexec --onnx=m.onnx --fp16
"""


def test_benchmark_model_summary_in_ms() -> None:
    t = parse_benchmark_model(XNNPACK_RUN)
    assert t.inference_avg_ms == pytest.approx(602.943)
    assert t.init_ms == pytest.approx(592.232)
    assert t.first_inference_ms == pytest.approx(633.430)
    assert t.runs == 50 and t.std_ms == pytest.approx(27.690) and t.min_ms == pytest.approx(568.228)
    assert t.median_ms is None  # this build printed no percentiles


def test_benchmark_model_scientific_notation_and_percentiles() -> None:
    text = ("INFO: count=1000 first=52162 curr=49785 min=49088 max=686105 avg=1.23457e+06 std=60716 p5=49620 "
            "median=51891 p95=68628\n\nINFO: Inference timings in us: Init: 119515, First inference: 87112, "
            "Warmup (avg): 58147.4, Inference (avg): 1.23457e+06\n")
    t = parse_benchmark_model(text)
    assert t.inference_avg_ms == pytest.approx(1234.57)
    assert t.median_ms == pytest.approx(51.891) and t.p95_ms == pytest.approx(68.628) and t.runs == 1000


def test_benchmark_model_old_summary_format() -> None:
    t = parse_benchmark_model("Average inference timings in us: Warmup: 83235, Init: 38467, Inference: 79760.9\n")
    assert t.inference_avg_ms == pytest.approx(79.7609) and t.first_inference_ms is None


def test_benchmark_model_failure_quotes_the_error() -> None:
    with pytest.raises(ParseError, match="Failed to mmap model"):
        parse_benchmark_model("INFO: STARTING!\nERROR: Failed to mmap model /x.tflite\n")


@pytest.mark.parametrize(("text", "name", "applied", "coverage"), [
    ("Explicitly applied GPU delegate, and the model graph will be completely executed by the delegate.",
     "GPU", True, "completely"),
    (XNNPACK_RUN, "XNNPACK", True, "partially (1 delegate kernels)"),
    (GPU_UNSUPPORTED, "GPU", False, "not applied"),
    ("Though NNAPI delegate is explicitly applied, the model graph will not be executed by the delegate.",
     "NNAPI", False, "not applied"),
])
def test_delegate_status(text: str, name: str, applied: bool, coverage: str) -> None:
    s = benchmark_delegate_status(text, name)
    assert (s.applied, s.coverage) == (applied, coverage)


def test_delegate_status_reasons() -> None:
    assert benchmark_delegate_status(GPU_UNSUPPORTED, "GPU").reason == "GPU acceleration is unsupported on this platform"
    hexagon = "WARNING: Could not create Hexagon delegate: platform may not support delegate or required libraries are missing"
    assert benchmark_delegate_status(hexagon, "Hexagon").reason.startswith("Could not create Hexagon delegate")
    assert "did not report" in benchmark_delegate_status("nothing", "NNAPI").reason


def test_trtexec_gpu_compute_time() -> None:
    t = parse_trtexec(TRTEXEC_85)
    assert t.median_ms == pytest.approx(0.809937) and t.mean_ms == pytest.approx(0.818735)
    assert t.p90_ms == pytest.approx(0.811035) and t.percentiles_ms[99.0] == pytest.approx(0.812012)
    assert t.tensorrt_version == "TensorRT v8502"


def test_trtexec_without_p90_and_failure() -> None:
    old = ("[08/09/2022-06:54:41] [I] GPU Compute Time: min = 41.1855 ms, max = 43.0625 ms, mean = 42.0431 ms, "
           "median = 41.9604 ms, percentile(99%) = 43.0625 ms\n")
    t = parse_trtexec(old)
    assert t.median_ms == pytest.approx(41.9604) and t.p90_ms is None and t.tensorrt_version is None
    with pytest.raises(ParseError, match="Cannot create DLA engine, 0 not available"):
        parse_trtexec("[I] x\n[E] Cannot create DLA engine, 0 not available\n"
                      "&&&& FAILED TensorRT.trtexec [TensorRT v8502] # trtexec --useDLACore=0\n")


def test_getprop_and_l4t_release() -> None:
    props = parse_getprop("[ro.product.model]: [Pixel 7]\n[ro.build.version.sdk]: [34]\n[empty]: []\n")
    assert props == {"ro.product.model": "Pixel 7", "ro.build.version.sdk": "34", "empty": ""}
    rel = parse_nv_tegra_release("# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref, EABI: aarch64, "
                                 "DATE: Tue Aug  1 19:57:35 UTC 2023\n")
    assert (rel.version, rel.board) == ("R35.4.1", "t186ref")
    with pytest.raises(ParseError):
        parse_nv_tegra_release("Ubuntu 22.04")
