"""``edgert bench loadgen``: MLPerf LoadGen (mlcommons-loadgen) against edgert's futures API and the backend.

Real LoadGen, real runtime, real LiteRT / ONNX Runtime, generated models. Needs
``pip install mlcommons-loadgen``; skipped without it.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np
import pytest

lg = pytest.importorskip("mlperf_loadgen", reason="needs mlcommons-loadgen (pip install mlcommons-loadgen)")

import edgert
from edgert.testing import genmodels
from edgert.cli import _bench as cmd_bench
from edgert.bench.loadgen import DirectSUT, EdgertSUT, LoadGenSettings, Samples, direct_specs, parse_summary, run_loadgen

SUMMARY = """\
================================================
MLPerf Results Summary
================================================
SUT name : PySUT
Scenario : SingleStream
Mode     : PerformanceOnly
90.0th percentile latency (ns) : 9766194
Result is : VALID
  Min duration satisfied : Yes
================================================
Additional Stats
================================================
QPS w/o loadgen overhead        : 205.81
50.00 percentile latency (ns)   : 2989361
90.00 percentile latency (ns)   : 9766194
"""


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="edgert")
    cmd_bench.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


def test_parse_summary() -> None:
    f = parse_summary(SUMMARY)
    assert f["Result is"] == "VALID" and f["Scenario"] == "SingleStream"
    assert f["90.00 percentile latency (ns)"] == "9766194" and f["QPS w/o loadgen overhead"] == "205.81"


@pytest.mark.parametrize("fmt", ["tflite", "onnx"])
def test_single_stream_edgert_and_direct_complete_every_sample(tmp_path: Path, fmt: str) -> None:
    path = genmodels.save("mlp", tmp_path, formats=[fmt])[fmt]
    samples = Samples(direct_specs(path), count=16)
    settings = LoadGenSettings("SingleStream", duration_ms=300, min_queries=50, expected_latency_ms=0.005)  # low: LoadGen pre-generates enough queries
    sut = DirectSUT(path, samples, lg, sessions=1, inline=True)
    direct = run_loadgen(sut, samples, settings)
    sut.close()
    delegate = {"tflite": "litert-xnnpack", "onnx": "ort-cpu"}[fmt]
    with edgert.Runtime(delegates=[delegate], cpu_workers=1) as rt:
        model = rt.load(path, name="mlp")
        ours = run_loadgen(EdgertSUT(model, samples, lg), samples, settings)
        assert rt.stats()["mlp"]["ok"] == ours.status["ok"]
    for rep in (direct, ours):
        assert rep.valid, rep.summary
        assert set(rep.status) == {"ok"} and rep.status["ok"] >= 50
        assert 0 < rep.latency_ms("50.00") <= rep.latency_ms("90.00")


class DoneModelDouble:
    """Test double for ``edgert.Model``: ``submit`` returns a future that is already done (a model
    finishing before its caller reaches ``add_done_callback``)."""

    def submit(self, inputs):
        from concurrent.futures import Future

        from edgert._core._result import Result

        fut: Future = Future()
        fut.set_result(Result({"y": np.zeros(1, np.float32)}, "ok", "cpu0", "test", 0.01, 0.0, None, "m", 0))
        return fut


class LoadGenDouble:
    """Test double for the ``mlperf_loadgen`` module's completion calls: records completed sample ids."""

    def __init__(self) -> None:
        self.completed: list[int] = []

    def QuerySampleResponse(self, sample_id, ptr, size):   # noqa: N802 (LoadGen's name)
        return sample_id

    def QuerySamplesComplete(self, responses):   # noqa: N802
        self.completed += responses


def test_windowed_sut_completes_every_sample_when_futures_finish_inline() -> None:
    # Offline with a window: each completion pumps the backlog. A future already done when its
    # callback is added runs that callback inline; pumping from inside a pump recursed once per
    # sample, and the RecursionError (swallowed by the future) lost a sample and hung LoadGen.
    from types import SimpleNamespace

    lgd = LoadGenDouble()
    n = 5000
    sut = EdgertSUT(DoneModelDouble(), SimpleNamespace(items=[[np.zeros(1, np.float32)]]), lgd, window=2)
    sut.issue([SimpleNamespace(id=i, index=0) for i in range(n)])
    assert sorted(lgd.completed) == list(range(n))
    assert sut.done.status == {"ok": n} and sut._inflight == 0 and not sut._pumping


@pytest.mark.parametrize("scenario", ["MultiStream", "Server", "Offline"])
def test_other_scenarios_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture,
                                        monkeypatch: pytest.MonkeyPatch, scenario: str) -> None:
    """--compare: a row per run and the ratio table, every line within 80 columns; progress on stderr (1 s)."""
    monkeypatch.setenv("COLUMNS", "80")
    out_json = tmp_path / "r.json"
    assert cli(["bench", "loadgen", "--scenario", scenario, "--model", "mlp", "--compare", "--duration-s", "0.5",
                "--min-queries", "20", "--target-qps", "500", "--json", str(out_json)]) == 0
    cap = capsys.readouterr()
    out = cap.out
    assert max(len(x) for x in out.splitlines()) <= 80, max(out.splitlines(), key=len)
    assert re.search(r"^1 direct +(VALID|INVALID) +[\d.]+ +[\d.]+ +[\d.]+ ", out, re.M), out
    assert re.search(r"^2 edgert +(VALID|INVALID) ", out, re.M), out
    assert re.search(r"^p50 ms +[\d.]+ +[\d.]+ +[\d.]+$", out, re.M) and "edgert/direct" in out
    assert f"loadgen {scenario}: 100% after" in cap.err and "run 2/2 edgert" in cap.err
    import json
    reports = json.loads(out_json.read_text())
    assert [r["sut"] for r in reports] == ["direct", "edgert"]
    assert all(set(r["status"]) == {"ok"} for r in reports)
    for i, r in enumerate(reports, 1):   # the printed verdict is LoadGen's own, per side (load-dependent)
        assert r["scenario"] == scenario and r["valid"] == (r["fields"]["Result is"] == "VALID")
        verdict = "VALID" if r["valid"] else "INVALID"
        assert re.search(rf"^{i} {r['sut']} +{verdict} ", out, re.M), out


def test_cli_prints_loadgen_summary(capsys: pytest.CaptureFixture) -> None:
    assert cli(["bench", "loadgen", "--scenario", "SingleStream", "--model", "tiny", "--duration-s", "0.3",
                "--min-queries", "20"]) == 0
    out = capsys.readouterr().out
    assert "MLPerf Results Summary" in out and "Result is : VALID" in out
    assert re.search(r"^1 edgert +VALID ", out, re.M), out


def test_short_runs_show_no_progress(capsys: pytest.CaptureFixture) -> None:
    """Under a second of benchmarking: nothing on stderr."""
    assert cli(["bench", "loadgen", "--scenario", "SingleStream", "--model", "tiny", "--duration-s", "0.3",
                "--min-queries", "20"]) == 0
    assert capsys.readouterr().err == ""


def test_cli_errors_are_one_line(capsys: pytest.CaptureFixture) -> None:
    assert cli(["bench", "loadgen", "--scenario", "SingleStream", "--model", "cnnn"]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'cnn'" in err and len(err.strip().splitlines()) == 1
    assert cli(["bench", "loadgen", "--scenario", "Server", "--model", "missing.onnx"]) == 2
    assert "model 'missing.onnx' not found" in capsys.readouterr().err
