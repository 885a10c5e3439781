"""``edgert deploy android``: profile .tflite models on a phone or headset over adb.

Steps (each printed, and none run, with ``dry_run``):

1. ``adb -s SERIAL get-state`` — the device is attached and authorized.
2. ``adb -s SERIAL shell getprop`` — model, SoC, ABI list, SDK, build fingerprint;
   the benchmark binary's ELF machine must be one of the device's ABIs.
3. ``adb push`` the ``benchmark_model`` binary, any delegate libraries that sit
   beside it (``libhexagon_*.so``, ``libQnn*.so``) and the models to
   ``/data/local/tmp/edgert/``.
4. Once per processor path and model, ``benchmark_model --graph=...`` with the
   path's flags: ``cpu`` (XNNPACK, one thread, as an edgert CPU worker runs),
   ``gpu`` (``--use_gpu=true``), ``nnapi`` (``--use_nnapi=true``), ``hexagon``
   (``--use_hexagon=true``, when its libraries are on the device) and
   ``qnn_htp`` (Qualcomm's QNN TFLite delegate as an external delegate, HTP
   backend, when ``libQnnTFLiteDelegate.so`` is on the device).
5. Parse "Inference timings in us: ... Inference (avg): ..." and check that the
   path's delegate was really applied (``benchmark_model`` silently falls back
   to the CPU when it cannot create one), then write the device profile.
6. Around each run, ``cat`` the battery fuel gauge (``current_now`` uA,
   ``voltage_now`` uV under :data:`FUEL_GAUGE`) right before and right after:
   energy per inference is estimated as (P_after - P_before) x Inference (avg)
   and written to ``energy_mj`` with that method in ``sources``. The gauge
   averages over its own window, so this is an estimate of the run's extra
   power; a device without the files, or with no rise, gets no energy figure.

A failing path (a delegate the device lacks, a model a delegate rejects) is
recorded with its reason and the other paths still run.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal

from edgert.deploy.parsers import (
    ParseError,
    benchmark_delegate_status,
    parse_benchmark_model,
    parse_fuel_gauge,
    parse_getprop,
)
from edgert.deploy.profile_writer import build_profile, slug, write_profile
from edgert.deploy.runner import (
    Collector,
    CommandResult,
    DeployError,
    DeployResult,
    Measurement,
    Runner,
    StepFailed,
)
from edgert.errors import ConfigError

#: Where everything goes on the device (world-writable, exec allowed, survives reboots).
DEVICE_DIR = "/data/local/tmp/edgert"
#: Library name patterns pushed from beside the benchmark binary.
DELEGATE_LIB_GLOBS: tuple[str, ...] = ("libhexagon_*.so", "libQnn*.so")
#: The battery fuel gauge files (uA, uV) read around each run.
FUEL_GAUGE = ("/sys/class/power_supply/battery/current_now", "/sys/class/power_supply/battery/voltage_now")
#: Benchmark run counts passed to every run (``benchmark_model`` runs at least this many).
WARMUP_RUNS, NUM_RUNS = 5, 50

_ELF_MACHINES = {0x03: ("x86",), 0x28: ("armeabi-v7a", "armeabi"), 0x3E: ("x86_64",), 0xB7: ("arm64-v8a",)}


@dataclass(frozen=True, slots=True)
class AndroidPath:
    """One processor path of ``benchmark_model``: profile processor name, kind, flags, and needs.

    ``delegate`` is the provider name ``benchmark_model`` logs ("GPU", "NNAPI",
    "Hexagon", "EXTERNAL"); None for the CPU path. ``needs`` are files that must
    be in :data:`DEVICE_DIR` for the path to be tried.
    """

    processor: str
    kind: str
    flags: tuple[str, ...]
    delegate: str | None
    needs: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    label: str = ""


PATHS: tuple[AndroidPath, ...] = (
    AndroidPath("cpu", "cpu", ("--use_xnnpack=true", "--num_threads=1"), None, label="CPU/XNNPACK, 1 thread"),
    AndroidPath("gpu", "gpu", ("--use_gpu=true",), "GPU", label="GPU delegate"),
    AndroidPath("nnapi", "npu", ("--use_nnapi=true",), "NNAPI", label="NNAPI delegate"),
    AndroidPath("hexagon", "dsp", ("--use_hexagon=true", f"--hexagon_lib_path={DEVICE_DIR}"), "Hexagon",
                needs=("libhexagon_interface.so",), label="Hexagon delegate"),
    AndroidPath("qnn_htp", "npu",
                (f"--external_delegate_path={DEVICE_DIR}/libQnnTFLiteDelegate.so",
                 "--external_delegate_options=backend_type:htp"),
                "EXTERNAL", needs=("libQnnTFLiteDelegate.so",),
                env=(f"LD_LIBRARY_PATH={DEVICE_DIR}",
                     f"ADSP_LIBRARY_PATH={DEVICE_DIR};/vendor/dsp/cdsp;/vendor/lib/rfsa/adsp;/system/lib/rfsa/adsp;/dsp"),
                label="QNN TFLite delegate, HTP backend"),
)

#: adb's own errors (not the device command's): the device went away mid-run.
_LOST = re.compile(r"^(?:adb: )?error: (?:failed to get feature set: )?(?:device '.*' not found|device offline|"
                   r"device unauthorized|no devices/emulators found|closed)", re.MULTILINE)
#: Failure texts that mean "this device cannot create the delegate at all": skip the path's other models.
_PLATFORM_LEVEL = ("unsupported on this platform", "Could not create")


class AndroidDeployer:
    """Profiles ``models`` on the device ``serial`` with ``benchmark_binary`` (see module doc)."""

    def __init__(self, serial: str, benchmark_binary: str | Path, models: Sequence[str | Path],
                 runner: Runner, bundle: str | Path | None = None) -> None:
        self.serial = serial
        self.binary = Path(benchmark_binary)
        self.models = [Path(m) for m in models]
        self.bundle = Path(bundle) if bundle is not None else None
        self.r = runner
        self.collected = Collector()
        self._check_local()

    # -- local checks (read only) -------------------------------------------------------------
    def _check_local(self) -> None:
        if not self.serial:
            raise ConfigError("--serial is empty; give the serial `adb devices` lists")
        if not self.binary.is_file():
            raise ConfigError(f"benchmark binary {str(self.binary)!r} not found; build or download TensorFlow Lite's "
                              "benchmark_model for the device's ABI (e.g. android_aarch64_benchmark_model) and pass its path")
        if not self.models:
            raise ConfigError("no models given; pass --models M.tflite ...")
        seen: dict[str, Path] = {}
        for m in self.models:
            if m.suffix != ".tflite":
                raise ConfigError(f"model {str(m)!r} is not a .tflite file; benchmark_model takes TFLite flatbuffers")
            if not m.is_file():
                raise ConfigError(f"model {str(m)!r} not found")
            if m.stem in seen:
                raise ConfigError(f"two models are named {m.stem!r} ({seen[m.stem]} and {m}); rename one")
            seen[m.stem] = m
        if self.bundle is not None and not self.bundle.exists():
            raise ConfigError(f"bundle {str(self.bundle)!r} not found")

    def _adb(self, *args: str) -> CommandResult | None:
        res = self.r.run(["adb", "-s", self.serial, *args])
        if res is not None and res.returncode != 0 and args[0] != "get-state" and _LOST.search(res.output):
            raise DeployError(f"lost device {self.serial} during `adb {args[0]}` ({res.last_line()}); "
                              "reconnect it and rerun")
        return res

    def _shell(self, argv: Sequence[str]) -> CommandResult | None:
        return self._adb("shell", shlex.join(argv))

    # -- steps ------------------------------------------------------------------------------------
    def check_device(self) -> dict[str, str]:
        """Attached, authorized, and the binary's ABI fits; returns getprop (empty in a dry run).

        Raises:
            DeployError: no such device, unauthorized, offline, or wrong ABI.
        """
        res = self._adb("get-state")
        state = res.stdout.strip().splitlines()[-1:] if res is not None else []
        if res is not None and (res.returncode != 0 or state != ["device"]):
            raise DeployError(self._state_error(res))
        res = self._adb("shell", "getprop")
        if res is None:
            return {}
        if res.returncode != 0:
            raise DeployError(f"adb shell getprop failed on {self.serial}: {res.last_line()}")
        props = parse_getprop(res.stdout)
        abis = [a for a in props.get("ro.product.cpu.abilist", props.get("ro.product.cpu.abi", "")).split(",") if a]
        want = _elf_abis(self.binary)
        if want is None:
            raise DeployError(f"{self.binary} is not an ELF executable; pass TensorFlow Lite's benchmark_model "
                              "binary built for Android")
        if abis and not set(want) & set(abis):
            raise DeployError(f"{self.binary.name} is built for {want[0]} but device {self.serial} runs "
                              f"{', '.join(abis)}; use the android_{_abi_word(abis[0])}_benchmark_model build")
        return props

    def _state_error(self, res: CommandResult) -> str:
        text = res.output.lower()
        if "unauthorized" in text:
            return (f"device {self.serial} is unauthorized: unlock it, accept the 'Allow USB debugging?' prompt "
                    "(tick 'Always allow'), then retry")
        if "offline" in text:
            return f"device {self.serial} is offline: replug it or run `adb reconnect`, then retry"
        if "not found" in text or "no devices" in text:
            listing = self.r.run(["adb", "devices"])
            serials = [ln.split()[0] for ln in (listing.stdout if listing else "").splitlines()[1:] if ln.strip()]
            found = f"adb sees: {', '.join(serials)}" if serials else "adb sees no devices"
            return f"no Android device with serial {self.serial!r} ({found}); check the cable and `adb devices`"
        return f"device {self.serial} is not ready ({res.last_line()}); it must be booted with USB debugging on"

    def push(self) -> set[str]:
        """Push binary, delegate libraries, models (and the bundle); returns the files now on the device.

        Raises:
            DeployError: the binary could not be pushed or made executable.
        """
        self._shell(["mkdir", "-p", DEVICE_DIR])
        res = self._adb("push", str(self.binary), f"{DEVICE_DIR}/benchmark_model")
        if res is not None and res.returncode != 0:
            raise DeployError(f"could not push {self.binary} to {self.serial}:{DEVICE_DIR}: {res.last_line()}")
        res = self._shell(["chmod", "755", f"{DEVICE_DIR}/benchmark_model"])
        if res is not None and res.returncode != 0:
            raise DeployError(f"could not make {DEVICE_DIR}/benchmark_model executable: {res.last_line()}")
        for lib in self.delegate_libs():  # a failed library push shows up as that path's missing file
            self._adb("push", str(lib), f"{DEVICE_DIR}/{lib.name}")
        for m in self.models:
            res = self._adb("push", str(m), f"{DEVICE_DIR}/{m.name}")
            if res is not None and res.returncode != 0:
                for p in PATHS:
                    self.collected.fail(p.processor, m.stem, f"could not push {m.name}: {res.last_line()}")
        if self.bundle is not None:
            self._shell(["mkdir", "-p", f"{DEVICE_DIR}/bundle"])
            res = self._adb("push", str(self.bundle), f"{DEVICE_DIR}/bundle/")
            if res is not None and res.returncode != 0:
                self.collected.fail("bundle", None, f"could not push {self.bundle}: {res.last_line()}")
        res = self._shell(["ls", DEVICE_DIR])
        if res is None:
            return set()
        files = set(res.stdout.split())
        if "benchmark_model" not in files:
            raise DeployError(f"benchmark_model is missing from {self.serial}:{DEVICE_DIR} after the push; "
                              "check free space (`adb shell df /data`) and retry")
        return files

    def delegate_libs(self) -> list[Path]:
        """Delegate libraries beside the benchmark binary (``libhexagon_*.so``, ``libQnn*.so``)."""
        found: list[Path] = []
        for pattern in DELEGATE_LIB_GLOBS:
            found += sorted(self.binary.parent.glob(pattern))
        return found

    def profile_path(self, path: AndroidPath, device_files: set[str], device: str) -> None:
        """Run ``benchmark_model`` for every model on ``path``; failures are collected, not raised."""
        missing = [n for n in path.needs if n not in device_files]
        if missing and not self.r.dry_run:
            self.collected.fail(path.processor, None,
                                f"{path.label} not present: {', '.join(missing)} is not in {DEVICE_DIR}; put it beside "
                                "the benchmark binary to profile this path")
            return
        if self.r.dry_run and path.needs:
            self.r.say(f"# {path.processor}: only if {', '.join(path.needs)} is on the device")
        platform_failure: str | None = None
        for m in self.models:
            if any(f.model == m.stem and f.processor == path.processor for f in self.collected.failures):
                continue
            if platform_failure is not None:
                self.collected.fail(path.processor, m.stem, platform_failure)
                continue
            ok = self.collected.attempt(path.processor, m.stem, partial(self._bench, path, m, device))
            last = self.collected.failures[-1].reason if not ok else ""
            if not ok and path.delegate and any(k in last for k in _PLATFORM_LEVEL):
                platform_failure = last

    def _bench(self, path: AndroidPath, model: Path, device: str) -> Measurement | None:
        argv = [*path.env, f"{DEVICE_DIR}/benchmark_model", f"--graph={DEVICE_DIR}/{model.name}", *path.flags,
                f"--warmup_runs={WARMUP_RUNS}", f"--num_runs={NUM_RUNS}"]
        before = self._gauge()
        res = self._shell(argv)
        if res is None:
            self._gauge()
            return None
        after = self._gauge()
        status = benchmark_delegate_status(res.output, path.delegate) if path.delegate else None
        try:
            t = parse_benchmark_model(res.output)
        except ParseError as exc:
            if status is not None and not status.applied and not status.reason.startswith("benchmark_model did not"):
                raise StepFailed(f"{path.label} unavailable: {status.reason}") from exc
            raise StepFailed(f"benchmark_model failed (exit {res.returncode}): {exc}") from exc
        if status is not None and not status.applied:
            raise StepFailed(f"{path.label} unavailable: {status.reason} (benchmark_model fell back to the CPU)")
        if res.returncode != 0:
            raise StepFailed(f"benchmark_model exited {res.returncode}: {res.last_line()}")
        how = f"{path.label}" + (f", delegate applied {status.coverage}" if status else "")
        runs = f" over {t.runs} runs" if t.runs else ""
        src = (f"measured on {device} with benchmark_model {' '.join(path.flags)}: "
               f"Inference (avg){runs} = {t.inference_avg_ms * 1e3:g} us ({how})")
        mj, how = _gauge_energy(before, after, t.inference_avg_ms)
        self.r.say(f"  {path.processor:8s} {model.stem}: {t.inference_avg_ms:.3f} ms"
                   + (f", ~{mj:.3f} mJ" if mj is not None else ""))
        return Measurement(model.stem, path.processor, path.kind, t.inference_avg_ms, src,
                           energy_mj=mj, energy_source=f"estimated on {device}: {how}" if mj is not None else "")

    def _gauge(self) -> tuple[float, float] | None:
        """The fuel gauge now: (|current| A, voltage V); None in a dry run or when it cannot be read."""
        res = self._shell(["cat", *FUEL_GAUGE])
        if res is None or res.returncode != 0:
            return None
        try:
            return parse_fuel_gauge(res.stdout)
        except ParseError:
            return None

    def run(self, output: str | Path) -> DeployResult:
        """Check, push, profile every path, write the profile to ``output`` (not in a dry run).

        Raises:
            DeployError: the device is unusable, or no path produced any number.
        """
        props = self.check_device()
        device = describe_device(props, self.serial)
        self.r.say(f"[android] {device}")
        files = self.push()
        short = " ".join(x for x in (props.get("ro.product.manufacturer"), props.get("ro.product.model")) if x)
        short = f"{short or 'Android device'} ({self.serial})"
        for path in PATHS:
            self.profile_path(path, files, short)
        commands = list(self.r.commands)
        if self.r.dry_run:
            self.r.note_local(f"write the device profile to {output}")
            return DeployResult(None, self.collected, None, commands)
        if not self.collected.measurements:
            raise DeployError(f"no processor path produced a latency on {self.serial}; "
                              + "; ".join(f.describe() for f in self.collected.failures[:4]))
        sources = {
            "device": device,
            "tool": f"TensorFlow Lite benchmark_model ({self.binary.name}, sha256 {_sha256(self.binary)[:16]}; "
                    "the tool prints no version)",
            "latency_ms/*/*": "benchmark_model 'Inference (avg)' in us / 1000, "
                            f"--warmup_runs={WARMUP_RUNS} --num_runs={NUM_RUNS}",
        }
        name = slug(props.get("ro.product.model", self.serial))
        profile = build_profile(name, f"measured over adb on {device}", self.collected, sources)
        out = write_profile(profile, output)
        return DeployResult(profile, self.collected, out, commands)


def _gauge_energy(before: tuple[float, float] | None, after: tuple[float, float] | None,
                  latency_ms: float) -> tuple[float | None, str]:
    """Energy per inference (mJ) from fuel-gauge reads before/after a run: (P_after - P_before) W x latency ms."""
    if before is None or after is None:
        return None, ""
    p0, p1 = before[0] * before[1], after[0] * after[1]
    if p1 <= p0:
        return None, ""
    how = (f"battery fuel gauge (current_now x voltage_now) read right before ({p0:.3f} W) and right after "
           f"({p1:.3f} W) the run; (P_after - P_before) x Inference (avg) {latency_ms:g} ms. The gauge averages "
           "over its own window, so this is an estimate of the run's extra power")
    return (p1 - p0) * latency_ms, how


def describe_device(props: dict[str, str], serial: str) -> str:
    """``Google Pixel 7 (serial S; SoC Google gs201; arm64-v8a; Android 14, SDK 34; build <fingerprint>)``."""
    if not props:
        return f"Android device {serial} (dry run: not queried)"
    maker = props.get("ro.product.manufacturer", "")
    model = props.get("ro.product.model", "unknown model")
    soc = " ".join(x for x in (props.get("ro.soc.manufacturer"), props.get("ro.soc.model")) if x) or \
        props.get("ro.board.platform") or props.get("ro.hardware", "unknown SoC")
    abi = props.get("ro.product.cpu.abi", "?")
    sdk = props.get("ro.build.version.sdk", "?")
    rel = props.get("ro.build.version.release", "?")
    fp = props.get("ro.build.fingerprint", "?")
    return f"{(maker + ' ' + model).strip()} (serial {serial}; SoC {soc}; {abi}; Android {rel}, SDK {sdk}; build {fp})"


def _elf_abis(path: Path) -> tuple[str, ...] | None:
    """The Android ABIs an ELF file runs as, from its header's e_machine; None if not ELF."""
    with open(path, "rb") as fh:
        head = fh.read(20)
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return None
    order: Literal["little", "big"] = "little" if head[5] == 1 else "big"
    machine = int.from_bytes(head[18:20], order)
    return _ELF_MACHINES.get(machine, (f"e_machine 0x{machine:x}",))


def _abi_word(abi: str) -> str:
    return {"arm64-v8a": "aarch64", "armeabi-v7a": "arm", "x86_64": "x86_64", "x86": "x86"}.get(abi, abi)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def deploy_android(serial: str, benchmark_binary: str | Path, models: Sequence[str | Path], output: str | Path,
                   dry_run: bool = False, bundle: str | Path | None = None,
                   runner: Runner | None = None) -> DeployResult:
    """Profile ``models`` on Android device ``serial`` and write a docs/design.md §6 profile to ``output``.

    Raises:
        ConfigError: a local file is missing or not a .tflite model.
        DeployError: the device is unusable (absent, unauthorized, offline, wrong ABI) or nothing was measured.
    """
    r = runner or Runner(dry_run=dry_run)
    return AndroidDeployer(serial, benchmark_binary, models, r, bundle=bundle).run(output)
