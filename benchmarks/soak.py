"""Soak: does edgert's memory, thread count and fd count stay flat over minutes, and does the demo's
on-time share hold? Memory that climbs for ten minutes reads as a leak to whoever watches a headset.

Parts (one per run, ``--part``):

* ``demo`` (default): the XR demo's default configuration (one user, the sample scene, the default
  policy; ``--offload`` / ``--users`` as the demo's) in this process: a minute of warm-up, then
  ``--minutes``. Every ``--sample-s`` it samples this process's resident set (VmRSS), threads and
  open fds from /proc; after the warm-up, every minute each stream's on-time share (frames whose
  whole cascade met the deadline, of the frames taken that minute) and p99 frame latency (ms).
* ``cli``: ``edgert run xr-demo --seconds S --quiet`` as its own process, sampled from outside
  (``/proc/PID``): the figures of the command a user runs (no per-minute stream figures).
* ``recursion``: a Child-Sum TreeLSTM (random weights, 100 random trees of ~40 nodes) ``encode``-d
  over and over through the default edgert runtime for ``--minutes``.
* ``cloud``: a runtime offloading to an ``edgert cloud serve`` worker over a real mosquitto broker
  (``cpu_workers=0``: every request goes there), the worker killed and started again every
  ``--bounce-s`` seconds, requests going on throughout.

Printed: the samples, then the slopes after warm-up (the first minute left out): RSS MB/min, threads
and fds per minute, and for ``demo`` each stream's on-time share (points/min) and p99 (ms/min), and
the last minute's on-time share against the first's. Timing-free checks only: this is a benchmark,
run under ``flock /tmp/edgert-bench.lock``; say when the host was shared.

    flock /tmp/edgert-bench.lock python benchmarks/soak.py --minutes 30 [--part demo|cli|recursion|cloud]

Writes benchmarks/results/soak_<part>.md (``--out`` to choose).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.append(str(Path(__file__).resolve().parent))   # after the packages: benchmarks/recursion.py is not them

from _common import host_line, markdown_doc  # noqa: E402

#: Samples before this many seconds are warm-up: left out of the slopes.
WARMUP_S = 60.0


@dataclass(slots=True)
class Sample:
    """One look at a process: when (s since the run began), resident set (MB), threads, open fds, and of those
    fds, how many hold a model file open (LiteRT keeps the file it maps open: one per interpreter copy)."""

    t_s: float
    rss_mb: float
    threads: int
    fds: int
    model_fds: int = 0
    #: demo: interpreter / session copies open over all models (a LiteRT pool opens one more the first time
    #: a model's runs overlap: :mod:`delegates.sharing`); 0 where not sampled
    copies: int = 0


def proc_sample(pid: int | str, t_s: float) -> Sample | None:
    """``/proc/PID``'s VmRSS (MB), Threads and open fds at ``t_s``; None once the process is gone."""
    try:
        fields = {}
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("VmRSS", "Threads"):
                    fields[key] = int(rest.split()[0])
        fds = os.listdir(f"/proc/{pid}/fd")
        return Sample(t_s, fields["VmRSS"] * 1024 / 1e6, fields["Threads"], len(fds),
                      sum(_target(f"/proc/{pid}/fd/{fd}").endswith((".tflite", ".onnx")) for fd in fds))
    except (OSError, KeyError, ValueError, IndexError):
        return None


def _target(link: str) -> str:
    """Where an fd link points ("" once it closed)."""
    try:
        return os.readlink(link)
    except OSError:
        return ""


@dataclass(slots=True)
class Minute:
    """One minute of one stream: frames taken, on time, and the p99 frame latency (ms)."""

    minute: int
    stream: str
    frames: int
    on_time: int
    p99_ms: float

    @property
    def on_time_pct(self) -> float:
        """On-time share of the minute's frames, %."""
        return 100.0 * self.on_time / self.frames if self.frames else float("nan")


@dataclass(slots=True)
class Soak:
    """What a soak saw: the samples, and for the demo the per-minute stream figures."""

    part: str
    samples: list[Sample] = field(default_factory=list)
    minutes: list[Minute] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def sampling(every_s: float, seconds: float, look: Callable[[float], Sample | None],
             on_minute: Callable[[int], None] | None = None, minute_zero_s: float = 0.0) -> list[Sample]:
    """Call ``look(t_s)`` every ``every_s`` for ``seconds``, and ``on_minute(k)`` when minute k (from 1)
    after ``minute_zero_s`` ends (``on_minute(0)`` at ``minute_zero_s`` itself)."""
    out: list[Sample] = []
    t0 = time.monotonic()
    k, minute = 0, 0
    while True:
        t = time.monotonic() - t0
        if t > seconds + every_s / 2:
            return out
        s = look(t)
        if s is None:
            return out
        out.append(s)
        if on_minute is not None and t >= minute_zero_s + 60.0 * minute - every_s / 2:
            on_minute(minute)
            minute += 1
        k += 1
        time.sleep(max(0.0, t0 + k * every_s - time.monotonic()))


