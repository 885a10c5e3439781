#!/usr/bin/env python3
"""Test double of ``adb`` (Android Debug Bridge) — not the real tool.

Answers ``adb [-s SERIAL] devices | get-state | push SRC DST | shell CMD`` for one
fake device described in the ``android`` section of ``EDGERT_DOUBLE_CONFIG``:
``serial``, ``state`` (device | unauthorized | offline | absent), ``root`` (a
directory standing for the device filesystem), ``props`` (getprop), ``lacks``
(processor paths whose delegate the device cannot create), ``latency_us``
(``{model: {path: us}}``), optional ``partial`` (``{model: {path: kernels}}``),
``lose_after_pushes`` (the device disappears after that many pushes) and
``battery`` (``voltage_uv``, ``idle_ua``, ``load_ua``: ``{path: uA}``), the fuel
gauge: ``cat current_now voltage_now`` prints the path's load current right
after a benchmark_model run of that path, the idle current otherwise, one
integer per line as sysfs does (negative while discharging, as on Pixels).
``shell`` runs ``getprop``, ``mkdir -p``, ``chmod``, ``ls``, ``cat`` and TensorFlow Lite's
``benchmark_model``, whose output follows the real tool's format
(tensorflow/lite/tools/benchmark: benchmark_model.cc, benchmark_tflite_model.cc).
"""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common_double import config, fail, g, log_call, mapped

UNAUTHORIZED = ("error: device unauthorized.\nThis adb server's $ADB_VENDOR_KEYS is not set\n"
                "Try 'adb kill-server' if that seems wrong.\nOtherwise check for a confirmation dialog on your device.")
DELEGATE_NAME = {"gpu": "GPU", "nnapi": "NNAPI", "hexagon": "Hexagon", "qnn_htp": "EXTERNAL"}


def main(argv: list[str]) -> int:
    log_call("adb", argv)
    dev = config()["android"]
    serial = None
    args = list(argv)
    while args and args[0] in ("-s", "-d", "-e"):
        if args[0] == "-s":
            serial = args[1]
            args = args[2:]
        else:
            args = args[1:]
    if not args:
        fail("adb: usage: adb [-s SERIAL] COMMAND")
    cmd, rest = args[0], args[1:]
    if cmd == "devices":
        print("List of devices attached")
        if dev["state"] != "absent":
            print(f"{dev['serial']}\t{dev['state']}")
        print()
        return 0
    if dev["state"] == "absent" or (serial is not None and serial != dev["serial"]):
        fail(f"error: device '{serial}' not found" if serial else "error: no devices/emulators found")
    if dev["state"] == "unauthorized":
        fail(UNAUTHORIZED)
    if dev["state"] == "offline":
        fail("error: device offline")
    root = Path(dev["root"])
    if cmd == "get-state":
        print("device")
        return 0
    if cmd == "push":
        if "lose_after_pushes" in dev:
            marker = root / ".pushes"
            n = int(marker.read_text()) if marker.exists() else 0
            marker.write_text(str(n + 1))
            if n >= dev["lose_after_pushes"]:
                fail(f"adb: error: failed to get feature set: device '{serial}' not found")
        src, dst = Path(rest[0]), rest[1]
        if not src.exists():
            fail(f"adb: error: cannot stat '{src}': No such file or directory")
        target = mapped(root, dst)
        if dst.endswith("/") or target.is_dir():
            target = target / src.name
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, target, dirs_exist_ok=True)
            n = sum(1 for p in src.rglob("*") if p.is_file())
        else:
            shutil.copyfile(src, target)
            n = 1
        size = sum(p.stat().st_size for p in ([src] if src.is_file() else src.rglob("*")) if p.is_file())
        print(f"{src}: {n} file{'s' if n != 1 else ''} pushed, 0 skipped. 31.4 MB/s ({size} bytes in 0.001s)")
        return 0
    if cmd == "shell":
        return shell(dev, root, shlex.split(" ".join(rest)))
    fail(f"adb: unknown command {cmd}")
    return 1


