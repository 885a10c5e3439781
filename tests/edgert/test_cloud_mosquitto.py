"""Cloud offload through a real mosquitto broker and real ``edgert cloud serve`` processes.

Needs the mosquitto binary (Debian: ``apt-get install mosquitto``); skipped without it.
"""

from __future__ import annotations

import signal
import threading
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

import numpy as np
import pytest

import edgert
from delegates.base import Artifact
from edgert.offload import parse_broker_url
from edgert.offload._client import CloudDelegate
from edgert.offload._link import MqttLink
from edgert.offload._wire import encode
from edgert.testing import genmodels
from edgert.cli import _cloud as cmd_cloud
from edgert._core._result import DROPPED, FAILED, LATE, OK
from edgert.errors import ModelLoadError, OffloadError
from tests.edgert.test_cloud_support import Mosquitto, WorkerProc, cloud_stack, make_models, needs_mosquitto

pytestmark = [needs_mosquitto, pytest.mark.broker]


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("cloud")
    with cloud_stack(tmp) as (broker, models, worker):
        yield broker, models, worker, tmp


def local_outputs(path: Path, feeds: dict) -> list[np.ndarray]:
    import onnxruntime as ort

    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


def session(link: MqttLink, models: Path, name: str):
    return CloudDelegate(link).open_named(Artifact("onnx", path=models / f"{name}.onnx"), name)


def test_runtime_runs_on_the_cloud_with_the_same_outputs(cloud) -> None:
    broker, models, worker, _ = cloud
    x = genmodels.example_inputs("cnn")
    with edgert.Runtime(cpu_workers=0, offload=broker.url) as rt:
        m = rt.load(models / "cnn.onnx", name="cnn", slo_ms=1_000.0)
        assert rt.processors == ["cloud"]
        assert rt.estimator.expected_ms("cnn", "cloud") > 0   # seeded by real round trips
        res = m.submit(x).result(10)
        assert (res.status, res.processor, res.delegate) == (OK, "cloud", "mqtt-cloud")
        np.testing.assert_allclose(res.outputs["logits"], local_outputs(models / "cnn.onnx", x)[0], rtol=1e-5)
        link = rt._dispatcher.decider.by_name["cloud"].link
        assert link.rtt_ms is not None and link.rtt_ms > 0
        assert m(x)["logits"].shape == (1, 10)
    assert "ready on" in worker.text()


def test_a_stale_cloud_estimate_is_reset_so_the_cloud_is_tried_again(cloud) -> None:
    """One slow spell must not keep the cloud out for the rest of the session: an estimate no round
    trip refreshed for STALE_S goes back to the fastest round trip seen; the prior stays."""
    from edgert.offload._worker import STALE_S

    broker, models, _, _ = cloud
    x = genmodels.example_inputs("cnn")
    with edgert.Runtime(cpu_workers=0, offload=broker.url) as rt:
        m = rt.load(models / "cnn.onnx", name="cnn", slo_ms=1_000.0)
        for _ in range(3):
            assert m.submit(x).result(10).processor == "cloud"
        w = rt._dispatcher.decider.by_name["cloud"]
        # The ager thread would age on the real clock (a stall of STALE_S on a busy host resets the
        # estimate before the test does): stop it and drive age_estimates with explicit times.
        w._stop_aging.set()
        w._ager.join()
        best = w._best_ms["cnn"]
        last = w._last_s["cnn"]                           # when the last round trip ended
        prior = rt.estimator.prior_ms("cnn", "cloud")
        for _ in range(40):
            rt.estimator.update("cnn", "cloud", 500.0)   # a slow spell
        slow = rt.estimator.expected_ms("cnn", "cloud")
        assert slow > 1.25 * best
        assert w.age_estimates(last + STALE_S - 0.01) == []        # not stale yet
        assert rt.estimator.expected_ms("cnn", "cloud") == slow
        assert w.age_estimates(last + STALE_S + 0.01) == ["cnn"]
        assert rt.estimator.expected_ms("cnn", "cloud") == pytest.approx(best)
        assert rt.estimator.prior_ms("cnn", "cloud") == prior
        assert w.age_estimates(last + STALE_S + 0.02) == []         # one reset per STALE_S