# -- parts --------------------------------------------------------------------------------------------


def soak_demo(minutes: float, every_s: float, offload: str | None, users: int) -> Soak:
    """The demo's default configuration in this process for :data:`WARMUP_S` + ``minutes``; a sampler thread
    looks at /proc/self, and counts each stream's frames per minute after the warm-up."""
    import edgert  # noqa: PLC0415
    from apps import xr_demo  # noqa: PLC0415
    from apps.xr import assets  # noqa: PLC0415

    soak = Soak("demo")
    with edgert.Runtime(delegates=xr_demo.demo_delegates("auto"), offload=offload,
                        records=xr_demo.SUMMARY_RECORDS) as rt:
        session = xr_demo.XRSession(rt, users=users)
        seen = {name: (0, 0) for name in session.stats}

        def on_minute(k: int) -> None:
            with session._lock:   # the demo's own per-stream counters, read as its summary does
                now = {n: (st.frames, st.on_time, st.latencies_ms.last(st.frames - seen[n][0]))
                       for n, st in session.stats.items()}
            for n, (frames, on_time, lat) in now.items():
                f0, o0 = seen[n]
                if k:   # minute 0 is the warm-up's end: where the first minute starts counting
                    soak.minutes.append(Minute(k, n, frames - f0, on_time - o0,
                                               float(np.percentile(lat, 99)) if len(lat) else float("nan")))
                seen[n] = (frames, on_time)

        def look(t: float) -> Sample | None:
            s = proc_sample("self", t)
            if s is not None:
                s.copies = sum(m["copies"] for m in rt.memory()["per_model"].values())
            return s

        seconds = WARMUP_S + minutes * 60.0
        sampler = threading.Thread(target=lambda: soak.samples.extend(
            sampling(every_s, seconds, look, on_minute, WARMUP_S)), name="soak-sampler")
        sampler.start()
        session.run(assets.sample_frames(), seconds + 0.5)
        sampler.join()
        soak.notes.append(f"processors: {', '.join(rt.processors)}; scheduler {rt.scheduler}; "
                          f"offload {offload or 'off'}; users {users}; {WARMUP_S:.0f} s of warm-up, then "
                          f"{minutes:g} minutes counted per minute (minute 1 starts at {WARMUP_S:.0f} s)")
    return soak


def soak_cli(seconds: float, every_s: float, extra: list[str]) -> Soak:
    """``python -m edgert.cli run xr-demo --seconds S --quiet`` sampled from outside."""
    soak = Soak("cli")
    cmd = [sys.executable, "-m", "edgert.cli", "run", "xr-demo", "--seconds", f"{seconds:g}", "--quiet", *extra]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        # its clock starts when it is started; the demo itself starts once its models are loaded
        soak.samples = sampling(every_s, seconds + 120.0, lambda t: proc_sample(proc.pid, t))
        rc = proc.wait()
        out.seek(0)
        tail = out.read().decode(errors="replace").strip().splitlines()[-8:]
    soak.notes.append(f"command: {' '.join(cmd[1:])} (exit {rc}); t is seconds since the process started")
    soak.notes += [f"    {line}" for line in tail if line.startswith("memory") or "resident" in line]
    return soak


def soak_recursion(minutes: float, every_s: float) -> Soak:
    """Child-Sum TreeLSTM ``encode`` over and over through the default edgert runtime."""
    from recursion.runners import default_runtime  # noqa: PLC0415
    from recursion.models import ChildSumTreeLSTM  # noqa: PLC0415
    from recursion.synth import random_tree  # noqa: PLC0415

    soak = Soak("recursion")
    rng = np.random.default_rng(0)
    trees = [random_tree(40, rng=rng) for _ in range(100)]
    model = ChildSumTreeLSTM.random([f"w{i}" for i in range(100)], input_dim=300, hidden=150)
    stop, runs = threading.Event(), [0]

    def work() -> None:
        while not stop.is_set():
            model.encode(trees)
            runs[0] += 1

    worker = threading.Thread(target=work, name="soak-encode")
    worker.start()
    soak.samples = sampling(every_s, minutes * 60.0, lambda t: proc_sample("self", t))
    stop.set()
    worker.join()
    soak.notes.append(f"{runs[0]} encode calls of 100 trees (~40 nodes) through the default runtime "
                      f"({', '.join(default_runtime().processors)})")
    return soak


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_worker(url: str, models: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    before = log.read_text(errors="replace").count(" ready on ") if log.exists() else 0
    with open(log, "ab") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "edgert.cli", "cloud", "serve", "--broker", url,
                                 "--models", str(models), "-v"], stdout=fh, stderr=subprocess.STDOUT,
                                cwd=ROOT, env=env)
    end = time.monotonic() + 60.0
    while log.read_text(errors="replace").count(" ready on ") <= before and time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"cloud worker exited: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.05)
    return proc


