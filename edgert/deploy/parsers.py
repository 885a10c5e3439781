"""Parsers for the real output of the device tools edgert drives.

* TensorFlow Lite's ``benchmark_model`` (tensorflow/lite/tools/benchmark):
  the summary line its ``BenchmarkLoggingListener::OnBenchmarkEnd`` logs::

      INFO: Inference timings in us: Init: 119515, First inference: 87112, Warmup (avg): 58147.4, Inference (avg): 63743.2

  (older builds: ``Average inference timings in us: Warmup: 83235, Init: 38467,
  Inference: 79760.9``), the per-run statistics line
  ``count=50 first=.. curr=.. min=.. max=.. avg=.. std=.. [p5=.. median=.. p95=..]``,
  and the delegate lines of ``benchmark_tflite_model.cc``
  (``Explicitly applied GPU delegate, and the model graph will be completely
  executed by the delegate.``, ``GPU acceleration is unsupported on this platform.``,
  ``Could not create Hexagon delegate: ...``). Averages are C++ doubles printed
  with six significant digits, so ``1.23457e+06`` is accepted.
* NVIDIA's ``trtexec``: ``GPU Compute Time: min = 0.80 ms, max = 4.93 ms,
  mean = 0.82 ms, median = 0.81 ms, percentile(90%) = 0.81 ms, ...`` and the
  ``&&&& RUNNING|PASSED|FAILED TensorRT.trtexec [TensorRT v8502]`` banner.
* NVIDIA's ``tegrastats`` power rails: ``VDD_GPU_SOC 3982mW/3982mW`` (Orin) or
  ``POM_5V_IN 2000/2000`` (Nano, TX2, Xavier): current/average mW per rail and line.
* The Android battery fuel gauge, ``/sys/class/power_supply/battery/current_now``
  (uA) and ``voltage_now`` (uV): one integer per file.
* ``adb shell getprop`` (``[key]: [value]`` lines) and ``/etc/nv_tegra_release``
  (``# R35 (release), REVISION: 4.1, GCID: ..., BOARD: t186ref, ...``).

All parsers are pure functions of the text; they raise :class:`ParseError`
naming the line they looked for when it is absent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from edgert.errors import EdgeRTError

_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"


class ParseError(EdgeRTError, ValueError):
    """A tool's output lacks the line edgert needs (the message names it)."""


@dataclass(frozen=True, slots=True)
class BenchmarkModelTimings:
    """``benchmark_model``'s summary, converted to milliseconds.

    ``inference_avg_ms`` is the number a profile records (the mean of the
    timed runs). ``runs``, ``std_ms``, ``min_ms``, ``max_ms``, ``median_ms``
    and ``p95_ms`` come from the last ``count=`` line when present.
    """

    init_ms: float
    first_inference_ms: float | None
    warmup_avg_ms: float | None
    inference_avg_ms: float
    runs: int | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    std_ms: float | None = None
    median_ms: float | None = None
    p95_ms: float | None = None


@dataclass(frozen=True, slots=True)
class DelegateStatus:
    """Whether ``benchmark_model`` applied a delegate: ``applied``, how (``coverage``), and why not."""

    name: str
    applied: bool
    coverage: str  # "completely", "partially (N delegate kernels)", or "not applied"
    reason: str = ""


_SUMMARY_NEW = re.compile(
    rf"Inference timings in us:\s*Init:\s*(?P<init>{_NUM}),\s*First inference:\s*(?P<first>{_NUM}),"
    rf"\s*Warmup \(avg\):\s*(?P<warm>{_NUM}),\s*Inference \(avg\):\s*(?P<inf>{_NUM})"
)
_SUMMARY_OLD = re.compile(
    rf"Average inference timings in us:\s*Warmup:\s*(?P<warm>{_NUM}),\s*Init:\s*(?P<init>{_NUM}),"
    rf"\s*(?:Inference|no stats):\s*(?P<inf>{_NUM})"
)
_COUNT = re.compile(rf"count=(?P<count>\d+)(?P<rest>(?:\s+\w+={_NUM})*)")
_KV = re.compile(rf"(\w+)=({_NUM})")