def shell(dev: dict, root: Path, argv: list[str]) -> int:
    env = {}
    while argv and "=" in argv[0] and not argv[0].startswith("-"):
        k, v = argv.pop(0).split("=", 1)
        env[k] = v
    prog = argv[0]
    if prog == "getprop":
        for k, v in sorted(dev["props"].items()):
            print(f"[{k}]: [{v}]")
        return 0
    if prog == "mkdir":
        for p in argv[1:]:
            if not p.startswith("-"):
                mapped(root, p).mkdir(parents=True, exist_ok=True)
        return 0
    if prog == "chmod":
        target = mapped(root, argv[-1])
        if not target.exists():
            fail(f"chmod: {argv[-1]}: No such file or directory")
        (target.parent / (target.name + ".exec")).write_text("")
        return 0
    if prog == "ls":
        d = mapped(root, argv[-1])
        if not d.is_dir():
            fail(f"ls: {argv[-1]}: No such file or directory")
        print("\n".join(sorted(p.name for p in d.iterdir() if not p.name.endswith(".exec"))))
        return 0
    if prog == "cat":
        return cat(dev, root, argv[1:])
    if prog.endswith("benchmark_model"):
        exe = mapped(root, prog)
        if not exe.exists():
            fail(f"/system/bin/sh: {prog}: inaccessible or not found", 127)
        if not (exe.parent / (exe.name + ".exec")).exists():
            fail(f"/system/bin/sh: {prog}: can't execute: Permission denied", 126)
        return benchmark_model(dev, root, argv[1:], env)
    fail(f"/system/bin/sh: {prog}: inaccessible or not found", 127)
    return 127


def cat(dev: dict, root: Path, paths: list[str]) -> int:
    """``cat`` of the battery fuel gauge sysfs files (uA, uV) or of a file under the fake root."""
    bat = dev.get("battery")
    marker = root / ".last_run_path"
    for p in paths:
        name = p.rsplit("/", 1)[-1]
        if p.startswith("/sys/class/power_supply/battery/") and bat is not None and name in ("current_now",
                                                                                           "voltage_now"):
            if name == "voltage_now":
                print(int(bat["voltage_uv"]))
                continue
            last = marker.read_text() if marker.exists() else None
            if marker.exists():
                marker.unlink()
            print(-int(bat["load_ua"].get(last, bat["idle_ua"]) if last else bat["idle_ua"]))
        elif mapped(root, p).is_file():
            sys.stdout.write(mapped(root, p).read_text())
        else:
            fail(f"cat: {p}: No such file or directory")
    return 0


