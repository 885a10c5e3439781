"""Request traces field by field (scheduler/sim/trace.py, docs/design.md §6): each field's default, the inclusive
ends of its range, the exact message naming ``file:line`` when it is wrong, the seeded ``p`` draws, the sort
into time order and what ``write_trace`` writes.

``tests/inputs/test_traces.py`` covers one bad value per field through the CLI and the parser's linear time;
this module pins the edges and defaults it leaves open.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scheduler.errors import TraceError
from scheduler.sim.columns import Request
from scheduler.sim.trace import (
    MAX_FRAME,
    MAX_LINE_BYTES,
    MAX_MS,
    parse_trace,
    read_trace,
    write_trace,
)


def _line(**fields: Any) -> str:
    return json.dumps({"t_ms": 1.0, "model": "m", **fields})


def _error(*lines: str, name: str = "t.jsonl") -> str:
    with pytest.raises(TraceError) as info:
        parse_trace(list(lines), name)
    return str(info.value)


# -- defaults --

def test_optional_fields_default_as_documented() -> None:
    wl = parse_trace([_line()], "t.jsonl")
    assert wl.name == "trace t.jsonl"
    assert wl.keys == ["line1"] and wl.streams == ["m"] and wl.models == ["m"]
    assert wl.frame.tolist() == [-1] and wl.parent.tolist() == [-1]
    assert wl.p.tolist() == [1.0] and math.isinf(wl.slo_ms[0]) and wl.fires.tolist() == [True]


def test_default_name_in_messages_is_trace() -> None:
    with pytest.raises(TraceError, match=r"^<trace>:1: missing 't_ms' \(a number of ms\)$"):
        parse_trace(['{"model": "m"}'])


def test_streams_and_models_are_numbered_in_order_of_first_use() -> None:
    wl = parse_trace([_line(stream="a"), _line(stream="b", model="n"), _line(stream="a")])
    assert wl.streams == ["a", "b"] and wl.stream.tolist() == [0, 1, 0]
    assert wl.models == ["m", "n"] and wl.model.tolist() == [0, 1, 0]


# -- the ranges' ends --

@pytest.mark.parametrize("fields", [{"t_ms": MAX_MS}, {"t_ms": 0}, {"slo_ms": MAX_MS}, {"slo_ms": 0.5},
                                    {"frame": MAX_FRAME}, {"frame": 0}, {"p": 0}, {"p": 1}],
                         ids=["t-max", "t-zero", "slo-max", "slo-half", "frame-max", "frame-zero", "p-0", "p-1"])
def test_range_ends_are_accepted(fields: dict[str, Any]) -> None:
    wl = parse_trace([_line(**fields)])
    (key, value), = fields.items()
    column = {"t_ms": wl.t_ms, "slo_ms": wl.slo_ms, "frame": wl.frame, "p": wl.p}[key]
    assert column.tolist() == [value]


@pytest.mark.parametrize(("fields", "message"), [
    ({"slo_ms": -1}, "slo_ms must be > 0 and <= 1e+10 ms, got -1"),
    ({"slo_ms": 0}, "slo_ms must be > 0 and <= 1e+10 ms, got 0"),
    ({"p": 2}, "p must be in [0, 1], got 2"),
    ({"p": "x"}, "p must be a number, got 'x'"),
    ({"id": [1]}, "id must be a string, got [1]"),
    ({"frame": -2}, "frame must be an integer >= 0, got -2"),
    ({"frame": MAX_FRAME + 1}, f"frame must be an integer >= 0, got {MAX_FRAME + 1}"),
    ({"model": 5}, "missing or empty 'model' (a model name string)"),
    ({"model": ""}, "missing or empty 'model' (a model name string)"),
    ({"arrival_ms": "x"}, "arrival_ms must be a number, got 'x'"),
], ids=["slo-neg", "slo-zero", "p-2", "p-str", "id-list", "frame-neg", "frame-huge", "model-int", "model-empty",
        "arrival-str"])
def test_bad_field_message_names_file_and_line(fields: dict[str, Any], message: str) -> None:
    assert _error(_line(id="ok"), _line(**fields)) == f"t.jsonl:2: {message}"


@pytest.mark.parametrize(("value", "shown"), [("x" * 38, repr("x" * 38)), ("x" * 39, repr("x" * 39)[:37] + "...")],
                         ids=["repr-40", "repr-41"])
def test_values_are_echoed_up_to_40_characters(value: str, shown: str) -> None:
    assert _error(_line(frame=value)) == f"t.jsonl:1: frame must be an integer >= 0, got {shown}"


# -- arrival_ms: a live run's first stage arrives when the app submitted it --

def test_arrival_at_the_largest_time_is_used() -> None:
    wl = parse_trace([_line(t_ms=MAX_MS - 10, slo_ms=100.0, arrival_ms=MAX_MS)])
    assert wl.t_ms.tolist() == [MAX_MS] and wl.slo_ms.tolist() == [90.0]


def test_arrival_past_the_largest_time_is_ignored() -> None:
    wl = parse_trace([_line(t_ms=5.0, slo_ms=100.0, arrival_ms=MAX_MS * 2)])
    assert wl.t_ms.tolist() == [5.0] and wl.slo_ms.tolist() == [100.0]


# -- the p draws: default_rng([seed, 3]), one draw per line in line order --

def _coin_lines(n: int) -> list[str]:
    return [_line(t_ms=float(i), id=f"r{i}", p=0.5) for i in range(n)]


def test_p_draws_come_from_the_documented_seeded_generator(tmp_path: Path) -> None:
    lines = _coin_lines(64)
    expected = {seed: (np.random.default_rng([seed, 3]).random(64) < 0.5).tolist() for seed in (0, 7)}
    assert expected[0] != expected[7]
    assert parse_trace(lines).fires.tolist() == expected[0]
    assert parse_trace(lines, seed=7).fires.tolist() == expected[7]
    p = tmp_path / "t.jsonl"
    p.write_text("\n".join(lines) + "\n")
    assert read_trace(p).fires.tolist() == expected[0]
    assert read_trace(p, seed=7).fires.tolist() == expected[7]


def test_a_stage_after_a_first_line_that_does_not_fire_does_not_fire() -> None:
    wl = parse_trace([_line(t_ms=0.0, id="a", p=0.0), _line(t_ms=1.0, id="b", after="a")])
    assert wl.fires.tolist() == [False, False] and wl.parent.tolist() == [-1, 0]


# -- sorting into time order --

def test_two_lines_out_of_order_are_sorted() -> None:
    wl = parse_trace([_line(t_ms=2.0, id="late"), _line(t_ms=1.0, id="early")])
    assert wl.keys == ["early", "late"] and wl.t_ms.tolist() == [1.0, 2.0]


def test_a_line_earlier_than_its_predecessor_but_not_the_first_is_sorted() -> None:
    wl = parse_trace([_line(t_ms=t, id=f"r{t:g}") for t in (0.0, 5.0, 3.0)])
    assert wl.keys == ["r0", "r3", "r5"]


def test_ties_keep_line_order_and_links_follow_the_renumbering() -> None:
    """Many equal times out of order: a stable sort keeps file order among ties, and a link follows its parent."""
    lines = [_line(t_ms=float((59 - i) % 3), id=f"r{i}") for i in range(60)]
    lines.append(_line(t_ms=1.5, id="child", after="r0", frame=3))
    wl = parse_trace(lines)
    order = sorted(range(60), key=lambda i: ((59 - i) % 3, i))
    assert [k for k in wl.keys if k != "child"] == [f"r{i}" for i in order]
    child = wl.keys.index("child")
    assert wl.keys[wl.parent[child]] == "r0" and wl.frame[child] == 3


def test_a_child_of_the_first_line_keeps_its_link_when_lines_are_reordered() -> None:
    wl = parse_trace([_line(t_ms=5.0, id="root"), _line(t_ms=6.0, id="child", after="root"),
                      _line(t_ms=1.0, id="early")])
    assert wl.keys == ["early", "root", "child"] and wl.parent.tolist() == [-1, -1, 1]


def test_unknown_after_names_the_file_and_the_line() -> None:
    assert _error(_line(id="a"), _line(id="b", after="zz"), name="f.jsonl") == (
        "f.jsonl:2: 'after' names id 'zz', which no line of the trace has")


# -- reading the file --

def test_a_line_of_exactly_the_longest_length_is_read(tmp_path: Path) -> None:
    body = _line(id="a", pad="")
    line = body[:-2] + " " * (MAX_LINE_BYTES - len(body) - 1) + body[-2:] + "\n"
    assert len(line.encode()) == MAX_LINE_BYTES
    p = tmp_path / "t.jsonl"
    p.write_text(line)
    assert read_trace(p).keys == ["a"]


def test_not_utf8_message_says_how_to_fix_it(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_bytes(b"\xff\n")
    with pytest.raises(TraceError) as info:
        read_trace(p)
    assert str(info.value) == f"{p}:1: not UTF-8 text (byte 0 of the line); save the trace as UTF-8 JSONL"


# -- writing --

def test_write_trace_skips_requests_that_do_not_fire_and_writes_the_rest(tmp_path: Path) -> None:
    root = Request(0, "a", 0.0, "m", 10.0, "s", frame=0)
    reqs = [root,
            Request(1, "b", 1.0, "m", 10.0, "s", frame=1, parent=root, p=0.5, fires=False),
            Request(2, "c", 2.0, "n", math.inf, "t", frame=-1, parent=root),
            Request(3, None, 3.0, "m", 10.0, "s", frame=2)]
    p = tmp_path / "out.jsonl"
    assert write_trace(p, reqs) == 3
    assert [json.loads(x) for x in p.read_text().splitlines()] == [
        {"t_ms": 0.0, "model": "m", "id": "a", "slo_ms": 10.0, "stream": "s", "frame": 0},
        {"t_ms": 2.0, "model": "n", "id": "c", "after": "a", "stream": "t"},
        {"t_ms": 3.0, "model": "m", "id": "s/2", "slo_ms": 10.0, "stream": "s", "frame": 2},
    ]


def test_a_missing_trace_is_named(tmp_path: Path) -> None:
    p = tmp_path / "none.jsonl"
    with pytest.raises(TraceError) as info:
        read_trace(p)
    assert str(info.value) == f"trace file {str(p)!r} not found"


class BrokenFileDouble:
    """Test double for an opened trace whose reads fail (a disk error half way through)."""

    def __init__(self, exc: OSError) -> None:
        self.exc = exc

    def __enter__(self) -> BrokenFileDouble:  # noqa: PYI034 - a plain test double
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def readline(self, size: int = -1) -> bytes:
        raise self.exc


@pytest.mark.parametrize(("exc", "why"), [(OSError(5, "Input/output error"), "Input/output error"),
                                          (OSError("device gone"), "device gone")], ids=["strerror", "bare"])
def test_a_read_error_is_one_trace_error(exc: OSError, why: str, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from scheduler.sim import trace
    monkeypatch.setattr(trace, "open_input", lambda p, what, suffix: BrokenFileDouble(exc))
    p = tmp_path / "t.jsonl"
    with pytest.raises(TraceError) as info:
        read_trace(p)
    assert str(info.value) == f"cannot read trace file {str(p)!r}: {why}"