def soak_cloud(minutes: float, every_s: float, bounce_s: float) -> Soak:
    """Every request on an ``edgert cloud serve`` worker over mosquitto; the worker bounces."""
    import edgert  # noqa: PLC0415
    from edgert.testing import genmodels  # noqa: PLC0415

    mosquitto = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    soak = Soak("cloud")
    tmp = Path(tempfile.mkdtemp(prefix="edgert-soak-"))
    port = _free_port()
    conf = tmp / "mosquitto.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\n"
                    + ("user root\n" if os.geteuid() == 0 else ""))
    broker = subprocess.Popen([mosquitto, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"mqtt://127.0.0.1:{port}"
    genmodels.save("cnn", tmp / "models", formats=["onnx"])
    worker = None
    try:
        time.sleep(0.5)
        worker = _start_worker(url, tmp / "models", tmp / "worker.log")
        stop, counts = threading.Event(), {"bounces": 0}
        x = genmodels.example_inputs("cnn")
        with edgert.Runtime(cpu_workers=0, offload=url) as rt:
            m = rt.load(tmp / "models" / "cnn.onnx", name="cnn", slo_ms=100.0)

            def requests() -> None:
                while not stop.wait(0.005):   # ~150 requests/s here; none piles up while the cloud is gone
                    m.submit(x).result(30)

            def bounce() -> None:
                nonlocal worker
                while not stop.wait(bounce_s):
                    assert worker is not None
                    worker.send_signal(signal.SIGKILL)
                    worker.wait(10)
                    if stop.wait(bounce_s / 4):   # the cloud is gone a while: requests fail or drop
                        return
                    worker = _start_worker(url, tmp / "models", tmp / "worker.log")
                    counts["bounces"] += 1

            threads = [threading.Thread(target=requests, name="soak-requests"),
                       threading.Thread(target=bounce, name="soak-bounce")]
            for t in threads:
                t.start()
            soak.samples = sampling(every_s, minutes * 60.0, lambda t: proc_sample("self", t))
            stop.set()
            for t in threads:
                t.join()
            st = rt.stats()["cnn"]
        soak.notes.append(f"{st['requests']} requests ({st['ok']} ok, {st['late']} late, {st['dropped']} dropped, "
                          f"{st['failed']} failed); the cloud worker killed and started again "
                          f"{counts['bounces']} times (every {bounce_s:g} s, gone {bounce_s / 4:g} s each time)")
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
            worker.wait(10)
        broker.terminate()
        broker.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)
    return soak


# -- figures ------------------------------------------------------------------------------------------


def slope_per_min(ts_s: list[float], ys: list[float]) -> float:
    """Least-squares slope of ``ys`` over ``ts_s`` (s), per minute (nan with under two points)."""
    t, y = np.asarray(ts_s, float), np.asarray(ys, float)
    ok = np.isfinite(y)
    if ok.sum() < 2 or np.ptp(t[ok]) == 0:
        return float("nan")
    return float(np.polyfit(t[ok] / 60.0, y[ok], 1)[0])


def at(samples: list[Sample], t_s: float) -> Sample | None:
    """The sample nearest ``t_s``."""
    return min(samples, key=lambda s: abs(s.t_s - t_s)) if samples else None


def report(soak: Soak) -> list[str]:
    """The lines printed and written: samples, slopes after warm-up, the stream checks."""
    after = [s for s in soak.samples if s.t_s >= WARMUP_S] or soak.samples
    ts = [s.t_s for s in after]
    lines = [f"slopes after {WARMUP_S:.0f} s warm-up: RSS {slope_per_min(ts, [s.rss_mb for s in after]):+.3f} MB/min, "
             f"threads {slope_per_min(ts, [s.threads for s in after]):+.3f}/min, "
             f"fds {slope_per_min(ts, [s.fds for s in after]):+.3f}/min"]
    if after:
        first, last = after[0], after[-1]
        lines.append(f"from {first.t_s:.0f} s to {last.t_s:.0f} s: RSS {first.rss_mb:.1f} -> {last.rss_mb:.1f} MB "
                     f"({last.rss_mb - first.rss_mb:+.1f}); threads {first.threads} -> {last.threads}; "
                     f"fds {first.fds} -> {last.fds}; peak RSS {max(s.rss_mb for s in soak.samples):.1f} MB")
    s60, s240 = at(soak.samples, 60.0), at(soak.samples, 240.0)
    if s60 is not None and s240 is not None and soak.samples[-1].t_s >= 235.0:
        lines.append(f"bar window: RSS(240 s) - RSS(60 s) = {s240.rss_mb - s60.rss_mb:+.1f} MB; threads "
                     f"{s60.threads} / {s240.threads}, fds {s60.fds} / {s240.fds} at 60 / 240 s")
    streams = sorted({m.stream for m in soak.minutes})
    for name in streams:
        ms = [m for m in soak.minutes if m.stream == name]
        later = ms
        k = [float(m.minute) * 60.0 for m in later]
        drift = ms[-1].on_time_pct - ms[0].on_time_pct
        lines.append(f"{name}: on time {ms[0].on_time_pct:.1f}% in minute 1, {ms[-1].on_time_pct:.1f}% in minute "
                     f"{ms[-1].minute} ({drift:+.1f} points, {'within' if abs(drift) <= 5.0 else 'OUTSIDE'} 5); "
                     f"slope {slope_per_min(k, [m.on_time_pct for m in later]):+.3f} points/min; p99 "
                     f"{ms[0].p99_ms:.1f} -> {ms[-1].p99_ms:.1f} ms, "
                     f"slope {slope_per_min(k, [m.p99_ms for m in later]):+.3f} ms/min")
    return lines


def write(soak: Soak, path: Path, command: str) -> None:
    """benchmarks/results/soak_<part>.md: notes, the summary lines, the samples and the minutes."""
    notes = [host_line() + " (shared with other jobs unless said otherwise)", f"`{command}`", *soak.notes,
             *(f"- {line}" for line in report(soak))]
    rows = [f"| {s.t_s:.0f} | {s.rss_mb:.1f} | {s.threads} | {s.fds} | {s.model_fds} | {s.copies} |"
            for s in soak.samples]
    doc = markdown_doc(f"Soak: {soak.part}", notes, ["t (s)", "RSS (MB)", "threads", "fds", "of which model files",
                                                      "model copies (demo)"], rows, range(6))
    if soak.minutes:
        doc += "\n| minute | stream | frames | on time % | p99 (ms) |\n|---:|---|---:|---:|---:|\n"
        doc += "".join(f"| {m.minute} | {m.stream} | {m.frames} | {m.on_time_pct:.1f} | {m.p99_ms:.1f} |\n"
                       for m in soak.minutes)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc)