def benchmark_model(dev: dict, root: Path, args: list[str], env: dict) -> int:
    """Print what TensorFlow Lite's benchmark_model prints (INFO lines on stderr/stdout as logcat-less CLI)."""
    flags = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
    graph = flags.get("graph", "")
    path = "cpu"
    if flags.get("use_gpu") == "true":
        path = "gpu"
    elif flags.get("use_nnapi") == "true":
        path = "nnapi"
    elif flags.get("use_hexagon") == "true":
        path = "hexagon"
    elif "external_delegate_path" in flags:
        path = "qnn_htp"
    threads = flags.get("num_threads", "-1")
    out = ["INFO: STARTING!", "INFO: Log parameter values verbosely: [0]",
           f"INFO: Min num runs: [{flags.get('num_runs', '50')}]", f"INFO: Num threads: [{threads}]",
           f"INFO: Min warmup runs: [{flags.get('warmup_runs', '1')}]", f"INFO: Graph: [{graph}]",
           f"INFO: #threads used for CPU inference: [{threads}]"]
    for f, label in (("use_gpu", "Use gpu"), ("use_nnapi", "Use NNAPI"), ("use_hexagon", "Use Hexagon"),
                     ("use_xnnpack", "Use xnnpack")):
        if f in flags:
            out.append(f"INFO: {label}: [{1 if flags[f] == 'true' else 0}]")
    if "external_delegate_path" in flags:
        out.append(f"INFO: External delegate path: [{flags['external_delegate_path']}]")
    model = mapped(root, graph)
    if not model.exists():
        out += [f"ERROR: Could not open '{graph}'.", f"ERROR: Failed to mmap model {graph}",
                "ERROR: Benchmarking failed."]
        print("\n".join(out), file=sys.stderr)
        return 1
    out.append(f"INFO: Loaded model {graph}")
    stem = Path(graph).stem
    lat = dev["latency_us"].get(stem, {})
    applied = path
    if path == "cpu":
        if flags.get("use_xnnpack") == "true":
            out += ["INFO: Created TensorFlow Lite XNNPACK delegate for CPU.",
                    ("INFO: Explicitly applied XNNPACK delegate, and the model graph will be completely executed "
                    "by the delegate.")]
    else:
        name = DELEGATE_NAME[path]
        lacks = path in dev.get("lacks", [])
        if path == "hexagon" and not mapped(root, flags.get("hexagon_lib_path", "/data/local/tmp")).joinpath(
                "libhexagon_interface.so").exists():
            lacks = True
        if path == "qnn_htp" and not mapped(root, flags["external_delegate_path"]).exists():
            out += [f"ERROR: Failed to load delegate from {flags['external_delegate_path']}"]
            lacks = True
        if lacks or path not in lat:
            applied = "cpu"
            out.append({"gpu": "INFO: GPU acceleration is unsupported on this platform.",
                        "nnapi": "INFO: NNAPI acceleration is unsupported on this platform.",
                        "hexagon": "WARNING: Could not create Hexagon delegate: platform may not support delegate "
                                   "or required libraries are missing",
                        "qnn_htp": "WARNING: EXTERNAL delegate: failed to create the delegate"}[path])
        else:
            if path == "gpu":
                out += ["INFO: Created TensorFlow Lite delegate for GPU.", "INFO: GPU delegate created.",
                        "INFO: Initialized OpenCL-based API.", "INFO: Created 1 GPU delegate kernels."]
            kernels = dev.get("partial", {}).get(stem, {}).get(path)
            if kernels:
                out.append(f"INFO: Explicitly applied {name} delegate, and the model graph will be partially "
                           f"executed by the delegate w/ {kernels} delegate kernels.")
            else:
                out.append(f"INFO: Explicitly applied {name} delegate, and the model graph will be completely "
                           "executed by the delegate.")
    us = float(lat.get(applied, lat.get("cpu", 10000.0)))
    (root / ".last_run_path").write_text(applied)
    init_us = int(us * 3 + 1234)
    first, warm = us * 2.5, us * 1.2
    runs = int(flags.get("num_runs", "50"))
    out += [f"INFO: The input model file size (MB): {model.stat().st_size / 1e6:g}",
            f"INFO: Initialized session in {init_us / 1e3:g}ms.",
            ("INFO: Running benchmark for at least 5 iterations and at least 0.5 seconds but terminate if "
            "exceeding 150 seconds."),
            (f"INFO: count=5 first={int(first)} curr={int(us)} min={int(us * 0.98)} max={int(first)} avg={g(warm)} "
            f"std={int(us * 0.3)}"), "",
            (f"INFO: Running benchmark for at least {runs} iterations and at least 1 seconds but terminate if "
            "exceeding 150 seconds."),
            (f"INFO: count={runs} first={int(us * 1.01)} curr={int(us)} min={int(us * 0.97)} max={int(us * 1.2)} "
            f"avg={g(us)} std={int(us * 0.02)}"), "",
            (f"INFO: Inference timings in us: Init: {init_us}, First inference: {int(first)}, "
            f"Warmup (avg): {g(warm)}, Inference (avg): {g(us)}"),
            ("INFO: Note: as the benchmark tool itself affects memory footprint, the following is only APPROXIMATE "
            "to the actual memory footprint of the model at runtime. Take the information at your discretion."),
            "INFO: Memory footprint delta from the start of the tool (MB): init=3.14 overall=9.87"]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
