"""apps.sst_sentiment end to end on a slice of SST, and the design §5 example on the default runtime."""

from __future__ import annotations

import json

import numpy as np

import recursion
from recursion.data import SST_DIR
from apps import sst_sentiment
from recursion.models import ChildSumTreeLSTM

SST = SST_DIR


def test_app_runs_and_reports(tmp_path, capsys) -> None:
    out = tmp_path / "sst.json"
    code = sst_sentiment.main(["--limit", "40", "--hidden", "12", "--input", "16", "--fit-readout",
                               "--workers", "2", "--json", str(out), "--examples", "2"])
    assert code == 0
    report = json.loads(out.read_text())
    assert report["sentences"] == 40 and len(report["predictions"]) == 40
    # the reported accuracies are the predictions scored against SST's gold labels
    pred = np.array(report["predictions"])
    gold = np.array([int(t.label) for t in sst_sentiment.load_split(SST, "test", 40)])
    assert set(pred.tolist()) <= set(range(5))
    assert report["accuracy_5class"] == float((pred == gold).mean())
    polar = gold != 2
    assert report["accuracy_binary"] == float(((pred[polar] >= 3) == (gold[polar] >= 3)).mean())
    assert set(report["by_processor"]) <= {"cpu0", "cpu1"} and sum(report["by_processor"].values()) > 0
    assert "accuracy: 5-class" in capsys.readouterr().out


def test_app_missing_data_is_a_clear_error(tmp_path, capsys) -> None:
    assert sst_sentiment.main(["--data", str(tmp_path)]) == 2
    assert "SST split not found" in capsys.readouterr().err


def test_design_example_on_the_default_runtime(tmp_path) -> None:
    """design §5: parse_ptb lines, ChildSumTreeLSTM.from_npz, encode -> [len(trees), hidden]."""
    with open(SST / "test.txt") as f:
        trees = [recursion.parse_ptb(next(f)) for _ in range(10)]
    words = sorted({w for t in trees for w in t.leaves()})
    ChildSumTreeLSTM.random(words, input_dim=8, hidden=6).save_npz(tmp_path / "weights.npz")
    model = ChildSumTreeLSTM.from_npz(tmp_path / "weights.npz")
    H = model.encode(trees)
    assert H.shape == (10, 6) and np.isfinite(H).all()
