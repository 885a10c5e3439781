"""Device profiles field by field (scheduler/profile.py, docs/design.md §6): what each field reads as, its range's
edges, its default when left out, the exact message (field, value, fix) when it is wrong, and the JSON a profile
writes back.

These pin what ``tests/inputs/test_profiles.py`` (one bad value per field, through the CLI) leaves open: the
inclusive ends of every range, the defaults of optional fields, the cloud path's arithmetic, and that
``to_json``/``save`` give back the shipped files unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scheduler.errors import TraceError
from scheduler.profile import MAX_BYTES, CloudSpec, DeviceProfile
from scheduler.sim.profiles import PROFILE_DIR

SHIPPED = {n: (PROFILE_DIR / f"{n}.json").read_text() for n in ("galaxy-s23", "pixel4", "xr2-gen2")}
PROCS = [{"name": "cpu", "kind": "cpu"}, {"name": "gpu", "kind": "gpu"}]


def _minimal(**extra: Any) -> dict[str, Any]:
    """The smallest valid profile (two processors, one model), plus ``extra`` fields."""
    return {"name": "phone", "processors": json.loads(json.dumps(PROCS)),
            "latency_ms": {"m": {"cpu": 10.0, "gpu": 4.0}}, **extra}


def _error(obj: Any, origin: str = "p.json") -> str:
    with pytest.raises(TraceError) as info:
        DeviceProfile.from_json(obj, origin=origin)
    return str(info.value)


def _cloud(**fields: Any) -> dict[str, Any]:
    return _minimal(cloud={"rtt_ms": 20.0, "uplink_mbps": 50.0, **fields})


# -- writing back: the JSON of docs/design.md §6, key for key --

@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_profile_writes_back_the_same_json(name: str) -> None:
    obj = json.loads(SHIPPED[name])
    assert DeviceProfile.from_json(obj).to_json() == obj


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_save_writes_the_shipped_file_byte_for_byte(name: str, tmp_path: Path) -> None:
    """Two-space indent, keys in the documented order (not sorted), one trailing newline."""
    out = tmp_path / "p.json"
    DeviceProfile.from_json(json.loads(SHIPPED[name])).save(out)
    assert out.read_text() == json.dumps(json.loads(SHIPPED[name]), indent=2) + "\n"
    assert out.read_text().startswith('{\n  "name": ')


def test_optional_tables_are_written_back() -> None:
    obj = _minimal(description="d", latency_p90_ms={"m": {"cpu": 12.0}}, energy_mj={"m": {"gpu": 4.0}},
                   cloud={"rtt_ms": 5.0, "uplink_mbps": 10.0, "downlink_mbps": 20.0, "latency_ms": {"m": 1.5},
                          "input_bytes": {"m": 100}, "output_bytes": {"m": 7}},
                   sources={"latency_ms/m/cpu": "measured"})
    out = DeviceProfile.from_json(obj).to_json()
    assert out == {**obj, "sources": obj["sources"]}
    assert list(out) == ["name", "description", "processors", "latency_ms", "latency_p90_ms", "energy_mj", "cloud",
                         "sources"]


def test_profile_without_optional_sections_writes_none_of_them() -> None:
    assert list(DeviceProfile.from_json(_minimal()).to_json()) == ["name", "description", "processors", "latency_ms",
                                                                   "sources"]


# -- defaults of the optional fields --

def test_missing_name_is_the_file_stem_and_other_optional_fields_default_empty() -> None:
    obj = _minimal()
    del obj["name"]
    prof = DeviceProfile.from_json(obj, origin="/somewhere/my-phone.json")
    assert prof.name == "my-phone"
    assert prof.description == "" and prof.sources == {} and prof.latency_p90_ms == {} and prof.energy_mj == {}
    assert prof.cloud is None and prof.power is None and prof.thermal is None


def test_default_origin_names_the_profile_in_messages() -> None:
    with pytest.raises(TraceError, match=r"^profile <profile>: a device profile is a JSON object "
                                         r"\{name, processors, latency_ms, \.\.\.\}, got a list$"):
        DeviceProfile.from_json([])


def test_empty_name_is_rejected_but_empty_description_is_not() -> None:
    assert _error(_minimal(name="")) == "profile p.json: name must be a non-empty string, got ''"
    assert DeviceProfile.from_json(_minimal(description="")).description == ""


def test_power_and_thermal_sections_are_parsed() -> None:
    shipped = json.loads(SHIPPED["galaxy-s23"])
    prof = DeviceProfile.from_json(shipped)
    assert prof.power is not None and prof.power.to_json() == shipped["power"]
    assert prof.thermal is not None and prof.thermal.to_json() == shipped["thermal"]


@pytest.mark.parametrize(("section", "value", "message"), [
    ("power", 3, "profile p.json: power must be an object"),
    ("thermal", 3, "profile p.json: thermal must be an object"),
    ("energy_mj", {"m": {"dsp": 1.0}}, ("profile p.json: energy_mj['m'] names unknown processor 'dsp'; "
                                        "known: ['cpu', 'gpu']")),
])
def test_power_sections_are_checked_against_the_processors(section: str, value: Any, message: str) -> None:
    assert _error(_minimal(**{section: value})).startswith(message)


# -- processors --

@pytest.mark.parametrize(("procs", "message"), [
    ({}, "processors must be a non-empty list of {name, kind} objects, got an object"),
    ([5], "processors[0] must be an object with 'name' and 'kind', got 5"),
    ([{"name": "cpu"}], "processors[0] must be an object with 'name' and 'kind', got an object"),
    ([{"kind": "cpu"}], "processors[0] must be an object with 'name' and 'kind', got an object"),
    ([{"name": "cpu", "kind": "tpu"}], "processors[0].kind 'tpu' is not one of cpu, gpu, dsp, npu, cloud"),
    ([{"name": "cpu", "kind": "cpu"}, {"name": "cpu", "kind": "gpu"}], "processor names must be unique"),
], ids=["object", "number", "no-kind", "no-name", "bad-kind", "duplicate"])
def test_bad_processors_message(procs: Any, message: str) -> None:
    assert _error(_minimal(processors=procs)) == f"profile p.json: {message}"


def test_latency_of_an_unknown_processor_names_it_and_the_known_ones() -> None:
    assert _error(_minimal(latency_ms={"m": {"cpu": 1.0, "dsp": 2.0}})) == (
        "profile p.json: latency_ms['m'] names unknown processor(s) ['dsp']; known: ['cpu', 'gpu']")


@pytest.mark.parametrize(("length", "shown"), [(40, repr("y" * 40)), (41, "a string of 41 characters")])
def test_long_strings_are_summarised_not_echoed(length: int, shown: str) -> None:
    """A string value is echoed (quoted) up to 40 characters; a longer one only by its length."""
    msg = _error(_minimal(processors=[{"name": "cpu", "kind": "y" * length}]))
    assert msg == f"profile p.json: processors[0].kind {shown} is not one of cpu, gpu, dsp, npu, cloud"


def test_a_value_of_another_python_type_is_named_by_its_type() -> None:
    assert _error(("a",)).endswith("got tuple")


# -- latency, p90, energy: the ranges' ends --

@pytest.mark.parametrize(("value", "ok"), [(1e6, True), (1e6 * (1 + 1e-12), False), (1e-9, True), (0, False)])
def test_latency_range_is_open_at_zero_and_closed_at_max(value: float, ok: bool) -> None:
    obj = _minimal(latency_ms={"m": {"cpu": value}})
    if ok:
        assert DeviceProfile.from_json(obj).latency_ms == {"m": {"cpu": value}}
    else:
        assert _error(obj) == (f"profile p.json: latency_ms['m']['cpu'] must be a latency in ms, > 0 and <= 1e+06, "
                               f"got {value}")


def test_latency_type_error_names_the_field() -> None:
    assert _error(_minimal(latency_ms={"m": {"cpu": "9"}})) == (
        "profile p.json: latency_ms['m']['cpu'] must be a number, got '9'")


@pytest.mark.parametrize(("value", "ok"), [(1e9, True), (1e9 + 1, False), (0.5, True), (1e-6, True), (0, False)])
def test_energy_range_is_open_at_zero_and_closed_at_1e9(value: float, ok: bool) -> None:
    obj = _minimal(energy_mj={"m": {"gpu": value}})
    if ok:
        assert DeviceProfile.from_json(obj).energy_mj == {"m": {"gpu": value}}
    else:
        assert _error(obj) == (f"profile p.json: energy_mj['m']['gpu'] must be a positive energy in mJ, at most 1e9, "
                               f"got {value}")


def test_energy_type_error_names_the_field() -> None:
    assert _error(_minimal(energy_mj={"m": {"gpu": None}})) == (
        "profile p.json: energy_mj['m']['gpu'] must be a number, got null")


@pytest.mark.parametrize(("field", "value", "message"), [
    ("latency_ms", [1], "latency_ms must be an object {model: {processor: number}}, got a list"),
    ("energy_mj", {"m": 3}, "energy_mj['m'] must be an object {processor: number}, got 3"),
    ("latency_p90_ms", {"m": {"cpu": "x"}}, "latency_p90_ms['m']['cpu'] must be a number, got 'x'"),
])
def test_table_shape_errors(field: str, value: Any, message: str) -> None:
    assert _error(_minimal(**{field: value})) == f"profile p.json: {message}"


def test_p90_may_be_exactly_100x_its_latency() -> None:
    prof = DeviceProfile.from_json(_minimal(latency_p90_ms={"m": {"cpu": 1000.0, "gpu": 5.0}}))
    assert prof.latency_p90_ms == {"m": {"cpu": 1000.0, "gpu": 5.0}}
    assert _error(_minimal(latency_p90_ms={"m": {"cpu": 1000.5}})) == (
        "profile p.json: latency_p90_ms['m']['cpu'] = 1000.5 is over 100x its latency_ms (10); "
        "both must be ms of the same runs")


def test_p90_of_a_model_without_latency_is_kept_unchecked() -> None:
    prof = DeviceProfile.from_json(_minimal(latency_p90_ms={"other": {"cpu": 500.0}}))
    assert prof.latency_p90_ms == {"other": {"cpu": 500.0}}


def test_sources_must_map_to_strings() -> None:
    assert _error(_minimal(sources=5)) == ('profile p.json: sources must be an object '
                                           '{"latency_ms/<model>/<processor>": "where it came from"}, got 5')


# -- cloud --

def test_cloud_fields_are_read_as_given() -> None:
    prof = DeviceProfile.from_json(_cloud(downlink_mbps=100.0, latency_ms={"m": 1.5}, input_bytes={"m": 1000},
                                          output_bytes={"m": 250}))
    assert prof.cloud == CloudSpec(20.0, 50.0, 100.0, {"m": 1.5}, {"m": 1000}, {"m": 250})


def test_cloud_downlink_defaults_to_uplink_and_tables_to_empty() -> None:
    assert DeviceProfile.from_json(_cloud()).cloud == CloudSpec(20.0, 50.0, 50.0, {}, {}, {})


def test_expected_ms_is_rtt_plus_both_transfers_plus_server() -> None:
    c = CloudSpec(20.0, uplink_mbps=8.0, downlink_mbps=2.0, latency_ms={"m": 1.5, "n": 3.0},
                  input_bytes={"m": 1000}, output_bytes={"m": 500, "n": 250})
    # 1000 B up at 8 Mbit/s = 1 ms; 500 B down at 2 Mbit/s = 2 ms
    assert c.expected_ms("m") == pytest.approx(20.0 + 1.0 + 2.0 + 1.5)
    # no input_bytes for "n": nothing to send up; 250 B down = 1 ms
    assert c.expected_ms("n") == pytest.approx(20.0 + 0.0 + 1.0 + 3.0)
    assert c.expected_ms("absent") is None


@pytest.mark.parametrize(("cloud", "message"), [
    (1, "cloud must be an object {rtt_ms, uplink_mbps, latency_ms, ...}, got 1"),
    ({"uplink_mbps": 5}, "cloud needs 'rtt_ms'"),
    ({"rtt_ms": 5}, "cloud needs 'uplink_mbps'"),
    ({"rtt_ms": "5", "uplink_mbps": 5}, "cloud.rtt_ms must be a number, got '5'"),
    ({"rtt_ms": 1e6 + 1, "uplink_mbps": 5}, "cloud.rtt_ms must be >= 0 and <= 1e+06 ms, got 1000001.0"),
    ({"rtt_ms": 5, "uplink_mbps": 5, "downlink_mbps": "fast"}, "cloud.downlink_mbps must be a number, got 'fast'"),
    ({"rtt_ms": 5, "uplink_mbps": 5, "downlink_mbps": 0},
     "cloud.downlink_mbps must be a link speed in Mbit/s, >= 0.001 and <= 1e+06, got 0"),
    ({"rtt_ms": 5, "uplink_mbps": 1e7},
     "cloud.uplink_mbps must be a link speed in Mbit/s, >= 0.001 and <= 1e+06, got 10000000.0"),
    ({"rtt_ms": 5, "uplink_mbps": 5, "latency_ms": {"m": 0}}, "cloud.latency_ms['m'] must be a latency in ms, > 0"),
    ({"rtt_ms": 5, "uplink_mbps": 5, "latency_ms": {"m": None}}, "cloud.latency_ms['m'] must be a number, got null"),
    ({"rtt_ms": 5, "uplink_mbps": 5, "input_bytes": [1]}, "cloud.input_bytes must be an object {model: bytes}, got a list"),
    ({"rtt_ms": 5, "uplink_mbps": 5, "output_bytes": 3}, "cloud.output_bytes must be an object {model: bytes}, got 3"),
    ({"rtt_ms": 5, "uplink_mbps": 5, "output_bytes": {"m": -1}},
     f"cloud.output_bytes['m'] must be a whole number of bytes, >= 0 and <= {MAX_BYTES}, got -1"),
    ({"rtt_ms": 5, "uplink_mbps": 5, "input_bytes": {"m": True}}, "cloud.input_bytes['m'] must be a whole number"),
    ({"rtt_ms": 5, "uplink_mbps": 5, "input_bytes": {"m": "8"}}, "cloud.input_bytes['m'] must be a whole number"),
    ({"rtt_ms": 5, "uplink_mbps": 5, "input_bytes": {"m": MAX_BYTES + 1}},
     f"cloud.input_bytes['m'] must be a whole number of bytes, >= 0 and <= {MAX_BYTES}, got 4294967297"),
], ids=["number", "no-rtt", "no-uplink", "rtt-str", "rtt-huge", "down-str", "down-zero", "up-huge", "lat-zero",
        "lat-null", "in-list", "out-num", "out-neg", "in-bool", "in-str", "in-huge"])
def test_bad_cloud_message(cloud: Any, message: str) -> None:
    msg = _error(_minimal(cloud=cloud))
    assert msg.startswith(f"profile p.json: {message}"), msg


@pytest.mark.parametrize(("field", "value"), [("rtt_ms", 0.0), ("rtt_ms", 1e6), ("uplink_mbps", 1e-3),
                                              ("uplink_mbps", 1e6), ("downlink_mbps", 1e-3), ("downlink_mbps", 1e6)])
def test_cloud_range_ends_are_accepted(field: str, value: float) -> None:
    cloud = DeviceProfile.from_json(_cloud(**{field: value})).cloud
    assert cloud is not None and getattr(cloud, field) == value


@pytest.mark.parametrize("value", [0, MAX_BYTES])
def test_byte_count_range_ends_are_accepted(value: int) -> None:
    cloud = DeviceProfile.from_json(_cloud(input_bytes={"m": value}, output_bytes={"m": value})).cloud
    assert cloud is not None and cloud.input_bytes == {"m": value} and cloud.output_bytes == {"m": value}


def test_a_missing_profile_is_named(tmp_path: Path) -> None:
    p = tmp_path / "none.json"
    with pytest.raises(TraceError) as info:
        DeviceProfile.load(p)
    assert str(info.value) == f"device profile {str(p)!r} not found"
