"""Loading a model onto workers (edgert/_core/_loader.py): which delegate each worker keeps, what identical workers
reuse, the warm-up timing, and the messages when nothing can load it or a delegate name is wrong.

Delegates and sessions here are test doubles with a fake clock, so "fastest" is exact: each double's ``run``
advances ``ClockDouble`` by its own ``ms`` (multiples of 1/8 s, so every timing is exact in floating point).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from delegates.base import Artifact, Delegate, Session, TensorSpec
from delegates.registry import all_delegates
from delegates.sharing import SessionPool
from edgert._core import _loader
from edgert._core._loader import check_delegate_names, check_specs, open_on_workers, warmup_ms
from edgert._core._model import LoadedModel
from edgert._core._run import Worker
from edgert.errors import (
    ConfigError,
    DelegateUnavailable,
    InferenceError,
    ModelLoadError,
)

SPEC = TensorSpec("x", (1, 2), np.dtype("float32"))


class ClockDouble:
    """Test double for the ``time`` module: ``perf_counter`` only moves when a session runs."""

    now = 0.0

    @classmethod
    def perf_counter(cls) -> float:
        return cls.now


class SessionDouble(Session):
    """Test double: each run takes ``ms`` on ClockDouble (or fails when ``ms`` is None)."""

    def __init__(self, ms: float | None, inputs: tuple[TensorSpec, ...] = (SPEC,)) -> None:
        self.ms, self.inputs, self.outputs = ms, inputs, (SPEC,)
        self.runs, self.closed = 0, False

    def run(self, feeds: list[np.ndarray]) -> list[np.ndarray]:
        self.runs += 1
        if self.ms is None:
            raise InferenceError("test double: zeros cannot run")
        ClockDouble.now += self.ms / 1e3
        return [np.zeros((1, 2), np.float32)]

    def close(self) -> None:
        self.closed = True


class DelegateDouble(Delegate):
    """Test double: opens SessionDouble(ms), or raises ModelLoadError(fail) when ``fail`` is set."""

    processor, backend, formats = "cpu", "test", ("onnx",)

    def __init__(self, name: str, ms: float | None = 1.0, fail: str | None = None,
                 inputs: tuple[TensorSpec, ...] = (SPEC,)) -> None:
        self.name, self.ms, self.fail, self.inputs = name, ms, fail, inputs
        self.sessions: list[SessionDouble] = []

    def _probe(self) -> None:
        return None

    def open(self, artifact: Artifact, threads: int = 1) -> Session:
        if self.fail is not None:
            raise ModelLoadError(self.fail)
        s = SessionDouble(self.ms, self.inputs)
        self.sessions.append(s)
        return s


@pytest.fixture(autouse=True)
def _fake_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    ClockDouble.now = 0.0
    monkeypatch.setattr(_loader, "time", ClockDouble)


def _model(*formats: str) -> LoadedModel:
    return LoadedModel("m", [Artifact(f, data=b"x") for f in formats or ("onnx",)], (), (), None)


def _worker(name: str, *delegates: Delegate, kind: str = "cpu") -> Worker:
    return Worker(name, kind, list(delegates), threading.Lock())


def _chosen(opened: list) -> list[tuple[str, str, float | None]]:
    return [(w.name, d.name, ms) for w, d, _s, ms in opened]


# -- which delegate a worker keeps --

def test_the_fastest_delegate_is_kept_and_the_others_closed() -> None:
    slow, fast, mid = DelegateDouble("slow", 500.0), DelegateDouble("fast", 125.0), DelegateDouble("mid", 250.0)
    opened = open_on_workers(_model(), [_worker("cpu0", slow, fast, mid)], None, [slow, fast, mid], 3)
    assert _chosen(opened) == [("cpu0", "fast", 125.0)]
    assert slow.sessions[0].closed and mid.sessions[0].closed and not fast.sessions[0].closed


def test_a_tie_keeps_the_first_listed_delegate() -> None:
    a, b = DelegateDouble("a", 250.0), DelegateDouble("b", 250.0)
    assert _chosen(open_on_workers(_model(), [_worker("cpu0", a, b)], None, [a, b], 1)) == [("cpu0", "a", 250.0)]
    assert b.sessions[0].closed and not a.sessions[0].closed


def test_a_timed_delegate_beats_one_that_zeros_cannot_run_in_either_order() -> None:
    blind, timed = DelegateDouble("blind", None), DelegateDouble("timed", 250.0)
    assert _chosen(open_on_workers(_model(), [_worker("w", blind, timed)], None, [], 1)) == [("w", "timed", 250.0)]
    blind2, timed2 = DelegateDouble("blind", None), DelegateDouble("timed", 250.0)
    assert _chosen(open_on_workers(_model(), [_worker("w", timed2, blind2)], None, [], 1)) == [("w", "timed", 250.0)]
    assert blind.sessions[0].closed and blind2.sessions[0].closed


def test_only_the_allowed_delegates_are_tried() -> None:
    a, b = DelegateDouble("a", 125.0), DelegateDouble("b", 500.0)
    assert _chosen(open_on_workers(_model(), [_worker("cpu0", a, b)], ("b",), [a, b], 1)) == [("cpu0", "b", 500.0)]
    assert a.sessions == []


def test_a_worker_with_no_candidate_is_skipped_not_the_end() -> None:
    tfl = DelegateDouble("tfl")
    tfl.formats = ("tflite",)
    ok = DelegateDouble("ok", 125.0)
    opened = open_on_workers(_model(), [_worker("npu", tfl, kind="npu"), _worker("cpu0", ok)], None, [tfl, ok], 1)
    assert _chosen(opened) == [("cpu0", "ok", 125.0)]


def test_a_delegate_that_fails_to_open_is_skipped_for_the_next() -> None:
    bad, ok = DelegateDouble("bad", fail="corrupt"), DelegateDouble("ok", 125.0)
    assert _chosen(open_on_workers(_model(), [_worker("cpu0", bad, ok)], None, [bad, ok], 1)) == [("cpu0", "ok", 125.0)]


def test_a_different_network_on_a_later_delegate_is_dropped_not_chosen() -> None:
    first = DelegateDouble("first", 500.0)
    other = DelegateDouble("other", 125.0, inputs=(SPEC, SPEC))
    lm = _model()
    assert _chosen(open_on_workers(lm, [_worker("cpu0", first, other)], None, [first, other], 1)) == [
        ("cpu0", "first", 500.0)]
    assert lm.inputs == (SPEC,)


def test_identical_workers_reuse_the_first_ones_choice_and_timing_and_share_its_session() -> None:
    slow, fast = DelegateDouble("slow", 500.0), DelegateDouble("fast", 125.0)
    workers = [_worker("cpu0", slow, fast), _worker("cpu1", slow, fast)]
    opened = open_on_workers(_model(), workers, None, [slow, fast], 2)
    assert _chosen(opened) == [("cpu0", "fast", 125.0), ("cpu1", "fast", 125.0)]
    assert len(slow.sessions) == 1                       # cpu1 did not try it again
    assert [s.runs for s in fast.sessions] == [3]        # nor open and warm up a session of its own:
    assert opened[0][2] is opened[1][2]                  # both run one (a pool: the double is not thread-safe)
    assert isinstance(opened[0][2], SessionPool) and opened[0][2].size == 1


# -- when nothing loads --

def test_every_delegates_reason_is_given_once_with_its_workers() -> None:
    a, b = DelegateDouble("a", fail="boom"), DelegateDouble("b", fail="bang")
    workers = [_worker("cpu0", a, b), _worker("cpu1", a, b)]
    with pytest.raises(ModelLoadError) as info:
        open_on_workers(_model(), workers, None, [a, b], 1)
    assert str(info.value) == "cannot load model 'm': a on cpu0, cpu1: boom; b on cpu0, cpu1: bang"


def test_no_delegate_taking_the_format_is_named() -> None:
    a, b = DelegateDouble("a"), DelegateDouble("b")
    with pytest.raises(ModelLoadError) as info:
        open_on_workers(_model("tflite", "pte"), [_worker("cpu0", a, b)], None, [a, b], 1)
    assert str(info.value) == "cannot load model 'm': no delegate here takes tflite/pte (delegates: a, b)"


# -- specs and warm-up --

@pytest.mark.parametrize(("inputs", "outputs"), [((SPEC, SPEC), (SPEC,)), ((SPEC,), (SPEC, SPEC))],
                         ids=["inputs", "outputs"])
def test_a_later_artifact_with_other_specs_is_not_the_same_network(inputs: tuple, outputs: tuple) -> None:
    lm = _model()
    lm.inputs, lm.outputs = (SPEC,), (SPEC,)
    s = SessionDouble(1.0)
    s.inputs, s.outputs = inputs, outputs
    d = DelegateDouble("d")
    d.formats = ("tflite", "onnx")
    with pytest.raises(ModelLoadError) as info:
        check_specs(lm, s, d)
    assert str(info.value) == (f"the tflite artifact of 'm' has {len(inputs)} inputs / {len(outputs)} outputs but "
                               "another artifact has 1 / 1: they must be one network")


@pytest.mark.parametrize(("runs", "calls"), [(0, 2), (1, 2), (3, 4)])
def test_warmup_is_one_untimed_run_then_the_median_of_runs(runs: int, calls: int) -> None:
    s = SessionDouble(250.0)
    assert warmup_ms(s, runs) == 250.0
    assert s.runs == calls


def test_warmup_of_a_session_zeros_cannot_run_is_none() -> None:
    assert warmup_ms(SessionDouble(None), 3) is None


# -- rt.load(delegates=...) names --

def test_one_name_may_be_given_as_a_string() -> None:
    own = [all_delegates()["ort-cpu"]]
    assert check_delegate_names("ort-cpu", own) == ("ort-cpu",)
    assert check_delegate_names(None, own) is None


def test_unknown_name_suggests_the_closest() -> None:
    with pytest.raises(ConfigError, match=r"^unknown delegate 'ort-cpx'; did you mean 'ort-cpu'"):
        check_delegate_names(["ort-cpx"], [])


def test_a_known_delegate_the_runtime_lacks_says_how_to_add_it() -> None:
    with pytest.raises(ConfigError) as info:
        check_delegate_names(["ort-cpu"], [])
    assert str(info.value) == ("delegate 'ort-cpu' is available but this runtime was created without it; "
                               "pass delegates=[..., 'ort-cpu'] to edgert.Runtime")


def test_a_delegate_that_cannot_run_here_gives_its_reason() -> None:
    coreml = all_delegates()["ort-coreml"]   # macOS/iOS only: never available on the Linux test hosts
    reason = coreml.probe()
    assert reason
    with pytest.raises(DelegateUnavailable) as info:
        check_delegate_names(["ort-coreml"], [coreml])
    assert (info.value.name, info.value.reason) == ("ort-coreml", reason)
