"""The core subcommands: ``edgert devices``, ``edgert models fetch``, ``edgert run APP``."""

from __future__ import annotations

import argparse
import json
import re

from edgert.cli import _args


def register(sub: argparse._SubParsersAction) -> None:
    """The core subcommands: ``devices``, ``models fetch``, ``run``."""
    p = sub.add_parser("devices", help="list every delegate path: name, processor, precision, available, reason")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--verbose", action="store_true", help="the full reason for every unavailable path")
    p.add_argument("--check", nargs="+", default=None, metavar="MODEL",
                   help="load these models as rt.load does and say which paths the accuracy check keeps, and why")
    p.add_argument("--delegates", default="auto", metavar="auto|cpu|gpu|NAME[,NAME...]",
                   help="with --check: the paths to check (default auto; name a software adapter's path to check it)")
    p.add_argument("--tolerance", type=float, default=None,
                   help="with --check: the bound (share of each output's range); default: the default check")
    p.set_defaults(func=_devices)

    p = sub.add_parser("models", help="fetch real models")
    msub = p.add_subparsers(dest="models_command", required=True)
    f = msub.add_parser("fetch", help="download a model zoo (mediapipe: the XR models in the mediapipe wheel)")
    f.add_argument("zoo", help="model zoo name: mediapipe")
    f.add_argument("--dir", default=None, help="target directory (default: the user cache)")
    f.set_defaults(func=_models_fetch)

    p = sub.add_parser("run", help="run an app: xr-demo")
    p.add_argument("app", help="app name: xr-demo")
    p.add_argument("--seconds", type=_args.seconds, default=10.0, help="how long to run (default 10 s)")
    p.add_argument("--offload", default="off", help="off | auto | mqtt://host:port | kserve://host:port (an Open Inference Protocol server: "
                        "Triton, KServe, MLServer; kserve+http:// for REST) (default off)")
    p.add_argument("--scheduler", default=None, help="policy name (default: edgert's own)")
    p.add_argument("--delegates", default="auto", metavar="auto|cpu|gpu|NAME[,NAME...]",
                   help="delegate paths: auto (every available one), cpu, gpu (the GPU paths, with the CPU "
                        "paths for what the GPU does not take) or names from `edgert devices` (default auto)")
    p.add_argument("--frames", default=None, help="a directory of image frames instead of the sample scene")
    p.add_argument("--video", default=None, help="a video file (OpenCV) instead of the sample scene")
    p.add_argument("--synthetic", action="store_true",
                   help="a synthetic camera (moving blobs: nothing to detect) instead of the sample scene")
    p.add_argument("--show", default=None, metavar="OUT.mp4",
                   help="write the frames with landmarks, boxes and the mask drawn over them")
    p.add_argument("--snapshot", default=None, metavar="OUT.png",
                   help="write a PNG of the source's first frames with their landmarks")
    p.add_argument("--models-dir", default=None, help="MediaPipe models directory (default: the user cache)")
    p.add_argument("--users", type=_args.integer(1, 64), default=1,
                   help="XR users, each with every stream; user k's camera is 40*k frames behind (default 1)")
    p.add_argument("--priority", default=None, metavar="STREAM=LEVEL[,...]",
                   help="each stream's importance: critical, high, normal (default) or low, e.g. "
                        "hands=critical,face=high,pose=normal,segmentation=low; under overload the lowest steps "
                        "its rate down first; with --users N it applies to that stream of every user")
    p.add_argument("--cpu-workers", type=_args.workers, default=None, help="CPU workers (default: one per core)")
    p.add_argument("--trace", type=_args.output_path(), default=None, help="record every request as JSONL (simulator input)")
    p.add_argument("--timeline", type=_args.output_path(), default=None, help="write a Chrome trace-event timeline (Perfetto)")
    p.add_argument("--plot", type=_args.output_path(*_args.PLOT_SUFFIXES), default=None, help="write a PNG: placement strip, latency CDFs, deadline-met %%")
    p.add_argument("--json", type=_args.output_path(), default=None, help="write the summary as JSON")
    p.add_argument("--quiet", action="store_true", help="no live table, just the summary")
    p.set_defaults(func=_run_app)


def _short_reason(reason: str) -> str:
    """The first clause of a reason: ``libfoo.so not found (searched …)`` -> ``libfoo.so not found``."""
    first = re.split(r" \(|; |: (?=[A-Z])", reason, maxsplit=1)[0]
    first = re.sub(r" is not in this onnxruntime \S+ build", " not in this ORT build", first)
    return first.replace("ExecutionProvider", " EP")


