"""Issue #16, traces: bad values are one TraceError line naming file:line; parsing streams, linear in lines."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from edgert.cli import main
from scheduler.errors import TraceError
from scheduler.sim.trace import MAX_LINE_BYTES, parse_trace, read_trace

GOOD = {"t_ms": 0.0, "model": "hand_tracking", "id": "a"}


@pytest.mark.parametrize(("line", "message"), [
    ('{"t_ms": Infinity, "model": "hand_tracking"}', "t_ms must be a finite number, got inf"),
    ('{"t_ms": NaN, "model": "hand_tracking"}', "t_ms must be a finite number, got nan"),
    ('{"t_ms": 1e300, "model": "hand_tracking"}', "t_ms must be >= 0 and <= 1e+10 ms, got 1e+300"),
    ('{"t_ms": ' + "9" * 400 + ', "model": "hand_tracking"}', "t_ms must be a finite number, got 9999"),
    ('{"t_ms": 1, "model": "hand_tracking", "slo_ms": Infinity}', "slo_ms must be a finite number, got inf"),
    ('{"t_ms": 1, "model": "hand_tracking", "frame": 1e3}', "frame must be an integer >= 0, got 1000.0"),
    ('{"t_ms": 1, "model": "hand_tracking", "frame": ' + "9" * 30 + "}", "frame must be an integer >= 0"),
    ('{"t_ms": 1, "model": "hand_tracking", "stream": {}}', "stream must be a string, got {}"),
    ('{"t_ms": 1, "model": "hand_tracking", "after": true}', "after must be the id of another line, got True"),
    ("[" * 100_000, "JSON nested too deeply"),
], ids=["inf", "nan", "1e300", "400-digit", "slo-inf", "frame-float", "frame-huge", "stream-obj", "after-bool",
        "deep"])
def test_bad_value_is_one_line_naming_file_and_line(line: str, message: str, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps(GOOD) + "\n" + line + "\n")
    with pytest.raises(TraceError) as info:
        read_trace(p)
    assert str(info.value).startswith(f"{p}:2: ") and message in str(info.value)
    assert len(str(info.value)) < 200   # a 300-digit number is not echoed whole
    assert main(["simulate", "--trace", str(p), "--device", "galaxy-s23"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


@pytest.mark.parametrize(("content", "message"), [
    ('{"t_ms": 0, "model": "h"}\n'.encode("utf-16"), "t.jsonl:1: not UTF-8 text (byte 0 of the line)"),
    (b'{"t_ms": 0, "model": "h"}\n\xff\xfe\n', "t.jsonl:2: not UTF-8 text"),
    (b" " * (MAX_LINE_BYTES + 10), f"t.jsonl:1: line longer than {MAX_LINE_BYTES} bytes"),
], ids=["utf-16", "binary", "long-line"])
def test_unreadable_file_is_one_line(content: bytes, message: str, tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_bytes(content)
    with pytest.raises(TraceError, match=re.escape(message)):
        read_trace(p)


def test_directory_is_named_a_directory(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="is a directory; give a .jsonl file"):
        read_trace(tmp_path)


def _chain(n: int, forward: bool = False) -> list[str]:
    lines = []
    for i in range(n):
        line = {"t_ms": i * 0.5, "model": "palm" if i % 2 else "hand", "id": f"r{i}", "p": 1.0}
        if i:
            line["after"] = f"r{i - 1}"
        lines.append(json.dumps(line))
    return lines[::-1] if forward else lines


@pytest.mark.timeout(60)
@pytest.mark.parametrize("forward", [False, True], ids=["backward-links", "forward-links"])
def test_long_after_chain_parses_in_linear_time(forward: bool) -> None:
    small, big = 5_000, 50_000
    t = time.perf_counter()
    parse_trace(_chain(small, forward))
    t_small = time.perf_counter() - t
    t = time.perf_counter()
    wl = parse_trace(iter(_chain(big, forward)))   # any iterable of lines: streamed, never held
    t_big = time.perf_counter() - t
    assert len(wl) == big and int((wl.parent >= 0).sum()) == big - 1
    assert wl.parent.tolist() == [-1, *range(big - 1)]   # renumbered in time order
    # quadratic parsing took 100x for 10x the lines; linear is ~10x (generous for a shared host)
    assert t_big < 40 * t_small + 1.0


def test_an_upstream_that_does_not_fire_stops_its_whole_chain() -> None:
    lines = _chain(1_000)
    lines[500] = lines[500].replace('"p": 1.0', '"p": 0.0')
    wl = parse_trace(lines)
    assert wl.fires.tolist() == [True] * 500 + [False] * 500


def test_unsorted_trace_is_sorted_by_time_then_line() -> None:
    wl = parse_trace([json.dumps({"t_ms": t, "model": "m", "id": k, **({"after": a} if a else {})})
                      for t, k, a in ((5.0, "b", "a"), (1.0, "a", None), (5.0, "c", None), (0.0, "d", None))])
    assert wl.keys == ["d", "a", "b", "c"] and wl.parent.tolist() == [-1, -1, 1, -1]
