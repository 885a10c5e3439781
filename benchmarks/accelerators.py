"""Right answers on every path this host has: the output contract, error vs fp32 CPU, speed vs CPU, XR landmarks.

For every available delegate path (the probe decides; ``litert-compiled-cpu`` on any host,
``litert-compiled-gpu`` / ``ort-cuda`` where a GPU is) x the XR demo's MediaPipe models and the
repo's generated ONNX (and TFLite) networks:

* refused: the path would not take the model at load: its compiler refuses an op or a shape, or,
  for a path below fp32, ``rt.load``'s default accuracy check (error > 0.01 of the range on the
  check's sample, or every output flat on it) excludes it, with the reason;
* contract: the session's output names, shapes and dtypes equal the backend's own (LiteRT's
  ``Interpreter`` / ONNX Runtime's CPU ``InferenceSession``, called directly; shapes compared as
  tuples), and its values lie within the path's declared tolerance (``delegates.base.TOLERANCE``,
  a share of each output's range: 1e-4 for fp32) of the fp32 CPU answer;
* err: the largest |path - fp32 CPU| as a share of the output's range, on one deterministic input;
* ms: median ms per call of the path's session (one thread, inputs already in host memory), and
  ``x cpu``: the fp32 CPU path's ms divided by it (> 1: faster than the CPU);
* XR landmarks: the demo's pipelines in static-image mode on the first frames of the sample scene,
  once on LiteRT's CPU path and once on each ``.tflite`` path (with ``litert-xnnpack`` beside an
  accelerator, for the models it refuses): the mean distance between the landmarks the two runs
  found, as % of the image diagonal.

Exit status 1 when any path breaks the contract on a model it loaded (a refusal at load, with its
reason, is not a break). Writes benchmarks/results/accelerators.md.

    python benchmarks/accelerators.py [--runs 20] [--frames 8] [--paths NAME,...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # the repo, when edgert is not installed
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import host_line, markdown_doc  # noqa: E402

import edgert  # noqa: E402
from delegates.base import TOLERANCE, Artifact, Delegate  # noqa: E402
from delegates.errors import EdgeRTError, ModelLoadError  # noqa: E402
from delegates.registry import all_delegates  # noqa: E402
from edgert import models as zoo  # noqa: E402
from edgert._core._accuracy import DEFAULT_TOLERANCE, REFERENCE, AccuracyCheck  # noqa: E402
from edgert.testing.direct import XR_MODELS, contract_break, contract_cases  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "accelerators.md"


def ms_per_call(run, feeds: list[np.ndarray], runs: int) -> float:
    """Median ms of ``runs`` calls after one untimed call."""
    run(feeds)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        run(feeds)
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def check_path(d: Delegate, label: str, art: Artifact, feeds: dict[str, np.ndarray], runs: int,
               cpu_ms: dict[str, float]) -> tuple[str, str, float | None, float | None]:
    """(contract verdict, note, error as share of range, ms per call) of path ``d`` on one model."""
    try:
        s = d.open(art, threads=1)
    except ModelLoadError as exc:
        return "refused", str(exc).split(": ", 1)[-1][:90], None, None
    if s.precision != "fp32":   # rt.load's default accuracy check refuses the path, as the runtime would
        check = AccuracyCheck(label, [art], DEFAULT_TOLERANCE, None, None, every_path=False)
        why = check(d, s)
        if why is not None:
            s.close()
            return "refused", f"accuracy check ({check.cost_ms:.0f} ms): {why}"[:160], check.errors.get(d.name), None
    try:
        ordered = [feeds[spec.name] for spec in s.inputs]
        got = s.run(ordered)
        ms = ms_per_call(s.run, ordered, runs)
    except EdgeRTError as exc:
        s.close()
        return "FAIL", f"raised: {exc}"[:120], None, None
    s.close()
    if d.name == REFERENCE.get(art.format):
        cpu_ms[label] = ms
    err, broke = contract_break(s, got, art, feeds)
    if broke:
        return "FAIL", broke[:120], (None if err == float("inf") else err), ms
    return "pass", f"{s.precision}, tolerance {TOLERANCE[s.precision]:g}", err, ms


def landmarks(delegates: list[str], frames: list[np.ndarray]) -> list[dict[str, list[np.ndarray]]]:
    """Per frame, the landmarks (x, y in pixels) each stream found, in static-image mode with no deadline."""
    from apps.xr import Pipelines

    out = []
    with edgert.Runtime(delegates=delegates, cpu_workers=1) as rt:
        px = Pipelines(rt, tracking=False)
        for f in frames:
            r = px.process(f)
            out.append({"hands": [h.landmarks[:, :2] for h in r.hands], "faces": [x.landmarks[:, :2] for x in r.faces],
                        "poses": [p.landmarks[:, :2] for p in r.poses]})
    return out


def landmark_error_pct(ref: list[dict[str, list[np.ndarray]]], got: list[dict[str, list[np.ndarray]]],
                       diag: float) -> tuple[float, int]:
    """Mean landmark distance (% of the image diagonal) over instances both runs found, and how many
    instances one run found and the other did not."""
    dists, missing = [], 0
    for a, b in zip(ref, got):
        for k in a:
            missing += abs(len(a[k]) - len(b[k]))
            for x, y in zip(a[k], b[k]):
                dists.append(float(np.linalg.norm(x - y, axis=1).mean()))
    return (100.0 * float(np.mean(dists)) / diag if dists else float("nan")), missing


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=20, help="timed calls per path and model (default 20)")
    ap.add_argument("--frames", type=int, default=8, help="sample-scene frames for the XR landmarks (default 8)")
    ap.add_argument("--paths", default="", help="comma-separated paths (default: every available one)")
    ap.add_argument("--out", default=str(RESULTS), help="results file (markdown)")
    args = ap.parse_args(argv)
    known = all_delegates()
    names = [n for n in args.paths.split(",") if n] or [n for n, d in known.items() if d.probe() is None]
    paths = [known[n] for n in names]
    rows, failures = [], []
    print(host_line())
    print(f"paths: {', '.join(f'{d.name} ({d.precision})' for d in paths)}")
    with tempfile.TemporaryDirectory() as tmp:
        cases = contract_cases(Path(tmp), zoo.path(XR_MODELS[0]).parent)
        # the fp32 CPU reference path first, so each model's CPU ms is known for the ratio
        order = sorted(paths, key=lambda d: d.name not in REFERENCE.values())
        cpu_ms: dict[str, float] = {}
        for label, art, feeds in cases:
            for d in order:
                if art.format not in d.formats:
                    continue
                verdict, note, err, ms = check_path(d, label, art, feeds, args.runs, cpu_ms)
                ratio = cpu_ms.get(label, float("nan")) / ms if ms else float("nan")
                if verdict == "FAIL":
                    failures.append(f"{d.name} on {label}: {note}")
                line = (f"{d.name:<20} {label:<34} {verdict:<7} "
                        f"{'-' if err is None else f'{err:.1e}':>8} {'-' if ms is None else f'{ms:8.2f}':>8} "
                        f"{'-' if ms is None else f'{ratio:5.2f}':>6}  {note}")
                print(line, flush=True)
                rows.append(f"| {d.name} | {label} | {verdict} | {'-' if err is None else f'{err:.1e}'} | "
                            f"{'-' if ms is None else f'{ms:.2f}'} | {'-' if ms is None else f'{ratio:.2f}'} | "
                            f"{note.replace('|', '/')} |")
    from apps.xr import assets

    gen = assets.sample_frames()
    frames = [next(gen) for _ in range(args.frames)]
    diag = float(np.hypot(*frames[0].shape[:2]))
    ref = landmarks(["litert-xnnpack"], frames)
    xr_rows = []
    for d in paths:
        if "tflite" not in d.formats or d.name == "litert-xnnpack":
            continue
        use = [d.name] if d.processor == "cpu" else [d.name, "litert-xnnpack"]
        try:
            pct, missing = landmark_error_pct(ref, landmarks(use, frames), diag)
        except EdgeRTError as exc:
            xr_rows.append(f"| {d.name} | - | - | {str(exc)[:100]} |")
            continue
        print(f"XR landmarks on {'+'.join(use)}: mean {pct:.4f} % of the diagonal, {missing} instance(s) differ")
        xr_rows.append(f"| {'+'.join(use)} | {pct:.4f} | {missing} | {args.frames} sample-scene frames |")
    notes = [host_line(), "Command: `python benchmarks/accelerators.py"
             + (f" --paths {args.paths}" if args.paths else "") + "` "
             f"(runs {args.runs}, frames {args.frames}). err = max |path - fp32 CPU| / output range; "
             "x cpu = fp32 CPU ms / path ms (one thread each).",
             f"Contract failures: {len(failures)}." + (" " + "; ".join(failures) if failures else "")]
    doc = markdown_doc("Accelerator paths: contract, error and speed vs fp32 CPU", notes,
                       ["path", "model", "contract", "err", "ms", "x cpu", "precision / note"], rows, range(3, 6))
    doc += ("\n## XR demo landmarks vs the CPU run\n\n| paths | mean error % of diagonal | instances differing | "
            "on |\n|---|---:|---:|---|\n" + "\n".join(xr_rows) + "\n")
    Path(args.out).write_text(doc)
    print(f"contract failures: {len(failures)}; wrote {args.out}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