def parse_benchmark_model(text: str) -> BenchmarkModelTimings:
    """Parse ``benchmark_model`` stdout/stderr into milliseconds.

    Raises:
        ParseError: no ``Inference timings in us:`` line (the run failed or
            was cut short); the message quotes the last ERROR line if any.
    """
    m = None
    for m in _SUMMARY_NEW.finditer(text):
        pass
    if m is not None:
        first: float | None = float(m["first"]) / 1e3
        warm: float | None = float(m["warm"]) / 1e3
    else:
        for m in _SUMMARY_OLD.finditer(text):
            pass
        if m is None:
            raise ParseError(
                "benchmark_model printed no 'Inference timings in us: ...' line"
                + _last_error_hint(text, ("ERROR", "Error", "error", "Failed", "failed"))
            )
        first, warm = None, float(m["warm"]) / 1e3
    init_ms, inf_ms = float(m["init"]) / 1e3, float(m["inf"]) / 1e3
    stats = _last_count_line(text[: m.start()])
    us = lambda k: float(stats[k]) / 1e3 if k in stats else None
    return BenchmarkModelTimings(
        init_ms=init_ms,
        first_inference_ms=first,
        warmup_avg_ms=warm,
        inference_avg_ms=inf_ms,
        runs=int(stats["count"]) if "count" in stats else None,
        min_ms=us("min"),
        max_ms=us("max"),
        std_ms=us("std"),
        median_ms=us("median"),
        p95_ms=us("p95"),
    )


def _last_count_line(text: str) -> dict[str, str]:
    last: dict[str, str] = {}
    for m in _COUNT.finditer(text):
        last = {"count": m["count"], **dict(_KV.findall(m["rest"]))}
    return last


def benchmark_delegate_status(text: str, delegate: str) -> DelegateStatus:
    """Did ``benchmark_model`` apply ``delegate`` (``GPU``, ``NNAPI``, ``Hexagon``, ``EXTERNAL``, ``XNNPACK``)?

    A delegate that cannot be created makes the tool fall back to the CPU and
    still print timings, so a path's number is only the delegate's when this
    says ``applied``.
    """
    d = re.escape(delegate)
    m = re.search(rf"Explicitly applied {d} delegate, and the model graph will be (completely|partially)"
                  rf"(?: executed by the delegate w/ (\d+) delegate kernels)?", text)
    if m:
        coverage = "completely" if m[1] == "completely" else f"partially ({m[2] or '?'} delegate kernels)"
        return DelegateStatus(delegate, True, coverage)
    patterns = [
        rf"Though {d} delegate is explicitly applied, the model graph will not be executed by the delegate",
        rf"{d} acceleration is unsupported on this platform",
        rf"Could not create {d} delegate[^\n]*",
        rf"Failed to (?:apply|create) (?:the )?{d} delegate[^\n]*",
        rf"{d} delegate[^\n]*(?:failed|not supported|unsupported)[^\n]*",
    ]
    for pat in patterns:
        m = re.search(pat, text, flags=re.IGNORECASE)
        if m:
            return DelegateStatus(delegate, False, "not applied", m[0].strip().rstrip("."))
    return DelegateStatus(delegate, False, "not applied",
                          f"benchmark_model did not report applying the {delegate} delegate")


def _last_error_hint(text: str, markers: tuple[str, ...]) -> str:
    """The last line holding the first marker found (markers in priority order), else the last line."""
    lines = text.strip().splitlines()
    for k in markers:
        for line in reversed(lines):
            if k in line:
                return f"; last error: {line.strip()}"
    tail = text.strip().splitlines()[-1:] if text.strip() else []
    return f"; last line: {tail[0].strip()}" if tail else "; the output was empty"


