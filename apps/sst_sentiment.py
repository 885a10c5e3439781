"""Sentiment over the Stanford Sentiment Treebank with a recursive tree model on edgert.

Reads SST trees (``recursion/data/sst/{train,dev,test}.txt``, shipped with the package), encodes every
sentence with a tree model (Child-Sum TreeLSTM by default) whose cells run as
batched requests on an ``edgert.Runtime``, and classifies the root states
into the 5 SST classes (0 very negative … 4 very positive).

Weights: ``--weights W.npz`` (the model's keys, see ``recursion.models``;
optionally ``W_s`` [H, 5] and ``b_s`` [5] for the classifier), or random
weights. With random weights, ``--fit-readout`` fits the classifier (ridge
regression, closed form, no training loop) on the encoded roots of the train
split: random recursive features with a fitted linear readout, a quick
baseline that shows the whole pipeline end to end (not a trained TreeLSTM).

    python -m apps.sst_sentiment --split test --fit-readout
    python -m apps.sst_sentiment --weights my_tree_lstm.npz --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import edgert
from recursion import Forest, read_ptb
from recursion.data import SST_DIR
from recursion.models import RNTN, BinaryTreeLSTM, ChildSumTreeLSTM, TreeRNN

MODELS = {"child-sum": ChildSumTreeLSTM, "binary": BinaryTreeLSTM, "tree-rnn": TreeRNN, "rntn": RNTN}
CLASSES = ("very negative", "negative", "neutral", "positive", "very positive")
DEFAULT_DATA = SST_DIR


def load_split(data: Path, split: str, limit: int | None = None):
    """Trees of ``split`` (train/dev/test); raises FileNotFoundError naming the path."""
    path = data / f"{split}.txt"
    if not path.exists():
        raise FileNotFoundError(f"SST split not found: {path} (pass --data DIR with train.txt/dev.txt/test.txt)")
    lines = path.read_text().splitlines()
    return read_ptb(lines[:limit] if limit else lines)


def fit_readout(states: np.ndarray, labels: np.ndarray, l2: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Ridge regression onto one-hot labels: returns W_s [H, 5], b_s [5]."""
    X = np.hstack([states.astype(np.float64), np.ones((len(states), 1))])
    Y = np.eye(len(CLASSES))[labels]
    gram = X.T @ X + l2 * np.eye(X.shape[1])
    Wb = np.linalg.solve(gram, X.T @ Y)
    return Wb[:-1].astype(np.float32), Wb[-1].astype(np.float32)


def softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="sst_sentiment", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="directory with train.txt/dev.txt/test.txt")
    ap.add_argument("--split", default="test", choices=("train", "dev", "test"))
    ap.add_argument("--model", default="child-sum", choices=sorted(MODELS))
    ap.add_argument("--weights", type=Path, help=".npz weights (default: random)")
    ap.add_argument("--hidden", type=int, default=150, help="hidden size for random weights")
    ap.add_argument("--input", type=int, default=300, help="embedding size for random weights")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fit-readout", action="store_true", help="fit the classifier on the train roots")
    ap.add_argument("--workers", type=int, default=None, help="CPU workers of the runtime (default: one per core)")
    ap.add_argument("--limit", type=int, default=None, help="only the first N sentences of each split")
    ap.add_argument("--examples", type=int, default=5, help="print this many example predictions")
    ap.add_argument("--json", type=Path, help="write the figures here")
    return ap


def _readout(model: Any, train: list, args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray, str]:
    """The sentiment readout (W_s [H, 5], b_s [5]) and where it came from: the weights file, a ridge
    fit on the training roots (``--fit-readout``), or random."""
    w = model.weights
    if "W_s" in w and "b_s" in w:
        return w["W_s"], w["b_s"], "from weights"
    if args.fit_readout:
        t = time.perf_counter()
        labels = np.array([int(tr.label) for tr in train])
        W_s, b_s = fit_readout(model.encode(train), labels)
        return W_s, b_s, f"ridge fit on the roots of {len(labels)} train sentences in {time.perf_counter() - t:.1f} s"
    H = model.hidden
    rng = np.random.default_rng(args.seed + 1)
    return rng.normal(0, 1 / np.sqrt(H), (H, 5)).astype(np.float32), np.zeros(5, np.float32), "random"


def main(argv: list[str] | None = None) -> int:
    """Run the app; returns the process exit code."""
    args = build_parser().parse_args(argv)
    try:
        trees = load_split(args.data, args.split, args.limit)
        train = load_split(args.data, "train", args.limit) if args.fit_readout else []
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cls = MODELS[args.model]
    with edgert.Runtime(delegates=["ort-cpu"], cpu_workers=args.workers) as rt:
        if args.weights:
            model = cls.from_npz(args.weights, runtime=rt)
        else:
            vocab = sorted({w for t in [*trees, *train] for w in t.leaves()})
            model = cls.random(vocab, input_dim=args.input, hidden=args.hidden, seed=args.seed, runtime=rt)
        H = model.hidden
        W_s, b_s, readout = _readout(model, train, args)
        t = time.perf_counter()
        roots = model.encode(trees)
        wall_ms = (time.perf_counter() - t) * 1e3
        stats = model.executor.last_stats
        probs = softmax(roots @ W_s + b_s)
        pred = probs.argmax(axis=1)
        gold = np.array([int(tr.label) for tr in trees])
        fine = float((pred == gold).mean())
        polar = gold != 2
        binary = float(((pred[polar] >= 3) == (gold[polar] >= 3)).mean()) if polar.any() else float("nan")
        by_proc: dict[str, int] = {}
        for s in rt.stats().values():
            for p, k in s["by_processor"].items():
                by_proc[p] = by_proc.get(p, 0) + k

    n_nodes = Forest.from_trees(trees).n
    print(f"{args.model} H={H} on SST {args.split}: {len(trees)} sentences, {n_nodes} nodes")
    print(f"  encode: {wall_ms:.1f} ms wall ({len(trees) / wall_ms * 1e3:.0f} sentences/s), "
          f"{stats.calls} batched cell requests over {stats.waves} waves; by processor {by_proc}")
    print(f"  readout: {readout}")
    print(f"  accuracy: 5-class {fine:.3f}, binary (neutral excluded) {binary:.3f}")
    for i in range(min(args.examples, len(trees))):
        words = " ".join(trees[i].leaves())
        print(f"  [{CLASSES[pred[i]]:>13s} | gold {CLASSES[gold[i]]:>13s}] {words[:80]}")
    if args.json:
        args.json.write_text(json.dumps({
            "model": args.model, "split": args.split, "sentences": len(trees), "nodes": n_nodes,
            "wall_ms": wall_ms, "calls": stats.calls, "waves": stats.waves, "accuracy_5class": fine,
            "accuracy_binary": binary, "readout": readout, "by_processor": by_proc,
            "predictions": pred.tolist()}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
