"""Offload over TLS as a user sets it up: a real mosquitto with TLS listeners made from a CA the tests make,
a password file, a real ``edgert cloud serve`` worker and ``Runtime(offload="mqtts://…", cpu_workers=0)``.

Each way of getting it wrong raises :class:`OffloadError` naming the cause (the password, the
certificate, the client certificate, a TLS mismatch) and the fix, well within the connect timeout;
"is mosquitto running?" is only for a port where nothing listens. A worker whose configuration
cannot work exits with one line and status 2; an unreachable broker it keeps retrying.

Needs the mosquitto binary and the ``cryptography`` package; skipped, saying which, without them.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import edgert
from edgert._core._result import OK
from edgert.errors import ConfigError, OffloadError
from edgert.offload import parse_broker_url
from edgert.offload._link import MqttLink
from edgert.testing import genmodels
from tests.edgert.test_cloud_support import ROOT, WorkerProc, free_port, make_models, needs_mosquitto
from tests.edgert.test_tls_support import PASSWORD, USER, Pki, TlsBroker

pytestmark = [needs_mosquitto, pytest.mark.broker]

#: The client's connect timeout (s): every error below must come well before it.
CONNECT_TIMEOUT_S = 5.0


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory, tls_pki: Pki):
    """The broker, and one worker on its TLS listener (right CA; the password from EDGERT_MQTT_PASSWORD)."""
    tmp = tmp_path_factory.mktemp("cloud_tls")
    broker = TlsBroker(tmp, tls_pki)
    models = make_models(tmp / "models", ("tiny",))
    worker = WorkerProc(broker.url("tls", password=None, ca=tls_pki.ca), models, tmp / "worker.log",
                        env={"EDGERT_MQTT_PASSWORD": PASSWORD})
    try:
        worker.ready()
        yield broker, tls_pki, models, tmp
    finally:
        worker.stop()
        broker.stop()


def run_on_cloud(url: str, models: Path) -> None:
    with edgert.Runtime(offload=url, cpu_workers=0) as rt:
        m = rt.load(models / "tiny.onnx", name="tiny", slo_ms=5_000.0)
        res = m.submit({"x": np.ones((1, 64), np.float32)}).result(10)
        assert (res.status, res.processor) == (OK, "cloud"), res.error


def offload_error(url: str) -> tuple[str, float]:
    """What ``Runtime(offload=url, cpu_workers=0)`` raises, and after how many seconds."""
    t = time.monotonic()
    with pytest.raises(OffloadError) as err:
        edgert.Runtime(offload=url, cpu_workers=0).close()
    return str(err.value), time.monotonic() - t


def test_the_right_ca_and_password_run_a_request_on_the_cloud(tls) -> None:
    broker, pki, models, _ = tls
    run_on_cloud(broker.url("tls", ca=pki.ca), models)


#: The issue's table (and the certificate failures beside it): listener, URL options, what the message says.
ROWS = {
    "wrong password": ("tls", {"password": "wrong", "ca": "ca"},
                       r"refused the connection: Not authorized \(check the username/password"),
    "wrong CA": ("tls", {"ca": "other_ca"},
                 r"presented a TLS certificate that cannot be verified: unable to get local issuer certificate; "
                 r"it is not signed by a CA this client trusts \(the CA in ca=.*other_ca.pem\): give the CA that "
                 r"signed it with \?ca=PATH \(insecure=1 skips the check: for tests only\)"),
    "no CA": ("tls", {},
              r"presented a TLS certificate that cannot be verified: .*\(the system's CA store, as no ca= was "
              r"given\): give the CA that signed it with \?ca=PATH"),
    "mqtt:// to the TLS port": ("tls", {"scheme": "mqtt"},
                                r"TLS mismatch: .* speaks TLS on port \d+, and this client does not: use "
                                r"mqtts://127.0.0.1:\d+\?ca=PATH"),
    "mqtts:// to a plain port": ("plain", {"ca": "ca"},
                                 r"TLS mismatch: .* does not speak TLS on port \d+ \(a plain listener answers "
                                 r"there\): use mqtt://127.0.0.1:\d+"),
    "expired certificate": ("expired", {"ca": "ca"},
                            r"presented a TLS certificate that cannot be verified: certificate has expired; renew "
                            r"the server's certificate"),
    "another host's certificate": ("other_host", {"ca": "ca"},
                                   r"cannot be verified: IP address mismatch, .*it is not issued for '127.0.0.1': "
                                   r"connect with a host name it names, or reissue it with subjectAltName=IP:127.0.0.1"),
    "mutual TLS without a client certificate": ("mtls", {"ca": "ca"},
                                                r"refused the TLS connection with alert "
                                                r"TLSV13_ALERT_CERTIFICATE_REQUIRED: it requires a client certificate "
                                                r"\(mutual TLS\): give one with \?cert=PATH&key=PATH"),
    "mutual TLS with a certificate of another CA": ("mtls", {"ca": "ca", "cert": "stranger", "key": "stranger_key"},
                                                    r"refused the TLS connection with alert \w*UNKNOWN_CA: it "
                                                    r"refused the client certificate .*stranger.pem"),
}


@pytest.mark.parametrize("row", list(ROWS))
def test_each_misconfiguration_is_named_with_its_fix_within_the_connect_timeout(tls, row: str) -> None:
    broker, pki, _, _ = tls
    case, opts, want = ROWS[row]
    opts = dict(opts)
    url_opts = {k: getattr(pki, v) for k, v in opts.items() if k in ("ca", "cert", "key")}
    url = broker.url(case, scheme=opts.get("scheme", "mqtts"), password=opts.get("password", PASSWORD), **url_opts)
    msg, took = offload_error(url)
    assert took < CONNECT_TIMEOUT_S, f"{row}: {took:.1f} s"
    assert "mosquitto running" not in msg
    assert f"127.0.0.1:{broker.ports[case]}" in msg, msg       # the broker is named
    assert re.search(want, msg), f"{row}: {msg}"


def test_nothing_listening_still_asks_whether_mosquitto_runs(tls) -> None:
    _, pki, _, _ = tls
    cfg = parse_broker_url(f"mqtts://127.0.0.1:{free_port()}?ca={pki.ca}")
    with pytest.raises(OffloadError, match=r"no MQTT broker answered at .* within 1 s \(is mosquitto running"):
        MqttLink(cfg, connect_timeout_s=1.0)


def test_mutual_tls_with_the_cas_client_certificate_runs_on_the_cloud(tls) -> None:
    broker, pki, models, _ = tls
    run_on_cloud(broker.url("mtls", ca=pki.ca, cert=pki.client, key=pki.client_key), models)


def test_insecure_skips_the_certificate_check(tls) -> None:
    broker, _, models, _ = tls
    run_on_cloud(broker.url("other_host", insecure=1), models)   # a certificate for another host, unchecked


def test_a_missing_ca_or_key_file_is_a_config_error_naming_the_option(tls, tmp_path: Path) -> None:
    broker, pki, _, _ = tls
    with pytest.raises(ConfigError, match=r"broker URL option ca='.*nope.pem': no such file"):
        edgert.Runtime(offload=broker.url("tls", ca=tmp_path / "nope.pem"), cpu_workers=0)
    with pytest.raises(ConfigError, match=r"broker URL options cert=.* key=.*: not a PEM certificate and its "
                                          r"private key"):
        edgert.Runtime(offload=broker.url("mtls", ca=pki.ca, cert=pki.client, key=pki.stranger_key), cpu_workers=0)


# -- the worker -----------------------------------------------------------------------------------------

def serve(url: str, models: Path, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
    """``edgert cloud serve`` run to its end."""
    return subprocess.run([sys.executable, "-m", "edgert.cli", "cloud", "serve", "--broker", url, "--models",
                           str(models)], capture_output=True, text=True, timeout=timeout_s, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.parametrize(("row", "want"), [
    ("wrong CA", r"^edgert cloud serve: the MQTT broker at mqtts://edge@127.0.0.1:\d+ presented a TLS certificate "
                 r"that cannot be verified: unable to get local issuer certificate; .*give the CA that signed it"),
    ("wrong password", r"^edgert cloud serve: the MQTT broker at mqtts://edge@127.0.0.1:\d+ refused the credentials "
                       r"of user 'edge': Not authorized"),
])
def test_a_worker_that_cannot_verify_the_broker_or_is_refused_exits_2_with_one_line(tls, row: str, want: str) -> None:
    broker, pki, models, _ = tls
    url = broker.url("tls", ca=pki.other_ca) if row == "wrong CA" else broker.url("tls", password="wrong", ca=pki.ca)
    t = time.monotonic()
    proc = serve(url, models)
    took = time.monotonic() - t
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("edgert cloud serve:")]
    assert proc.returncode == 2, proc.stderr
    assert len(errors) == 1 and re.search(want, errors[0]), proc.stderr
    assert "reconnecting" not in proc.stderr
    assert took < 30.0   # at the first attempt (the process start is most of it), not after retries


def test_a_worker_keeps_retrying_while_nothing_listens(tls, tmp_path: Path) -> None:
    _, pki, models, _ = tls
    w = WorkerProc(f"mqtts://{USER}:{PASSWORD}@127.0.0.1:{free_port()}?ca={pki.ca}", models, tmp_path / "w.log")
    try:
        end = time.monotonic() + 60.0
        while w.text().count("reconnecting in") < 3 and time.monotonic() < end:
            assert w.proc.poll() is None, w.text()
            time.sleep(0.1)
        assert w.text().count("reconnecting in") >= 3 and w.proc.poll() is None, w.text()
    finally:
        assert w.stop(signal.SIGTERM) == 0, w.text()


# -- docs/offload.md's TLS section, as printed, on a free port --------------------------------------------

def test_the_documented_listener_worker_and_client_work(tmp_path: Path) -> None:
    """The TLS section's blocks: the config block as printed (its CA, certificates, password file and
    mosquitto.conf), then the start block and the client block with port 8883 replaced by a free one
    (the broker and the worker started here, so that they are stopped)."""
    import shutil

    from tests.edgert.test_cloud_support import MOSQUITTO, end, started, wait_port
    from tests.test_readme import ROOT as DOCS_ROOT, blocks

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    page = DOCS_ROOT / "docs" / "offload.md"
    config, start, client = (next(b for b in blocks(page) if key in b.body)
                             for key in ("mosquitto_passwd", "edgert cloud serve --broker", 'url = "mqtts://'))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    subprocess.run(["bash", "-euo", "pipefail", "-c", config.body], cwd=tmp_path, check=True, env=env, timeout=60)
    port = str(free_port())
    conf = (tmp_path / "mosquitto.conf").read_text().replace("listener 8883", f"listener {port} 127.0.0.1")
    (tmp_path / "mosquitto.conf").write_text(conf + ("user root\n" if os.geteuid() == 0 else ""))
    for p in tmp_path.iterdir():
        p.chmod(0o644)
    worker_url, models = "", ""
    for line in start.body.splitlines():
        if line.startswith("export "):
            k, _, v = line.removeprefix("export ").partition("=")
            env[k] = v.strip("'\"")
        elif line.startswith("edgert cloud serve"):
            worker_url = re.search(r'--broker "([^"]+)"', line).group(1).replace(":8883", f":{port}")
            models = re.search(r"--models (\S+)", line).group(1)
        elif not line.startswith("mosquitto "):
            subprocess.run(["bash", "-euo", "pipefail", "-c", line], cwd=tmp_path, check=True, env=env, timeout=120)
    assert MOSQUITTO is not None and worker_url and models
    broker = started(subprocess.Popen([MOSQUITTO, "-c", str(tmp_path / "mosquitto.conf")], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
    log = tmp_path / "worker.log"
    with open(log, "wb") as fh:
        worker = started(subprocess.Popen([sys.executable, "-m", "edgert.cli", "cloud", "serve", "--broker", worker_url,
                                           "--models", models], cwd=tmp_path, env=env, stdout=fh,
                                          stderr=subprocess.STDOUT))
    try:
        wait_port(int(port))
        end_s = time.monotonic() + 60
        while " ready on " not in log.read_text(errors="replace"):
            assert worker.poll() is None and time.monotonic() < end_s, log.read_text(errors="replace")
            time.sleep(0.05)
        out = subprocess.run([sys.executable, "-c", client.body.replace(":8883", f":{port}")], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["ok", "cloud"], out.stdout
    finally:
        end(worker)
        end(broker)
