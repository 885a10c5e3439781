"""Forests from text to root states: ours (``read_ptb`` + ``encode``) vs torch level-batched, alternated.

Workload: Child-Sum TreeLSTM (D 300, H 150, random weights, seed 0), vocabulary of 2,000 words, over
held-out forests of 300 PTB-bracketed trees made by ``recursion.synth.split_tree`` (a parse-shaped
tree: each span of leaves cut into 1..max-arity parts), written out as text:

* ``small``: ~20 leaves a tree (10..30), arity 1..5;
* ``large``: ~60 leaves a tree (30..90), arity 1..8.

Columns, each timed from the lines of text to the root states [300, 150]:

* ``ours Nw``: ``ChildSumTreeLSTM.encode_ptb(lines)`` (``recursion.read_forest`` a part at a time,
  then ``encode``) on ``edgert.Runtime(delegates=["ort-cpu"], cpu_workers=N)``;
* ``torch Nt``: a small PTB reader (a Python loop over the tokens), its Python flattening into
  levels, then one batched Child-Sum step per level (``inference_mode``), at N intra-op threads
  (torch's default is the core count).

"parse excluded" times the same from the parsed text (ours: ``encode`` of the Forest; torch: its
flattening and levels). Every round runs each column in turn (a 50 ms pause between columns, so that no column's
idle threads run into the next), ``--repeat`` times, and keeps each column's median; the ratio of a
round is torch / ours from those medians, and the figure is the median ratio over ``--rounds``
rounds. All columns must agree within 1e-4, and ours with a per-node float64 reference on 20 trees.

Usage::

    python benchmarks/recursion_forests.py [--kinds small large] [--seeds 101 102 103]
                                          [--rounds 3] [--repeat 5]
    python benchmarks/recursion_forests.py --profile 20 [--kinds small] [--seeds 1]

``--profile RUNS`` prints instead where one worker's CPU time goes, by stage, per run, per level,
per cell call and per node (cProfile on the process-time clock).

Bars (the quiet host, held-out seeds): small >= 3x and large >= 4x torch at its default threads,
text to root states, median of three rounds.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import edgert  # noqa: E402
from recursion import Tree, read_forest, read_ptb  # noqa: E402
from recursion.models import ChildSumTreeLSTM  # noqa: E402
from recursion.synth import split_tree  # noqa: E402

#: forest kind -> (fewest leaves, most leaves, max arity)
KINDS = {"small": (10, 30, 5), "large": (30, 90, 8)}
TREES = 300
VOCAB = [f"w{i}" for i in range(2000)]


def to_ptb(t: Tree) -> str:
    """``t`` as one line of PTB brackets (children before parents: no recursion)."""
    text = [""] * len(t)
    for i in range(len(t)):
        head = f"({t.labels[i]} " if t.labels[i] else "("
        kids = t.children(i)
        text[i] = head + (t.words[i] if t.words[i] is not None else " ".join(text[c] for c in kids)) + ")"
    return text[-1]


def forest_text(kind: str, seed: int) -> list[str]:
    """The 300 lines of forest ``kind`` made with ``seed``."""
    lo, hi, arity = KINDS[kind]
    rng = np.random.default_rng(seed)
    return [to_ptb(split_tree(int(rng.integers(lo, hi + 1)), arity, rng, VOCAB)) for _ in range(TREES)]


# -- the torch peer -------------------------------------------------------------------------------

_TOKEN = re.compile(r"\(|\)|[^ \t\r\n\f\v()]+")


def torch_read(lines: list[str]) -> list[tuple[list[list[int]], list[str | None]]]:
    """A small PTB reader: per tree, children lists in post-order and the words (None: internal)."""
    out = []
    for line in lines:
        stack: list[list] = []
        kids: list[list[int]] = []
        words: list[str | None] = []
        label_next = False
        for tok in _TOKEN.findall(line):
            if tok == "(":
                stack.append([])
                label_next = True
            elif tok == ")":
                ch = stack.pop()
                label_next = False
                leaf = len(ch) == 1 and isinstance(ch[0], str)    # "(LABEL word)"
                kids.append([] if leaf else ch)
                words.append(ch[0] if leaf else None)
                if stack:
                    stack[-1].append(len(kids) - 1)
            elif label_next:
                label_next = False
            else:
                stack[-1].append(tok)
        out.append((kids, words))
    return out


def torch_levels(parsed, vocab: dict[str, int], unknown: int):
    """Flatten the trees: word ids, roots, and per level (height) its nodes and padded child ids."""
    kids_all: list[list[int]] = []
    word_ids: list[int] = []
    height: list[int] = []
    roots = []
    for kids, words in parsed:
        off = len(kids_all)
        for k, w in zip(kids, words):
            kids_all.append([off + c for c in k])
            word_ids.append(vocab.get(w, unknown) if w is not None else 0)
            height.append(1 + max(height[off + c] for c in k) if k else 0)
        roots.append(len(kids_all) - 1)
    n = len(kids_all)
    h = np.array(height)
    levels = []
    for lvl in range(int(h.max()) + 1):
        idx = np.flatnonzero(h == lvl)
        if lvl == 0:
            levels.append((idx, None))
            continue
        ch = np.full((len(idx), max(len(kids_all[i]) for i in idx)), n, dtype=np.int64)
        for r, i in enumerate(idx.tolist()):
            ch[r, :len(kids_all[i])] = kids_all[i]
        levels.append((idx, ch))
    return n, np.array(word_ids), np.array(roots), levels


def torch_encode(parsed, model: ChildSumTreeLSTM, torch) -> np.ndarray:
    """Root h of every tree: flatten, then one batched Child-Sum step per level (the paper's equations)."""
    H = model.hidden
    n, word, roots, levels = torch_levels(parsed, model.vocab, model.unknown)
    w = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in model.weights.items() if k != "vocab"}
    emb = torch.from_numpy(model.emb)
    word_t = torch.from_numpy(word)
    with torch.inference_mode():
        h = torch.zeros(n + 1, H)
        c = torch.zeros(n + 1, H)
        for idx_np, ch_np in levels:
            idx = torch.from_numpy(idx_np)
            if ch_np is None:
                i, o, u = (emb[word_t[idx]] @ w["W_iou"] + w["b_iou"]).split(H, dim=1)
                cc = torch.sigmoid(i) * torch.tanh(u)
            else:
                ch = torch.from_numpy(ch_np)
                hk, ck = h[ch], c[ch]
                i, o, u = (hk.sum(1) @ w["U_iou"] + w["b_iou"]).split(H, dim=1)
                f = torch.sigmoid(hk @ w["U_f"] + w["b_f"])
                cc = torch.sigmoid(i) * torch.tanh(u) + (f * ck).sum(1)
            h[idx] = torch.sigmoid(o) * torch.tanh(cc)
            c[idx] = cc
        return h[torch.from_numpy(roots)].numpy()


