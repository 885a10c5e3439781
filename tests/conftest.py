"""Shared fixtures: generated model files and the MediaPipe models."""

from __future__ import annotations

import logging
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
