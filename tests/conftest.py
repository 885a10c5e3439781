"""Shared fixtures: generated model files and the MediaPipe models."""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from edgert import models as zoo
from edgert.testing import genmodels


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every generated network written as .onnx and .tflite (seed 0)."""
    d = tmp_path_factory.mktemp("genmodels")
    for name in genmodels.NAMES:
        genmodels.save(name, d)
    return d


@pytest.fixture(scope="session")
def tls_pki(tmp_path_factory: pytest.TempPathFactory):
    """A CA, another CA, broker/server and client certificates made once per session (tests/edgert/test_tls_support.py)."""
    from tests.edgert.test_tls_support import HAVE_CRYPTOGRAPHY, make_pki  # noqa: PLC0415

    if not HAVE_CRYPTOGRAPHY:
        pytest.skip("the tests' CA is made with the cryptography package: pip install cryptography")
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="session")
def mediapipe_dir() -> Path:
    """The verified MediaPipe models (downloaded from PyPI once, then cached)."""
    return next(iter(zoo.fetch("mediapipe").values())).parent


# -- markers, fuzz budget, and bugs of ours surfacing as test failures (issue #16) -------------------

#: Hypothesis examples per fuzz test: small in the default run, FUZZ_EXAMPLES under ``-m fuzz``.
FUZZ_EXAMPLES_DEFAULT = 25
FUZZ_EXAMPLES = 2_000


def pytest_configure(config: pytest.Config) -> None:
    """Register the markers, and pick the Hypothesis budget: ``-m fuzz`` runs the long one."""
    config.addinivalue_line("markers", "fuzz: property-based fuzzing of an input surface (-m fuzz: "
                                       f"{FUZZ_EXAMPLES} cases each; default run: {FUZZ_EXAMPLES_DEFAULT})")
    config.addinivalue_line("markers", "bug_log_expected: the test provokes a bug on purpose (edgert.bug log)")
    from hypothesis import HealthCheck, settings

    common = {"deadline": None, "derandomize": False, "print_blob": True,
              "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]}
    settings.register_profile("edgert-default", max_examples=FUZZ_EXAMPLES_DEFAULT, **common)
    settings.register_profile("edgert-fuzz", max_examples=FUZZ_EXAMPLES, **common)
    long_run = "fuzz" in (config.getoption("markexpr", "") or "")
    settings.load_profile("edgert-fuzz" if long_run else "edgert-default")


class _BugRecords(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(autouse=True)
def _fail_on_edgert_bug(request: pytest.FixtureRequest) -> Iterator[None]:
    """A bug of ours is logged to ``edgert.bug`` (the runtime fails that request and keeps serving):
    in a test it is a failure, unless the test is marked ``bug_log_expected``."""
    handler = _BugRecords()
    log = logging.getLogger("edgert.bug")
    log.addHandler(handler)
    try:
        yield
    finally:
        log.removeHandler(handler)
    if handler.records and request.node.get_closest_marker("bug_log_expected") is None:
        first = handler.records[0]
        tb = logging.Formatter().formatException(first.exc_info) if first.exc_info else ""
        pytest.fail(f"edgert.bug logged {len(handler.records)} bug(s); first: {first.getMessage()}\n{tb}")


# -- the suite stops every process it starts (issue #32) ------------------------------------------------

def is_broker_or_worker(argv: list[str]) -> bool:
    """A mosquitto broker, or an edgert process (``python -m edgert.cli cloud serve``, the ``edgert`` script)."""
    if not argv:
        return False
    exe = os.path.basename(argv[0])
    return exe in ("mosquitto", "edgert") or any(
        a == "-m" and b.startswith("edgert") for a, b in zip(argv, argv[1:]))


def leftover_processes(pgid: int | None = None, since_ticks: int = 0) -> list[tuple[int, str]]:
    """Brokers and workers still running in process group ``pgid`` (default: this one), other than this
    process, started at or after ``since_ticks`` (clock ticks since boot); orphans whose parent died are
    found too, as they keep the group. ``(pid, command line)`` each; empty where /proc is missing."""
    me = os.getpid()
    group = os.getpgid(0) if pgid is None else pgid
    found = []
    for entry in os.scandir("/proc") if os.path.isdir("/proc") else ():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")[:-1]
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()   # after "pid (comm) ": state ppid pgrp ...
        if fields[0] == "Z" or int(fields[2]) != group or int(fields[19]) < since_ticks:
            continue
        if is_broker_or_worker(argv):
            found.append((int(entry.name), " ".join(argv)))
    return found


def _start_ticks() -> int:
    with open(f"/proc/{os.getpid()}/stat", "rb") as f:
        stat = f.read().decode(errors="replace")
    return int(stat[stat.rfind(")") + 2:].split()[19])


@pytest.fixture(scope="session", autouse=True)
def _no_process_outlives_the_suite() -> Iterator[None]:
    """At the end of the session no broker or worker that the tests started is left running: any that is
    gets stopped (SIGTERM, then SIGKILL) and the session errors, naming it."""
    if not os.path.isdir("/proc"):
        yield
        return
    since = _start_ticks()
    yield
    from tests.edgert.test_cloud_support import STARTED, end  # noqa: PLC0415

    left = leftover_processes(since_ticks=since)
    deadline = time.monotonic() + 5.0
    while left and time.monotonic() < deadline:   # one may be exiting right now (a worker draining)
        time.sleep(0.1)
        left = leftover_processes(since_ticks=since)
    for pid, _ in left:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for proc in STARTED:
        end(proc, timeout_s=5.0)
    if left:
        listing = "; ".join(f"pid {pid}: {cmd}" for pid, cmd in left)
        pytest.fail(f"{len(left)} process(es) started by the tests outlived them (now stopped): {listing}",
                    pytrace=False)