def test_only_the_exact_files_in_the_models_dir_are_served(cloud, tmp_path: Path) -> None:
    broker, models, _, _ = cloud
    other = genmodels.build("tiny", "onnx", seed=1)          # same name, other weights
    with edgert.Runtime(cpu_workers=1, offload=broker.url) as rt:
        rt.load(other, name="tiny", format="onnx", slo_ms=100.0)
        assert rt.estimator.expected_ms("tiny", "cpu0") is not None
        assert rt.estimator.expected_ms("tiny", "cloud") is None   # not offloaded, runs locally
    with edgert.Runtime(cpu_workers=0, offload=broker.url) as rt:
        with pytest.raises(ModelLoadError, match=r"does not serve 'tiny' with sha256 .*put this exact file"):
            rt.load(other, name="tiny", format="onnx")
        with pytest.raises(ModelLoadError, match="does not serve 'mlp'"):
            rt.load(genmodels.build("mlp", "onnx"), name="mlp", format="onnx")


def test_bad_requests_get_error_replies_and_the_worker_survives(cloud) -> None:
    broker, models, worker, _ = cloud
    link = MqttLink(parse_broker_url(broker.url))
    ignored = worker.text().count("ignored")
    try:
        tiny = session(link, models, "tiny")
        ok = tiny.run([np.ones((1, 64), np.float32)])
        with pytest.raises(OffloadError, match=r"\[bad_input\] input 'x' of 'tiny' expects float32\[1,64\], got float64"):
            tiny.run([np.ones((1, 64), np.float64)])
        with pytest.raises(OffloadError, match=r"\[bad_input\].*got float32\[1, 63\]"):
            tiny.run([np.ones((1, 63), np.float32)])
        with pytest.raises(OffloadError, match=r"\[bad_input\] 'tiny' takes 1 input\(s\), got 2"):
            tiny.run([np.ones((1, 64), np.float32)] * 2)
        raises = session(link, models, "raises")
        with pytest.raises(OffloadError, match=r"\[inference_failed\]"):
            raises.run([np.ones((1, 16), np.float32), np.array(1, np.int64)])
        with pytest.raises(OffloadError, match=r"\[bad_request\] unknown op 'rm'"):
            link.request({"op": "rm", "digest": tiny.digest}, [], "tiny", 2_000)
        # garbage and frames with a foreign reply topic: logged, not answered, nothing breaks
        raw = link._client
        raw.publish("edgert/req/tiny", b"\x00garbage", qos=1).wait_for_publish(2)
        raw.publish("edgert/req/tiny", encode({"op": "run", "reply": "victim/topic", "id": "1"}), qos=1)
        raw.publish("edgert/req/tiny", b"EDG1\x00\x00\x00\x05{{{{{", qos=1).wait_for_publish(2)
        # One connection, one topic, QoS 1: the worker gets the frames in order and handles each in
        # a task started in arrival order, and a bad frame is logged before its task yields; so when
        # this request is answered, the three were logged.
        np.testing.assert_array_equal(tiny.run([np.ones((1, 64), np.float32)])[0], ok[0])
        assert worker.text().count("ignored") == ignored + 3
        assert worker.proc.poll() is None
    finally:
        link.close()


def test_payload_caps_on_both_sides(cloud) -> None:
    broker, models, _, tmp = cloud
    capped = WorkerProc(broker.url, models, tmp / "capped.log", "--prefix", "capped", "--max-payload", "20000")
    try:
        capped.ready()
        link = MqttLink(parse_broker_url(broker.url + "?prefix=capped"))
        try:
            cnn = session(link, models, "cnn")       # 49 KB of input: over the worker's cap
            with pytest.raises(OffloadError, match=r"\[too_large\] .* over this worker's 20000-byte cap"):
                cnn.run([np.zeros((1, 64, 64, 3), np.float32)])
        finally:
            link.close()
        small = MqttLink(parse_broker_url(broker.url + "?max_payload=1000"))
        try:
            with pytest.raises(OffloadError, match="over the 1000-byte cap"):
                small.request({"op": "run", "digest": "0"}, [np.zeros(1000, np.float32)], "tiny", 1_000)
        finally:
            small.close()
    finally:
        assert capped.stop() == 0


