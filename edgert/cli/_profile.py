"""``edgert profile MODEL... [--delegates …] [--runs N] [--warmup N] -o profile.json``
and ``edgert profile --from-trace T.jsonl -o profile.json``.

``--from-trace`` writes this host's profile from a live run's trace (the
requests' service times, p50 / p90 per model and processor: what the
simulator needs to replay that trace here; see :func:`edgert._replay.host_profile`).

Measures every model on every delegate path that can take its format (or on
the ``--delegates`` named), warm-up then N timed runs per pair, and writes
p50 / p90 as a device profile (docs/design.md §6) with the host, the versions and
the coverage of partially delegated graphs in ``sources``. A pair that fails
(e.g. an op the delegate rejects) is listed under ``unmeasured/…`` and the
others go on; errors that stop the command print one line and exit 2.

On a GPU path that serves several sessions of a model side by side (ORT CUDA / TensorRT), it also
runs 1, 2 and 4 sessions at once (``--instances``) and records the count that earns its keep in the
profile's ``instances`` (:func:`edgert._profiling.measure_instances`); where no such path is here it
says why and records none.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from delegates.registry import resolve
from delegates.base import Delegate
from delegates.registry import all_delegates
from edgert._profiling import (
    INSTANCE_COUNTS,
    Failure,
    Measurement,
    artifact_for,
    build_profile,
    measure,
    measure_instances,
    record_instances,
    save_profile,
)
from edgert.errors import EdgeRTError


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``profile`` sub-command to an argparse ``subparsers`` object."""
    p = subparsers.add_parser(
        "profile", help="measure models on this host's delegates and write a device profile",
        description="Warm up, run each model N times on each delegate, write p50/p90 as a device profile.")
    p.add_argument("models", nargs="*", metavar="MODEL", help=".tflite / .onnx files (model name = file stem)")
    p.add_argument("--from-trace", type=Path, default=None, metavar="T.jsonl",
                   help="instead of measuring, use the service times a live run recorded (edgert run … --trace)")
    p.add_argument("--delegates", action="extend", nargs="+", default=None, metavar="NAME",
                   help="delegate names from `edgert devices` (space or comma separated); default: every available one")
    p.add_argument("--runs", type=int, default=50, help="timed runs per (model, delegate) (default 50)")
    p.add_argument("--warmup", type=int, default=5, help="untimed warm-up runs (default 5)")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads per session (default 1, like a worker)")
    p.add_argument("--instances", default=",".join(map(str, INSTANCE_COUNTS)), metavar="N,N…|off",
                   help="sessions run at once on a GPU path to choose the instance count from (default "
                        f"{','.join(map(str, INSTANCE_COUNTS))}; off: do not measure)")
    p.add_argument("--name", default=None, help="profile name (default: the host name)")
    p.add_argument("-o", "--output", required=True, type=Path, help="profile JSON to write")
    p.set_defaults(func=run)
    return p


def _delegate_names(raw: list[str] | None) -> str | list[str]:
    if not raw:
        return "auto"
    names = [n.strip() for item in raw for n in item.split(",") if n.strip()]
    return "auto" if names == ["auto"] else names


def _instance_counts(raw: str) -> tuple[int, ...]:
    if raw.strip().lower() == "off":
        return ()
    try:
        counts = tuple(sorted({int(x) for x in raw.split(",") if x.strip()}))
    except ValueError:
        counts = ()
    if not counts or counts[0] < 1:
        raise ValueError(f"--instances takes counts >= 1 such as 1,2,4, or off; got {raw!r}")
    return counts


def _no_instance_path(chosen: list[Delegate]) -> str:
    """Why no instance count is measured: the GPU paths that would take one, and why they are not here."""
    gpu = [d for d in all_delegates().values() if getattr(d, "serves_instances", False)]
    names = {d.name for d in chosen}
    why = "; ".join(f"{d.name}: {d.probe() or ('took none of the models' if d.name in names else 'not among --delegates')}"
                    for d in gpu)
    return f"no GPU path that serves instances is measured ({why or 'none known'})"


def run(args: argparse.Namespace) -> int:
    """Run the command; 0 on success, 2 with one clear line on stderr otherwise."""
    try:
        return _run(args)
    except (EdgeRTError, ValueError, OSError) as exc:
        print(f"edgert profile: error: {exc}", file=sys.stderr)
        return 2