def reference_roots(trees: list[Tree], model: ChildSumTreeLSTM) -> np.ndarray:
    """Root h per tree, one node at a time in float64 (the paper's equations, literally)."""
    w = {k: v.astype(np.float64) for k, v in model.weights.items() if k != "vocab"}
    H = model.hidden
    out = []
    for t in trees:
        h = np.zeros((len(t), H))
        c = np.zeros((len(t), H))
        for j in range(len(t)):
            kids = t.children(j)
            x = (model.emb[model.vocab.get(t.words[j], model.unknown)].astype(np.float64)
                 if t.words[j] is not None else np.zeros(model.emb.shape[1]))
            iou = x @ w["W_iou"] + h[kids].sum(0) @ w["U_iou"] + w["b_iou"]
            i, o, u = 1 / (1 + np.exp(-iou[:H])), 1 / (1 + np.exp(-iou[H:2 * H])), np.tanh(iou[2 * H:])
            f = 1 / (1 + np.exp(-(x @ w["W_f"] + h[kids] @ w["U_f"] + w["b_f"])))
            c[j] = i * u + (f * c[kids]).sum(0)
            h[j] = o * np.tanh(c[j])
        out.append(h[-1])
    return np.array(out)


# -- the run --------------------------------------------------------------------------------------

def median_ms(fn, repeat: int) -> tuple[float, object]:
    """Median wall ms of ``repeat`` runs after one warm-up (and the last result)."""
    out = fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - t) * 1e3)
    return (statistics.median(times) if times else float("nan")), out