def _devices(args: argparse.Namespace) -> int:
    """One line per delegate path; ``--verbose`` adds the full reason (wrapped), ``--json`` everything;
    ``--check MODEL…`` the accuracy check's verdicts instead (:mod:`edgert.cli._check`)."""
    if getattr(args, "check", None):
        from edgert.cli._check import run  # noqa: PLC0415

        return run(args)
    from delegates.registry import describe  # noqa: PLC0415
    from edgert.tables import Column, render, width  # noqa: PLC0415

    from delegates._install import shadowed  # noqa: PLC0415

    infos = describe()
    shadows = shadowed()
    if args.json:
        print(json.dumps([i.as_dict() for i in infos], indent=2))
        return 0
    total = width()
    cols = [Column("name", "<"), Column("proc", "<"), Column("backend", "<"), Column("prec", "<"),
            Column("avail", "<")]
    used = sum(max(len(c.header), *(len(v) for v in vals)) + 2 for c, vals in zip(cols, (
        [i.name for i in infos], [i.processor for i in infos], [i.backend for i in infos],
        [i.precision for i in infos], ["yes"])))
    room = max(12, total - used)
    rows = []
    for i in infos:
        why = i.reason if args.verbose else _short_reason(i.reason)
        if not args.verbose and len(why) > room:
            why = why[:room - 1] + "…"
        rows.append((i.name, i.processor, i.backend, i.precision, "yes" if i.available else "no", why))
    n_ok = sum(i.available for i in infos)
    from edgert._core._memory import pid_summary  # noqa: PLC0415
    from edgert._power import power_counters  # noqa: PLC0415

    foot = [f"{n_ok} of {len(infos)} paths available here."
            + ("" if args.verbose else " Full reasons: edgert devices --verbose (or --json)."),
            "prec = the arithmetic a path computes in (fp32, tf32, fp16, int8, mixed); "
            "force fp32 with the path's option force_fp32 (edgert devices --json: force_fp32).",
            *(f"{i.name}: its {i.processor} is a software adapter ({i.adapter}) that computes on this host's CPU "
              "cores; delegates=\"auto\" leaves it out, naming it opts in" for i in infos if i.software),
            power_counters().line(), pid_summary(), *(f"warning: {sh.line()}" for sh in shadows)]
    print(render([*cols, Column("reason" if args.verbose else "why not", "<", wrap=True)], rows,
                 title="edgert delegate paths on this host", total=total, footer=foot))
    return 0


def _models_fetch(args: argparse.Namespace) -> int:
    from pathlib import Path  # noqa: PLC0415

    from edgert import models as zoo  # noqa: PLC0415

    paths = zoo.fetch(args.zoo, Path(args.dir) if args.dir else None)
    for name, p in sorted(paths.items()):
        note = "  (custom op: needs MediaPipe's resolver)" if name in zoo.CUSTOM_OP_MODELS else ""
        print(f"{p}{note}")
    print(f"{len(paths)} models verified (sha256) in {next(iter(paths.values())).parent}")
    return 0


def _run_app(args: argparse.Namespace) -> int:
    """Run an app registered under the ``edgert.apps`` entry-point group (``xr-demo``: apps/xr_demo.py).

    Apps sit above everything else in the dependency order, so edgert finds them as plugins
    instead of importing them.
    """
    from importlib.metadata import entry_points  # noqa: PLC0415

    from edgert.extras import EXTRA_OF, MissingExtra  # noqa: PLC0415
    from edgert.errors import ConfigError, did_you_mean  # noqa: PLC0415

    apps = {ep.name: ep for ep in entry_points(group="edgert.apps")}
    if not apps:
        raise ConfigError("no apps are registered; install the project with `pip install -e .`")
    if args.app not in apps:
        raise did_you_mean("app", args.app, apps)
    try:
        return int(apps[args.app].load()(args) or 0)
    except ModuleNotFoundError as exc:   # an app's optional dependency: name the extra that brings it
        top = (exc.name or "").split(".")[0]
        if top not in EXTRA_OF:
            raise
        dist, extra = EXTRA_OF[top]
        raise MissingExtra(f"edgert run {args.app} needs {dist}: pip install 'edgert[{extra}]'") from exc