def test_a_second_worker_shares_the_load_and_drains_on_sigterm(cloud) -> None:
    broker, models, first, tmp = cloud
    second = WorkerProc(broker.url, models, tmp / "second.log")
    link = MqttLink(parse_broker_url(broker.url + "?capacity=8"))
    try:
        second.ready()
        cnn = session(link, models, "cnn")
        x = [np.zeros((1, 64, 64, 3), np.float32)]

        def one(_: int) -> str:
            cnn.run(x, 10_000)
            return cnn.last_worker

        with ThreadPoolExecutor(8) as ex:
            seen = Counter(ex.map(one, range(48)))
        assert len(seen) == 2, seen                       # both workers answered
        # graceful drain: SIGTERM while requests are queued on it; every request is answered
        with ThreadPoolExecutor(8) as ex:
            futs = [ex.submit(cnn.run, x, 20_000) for _ in range(40)]
            wait(futs, return_when=FIRST_COMPLETED)       # replies are flowing: requests are queued
            second.proc.send_signal(signal.SIGTERM)
            outs = [f.result() for f in futs]
        assert len(outs) == 40
        assert second.proc.wait(20) == 0                 # exits by itself after the drain
        assert "stopped; served" in second.text() and "drained" in second.text()
    finally:
        link.close()
        second.stop()


def test_kill_a_worker_mid_burst_every_request_ends(tmp_path: Path) -> None:
    """SIGKILL one of two workers during a burst: no request hangs or vanishes, and the runtime
    still serves afterwards (on the surviving worker or locally)."""
    broker = Mosquitto(tmp_path)
    models = make_models(tmp_path / "models", ("cnn",))
    workers = [WorkerProc(broker.url, models, tmp_path / f"w{i}.log") for i in range(2)]
    try:
        for w in workers:
            w.ready()
        x = genmodels.example_inputs("cnn")
        with edgert.Runtime(cpu_workers=1, offload=broker.url) as rt:
            m = rt.load(models / "cnn.onnx", name="cnn")
            futs = []
            for i in range(300):
                with rt.frame(deadline_ms=60.0):
                    futs.append(m.submit(x))
                if i == 100:       # mid-burst: 100 submitted, 199 to come
                    workers[0].proc.send_signal(signal.SIGKILL)
                    workers[0].proc.wait(10)
            results = [f.result(30) for f in futs]
            # no deadline: given up on the cloud (a request the broker routed to the dead worker) it is
            # re-placed locally, so it ends ok wherever it runs
            after = m.submit(x).result(60)
            requests = rt.stats()["cnn"]["requests"]
        statuses = Counter(r.status for r in results)
        assert sum(statuses.values()) == 300 and set(statuses) <= {OK, LATE, DROPPED, FAILED}
        assert all((r.error is not None) == (r.status in (DROPPED, FAILED)) for r in results)
        assert all((r.outputs is not None) == r.ok for r in results)
        assert len({r.id for r in results}) == 300 and requests == 301   # one result each, all counted
        assert after.status == OK and after.processor in ("cloud", "cpu0"), after
    finally:
        for w in workers:
            w.stop(signal.SIGKILL)
        broker.stop()