def columns(lines: list[str], models: dict[int, ChildSumTreeLSTM], torch, threads: list[int]) -> dict:
    """Every column as (name, parse included?) -> (a function returning root h, torch threads or 0)."""
    forest = read_forest(lines)
    cols = {}
    for w, m in models.items():
        cols[(f"ours {w}w", True)] = (lambda m=m: m.encode_ptb(lines), 0)
        cols[(f"ours {w}w", False)] = (lambda m=m: m.encode(forest), 0)
    if torch is not None:
        parsed = torch_read(lines)
        model = next(iter(models.values()))
        for t in threads:
            cols[(f"torch {t}t", True)] = (lambda: torch_encode(torch_read(lines), model, torch), t)
            cols[(f"torch {t}t", False)] = (lambda: torch_encode(parsed, model, torch), t)
    return cols


def timed_column(fn, torch_threads: int, torch, repeat: int) -> tuple[float, object]:
    """``median_ms`` of a column, torch set to its thread count first (outside the timing)."""
    if torch_threads:
        torch.set_num_threads(torch_threads)
    return median_ms(fn, repeat)


#: ``--profile`` stages: (name, (file, function) whose cumulative CPU time it is, those it leaves out)
ORT_RUN = ("onnxruntime_inference_collection.py", "run")
STAGES = (
    ("parse (read_forest)", [("ptb.py", "read_forest")], []),
    ("word ids (Forest.lookup)", [("forest.py", "lookup")], []),
    ("planning (make_plan)", [("plan.py", "make_plan")], []),
    ("gathers (the children's rows, taken and summed)", [("executor.py", "_inputs")], []),
    ("cell calls (InferenceSession.run)", [ORT_RUN], []),
    ("runtime around a call (Model.__call__ less the run)", [("_model.py", "__call__")], [ORT_RUN]),
    ("stores (outputs into the buffers)", [("executor.py", "_store")], []),
)


def profile(kind: str, seed: int, model: ChildSumTreeLSTM, runs: int) -> None:
    """CPU time by stage of ``encode(read_forest(lines))`` on one worker (cProfile, process-time clock),
    per run, per level, per cell call and per node; prints a markdown table."""
    import cProfile
    import pstats

    lines = forest_text(kind, seed)
    model.encode(read_forest(lines))
    prof = cProfile.Profile(time.process_time)
    prof.enable()
    for _ in range(runs):
        model.encode(read_forest(lines))
    prof.disable()
    st = model.executor.last_stats
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]

    def cum(funcs: list[tuple[str, str]]) -> float:
        return sum(v[3] for (path, _, fn), v in stats.items() if any(path.endswith(f) and fn == name
                                                                     for f, name in funcs))

    total = cum([("base.py", "encode"), ("ptb.py", "read_forest")])
    print(f"\n{kind} forest, seed {seed}, 1 worker: {st.nodes} nodes, {st.waves} levels, {st.calls} cell calls a "
          f"run; CPU ms over {runs} runs under cProfile (which adds its own)\n")
    print("| stage | ms a run | share | us a level | us a call | us a node |\n|---|---:|---:|---:|---:|---:|")
    rows = [(name, cum(inc) - cum(exc)) for name, inc, exc in STAGES]
    rows.append(("rest (Python around them)", total - sum(v for _, v in rows)))
    for name, sec in rows:
        ms = sec * 1e3 / runs
        print(f"| {name} | {ms:.2f} | {100 * sec / total:.0f} % | {ms * 1e3 / st.waves:.0f} | "
              f"{ms * 1e3 / st.calls:.0f} | {ms * 1e3 / st.nodes:.2f} |")
    print(f"| total | {total * 1e3 / runs:.2f} | 100 % | {total * 1e6 / runs / st.waves:.0f} | "
          f"{total * 1e6 / runs / st.calls:.0f} | {total * 1e6 / runs / st.nodes:.2f} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kinds", nargs="+", choices=sorted(KINDS), default=["small", "large"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[101, 102, 103], help="held-out forest seeds")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of every column in turn (median ratio)")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs of a column in a round (median)")
    ap.add_argument("--profile", type=int, default=0, metavar="RUNS",
                    help="instead: CPU time by stage over RUNS runs of ours on 1 worker (cProfile)")
    args = ap.parse_args(argv)
    if args.profile:
        with edgert.Runtime(delegates=["ort-cpu"], cpu_workers=1) as rt:
            model = ChildSumTreeLSTM.random(VOCAB, input_dim=300, hidden=150, seed=0, runtime=rt)
            for kind in args.kinds:
                profile(kind, args.seeds[0], model, args.profile)
        return 0
    try:
        import torch
    except ImportError:
        torch = None
        print("torch: SKIPPED (pip install torch==2.13.0 for the peer columns)")
    default_threads = torch.get_num_threads() if torch is not None else 0
    threads = sorted({default_threads, 1}, reverse=True)
    print(f"host: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start (a shared host: "
          f"columns alternate within each round); torch default threads {default_threads}")
    base = ChildSumTreeLSTM.random(VOCAB, input_dim=300, hidden=150, seed=0)
    rts = {w: edgert.Runtime(delegates=["ort-cpu"], cpu_workers=w) for w in (1, 2)}
    try:
        models = {w: ChildSumTreeLSTM(base.weights, runtime=rt) for w, rt in rts.items()}
        for kind in args.kinds:
            for seed in args.seeds:
                run_forest(kind, seed, models, torch, threads, default_threads, args)
    finally:
        for rt in rts.values():
            rt.close()
        if torch is not None:
            torch.set_num_threads(default_threads)
    print(f"host load average at the end: {os.getloadavg()[0]:.2f}")
    return 0


