"""``edgert simulate``: flags of docs/design.md §5, outputs, bad input -> one line and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from edgert.cli import main


def _run(capsys, *argv):
    rc = main(["simulate", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_scenario_run_writes_json_timeline_and_plot(tmp_path, capsys):
    js, tl, png = tmp_path / "s.json", tmp_path / "t.json", tmp_path / "p.png"
    rc, out, err = _run(capsys, "--scenario", "ar_gaming", "--device", "xr2-gen2", "--scheduler", "round_robin",
                        "--load", "2", "--duration", "2", "--seed", "3", "--burst", "0.5:0.5:2",
                        "--json", str(js), "--timeline", str(tl), "--plot", str(png))
    assert rc == 0, err
    assert "hand_tracking" in out and "processors" in out and "wrote summary" in out
    s = json.loads(js.read_text())
    assert {"requests", "slo_met_rate", "dropped", "p50_ms", "p99_ms", "offloaded", "per_model",
            "per_processor", "realtime_score"} <= set(s)
    assert s["scheduler"] == "round_robin" and s["config"]["burst"] == {"start_s": 0.5, "duration_s": 0.5,
                                                                          "factor": 2.0}
    trace = json.loads(tl.read_text())
    names = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
    assert {"cpu", "gpu", "npu"} <= names
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("argv, msg", [
    (["--scenario", "ar_asistant", "--device", "pixel4"], "did you mean 'ar_assistant'"),
    (["--scenario", "ar_gaming", "--device", "pixle4"], "did you mean 'pixel4'"),
    (["--scenario", "ar_gaming", "--device", "pixel4", "--scheduler", "edgrt"], "did you mean 'edgert'"),
    (["--scenario", "ar_gaming", "--device", "pixel4", "--load", "0"], "--load must be > 0"),
    (["--scenario", "ar_gaming", "--device", "pixel4", "--burst", "1:2"], "START:DUR:FACTOR"),
    (["--trace", "/nonexistent/t.jsonl", "--device", "pixel4"], "not found"),
    (["--scenario", "ar_gaming", "--device", "pixel4", "--json", "/nonexistent/dir/s.json"], "does not exist"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, msg):
    rc, _, err = _run(capsys, *argv)
    assert rc == 2
    assert msg in err and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("edgert simulate: error: ")


def test_malformed_trace_names_file_and_line(tmp_path, capsys):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"t_ms": 0, "model": "hand_tracking"}\n{"t_ms": 1, "model": \n')
    rc, _, err = _run(capsys, "--trace", str(p), "--device", "galaxy-s23")
    assert rc == 2 and f"{p}:2: not valid JSON" in err and err.count("\n") == 1


def test_trace_model_missing_from_profile_fails_before_the_run(tmp_path, capsys):
    p = tmp_path / "t.jsonl"
    p.write_text('{"t_ms": 0, "model": "hand_tracking"}\n{"t_ms": 1, "model": "palm_detection"}\n')
    rc, out, err = _run(capsys, "--trace", str(p), "--device", "galaxy-s23")
    assert rc == 2 and "model 'palm_detection'" in err and f"{p}:2" in err and "requests" not in out


def test_scenario_and_trace_are_exclusive_and_one_is_required(capsys):
    # a usage error is one line and exit code 2 (edgert.cli.main returns it; the entry point exits with it)
    assert main(["simulate", "--device", "pixel4"]) == 2
    assert capsys.readouterr().err == ("edgert simulate: error: one of the arguments --scenario --trace is "
                                       "required (see `edgert simulate --help`)\n")
    assert main(["simulate", "--scenario", "ar_gaming", "--trace", "x.jsonl", "--device", "pixel4"]) == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_installed_command_end_to_end(tmp_path):
    js = tmp_path / "s.json"
    r = subprocess.run([sys.executable, "-m", "edgert.cli", "simulate", "--scenario", "vr_gaming", "--device",
                        "galaxy-s23", "--duration", "1", "--json", str(js)], capture_output=True, text=True,
                       timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    assert json.loads(js.read_text())["requests"] == 60 + 60 + 45
