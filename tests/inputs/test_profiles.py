"""Issue #16, device profiles: each bad field of a shipped profile ends in one TraceError line naming it.

Every case also goes through ``edgert simulate`` (exit 2, one line, no traceback).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from edgert.cli import main
from scheduler.errors import TraceError
from scheduler.profile import DeviceProfile
from scheduler.sim.profiles import PROFILE_DIR, load_profile

SHIPPED = json.loads((PROFILE_DIR / "galaxy-s23.json").read_text())
CLOUD = {"rtt_ms": 20.0, "uplink_mbps": 50.0, "latency_ms": {"hand_tracking": 1.5}}


def _set(path: str, value: Any) -> dict[str, Any]:
    """The shipped profile with one field (``a/b/c``) changed."""
    d = json.loads(json.dumps(SHIPPED))
    d["cloud"] = json.loads(json.dumps(CLOUD))
    *parents, last = path.split("/")
    node = d
    for k in parents:
        node = node[k]
    node[last] = value
    return d


CASES = [  # (field, value, the message it must give)
    ("sources", ["a"], "sources must be an object"),
    ("sources", 5, "sources must be an object"),
    ("processors", 3, "processors must be a non-empty list of {name, kind} objects, got 3"),
    ("cloud/latency_ms", [1], "cloud.latency_ms must be an object {model: ms}, got a list"),
    ("cloud/uplink_mbps", 0, "cloud.uplink_mbps must be a link speed in Mbit/s"),
    ("cloud/rtt_ms", -5, "cloud.rtt_ms must be >= 0 and <= 1e+06 ms, got -5"),
    ("latency_p90_ms", {"hand_tracking": {"cpu": -1}}, "latency_p90_ms['hand_tracking']['cpu'] must be a latency"),
    ("latency_p90_ms", {"hand_tracking": {"cpu": 1e5}}, "is over 100x its latency_ms"),
    ("latency_ms/hand_tracking/cpu", -3, "latency_ms['hand_tracking']['cpu'] must be a latency in ms, > 0"),
    ("latency_ms/hand_tracking/cpu", float("nan"), "must be a finite number, got nan"),
    ("latency_ms/hand_tracking/cpu", 0, "must be a latency in ms, > 0 and <= 1e+06, got 0"),
    ("latency_ms/hand_tracking/cpu", float("inf"), "must be a finite number, got inf"),
    ("latency_ms/hand_tracking/cpu", 1e308, "got 1e+308"),
    ("latency_ms/hand_tracking/cpu", True, "must be a number, got true"),
    ("latency_ms/hand_tracking/cpu", "9.5", "must be a number, got '9.5'"),
    ("name", None, "name must be a non-empty string, got null"),
    ("description", 7, "description must be a string, got 7"),
    ("cloud", 1, "cloud must be an object"),
    ("cloud/input_bytes", {"hand_tracking": -1}, "cloud.input_bytes['hand_tracking'] must be a whole number"),
    ("energy_mj", {"hand_tracking": {"cpu": -2}}, "energy_mj['hand_tracking']['cpu'] must be a positive energy in mJ"),
    ("processors", [{"name": 1, "kind": "cpu"}], "processors[0].name must be a non-empty string, got 1"),
]


@pytest.mark.parametrize(("field", "value", "message"), CASES, ids=[f"{c[0]}={c[1]!r}" for c in CASES])
def test_bad_field_is_one_trace_error(field: str, value: Any, message: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(_set(field, value)))
    with pytest.raises(TraceError) as info:
        DeviceProfile.load(bad)
    assert message in str(info.value)
    assert str(info.value).startswith(f"profile {bad}: ")
    assert main(["simulate", "--scenario", "ar_assistant", "--device", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_shipped_profile_with_cloud_still_loads() -> None:
    prof = DeviceProfile.from_json(_set("cloud/rtt_ms", 0))
    assert prof.cloud is not None and prof.cloud.rtt_ms == 0.0 and prof.name == "galaxy-s23"


@pytest.mark.parametrize(("content", "message"), [
    (json.dumps(SHIPPED).encode("utf-16"), "not UTF-8 text (byte 0); save it as UTF-8 JSON"),
    (bytes(range(256)), "not UTF-8 text"),
    (b"[" * 100_000, "JSON nested too deeply"),
    (b"{", "not valid JSON (line 1"),
], ids=["utf-16", "binary", "deep", "truncated"])
def test_unreadable_file_is_one_trace_error(content: bytes, message: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    with pytest.raises(TraceError, match=re.escape(message)):
        load_profile(bad)


def test_directory_is_named_a_directory_not_missing(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="is a directory; give a .json file"):
        load_profile(tmp_path)