def main(argv: list[str] | None = None) -> int:
    global WARMUP_S   # noqa: PLW0603 - one setting for the whole run, read by the parts and the report
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=("demo", "cli", "recursion", "cloud"), default="demo")
    ap.add_argument("--minutes", type=float, default=5.0, help="how long (cli: the demo's --seconds / 60)")
    ap.add_argument("--sample-s", type=float, default=10.0, help="seconds between samples")
    ap.add_argument("--offload", default=None, help="demo: the demo's --offload (auto, mqtt://…)")
    ap.add_argument("--users", type=int, default=1, help="demo: XR users")
    ap.add_argument("--bounce-s", type=float, default=40.0, help="cloud: seconds between worker kills")
    ap.add_argument("--warmup-s", type=float, default=WARMUP_S, help="seconds left out of the slopes (demo: "
                    "run before the minutes are counted)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    WARMUP_S = args.warmup_s
    command = "python benchmarks/soak.py " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.part == "demo":
        soak = soak_demo(args.minutes, args.sample_s, None if args.offload in (None, "off") else args.offload,
                         args.users)
    elif args.part == "cli":
        soak = soak_cli(args.minutes * 60.0, args.sample_s, [] if args.offload is None else ["--offload", args.offload])
    elif args.part == "recursion":
        soak = soak_recursion(args.minutes, args.sample_s)
    else:
        soak = soak_cloud(args.minutes, args.sample_s, args.bounce_s)
    print(host_line())
    for s in soak.samples:
        print(f"  t {s.t_s:7.1f} s  RSS {s.rss_mb:7.1f} MB  threads {s.threads:3d}  fds {s.fds:3d}  "
              f"model files open {s.model_fds:2d}  copies {s.copies:2d}")
    for m in soak.minutes:
        print(f"  minute {m.minute:3d} {m.stream:<13} frames {m.frames:5d} on time {m.on_time_pct:5.1f}%  "
              f"p99 {m.p99_ms:7.1f} ms")
    for line in soak.notes + report(soak):
        print(line)
    out = args.out or ROOT / "benchmarks" / "results" / f"soak_{args.part}.md"
    write(soak, out, command)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