@dataclass(frozen=True, slots=True)
class TrtexecTimings:
    """``trtexec``'s ``GPU Compute Time`` statistics, in ms (percentiles when printed)."""

    min_ms: float
    max_ms: float
    mean_ms: float
    median_ms: float
    percentiles_ms: dict[float, float]
    tensorrt_version: str | None = None
    throughput_qps: float | None = None

    @property
    def p90_ms(self) -> float | None:
        """The 90th percentile (ms) when trtexec printed it (TensorRT ≥ 8.2)."""
        return self.percentiles_ms.get(90.0)


_TRT_GPU = re.compile(
    rf"GPU Compute Time:\s*min = (?P<min>{_NUM}) ms,\s*max = (?P<max>{_NUM}) ms,\s*mean = (?P<mean>{_NUM}) ms,"
    rf"\s*median = (?P<median>{_NUM}) ms(?P<rest>[^\n]*)"
)
_TRT_PCT = re.compile(rf"percentile\((?P<p>{_NUM})%\) = (?P<v>{_NUM}) ms")
_TRT_QPS = re.compile(rf"Throughput:\s*(?P<qps>{_NUM}) qps")
_TRT_BANNER = re.compile(r"&&&& (?:RUNNING|PASSED|FAILED) TensorRT\.trtexec \[TensorRT (v[\w.]+)\]")


def parse_trtexec(text: str) -> TrtexecTimings:
    """Parse the ``GPU Compute Time: ...`` line of ``trtexec`` output (ms).

    Raises:
        ParseError: no such line (engine build failed, DLA core missing, ...);
            the message quotes trtexec's last ``[E]`` line.
    """
    m = None
    for m in _TRT_GPU.finditer(text):
        pass
    if m is None:
        first_error = next((ln.split("[E]", 1)[1].strip() for ln in text.splitlines() if "[E]" in ln), None)
        if first_error:  # trtexec logs a cascade of [E] lines; the first one is the cause
            raise ParseError(f"trtexec printed no 'GPU Compute Time' line; first error: {first_error}")
        raise ParseError("trtexec printed no 'GPU Compute Time: min = ...' line"
                         + _last_error_hint(text, ("Error", "error", "FAILED")))
    pct = {float(p["p"]): float(p["v"]) for p in _TRT_PCT.finditer(m["rest"])}
    qps = None
    for q in _TRT_QPS.finditer(text):
        qps = float(q["qps"])
    return TrtexecTimings(float(m["min"]), float(m["max"]), float(m["mean"]), float(m["median"]), pct,
                          trtexec_version(text), qps)


def trtexec_version(text: str) -> str | None:
    """``TensorRT v8502`` from trtexec's ``&&&& RUNNING TensorRT.trtexec [TensorRT v8502]`` banner, or None."""
    m = _TRT_BANNER.search(text)
    return f"TensorRT {m[1]}" if m else None


def parse_getprop(text: str) -> dict[str, str]:
    """``adb shell getprop`` output (``[ro.product.model]: [Pixel 7]`` lines) as a dict."""
    return dict(re.findall(r"^\[([^\]]+)\]:\s*\[(.*)\]\s*$", text, flags=re.MULTILINE))


@dataclass(frozen=True, slots=True)
class L4TRelease:
    """A Jetson's Linux for Tegra release from ``/etc/nv_tegra_release``: e.g. ``R35.4.1``."""

    release: str  # "R35"
    revision: str  # "4.1"
    board: str | None
    raw: str

    @property
    def version(self) -> str:
        """``R35.4.1`` style version."""
        return f"{self.release}.{self.revision}"


def parse_nv_tegra_release(text: str) -> L4TRelease:
    """Parse ``# R35 (release), REVISION: 4.1, GCID: ..., BOARD: t186ref, EABI: aarch64, DATE: ...``.

    Raises:
        ParseError: the text is not an L4T release line.
    """
    m = re.search(r"#\s*(R\d+)\s*\(release\),\s*REVISION:\s*([\w.]+)(?P<rest>[^\n]*)", text)
    if m is None:
        raise ParseError(f"not an L4T release line (expected '# R35 (release), REVISION: 4.1, ...'): {text.strip()[:80]!r}")
    b = re.search(r"BOARD:\s*([\w.-]+)", m["rest"])
    return L4TRelease(m[1], m[2], b[1] if b else None, m[0].strip())