def _from_trace(args: argparse.Namespace) -> int:
    from edgert._replay import host_profile, never_ran, read_outcomes  # noqa: PLC0415

    if args.models:
        raise ValueError("give either MODEL files or --from-trace, not both")
    live = read_outcomes(args.from_trace)
    prof = host_profile(live, name=args.name or "this-host", source=f"the live run of {args.from_trace.name}")
    for m in prof.models:
        row = "  ".join(f"{p} {v:.2f}" for p, v in prof.latency_ms[m].items())
        print(f"  {m:28} p50 ms: {row}")
    for line in never_ran(live).values():   # a stream shed throughout an overload: named, not silently left out
        print(f"  left out: {line}; measure it with `edgert profile MODEL_FILE` or give its latency_ms by hand")
    prof.save(args.output)
    print(f"wrote {args.output}: {len(prof.models)} model(s) on {', '.join(p.name for p in prof.processors)}")
    return 0


def _run(args: argparse.Namespace) -> int:
    if args.from_trace is not None:
        return _from_trace(args)
    if not args.models:
        raise ValueError("name the MODEL files to measure, or pass --from-trace T.jsonl")
    if args.runs < 1 or args.warmup < 0:
        raise ValueError(f"--runs must be >= 1 and --warmup >= 0 (got {args.runs}, {args.warmup})")
    counts = _instance_counts(args.instances)
    artifacts = [artifact_for(m) for m in args.models]
    chosen = resolve(_delegate_names(args.delegates))
    results: list[Measurement] = []
    failures: list[Failure] = []
    throughputs: list[tuple[str, Delegate, dict[int, float]]] = []
    for art in artifacts:
        model = art.path.stem  # type: ignore[union-attr]
        takers = [d for d in chosen if art.format in d.formats]
        if not takers:
            failures.append(Failure(model, "*", f"no chosen delegate takes .{art.format} "
                                                f"(chosen: {', '.join(d.name for d in chosen)})"))
        for d in takers:
            try:
                m = measure(d, art, runs=args.runs, warmup=args.warmup, threads=args.threads, model=model)
            except EdgeRTError as exc:
                failures.append(Failure(model, d.name, str(exc)))
                print(f"  {model:24} {d.name:20} skipped: {exc}", file=sys.stderr)
                continue
            results.append(m)
            cov = "" if m.coverage >= 1.0 else f"  coverage {m.coverage:.0%}"
            mem = "" if m.memory_mb is None else f"  {m.memory_mb:6.1f} MB resident"
            print(f"  {model:24} {d.name:20} {d.processor:4} p50 {m.p50_ms:9.3f} ms  p90 {m.p90_ms:9.3f} ms{mem}{cov}")
            if counts and getattr(d, "serves_instances", False):
                try:
                    tp = measure_instances(d, art, counts, runs=args.runs, warmup=args.warmup)
                except EdgeRTError as exc:
                    failures.append(Failure(model, d.name, f"instances not measured: {exc}"))
                    print(f"  {model:24} {d.name:20} instances not measured: {exc}", file=sys.stderr)
                    continue
                throughputs.append((model, d, tp))
    if not results:
        reasons = "; ".join(f"{f.model}/{f.delegate}: {f.reason}" for f in failures)
        raise ValueError(f"nothing could be measured ({reasons})")
    profile = build_profile(results, failures, name=args.name)
    instances: dict[str, dict[str, int]] = {}
    for model, d, tp in throughputs:
        n = record_instances(profile, instances, model, d.processor, d.name, tp)
        figures = "  ".join(f"{k}: {v:.1f}/s" for k, v in sorted(tp.items()))
        print(f"  {model:24} {d.name:20} instances {figures}  -> {n}")
    if counts and not throughputs:
        why = _no_instance_path(chosen)
        profile.sources["instances"] = f"not measured: {why}"
        print(f"  instances per GPU: not measured: {why}")
    if args.output.parent and not args.output.parent.exists():
        args.output.parent.mkdir(parents=True)
    save_profile(profile, args.output, instances)
    print(f"wrote {args.output}: {len(profile.models)} model(s) on {', '.join(p.name for p in profile.processors)}")
    return 0
