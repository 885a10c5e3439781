"""``edgert simulate``: replay a scenario or a trace on a device profile under a policy (docs/design.md §5).

::

    edgert simulate (--scenario NAME | --trace F.jsonl) --device PROFILE [--scheduler NAME]
                    [--load X] [--duration S] [--seed N] [--burst START:DUR:FACTOR]
                    [--json F] [--timeline F.json] [--plot F.png]

Prints a summary table (overall, per model, per processor); long runs show
progress on stderr. Bad input prints one line and exits 2. A trace written by
a live run (``edgert run xr-demo --trace``) also carries what happened live:
then the replay draws its hand-off delays (placement to start) from the live
run's and a second table compares live and replay per model.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from edgert.cli import _args
from edgert.errors import ConfigError, EdgeRTError

#: Most requests a scenario run may generate (each costs a few hundred bytes of simulator state).
MAX_SIM_REQUESTS = 20_000_000
#: Show a progress bar when a run has at least this many requests (roughly a second of work).
PROGRESS_MIN_REQUESTS = 50_000


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``simulate`` sub-command to an argparse ``subparsers`` object."""
    p = subparsers.add_parser(
        "simulate", help="replay a scenario or a trace on a device profile under a scheduler",
        description="Discrete-event simulation of the XRBench scenarios or a recorded trace on a device "
                    "profile, driving the same policy objects as the live runtime.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--scenario", metavar="NAME",
                     help="built-in XRBench scenario: social_a, social_b, outdoor_a, outdoor_b, ar_assistant, "
                          "ar_gaming, vr_gaming")
    src.add_argument("--trace", metavar="F.jsonl", help="a JSONL trace (a live run's trace= output replays as is)")
    p.add_argument("--device", required=True, metavar="PROFILE",
                   help="device profile: galaxy-s23, xr2-gen2, pixel4, or a JSON path")
    p.add_argument("--scheduler", default=None, metavar="NAME", help="policy name (default: edgert's own)")
    p.add_argument("--objective", default=None, choices=("deadlines", "balanced", "energy"),
                   help="edgert's objective: deadlines only, balanced (default: less energy where deadlines "
                        "allow) or energy")
    p.add_argument("--load", type=_args.load, default=1.0, metavar="X",
                   help="multiply every stream's request rate by X (SLOs unchanged; default 1)")
    p.add_argument("--duration", type=_args.seconds, default=None, metavar="S",
                   help="simulated seconds of arrivals (default: 10 for a scenario, the whole trace)")
    p.add_argument("--seed", type=_args.seed, default=0, metavar="N", help="seed for cascade draws and latency noise")
    p.add_argument("--burst", type=_args.burst, default=None, metavar="START:DUR:FACTOR",
                   help="extra streams from START s for DUR s, FACTOR x the load (e.g. 4:2:3)")
    p.add_argument("--priority", default=None, metavar="STREAM=LEVEL[,...]",
                   help="offer every frame to the stream controller, closed-loop, with these levels (critical, high, "
                        "normal, low); a scenario's streams are its root models, e.g. hand_tracking=critical")
    p.add_argument("--streams", action=argparse.BooleanOptionalAction, default=None,
                   help="offer frames to the stream controller (default: with --priority, or when the trace has "
                        "streams); with streams a scenario's --load X is X users")
    p.add_argument("--measured-runs", action="store_true",
                   help="--trace on the profile of the host that ran it (edgert profile --from-trace): run each "
                        "request as long as it ran live, rather than drawing its time from the profile")
    p.add_argument("--json", type=_args.output_path(), default=None, metavar="F", help="write the summary as JSON")
    p.add_argument("--timeline", type=_args.output_path(), default=None, metavar="F.json",
                   help="write a Chrome trace-event timeline (open in ui.perfetto.dev), one track per processor")
    p.add_argument("--plot", type=_args.output_path(*_args.PLOT_SUFFIXES), default=None, metavar="F.png",
                   help="write a PNG: Gantt strip, latency CDF per model, deadline-met %% over time")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Run the command; 0 on success, 2 with one clear line on stderr for bad input."""
    try:
        return _run(args)
    except (EdgeRTError, OSError) as exc:
        if getattr(args, "debug", False):
            import traceback  # noqa: PLC0415

            traceback.print_exception(exc, file=sys.stderr)
        print(f"edgert simulate: error: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    from edgert._replay import live_figures, read_outcomes  # noqa: PLC0415
    from edgert.sweep import sim_config  # noqa: PLC0415
    from scheduler.sim import run_simulation  # noqa: PLC0415

    _check_size(args)
    live = read_outcomes(args.trace) if args.trace else []
    _check_never_ran(live, args.device)
    # the one builder `edgert sweep` uses too: a sweep cell and this command give the same figures
    cfg = sim_config(scenario=args.scenario, trace=args.trace, device=args.device, scheduler=args.scheduler,
                     objective=args.objective, load=args.load, duration_s=args.duration, seed=args.seed,
                     burst=args.burst, live=live, streams=args.streams, priority=args.priority,
                     measured=args.measured_runs)
    res = _run_with_progress(cfg, run_simulation)
    summary = res.summary()
    _print_summary(summary, cfg)
    if summary.get("per_stream"):
        _print_streams(summary["per_stream"])
    if live:
        _print_comparison(summary, live_figures(live))
    if args.json:
        out = {"config": _config_json(cfg), **summary}
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    if args.timeline:
        from scheduler.timeline import write_chrome_trace  # noqa: PLC0415

        write_chrome_trace(args.timeline, res.records, res.processor_names)
    if args.plot:
        from edgert.bench.plot import plot_records  # noqa: PLC0415

        plot_records(res.records, args.plot, title=f"{summary['workload']} on {summary['device']}, "
                                                  f"scheduler {summary['scheduler']}",
                     processors=res.processor_names)
    for what, path in (("summary", args.json), ("timeline", args.timeline), ("plot", args.plot)):
        if path:
            print(f"wrote {what}: {path}")
    return 0


def _check_never_ran(live: list[Any], device: str) -> None:
    """Refuse, in one line naming it, a trace model that never ran live and that the profile has no latency for
    (``edgert profile --from-trace`` could measure nothing of it), rather than the simulator's generic refusal.

    Raises:
        ConfigError: such a model, with what the live run did with its requests and the fix.
    """
    from edgert._replay import never_ran  # noqa: PLC0415
    from scheduler.sim import load_profile  # noqa: PLC0415

    unmeasured = never_ran(live)
    if not unmeasured:
        return
    prof = load_profile(device)
    cloud = prof.cloud.latency_ms if prof.cloud is not None else {}
    missing = [line for model, line in unmeasured.items() if model not in prof.latency_ms and model not in cloud]
    if missing:
        raise ConfigError(f"device profile {prof.name!r} has no latency for a model of the trace: {missing[0]}; "
                          "measure it with `edgert profile MODEL_FILE` or give its latency_ms in the profile")


def _check_size(args: argparse.Namespace) -> None:
    """Refuse a scenario run too large to hold (``--load`` x ``--duration`` x the scenario's rate)."""
    from scheduler.sim.run import DEFAULT_DURATION_S  # noqa: PLC0415
    from scheduler.sim.workload import SCENARIOS  # noqa: PLC0415

    if args.scenario not in SCENARIOS:
        return   # an unknown name gets its "did you mean" from the simulator
    dur = args.duration if args.duration is not None else DEFAULT_DURATION_S
    factor = float(args.burst.split(":")[2]) if args.burst else 1.0
    n = sum(s.fps * s.p for s in SCENARIOS[args.scenario]) * args.load * factor * dur
    if n > MAX_SIM_REQUESTS:
        raise ConfigError(f"--load {args.load:g} x --duration {dur:g} s of scenario {args.scenario} is "
                          f"~{n:.2g} requests, over the simulator's {MAX_SIM_REQUESTS:.0e}; "
                          "lower --load or --duration")


def _run_with_progress(cfg: Any, run_simulation: Any) -> Any:
    """Run, with progress on stderr when the run is long (about a second of work or more)."""
    from scheduler.sim.run import DEFAULT_DURATION_S  # noqa: PLC0415
    from scheduler.sim.workload import SCENARIOS  # noqa: PLC0415

    from edgert.cli._progress import Progress  # noqa: PLC0415

    est_requests = 0.0
    if cfg.scenario in SCENARIOS:
        dur = cfg.duration_s if cfg.duration_s is not None else DEFAULT_DURATION_S
        est_requests = sum(s.fps * s.p for s in SCENARIOS[cfg.scenario]) * cfg.load * dur
    elif cfg.trace is not None:
        try:
            est_requests = Path(cfg.trace).stat().st_size / 80   # ~80 bytes a line
        except OSError:
            est_requests = 0.0
    with collector_paused():
        if est_requests < PROGRESS_MIN_REQUESTS:
            return run_simulation(cfg)
        with Progress("simulating") as bar:
            return run_simulation(cfg, progress=bar.update)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for a simulated run, on again after (if it was on).

    A run allocates ~10 small objects per request and frees few of them until its end, so the collector would
    rescan the growing heap again and again (a third of the run's time) for no garbage. The command line owns
    its process, so it may pause the collector; ``run_simulation``, a library function, leaves it alone (a
    sweep's worker pauses it too: ``edgert/sweep/_cell.py``)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _config_json(cfg: Any) -> dict[str, Any]:
    b = cfg.burst
    return {"scenario": cfg.scenario, "trace": None if cfg.trace is None else str(cfg.trace),
            "device": str(cfg.profile), "scheduler": cfg.scheduler, "objective": cfg.objective, "load": cfg.load,
            "duration_s": cfg.duration_s, "seed": cfg.seed, "streams": cfg.streams,
            "measured_runs": cfg.run_ms is not None,
            "priorities": None if cfg.priorities is None else dict(cfg.priorities),
            "burst": None if b is None else {"start_s": b.start_s, "duration_s": b.duration_s, "factor": b.factor}}


def _fmt(v: Any, pct: bool = False) -> str:
    if v is None:
        return "-"
    if pct:
        return f"{100 * v:.1f}%"
    return f"{v:.2f}" if isinstance(v, float) else str(v)


def _print_summary(s: dict[str, Any], cfg: Any) -> None:
    """The summary as plain tables that fit the terminal (80 columns included) and read the same piped."""
    from edgert.tables import Column, render  # noqa: PLC0415

    title = (f"{s['workload']} on {s['device']} | scheduler {s['scheduler']} | load {cfg.load} | seed {cfg.seed}"
             + (f" | burst {cfg.burst.start_s}:{cfg.burst.duration_s}:{cfg.burst.factor}" if cfg.burst else ""))
    cols = [Column("model", "<", wrap=True), Column("reqs"), Column("ok"), Column("late"), Column("drop"),
            Column("met"), Column("p50 ms"), Column("p99 ms"), Column("cloud"), Column("RT")]

    def row(name: str, m: dict[str, Any]) -> tuple[str, ...]:
        return (name, str(m["requests"]), str(m["ok"]), str(m["late"]), str(m["dropped"]),
                _fmt(m["slo_met_rate"], True), _fmt(m["p50_ms"]), _fmt(m["p99_ms"]), str(m["offloaded"]),
                f"{m['realtime_score']:.3f}")

    rows = [row(name, m) for name, m in s["per_model"].items()] + [(), row("all", s)]
    print(render(cols, rows, title=title, footer=["met: deadline met; cloud: offloaded; RT: XRBench real-time "
                                                  "score (1 = every request well before its deadline)"]))
    pcols = [Column("processor", "<", wrap=True), Column("kind", "<"), Column("requests"), Column("busy ms"),
             Column("utilization")]
    prow = [(n, p["kind"], str(p["requests"]), f"{p['busy_ms']:.1f}", _fmt(p["utilization"], True))
            for n, p in s["per_processor"].items()]
    print()
    print(render(pcols, prow, title="processors"))
    if s["drop_reasons"]:
        top = sorted(s["drop_reasons"].items(), key=lambda kv: -kv[1])
        print("dropped:")
        for reason, n in top[:6]:
            print(f"  {n:>7} x {reason}")
        if len(top) > 6:
            print(f"  ... and {len(top) - 6} more kinds (see --json)")
    for r in s.get("memory_refused", ()):
        print(f"not placed for want of memory: {r['reason']}")
    if "energy_mj" in s:
        print(_energy_line(s))
    print(f"simulated {s['sim_span_ms'] / 1000:.1f} s in {s['wall_s']:.2f} s wall "
          f"({s['wall_requests_per_s'] or 0:,.0f} requests/s)")


def _print_streams(per: dict[str, Any]) -> None:
    """Each stream: frames offered, taken, on time, shed, its rung and its steps."""
    from edgert.tables import Column, render  # noqa: PLC0415

    cols = [Column("stream", "<", wrap=True), Column("level", "<"), Column("frames"), Column("taken"),
            Column("on time"), Column("late"), Column("shed"), Column("fps now"), Column("steps")]
    rows = []
    for name, s in per.items():
        on = s["on_time"] / s["frames"] if s["frames"] else 0.0
        rows.append((name, s["priority"], str(s["frames"]), str(s["taken"]), f"{100 * on:.1f}%", str(s["late"]),
                     str(s["frames_shed"]), f"{s['rung_fps']:g}", str(len(s["steps"]))))
    print()
    print(render(cols, rows, title="streams (the stream controller, closed-loop)",
                 footer=["on time: share of the frames offered; shed: not taken (frames_shed_by in --json)"]))


def _energy_line(s: dict[str, Any]) -> str:
    """One line (<= 80 columns): energy (J), mean power (W), XRBench score (E_max 1500 mJ), peak degC."""
    e, xr, th = s["energy_mj"], s.get("xrbench", {}), s.get("thermal")
    line = (f"energy {e['total_mj'] / 1e3:.1f} J (inference {e['inference_mj'] / 1e3:.1f}), "
            f"{e['mean_power_w']:.2f} W; XRBench {xr.get('score', 0.0):.1f}")
    if th is not None:
        line += f"; peak {th['peak_c']:.1f} C"
    return line


#: Fewest requests of a model whose live and replayed p50 the comparison sets side by side.
MIN_P50_N = 20


def _print_comparison(s: dict[str, Any], live: dict[str, tuple[int, float, float | None]]) -> None:
    """Live (the trace's recorded outcomes) vs this replay, per model: deadline-met and p50."""
    from edgert.tables import Column, render  # noqa: PLC0415

    cols = [Column("model", "<", wrap=True), Column("n"), Column("met live"), Column("met sim"), Column("d pt"),
            Column("p50 live"), Column("p50 sim"), Column("d p50")]
    rows = []
    for name, (n, met, p50) in live.items():
        m = s["per_model"].get(name)
        if m is None:
            continue
        dpt = 100 * (m["slo_met_rate"] - met)
        dp = (m["p50_ms"] - p50) / p50 if p50 and m["p50_ms"] is not None else None
        shown = "-" if dp is None else f"n<{MIN_P50_N}" if n < MIN_P50_N else f"{100 * dp:+.1f}%"
        rows.append((name, str(n), f"{100 * met:.1f}%", _fmt(m["slo_met_rate"], True),
                     f"{dpt:+.1f}", _fmt(p50), _fmt(m["p50_ms"]), shown))
    print()
    print(render(cols, rows, title="live run (recorded in the trace) vs this replay",
                 footer=["n: requests; met: deadline-met share; d pt: sim - live in points; p50: latency from "
                         f"submission to end (ms); d p50: sim vs live (not compared under {MIN_P50_N} requests: "
                         "a median of a few runs is noise)"]))
