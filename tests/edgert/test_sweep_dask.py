"""``edgert sweep --cluster``: the cells as tasks on a real Dask distributed scheduler (two local worker
processes over TCP) give the figures one process gives; a scheduler that is not there is one line."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd
import pytest

from edgert.cli import main
from edgert.sweep import _engine, load_grid, make_task, run_sweep, run_task, run_tasks

distributed = pytest.importorskip("distributed")

GRID = """
scenario = ["ar_gaming", "social_a"]
device = ["xr2-gen2", "profile.json"]
scheduler = ["edgert", "shortest_expected_latency"]
load = [1.5]
seed = [0, 7]
duration = 2
"""


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  host="127.0.0.1", silence_logs=logging.CRITICAL) as lc:
        yield lc.scheduler_address


def test_cells_on_a_dask_cluster_equal_cells_in_one_process(tmp_path: Path, cluster: str):
    # a profile the workers have no copy of: the task carries it (workers share no file system with us)
    from scheduler.sim.profiles import PROFILE_DIR

    (tmp_path / "profile.json").write_text((PROFILE_DIR / "pixel4.json").read_text())
    (tmp_path / "grid.toml").write_text(GRID)
    grid = load_grid(tmp_path / "grid.toml")
    here = run_sweep(grid, tmp_path / "here.csv", jobs=1)
    there = run_sweep(grid, tmp_path / "there.csv", cluster=cluster)
    assert here.ran == there.ran == 16 and not here.failed and not there.failed, there.failed
    a, b = (pd.read_csv(tmp_path / f).drop(columns="wall_s") for f in ("here.csv", "there.csv"))
    assert a.equals(b)
    assert set(a["device"]) == {"xr2-gen2", "profile.json"}
    # the file gone from here, the tasks made before still run there: they carry the profile's bytes
    tasks = [make_task(c) for c in grid.cells]
    (tmp_path / "profile.json").unlink()
    done = list(run_tasks(run_task, tasks, cluster=cluster))
    assert len(done) == 16 and all(d.error is None and d.value.error is None for d in done)


def test_a_cluster_that_does_not_answer_is_one_line(tmp_path: Path, capsys, monkeypatch):
    monkeypatch.setattr(_engine, "CONNECT_TIMEOUT_S", 1)
    (tmp_path / "grid.toml").write_text('scenario = "ar_gaming"\ndevice = "pixel4"\nduration = 1\n')
    rc = main(["sweep", str(tmp_path / "grid.toml"), "-o", str(tmp_path / "r.csv"), "--cluster", "tcp://127.0.0.1:9"])
    err = capsys.readouterr().err
    assert rc == 2 and "no Dask scheduler answered" in err and len(err.strip().splitlines()) == 1, err


def test_a_cluster_url_of_another_scheme_is_refused(tmp_path: Path, capsys):
    (tmp_path / "grid.toml").write_text('scenario = "ar_gaming"\ndevice = "pixel4"\nduration = 1\n')
    rc = main(["sweep", str(tmp_path / "grid.toml"), "-o", str(tmp_path / "r.csv"), "--cluster", "ray://x:1"])
    assert rc == 2 and "give a Dask scheduler's address" in capsys.readouterr().err