#: tegrastats rails that measure the whole module's input, in order of preference.
TEGRA_INPUT_RAILS: tuple[str, ...] = ("VDD_IN", "POM_5V_IN")
_RAIL = re.compile(r"\b([A-Z][A-Z0-9_]*) (\d+)(?:mW)?/(\d+)(?:mW)?(?![\w])")


def parse_tegrastats(text: str) -> list[dict[str, float]]:
    """Per ``tegrastats`` line, the current power (mW) of every rail it prints; lines without rails are skipped."""
    out = []
    for line in text.splitlines():
        rails = {name: float(cur) for name, cur, _avg in _RAIL.findall(line) if name not in ("RAM", "SWAP", "IRAM")}
        if rails:
            out.append(rails)
    return out


def tegrastats_power_mw(samples: list[dict[str, float]]) -> tuple[str, list[float]]:
    """The module power per sample (mW) and how it was taken.

    The input rail (``VDD_IN`` on Orin Nano/NX, ``POM_5V_IN`` on Nano/TX2/Xavier)
    when printed, else the sum of all rails (AGX Orin prints no input rail).

    Raises:
        ParseError: no sample has any rail.
    """
    if not samples:
        raise ParseError("tegrastats printed no power rails (expected e.g. 'VDD_IN 5123mW/5001mW')")
    for rail in TEGRA_INPUT_RAILS:
        if all(rail in s for s in samples):
            return rail, [s[rail] for s in samples]
    names = sorted(samples[0])
    return "sum of " + "+".join(names), [sum(s.values()) for s in samples]


def tegrastats_energy_mj(text: str, qps: float, duration_s: float, interval_ms: float) -> tuple[float, str]:
    """Energy per inference (mJ) from a tegrastats log of one trtexec run, and how it was taken.

    The timed runs are the last ``duration_s`` of the run, so the samples of
    that window (less the last two, taken after trtexec ended, and a tenth at
    each edge) give the mean module power; mW / qps = mJ per inference.

    Raises:
        ParseError: the log has no power rails.
    """
    samples = parse_tegrastats(text)
    window = int(duration_s * 1000 / interval_ms)
    timed = samples[-window - 2:-2] if len(samples) > window + 2 else samples[1:-1] or samples
    timed = timed[len(timed) // 10: len(timed) - len(timed) // 10] or timed
    rail, mw = tegrastats_power_mw(timed)
    mean_mw = sum(mw) / len(mw)
    how = (f"tegrastats --interval {interval_ms:g} during the trtexec run: mean {rail} {mean_mw:.0f} mW over "
           f"{len(mw)} samples of the timed window / throughput {qps:g} qps (gross: includes the board's idle power)")
    return mean_mw / qps, how


def parse_fuel_gauge(text: str) -> tuple[float, float]:
    """``cat current_now voltage_now`` (uA, uV) -> (|current| A, voltage V); the sign of current varies by vendor.

    Raises:
        ParseError: not two integers.
    """
    nums = re.findall(r"^\s*(-?\d+)\s*$", text, flags=re.MULTILINE)
    if len(nums) != 2:
        raise ParseError(f"expected current_now (uA) and voltage_now (uV), one integer each; got {text.strip()[:80]!r}")
    return abs(int(nums[0])) / 1e6, int(nums[1]) / 1e6


def describe_jetson(host: str, release: L4TRelease | None, board: str, dry_run: bool) -> str:
    """``NVIDIA Jetson AGX Orin Developer Kit (user@host; L4T R35.4.1, board t186ref)``."""
    if dry_run:
        return f"Jetson {host} (dry run: not queried)"
    l4t = f"L4T {release.version}" + (f", board {release.board}" if release.board else "") if release else "no L4T"
    return f"{board or 'unknown board'} ({host}; {l4t})"
