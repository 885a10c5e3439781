"""One copy of each model however many CPU workers (issue #32), through real ONNX Runtime and LiteRT, and
the memory the runtime reports (edgert/_core/_memory.py)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import edgert
from delegates.sharing import SessionPool
from edgert._core._memory import ResidentGrowth, peak_rss_mb, process_memory, rss_mb
from edgert.testing import genmodels


def _sessions(rt: edgert.Runtime, name: str) -> list[object]:
    return [w.sessions[name][1] for w in rt._dispatcher.workers if name in w.sessions]  # noqa: SLF001 - what each worker runs


def _hammer(model: edgert.Model, feeds: dict, threads: int, runs: int) -> list[list[np.ndarray]]:
    outs: list[list[np.ndarray]] = []
    lock = threading.Lock()

    def go() -> None:
        for _ in range(runs):
            out = model(feeds)
            with lock:
                outs.append(list(out.values()))
    ts = [threading.Thread(target=go) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    return outs


@pytest.mark.parametrize(("fmt", "delegate"), [("onnx", "ort-cpu"), ("tflite", "litert-xnnpack")])
def test_cpu_workers_share_one_session_and_answer_alike(model_dir, fmt: str, delegate: str) -> None:
    feeds = genmodels.example_inputs("cnn")
    with edgert.Runtime(delegates=[delegate], cpu_workers=3) as rt:
        m = rt.load(model_dir / f"cnn.{fmt}", name="cnn")
        sessions = _sessions(rt, "cnn")
        assert len(sessions) == 3 and all(s is sessions[0] for s in sessions)   # one object for all three
        assert isinstance(sessions[0], SessionPool) == (fmt == "tflite")        # LiteRT: a pool of interpreters
        outs = _hammer(m, feeds, threads=3, runs=10)
        ref = outs[0]
        assert len(outs) == 30 and all(np.array_equal(o[0], ref[0]) for o in outs)
        copies = rt.memory()["per_model"]["cnn"]["copies"]
        assert 1 <= copies <= 3 and (fmt == "tflite" or copies == 1)


def test_runtime_memory_reports_the_process_and_each_model(model_dir) -> None:
    with edgert.Runtime(cpu_workers=2) as rt:
        rt.load(model_dir / "cnn.onnx", name="cnn")
        mem = rt.memory()
    assert mem["peak_rss_mb"] >= mem["rss_mb"] > 10
    assert mem["host_total_mb"] >= mem["host_available_mb"] > 0
    assert mem["per_model"]["cnn"]["copies"] == 1 and mem["per_model"]["cnn"]["resident_mb"] >= 0


def test_resident_growth_sees_memory_touched_inside() -> None:
    with ResidentGrowth() as g:
        block = np.ones(40_000_000 // 8)   # 40 MB, touched
    assert g.mb is not None and g.mb >= 30
    del block
    assert peak_rss_mb() >= (rss_mb() or 0) and "peak_rss_mb" in process_memory()