def test_broker_restart_fails_fast_then_everyone_reconnects(tmp_path: Path) -> None:
    """Stop mosquitto: requests end with the reason at once (no wait for a reply); start it again:
    client and worker reconnect, and a fault mark can be cleared."""
    broker = Mosquitto(tmp_path)
    models = make_models(tmp_path / "models", ("tiny",))
    worker = WorkerProc(broker.url, models, tmp_path / "w.log")
    try:
        worker.ready()
        x = np.ones((1, 64), np.float32)
        with edgert.Runtime(cpu_workers=0, offload=broker.url) as rt:
            m = rt.load(models / "tiny.onnx", name="tiny", slo_ms=2_000.0)
            cloud_w = rt._dispatcher.decider.by_name["cloud"]
            link = cloud_w.link
            up, down = link_events(link)
            assert m.submit(x).result(5).status == OK
            broker.stop()
            assert down.wait(30), "the link never saw the broker go"
            res = m.submit(x).result(30)
            # failed on the missing connection, not after waiting out a reply (that says "no reply")
            assert res.status == FAILED and "not connected to the MQTT broker" in str(res.error), res
            cloud_w.unhealthy_until_ms = rt.now_ms() + 60_000.0   # a fault mark, taken while disconnected
            up.clear()
            broker.start()
            worker.ready(count=2, timeout_s=30)
            assert up.wait(30), "the link did not reconnect"
            assert link.connected and link.reconnects >= 1
            assert m.submit(x).result(10).status == DROPPED     # still marked: placement skips the cloud
            cloud_w.unhealthy_until_ms = 0.0                    # cleared (the setter used to ignore this)
            assert cloud_w.unhealthy_until_ms == 0.0
            assert m.submit(x).result(10).status == OK
            cloud_w.unhealthy_until_ms = rt.now_ms() + 60_000.0
            assert cloud_w.unhealthy_until_ms == 0.0            # connected: a new mark is ignored
    finally:
        worker.stop()
        broker.stop()


def link_events(link: MqttLink) -> tuple[threading.Event, threading.Event]:
    """(connected, disconnected) events set by the link's own paho callbacks, after they ran."""
    up, down = threading.Event(), threading.Event()
    client = link._client
    on_connect, on_disconnect = client.on_connect, client.on_disconnect

    def connected(*args) -> None:
        on_connect(*args)
        if link.connected:
            up.set()

    def disconnected(*args) -> None:
        on_disconnect(*args)
        down.set()

    client.on_connect, client.on_disconnect = connected, disconnected
    return up, down


def test_username_password_and_tls(tmp_path: Path) -> None:
    """mosquitto with a password file and a TLS listener (self-signed, openssl)."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    broker = Mosquitto(tmp_path, users={"edge": "s3cret"}, tls=(cert, key))
    models = make_models(tmp_path / "models", ("tiny",))
    url = f"mqtts://edge:s3cret@127.0.0.1:{broker.port}?ca={cert}"
    worker = WorkerProc(f"mqtts://127.0.0.1:{broker.port}", models, tmp_path / "w.log",
                        "--username", "edge", "--password-env", "TEST_PW", "--cafile", str(cert),
                        env={"TEST_PW": "s3cret"})
    try:
        with pytest.raises(OffloadError, match="refused the connection"):
            MqttLink(parse_broker_url(f"mqtts://edge:wrong@127.0.0.1:{broker.port}?ca={cert}"), 3.0)
        with pytest.raises(OffloadError):                     # plain MQTT on a TLS port
            MqttLink(parse_broker_url(f"mqtt://edge:s3cret@127.0.0.1:{broker.port}"), 1.0)
        worker.ready()
        with edgert.Runtime(cpu_workers=0, offload=url) as rt:
            m = rt.load(models / "tiny.onnx", name="tiny")
            res = m.submit(np.ones((1, 64), np.float32)).result(10)
            assert (res.status, res.processor) == (OK, "cloud")
    finally:
        worker.stop()
        broker.stop()


def test_cli_errors_are_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cmd_cloud.main(["serve", "--broker", "http://x:1", "--models", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "must start with mqtt://" in err
    assert cmd_cloud.main(["cloud", "serve", "--broker", "mqtt://127.0.0.1:1", "--models",
                           str(tmp_path / "nope")]) == 2
    assert "is not a directory" in capsys.readouterr().err
