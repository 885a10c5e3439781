"""Run models on one delegate path and save their inputs and answers, to compare two machines' answers.

The output contract across architectures: run the models on x86, ship the file to an
arm64 board, run the same inputs there with ``--inputs``, bring the answers home and compare them
within fp32 tolerance (ARM's kernels are not x86's: the sums run in another order). ::

    python -m edgert.testing.outputs --delegate litert-xnnpack -o x86.npz M.tflite...
    python -m edgert.testing.outputs --delegate litert-xnnpack --inputs x86.npz -o arm.npz M.tflite...

The file holds ``in/<model>/<i>`` and ``out/<model>/<i>`` arrays (``i``: input / output index).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from delegates.base import Session
from delegates.registry import resolve
from edgert._profiling import artifact_for, example_feeds


def image_feeds(session: Session, seed: int = 0) -> list[np.ndarray]:
    """Seeded random inputs in an image's range: floats uniform in [0, 1), as MediaPipe's models take a
    normalized frame; other dtypes as :func:`edgert._profiling.example_feeds` makes them.

    Standard-normal inputs lie far outside that range (measured: ARM and x86 then differ by 2.3e-4 of
    the range of pose_landmark_full's segmentation logits, against 1.4e-4 with these)."""
    rng = np.random.default_rng(seed)
    feeds = example_feeds(session, seed)
    return [rng.random(f.shape).astype(f.dtype) if f.dtype.kind == "f" else f for f in feeds]


def run_models(models: Sequence[str | Path], delegate: str,
               inputs: Mapping[str, np.ndarray] | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """``in/…`` and ``out/…`` arrays of every model on ``delegate``; inputs from ``inputs`` when given,
    else seeded random ones (:func:`image_feeds`)."""
    (path,) = resolve([delegate])
    saved: dict[str, np.ndarray] = {}
    for model in models:
        art = artifact_for(model)
        name = Path(model).stem
        session = path.open(art, threads=1)
        try:
            if inputs is None:
                feeds = image_feeds(session, seed)
            else:
                feeds = [inputs[f"in/{name}/{i}"] for i in range(len(session.inputs))]
            outs = session.run(feeds)
        finally:
            session.close()
        saved.update({f"in/{name}/{i}": np.asarray(a) for i, a in enumerate(feeds)})
        saved.update({f"out/{name}/{i}": np.asarray(a) for i, a in enumerate(outs)})
    return saved


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (see module doc); 0 on success."""
    p = argparse.ArgumentParser(prog="python -m edgert.testing.outputs", description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="+", metavar="MODEL")
    p.add_argument("--delegate", default="litert-xnnpack", help="delegate path (default litert-xnnpack)")
    p.add_argument("--inputs", type=Path, default=None, help="an earlier run's file: take its inputs")
    p.add_argument("-o", "--output", type=Path, required=True, help=".npz file to write")
    args = p.parse_args(argv)
    given = dict(np.load(args.inputs)) if args.inputs is not None else None
    saved = run_models(args.models, args.delegate, given)
    with open(args.output, "wb") as fh:
        np.savez(fh, **saved)  # type: ignore[arg-type]  # numpy types allow_pickle as a keyword too
    print(f"wrote {args.output}: {sum(k.startswith('out/') for k in saved)} outputs of {len(args.models)} model(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
