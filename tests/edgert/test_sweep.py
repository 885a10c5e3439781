"""``edgert sweep``: a grid checked before anything runs, rows equal to ``edgert simulate --json``'s,
the same figures on any number of processes, resuming, failed cells recorded, per-model rows, Parquet."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from edgert.cli import main
from edgert.sweep import FIGURES, best_policies, load_grid, run_sweep

SMALL = """
scenario = ["ar_gaming", "social_a"]
device = ["galaxy-s23", "pixel4"]
scheduler = ["edgert", "fixed_worker"]
load = [1, 2.5]
seed = [3]
duration = 2
"""


def _grid(tmp_path: Path, text: str, name: str = "grid.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _sweep(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["sweep", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _figures(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=["wall_s"]).reset_index(drop=True)


@pytest.mark.parametrize("text, msg", [
    ("scenario = ['ar_gaming']\ndevice = ['pixel4']\nschedulr = ['edgert']", "unknown key 'schedulr'; did you mean 'scheduler'"),
    ("scenario = ['ar_gaming']\ndevice = ['pixel4']\nscheduler = ['edgert', 'round_robn']",
     "unknown scheduler 'round_robn'; did you mean 'round_robin'"),
    ("scenario = ['ar_gamin']\ndevice = ['pixel4']", "unknown scenario 'ar_gamin'; did you mean 'ar_gaming'"),
    ("scenario = ['ar_gaming']\ndevice = ['pixle4']", "unknown device profile 'pixle4'; did you mean 'pixel4'"),
    ("scenario = ['ar_gaming']\ndevice = ['pixel4']\nobjective = ['speed']", "unknown objective 'speed'"),
    ("scenario = ['ar_gaming']\ndevice = ['pixel4']\nload = [1, -2]", "load must be a number > 0 and <= 1000, got -2"),
    ("scenario = ['ar_gaming']\ndevice = ['pixel4']\nseed = [1.5]", "seed must be a whole number >= 0, got 1.5"),
    ("scenario = ['ar_gaming']\ndevice = ['pixel4']\nburst = ['4:2']", "bad --burst '4:2'"),
    ("scenario = ['ar_gaming']\ndevice = ['pixel4']\nduration = 'long'", "duration must be a number > 0"),
    ("scenario = ['ar_gaming']\ndevice = ['pixel4']\ntrace = ['t.jsonl']", "give one of scenario = [...] or trace"),
    ("scenario = ['ar_gaming']\ndevice = ['pixel4']\nseed = [1, 1]", "seed lists 1 twice"),
    ("scenario = ['ar_gaming'\n", "is not TOML"),
    ("scenario = ['ar_gaming']\ndevice = ['pixel4']\nseed = [1979-05-27]", "seed holds datetime.date(1979, 5, 27)"),
])
def test_a_bad_grid_is_one_line_naming_it_and_nothing_runs(tmp_path, capsys, text, msg):
    out = tmp_path / "r.csv"
    rc, _, err = _sweep(capsys, str(_grid(tmp_path, text)), "-o", str(out))
    assert rc == 2
    assert len(err.strip().splitlines()) == 1 and msg in err, err
    assert not out.exists()


def test_rows_hold_the_params_as_written_and_simulate_json_figures(tmp_path, capsys):
    out = tmp_path / "r.csv"
    rc, stdout, err = _sweep(capsys, str(_grid(tmp_path, SMALL)), "-o", str(out), "--jobs", "1")
    assert rc == 0, err
    df = pd.read_csv(out)
    assert list(df.columns[:6]) == ["scenario", "device", "scheduler", "load", "seed", "duration"]
    assert set(FIGURES) <= set(df.columns) and len(df) == 16 and not df["error"].notna().any()
    assert sorted(df["load"].unique()) == [1, 2.5]
    assert "best policy per workload and device" in stdout and "16 cells: 16 ran" in stdout
    js = tmp_path / "s.json"
    assert main(["simulate", "--scenario", "social_a", "--device", "pixel4", "--scheduler", "edgert", "--load", "2.5",
                 "--seed", "3", "--duration", "2", "--json", str(js)]) == 0
    capsys.readouterr()
    s = json.loads(js.read_text())
    row = df[(df.scenario == "social_a") & (df.device == "pixel4") & (df.scheduler == "edgert") & (df.load == 2.5)]
    assert len(row) == 1
    r = row.iloc[0]
    for k in ("requests", "ok", "late", "dropped", "slo_met_rate", "p50_ms", "p99_ms", "realtime_score", "offloaded"):
        assert r[k] == s[k], k
    assert r["energy_mj.total_mj"] == s["energy_mj"]["total_mj"] and r["xrbench.score"] == s["xrbench"]["score"]


def test_figures_are_the_same_on_one_and_on_two_processes(tmp_path):
    grid = load_grid(_grid(tmp_path, SMALL))
    one = run_sweep(grid, tmp_path / "one.csv", jobs=1)
    two = run_sweep(grid, tmp_path / "two.csv", jobs=2)
    assert one.ran == two.ran == 16 and not one.failed and not two.failed
    assert _figures(pd.read_csv(tmp_path / "one.csv")).equals(_figures(pd.read_csv(tmp_path / "two.csv")))


def test_a_rerun_resumes_and_a_new_output_computes_every_cell(tmp_path, capsys):
    grid = _grid(tmp_path, SMALL)
    out = tmp_path / "r.csv"
    assert _sweep(capsys, str(grid), "-o", str(out), "--jobs", "1")[0] == 0
    first = pd.read_csv(out)
    rc, stdout, _ = _sweep(capsys, str(grid), "-o", str(out), "--jobs", "1")
    assert rc == 0 and "0 ran on 1 process(es), 16 resumed" in stdout
    assert pd.read_csv(out).equals(first)
    # a grid that grows keeps the cells it had and runs only the new ones
    _grid(tmp_path, SMALL.replace("seed = [3]", "seed = [3, 4]"))
    rc, stdout, _ = _sweep(capsys, str(grid), "-o", str(out), "--jobs", "1")
    assert rc == 0 and "16 ran on 1 process(es), 16 resumed" in stdout
    rc, stdout, _ = _sweep(capsys, str(grid), "-o", str(tmp_path / "new.csv"), "--jobs", "1")
    assert rc == 0 and "32 ran" in stdout


def test_an_output_of_another_sweep_is_refused_not_overwritten(tmp_path, capsys):
    out = tmp_path / "r.csv"
    out.write_text("a,b\n1,2\n")
    rc, _, err = _sweep(capsys, str(_grid(tmp_path, SMALL)), "-o", str(out))
    assert rc == 2 and "holds another sweep" in err and out.read_text() == "a,b\n1,2\n"


def test_a_cell_that_raises_is_recorded_and_the_sweep_goes_on(tmp_path, capsys):
    good = '{"t_ms": 0, "model": "hand_tracking", "slo_ms": 22}\n{"t_ms": 22, "model": "hand_tracking", "slo_ms": 22}\n'
    (tmp_path / "good.jsonl").write_text(good)
    (tmp_path / "bad.jsonl").write_text(good + "{not json\n")
    grid = _grid(tmp_path, 'trace = ["good.jsonl", "bad.jsonl"]\ndevice = ["pixel4"]\nscheduler = ["round_robin"]\n')
    out = tmp_path / "r.csv"
    rc, _, err = _sweep(capsys, str(grid), "-o", str(out), "--jobs", "2")
    assert rc == 1 and "1 of 2 cells failed" in err and "cell trace=bad.jsonl" in err
    df = pd.read_csv(out)
    assert df.loc[0, "requests"] == 2 and pd.isna(df.loc[0, "error"])
    assert pd.isna(df.loc[1, "requests"]) and "bad.jsonl:3" in df.loc[1, "error"]
    # the rerun retries the failed cell only
    rc, stdout, _ = _sweep(capsys, str(grid), "-o", str(out), "--jobs", "1")
    assert rc == 1 and "1 ran on 1 process(es), 1 resumed" in stdout


def test_per_model_adds_a_row_per_cell_and_model(tmp_path, capsys):
    grid = _grid(tmp_path, 'scenario = "ar_gaming"\ndevice = "pixel4"\nseed = [0, 1]\nduration = 1\n')
    rc, _, err = _sweep(capsys, str(grid), "-o", str(tmp_path / "r.csv"), "--per-model", "--jobs", "1")
    assert rc == 0, err
    df = pd.read_csv(tmp_path / "r.csv")
    assert list(df["model"][:4]) == ["all", "depth_estimation", "hand_tracking", "plane_detection"]
    cell = df[df.model == "all"].set_index("seed")["requests"]
    assert (df[df.model != "all"].groupby("seed")["requests"].sum() == cell).all()


def test_parquet_output_loads_in_pandas(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    grid = _grid(tmp_path, 'scenario = "ar_gaming"\ndevice = "pixel4"\nburst = [false, "0.2:0.2:2"]\nduration = 1\n')
    out = tmp_path / "r.parquet"
    assert _sweep(capsys, str(grid), "-o", str(out), "--jobs", "1")[0] == 0
    df = pd.read_parquet(out)
    assert len(df) == 2 and list(df["burst"]) == ["false", "0.2:0.2:2"] and df["requests"][1] > df["requests"][0]
    assert "2 cells: 0 ran" in _sweep(capsys, str(grid), "-o", str(out))[1] and pd.read_parquet(out).equals(df)


@pytest.mark.slow
def test_ctrl_c_keeps_the_finished_cells_and_a_rerun_finishes_the_grid(tmp_path):
    # cells long enough that Ctrl-C lands mid-grid: 10 s cells finished all 32 within one poll on an idle host
    grid = _grid(tmp_path, SMALL.replace("duration = 2", "duration = 200").replace("seed = [3]", "seed = [0, 1]"))
    out = tmp_path / "r.csv"
    cmd = [sys.executable, "-m", "edgert.cli", "sweep", str(grid), "-o", str(out), "--jobs", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while not out.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)   # as a terminal's Ctrl-C: the whole process group
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the sweep finished before Ctrl-C reached it")
    assert proc.returncode == 130, err
    kept = pd.read_csv(out)
    assert 0 < len(kept) < 32 and "run the same command again to resume" in err
    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0 and f"{len(kept)} resumed" in rerun.stdout, rerun.stderr
    assert len(pd.read_csv(out)) == 32


def test_best_policy_table_and_heatmap_read_rows_as_pandas_gives_them(tmp_path, capsys):
    grid = _grid(tmp_path, 'scenario = "social_a"\ndevice = "pixel4"\nscheduler = ["edgert", "fixed_worker"]\n'
                           'objective = ["deadlines"]\nload = [1.5]\nduration = 5\n')
    png = tmp_path / "h.png"
    rc, out, err = _sweep(capsys, str(grid), "-o", str(tmp_path / "r.csv"), "--jobs", "1", "--plot", str(png))
    assert rc == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    df = pd.read_csv(tmp_path / "r.csv")
    assert df["objective"].isna().tolist() == [False, True]   # fixed_worker has no objective
    best = best_policies(df.to_dict("records"))   # empty fields are NaN here, "" from csv
    met = dict(zip(df["scheduler"], df["ok"] / df["requests"]))
    assert len(best) == 1 and best[0].met == max(met.values())
    assert {best[0].policy, best[0].runner_up} == {"edgert/deadlines", "fixed_worker"}
    assert best[0].policy in out.split("best policy per workload and device")[1]


#: An import finder refusing pyarrow and distributed, as an install without edgert[parquet] / [cluster] does.
WITHOUT_EXTRAS = """
import importlib.abc, sys
class _Without(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pyarrow", "distributed", "dask"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, _Without())
from edgert.cli import main
"""


def test_parquet_and_cluster_name_their_extra_when_it_is_missing(tmp_path):
    grid = _grid(tmp_path, 'scenario = "ar_gaming"\ndevice = "pixel4"\nduration = 1\n')
    code = WITHOUT_EXTRAS + (f"print(main(['sweep', {str(grid)!r}, '-o', {str(tmp_path / 'r.parquet')!r}]))\n"
                             f"print(main(['sweep', {str(grid)!r}, '-o', {str(tmp_path / 'r.csv')!r}, "
                             "'--cluster', 'tcp://127.0.0.1:8786']))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.split() == ["2", "2"], proc.stderr
    assert proc.stderr.splitlines() == ["edgert: error: -o F.parquet needs pyarrow: pip install 'edgert[parquet]'",
                                        "edgert: error: --cluster needs dask[distributed]: pip install 'edgert[cluster]'"]
    assert not (tmp_path / "r.parquet").exists() and not (tmp_path / "r.csv").exists()


def test_progress_is_a_line_per_tenth_when_piped_and_a_bar_with_an_eta_on_a_terminal():
    import io

    from edgert.cli._progress import Progress

    class TerminalDouble(io.StringIO):   # a test double: a stream that says it is a terminal
        def isatty(self) -> bool:
            return True

    piped = io.StringIO()
    with Progress("sweep", stream=piped, eta=True, steps=10) as bar:
        for done in range(1, 33):
            bar.update(done / 32, f"{done}/32 cells")
    lines = piped.getvalue().splitlines()
    assert len(lines) == 10 and lines[-1].startswith("sweep: 100% after") and lines[-1].endswith("32/32 cells")
    assert "ETA" in lines[0] and "ETA" not in lines[-1]
    tty = TerminalDouble()
    bar = Progress("sweep", stream=tty, eta=True, steps=10)
    bar.update(0.5, "16/32 cells")
    assert "[##########----------]  50%" in tty.getvalue() and ", ETA " in tty.getvalue()