def run_forest(kind: str, seed: int, models, torch, threads, default_threads: int, args) -> None:
    """One forest: check the answers, then ``rounds`` rounds of every column; prints the table and ratios."""
    lines = forest_text(kind, seed)
    trees = read_ptb(lines)
    nodes = sum(len(t) for t in trees)
    cols = columns(lines, models, torch, threads)
    ref = reference_roots(trees[:20], models[1])
    answers = {name: timed_column(fn, t, torch, 0)[1] for name, (fn, t) in cols.items()}
    worst = max(float(np.abs(a - answers[("ours 1w", True)]).max()) for a in answers.values())
    err = float(np.abs(answers[("ours 1w", True)][:20] - ref).max())
    assert worst < 1e-4 and err < 1e-4, f"answers disagree: columns {worst:.1e}, reference {err:.1e}"
    rounds: list[dict] = []
    for _ in range(args.rounds):
        times = {}
        for name, (fn, t) in cols.items():
            time.sleep(0.05)
            times[name] = timed_column(fn, t, torch, args.repeat)[0]
        rounds.append(times)
    if torch is not None:
        torch.set_num_threads(default_threads)
    print(f"\n{kind} forest, seed {seed}: {len(trees)} trees, {nodes} nodes, "
          f"{int(max(t.height.max() for t in trees)) + 1} levels at most; answers agree within {worst:.1e} "
          f"(per-node float64 reference on 20 trees: {err:.1e}); ms, median of {args.repeat} a round, per round:")
    for (name, parse) in cols:
        per = " ".join(f"{r[(name, parse)]:7.1f}" for r in rounds)
        print(f"  {name:10s} {'text to root' if parse else 'parse excluded':15s} {per}")
    if torch is None:
        return
    dt = f"torch {default_threads}t"
    for parse in (True, False):
        what = "text to root" if parse else "parse excluded"
        for peer, ours in ((dt, "ours 2w"), (dt, "ours 1w"), ("torch 1t", "ours 1w")):
            ratios = [r[(peer, parse)] / r[(ours, parse)] for r in rounds]
            print(f"  {what:15s} {peer} / {ours} = {statistics.median(ratios):5.2f}x  "
                  f"(rounds: {', '.join(f'{x:.2f}' for x in ratios)})")
    print(f"  ours 1w / ours 2w, text to root = "
          f"{statistics.median([r[('ours 1w', True)] / r[('ours 2w', True)] for r in rounds]):5.2f}x")


if __name__ == "__main__":
    raise SystemExit(main())
