"""``python -m edgert.testing.genmodels``: write the generated models, or time them on both backends.

    python -m edgert.testing.genmodels --out DIR [--seed N] [NAME ...]   # DIR/<name>.onnx and DIR/<name>.tflite
    python -m edgert.testing.genmodels --time [NAME ...]                  # per-run ms, ORT vs LiteRT, 1 thread each

Timing is the best and the median of 5 rounds after a warm-up; the LiteRT
figure includes ``set_tensor`` + ``invoke`` + ``get_tensor`` (what a caller
pays), with ``invoke`` alone alongside.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from edgert.testing import genmodels


def _per_run_ms(fn: Callable[[], object], budget_s: float = 0.3) -> tuple[float, float]:
    """(best, median) ms per call of ``fn`` over 5 rounds sized to ~``budget_s`` seconds in all."""
    t0 = time.perf_counter()
    fn()
    n = 1
    while time.perf_counter() - t0 < 0.02:
        fn()
        n += 1
    per = (time.perf_counter() - t0) / n
    reps = max(1, int(budget_s / 5 / max(per, 1e-7)))
    rounds = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        rounds.append((time.perf_counter() - t) / reps * 1e3)
    return min(rounds), statistics.median(rounds)


def time_models(names: list[str]) -> list[tuple[str, float, float, float]]:
    """``(name, ort_ms, litert_ms, litert_invoke_ms)`` medians per run, one thread per backend."""
    import onnxruntime as ort  # noqa: PLC0415
    from ai_edge_litert.interpreter import Interpreter  # noqa: PLC0415

    rows = []
    for name in names:
        if name == "raises":
            continue
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        sess = ort.InferenceSession(genmodels.build(name, "onnx"), so, providers=["CPUExecutionProvider"])
        it = Interpreter(model_content=genmodels.build(name, "tflite"), num_threads=1)
        it.allocate_tensors()
        feeds = genmodels.example_inputs(name)
        ins = [(d["index"], feeds[d["name"]]) for d in it.get_input_details()]
        outs = [d["index"] for d in it.get_output_details()]

        def lite() -> list:
            for idx, arr in ins:
                it.set_tensor(idx, arr)
            it.invoke()
            return [it.get_tensor(i) for i in outs]

        o = _per_run_ms(lambda: sess.run(None, feeds))
        lt = _per_run_ms(lite)
        inv = _per_run_ms(it.invoke)
        rows.append((name, o[1], lt[1], inv[1]))
        print(f"{name:14s} ORT {o[1]:8.4f} ms (best {o[0]:.4f})   LiteRT {lt[1]:8.4f} ms (best {lt[0]:.4f})"
              f"   invoke only {inv[1]:8.4f} ms   ORT/LiteRT {o[1] / lt[1]:5.2f}x", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    ap = argparse.ArgumentParser(prog="python -m edgert.testing.genmodels", description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help=f"models (default: all of {', '.join(genmodels.NAMES)})")
    ap.add_argument("--out", help="directory to write <name>.onnx and <name>.tflite into")
    ap.add_argument("--seed", type=int, default=0, help="weight seed (default 0)")
    ap.add_argument("--time", action="store_true", help="time each model on ORT and LiteRT, 1 thread")
    args = ap.parse_args(argv)
    names = args.names or list(genmodels.NAMES)
    for name in names:
        genmodels.spec(name)
    if not args.out and not args.time:
        ap.error("give --out DIR, --time, or both")
    if args.out:
        for name in names:
            for fmt, path in genmodels.save(name, args.out, seed=args.seed).items():
                print(f"{name:14s} {fmt:7s} {path}")
    if args.time:
        time_models(names)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
