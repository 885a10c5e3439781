"""Failure containment on edgert's own threads: a worker loop, the cloud reply handler and the cloud
estimate ager. An exception injected there (a real function monkeypatched to raise, ``_raise``)
ends the affected request ``failed`` with the exception's type and message; the thread goes on."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

import edgert
from edgert._core._result import FAILED, OK
from edgert.errors import OffloadError
from edgert.testing import genmodels
from tests.edgert.test_cloud_support import needs_mosquitto


def _raise(*_a: object, **_k: object) -> None:
    raise KeyError("injected")


@pytest.mark.bug_log_expected
def test_a_session_that_raises_a_foreign_exception_fails_one_request_and_the_worker_goes_on(tmp_path: Path) -> None:
    paths = genmodels.save("tiny", tmp_path)
    x = genmodels.example_inputs("tiny")
    with edgert.Runtime(delegates=["ort-cpu"], cpu_workers=1) as rt:
        m = rt.load(paths["onnx"], name="tiny")
        _, session = rt._dispatcher.decider.by_name["cpu0"].sessions["tiny"]
        real = session.run
        session.run = _raise   # type: ignore[method-assign]
        bad = m.submit(x).result(10)
        session.run = real     # type: ignore[method-assign]
        good = m.submit(x).result(10)
        alive = [t.is_alive() for t in threading.enumerate() if t.name.startswith("edgert-cpu0")]
    assert bad.status == FAILED and "KeyError" in str(bad.error) and "injected" in str(bad.error)
    assert good.status == OK and alive and all(alive)


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory):
    from tests.edgert.test_cloud_support import cloud_stack

    with cloud_stack(tmp_path_factory.mktemp("cloud27")) as (broker, models, _):
        yield broker, models


@needs_mosquitto
@pytest.mark.broker
@pytest.mark.bug_log_expected
def test_a_cloud_reply_handler_that_raises_fails_that_request_and_the_link_goes_on(
        cloud, monkeypatch: pytest.MonkeyPatch) -> None:
    from delegates.base import Artifact
    from edgert.offload import _link
    from edgert.offload._client import CloudDelegate
    from edgert.offload._config import parse_broker_url

    broker, models = cloud
    link = _link.MqttLink(parse_broker_url(broker.url))
    try:
        tiny = CloudDelegate(link).open_named(Artifact("onnx", path=models / "tiny.onnx"), "tiny")
        x = np.ones((1, 64), np.float32)
        ok = tiny.run([x])
        monkeypatch.setattr(_link, "decode_arrays", _raise)
        with pytest.raises(OffloadError, match="raised KeyError: 'injected'"):
            tiny.run([x])
        monkeypatch.undo()
        np.testing.assert_array_equal(tiny.run([x])[0], ok[0])   # paho's network thread lives on
    finally:
        link.close()


@needs_mosquitto
@pytest.mark.broker
@pytest.mark.bug_log_expected
def test_the_cloud_estimate_ager_survives_an_exception(cloud) -> None:
    from edgert.offload._worker import STALE_S

    broker, models = cloud
    with edgert.Runtime(cpu_workers=0, offload=broker.url) as rt:
        rt.load(models / "tiny.onnx", name="tiny", slo_ms=1_000.0)
        w = rt._dispatcher.decider.by_name["cloud"]
        calls: list[float] = []

        def raising(now_s: float) -> list[str]:
            calls.append(now_s)
            raise KeyError("injected")

        w.age_estimates = raising   # type: ignore[method-assign]
        time.sleep(STALE_S * 0.8)
        assert len(calls) >= 2 and w._ager is not None and w._ager.is_alive()


def test_a_result_callback_that_raises_on_a_worker_thread_leaves_the_worker_serving(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A caller's ``add_done_callback`` runs where the result is resolved (often a worker thread): the
    future machinery logs its exception ("exception calling callback") and the worker goes on."""
    paths = genmodels.save("tiny", tmp_path)
    x = genmodels.example_inputs("tiny")
    with edgert.Runtime(delegates=["ort-cpu"], cpu_workers=1) as rt:
        m = rt.load(paths["onnx"], name="tiny")
        futs = [m.submit(x) for _ in range(3)]
        for f in futs:
            f.add_done_callback(_raise)
        results = [f.result(10) for f in futs] + [m.submit(x).result(10) for _ in range(3)]
        alive = [t.is_alive() for t in threading.enumerate() if t.name.startswith("edgert-cpu0")]
    assert [r.status for r in results] == [OK] * 6 and alive and all(alive)
