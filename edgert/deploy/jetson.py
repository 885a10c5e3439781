"""``edgert deploy jetson``: copy a bundle to a Jetson and profile ONNX models on GPU and DLA with trtexec.

Steps (each printed, and none run, with ``dry_run``), all over ``ssh``/``scp``
with ``BatchMode=yes`` (key authentication, never a password prompt):

1. ``cat /etc/nv_tegra_release`` (L4T release) and ``/proc/device-tree/model``.
2. Copy the bundle to ``~/edgert/``: the edgert wheel (``--wheel``, or built
   from this source tree), the models (``models/``) and ``config.json``.
3. Once per model and path, ``trtexec --onnx=... --fp16`` on the GPU and with
   ``--useDLACore=N --allowGPUFallback`` on DLA cores 0 and 1, saving each engine
   under ``~/edgert/engines/``; parse "GPU Compute Time: ... median = ..."
   (the profile's number) and ``percentile(90%)``.
   Around each run ``tegrastats --start --interval 100 --logfile ...`` and
   ``tegrastats --stop`` sample the power rails; the samples of the timed
   window (the last ``--duration`` seconds, trimmed at both ends) give the mean
   module power, and energy per inference = mean mW / trtexec's throughput
   (qps), written to ``energy_mj`` (gross: it includes the board's idle power).
4. Optionally create ``~/edgert/venv`` (``--system-site-packages`` so JetPack's
   TensorRT and CUDA Python packages stay visible), install the wheel, and
   install a systemd unit that runs an app from it.
5. ``with_edgert``: ``edgert deploy linux``'s steps (:mod:`edgert.deploy.linux`); edgert's own numbers
   join trtexec's, a column trtexec also fills taking an ``edgert-`` prefix (``edgert-gpu``).

A path that fails (no DLA on an Orin Nano, a layer DLA rejects) is recorded and
the other paths still run.
"""

from __future__ import annotations

import json
import shlex
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from edgert.deploy.parsers import (
    L4TRelease,
    ParseError,
    describe_jetson,
    parse_nv_tegra_release,
    parse_trtexec,
    tegrastats_energy_mj,
)
from edgert.deploy.linux import LinuxDeployer, LinuxOptions, board_measurements
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
from edgert.deploy.systemd import REMOTE_DIR, service_unit
from edgert.errors import ConfigError

#: Where JetPack installs trtexec.
DEFAULT_TRTEXEC = "/usr/src/tensorrt/bin/trtexec"
#: systemd unit name installed by ``--service``.
SERVICE_NAME = "edgert-app.service"
SSH_OPTIONS: tuple[str, ...] = ("-o", "BatchMode=yes", "-o", "ConnectTimeout=15")
#: trtexec timing flags used on every path (ms of warm-up, seconds of timed runs).
TIMING_FLAGS: tuple[str, ...] = ("--warmUp=500", "--duration=5")
#: tegrastats sampling interval (ms) and where its logs go.
TEGRASTATS_INTERVAL_MS = 100
TEGRASTATS = "tegrastats"
#: Failure texts that mean the DLA core does not exist: skip that core's other models.
_PLATFORM_LEVEL = ("not available", "DLA cores", "no DLA", "DLA core")


@dataclass(frozen=True, slots=True)
class JetsonPath:
    """A trtexec path: profile processor name, kind, and extra trtexec flags."""

    processor: str
    kind: str
    flags: tuple[str, ...]
    label: str


PATHS: tuple[JetsonPath, ...] = (
    JetsonPath("gpu", "gpu", ("--fp16",), "TensorRT GPU, fp16"),
    JetsonPath("dla0", "npu", ("--fp16", "--useDLACore=0", "--allowGPUFallback"), "TensorRT DLA core 0, fp16"),
    JetsonPath("dla1", "npu", ("--fp16", "--useDLACore=1", "--allowGPUFallback"), "TensorRT DLA core 1, fp16"),
)


class JetsonDeployer:
    """Deploys to and profiles one Jetson (see module doc)."""

    def __init__(self, host: str, models: Sequence[str | Path], runner: Runner, *,
                 trtexec: str = DEFAULT_TRTEXEC, wheel: str | Path | None = None,
                 venv: bool = False, service: str | None = None,
                 with_edgert: LinuxOptions | None = None) -> None:
        self.host = host
        self.with_edgert = with_edgert
        self.edgert_sources: dict[str, str] = {}
        self.models = [Path(m) for m in models]
        self.r = runner
        self.trtexec = trtexec
        self.wheel = Path(wheel) if wheel is not None else None
        self.venv = venv or service is not None
        self.service = service
        self.collected = Collector()
        self._check_local()

    def _check_local(self) -> None:
        if not self.host or self.host.startswith("-"):
            raise ConfigError(f"--host {self.host!r} is not a host; give user@host as for ssh")
        if not self.models:
            raise ConfigError("no models given; pass --models M.onnx ...")
        seen: dict[str, Path] = {}
        for m in self.models:
            if m.suffix != ".onnx":
                raise ConfigError(f"model {str(m)!r} is not an .onnx file; trtexec builds engines from ONNX")
            if not m.is_file():
                raise ConfigError(f"model {str(m)!r} not found")
            if m.stem in seen:
                raise ConfigError(f"two models are named {m.stem!r} ({seen[m.stem]} and {m}); rename one")
            seen[m.stem] = m
        if self.wheel is not None and not self.wheel.is_file():
            raise ConfigError(f"wheel {str(self.wheel)!r} not found; build one with `pip wheel --no-deps .`")

    def _ssh(self, argv: Sequence[str], timeout_s: float | None = None) -> CommandResult | None:
        return self.r.run(["ssh", *SSH_OPTIONS, self.host, shlex.join(argv)], timeout_s=timeout_s)

    def _scp(self, sources: Sequence[str | Path], dest: str) -> CommandResult | None:
        return self.r.run(["scp", "-q", *SSH_OPTIONS, *map(str, sources), f"{self.host}:{dest}"])

    # -- steps ------------------------------------------------------------------------------------
    def read_release(self) -> tuple[L4TRelease | None, str]:
        """The L4T release (None if the host is no Jetson) and the board model; ('', '') parts in a dry run.

        Raises:
            DeployError: ssh cannot log in.
        """
        res = self._ssh(["cat", "/etc/nv_tegra_release"], timeout_s=60)
        if res is None:
            self._ssh(["cat", "/proc/device-tree/model"], timeout_s=60)
            return None, ""
        if res.returncode == 255:
            raise DeployError(f"cannot log in to {self.host} over ssh ({res.last_line()}); check that "
                              f"`ssh {self.host} true` works without a password (ssh-copy-id {self.host})")
        release: L4TRelease | None = None
        if res.returncode == 0:
            try:
                release = parse_nv_tegra_release(res.stdout)
            except ParseError as exc:
                self.r.say(f"warning: {exc}")
        else:
            self.r.say(f"warning: {self.host} has no /etc/nv_tegra_release, so it is not a Jetson (L4T); "
                       "profiling with trtexec anyway")
        res = self._ssh(["cat", "/proc/device-tree/model"], timeout_s=60)
        board = res.stdout.replace("\x00", "").strip() if res is not None and res.returncode == 0 else ""
        return release, board

    def copy_bundle(self, release: L4TRelease | None, workdir: Path) -> str | None:
        """Copy wheel, models and config.json to ``~/edgert``; returns the remote wheel path (or None).

        Raises:
            DeployError: the models could not be copied (nothing can be profiled).
        """
        res = self._ssh(["mkdir", "-p", f"{REMOTE_DIR}/models", f"{REMOTE_DIR}/engines", f"{REMOTE_DIR}/power"])
        if res is not None and res.returncode != 0:
            raise DeployError(f"cannot create ~/{REMOTE_DIR} on {self.host}: {res.last_line()}")
        res = self._scp(self.models, f"{REMOTE_DIR}/models/")
        if res is not None and res.returncode != 0:
            raise DeployError(f"could not copy the models to {self.host}:{REMOTE_DIR}/models: {res.last_line()}")
        wheel = self._wheel(workdir)
        config = {
            "created_by": "edgert deploy jetson",
            "models": {m.stem: f"models/{m.name}" for m in self.models},
            "engines": {m.stem: {p.processor: f"engines/{m.stem}.{p.processor}.engine" for p in PATHS}
                        for m in self.models},
            "trtexec": self.trtexec,
            "l4t": release.version if release else None,
            "profile": "profile.json",
        }
        cfg = workdir / "config.json"
        if self.r.dry_run:
            self.r.note_local(f"write {cfg}: {json.dumps(config)}")
        else:
            cfg.write_text(json.dumps(config, indent=2) + "\n")
        files: list[str | Path] = [cfg, *([wheel] if wheel else [])]
        res = self._scp(files, f"{REMOTE_DIR}/")
        if res is not None and res.returncode != 0:
            self.collected.fail("bundle", None, f"could not copy config/wheel: {res.last_line()}")
            return None
        return f"{REMOTE_DIR}/{wheel.name}" if wheel else None

    def _wheel(self, workdir: Path) -> Path | None:
        if self.wheel is not None:
            return self.wheel
        root = Path(__file__).resolve().parents[2]
        if not (root / "pyproject.toml").is_file():
            self.r.say("note: edgert is not installed from a source tree and no --wheel was given; "
                       "the bundle has no wheel")
            return None
        res = self.r.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                          "-q", "-w", str(workdir), str(root)], timeout_s=600)
        if res is None:
            return workdir / "edgert-<version>-py3-none-any.whl"
        found = sorted(workdir.glob("edgert-*.whl"))
        if res.returncode != 0 or not found:
            self.collected.fail("bundle", None, f"could not build the edgert wheel: {res.last_line()}")
            return None
        return found[-1]

    def has_trtexec(self) -> bool:
        """True when ``trtexec`` is executable on the host (True in a dry run)."""
        res = self._ssh(["test", "-x", self.trtexec])
        return res is None or res.returncode == 0

    def profile(self, device: str) -> str | None:
        """Run trtexec for every model on every path; returns the TensorRT version seen (or None)."""
        version: str | None = None
        skip: dict[str, str] = {}
        for m in self.models:
            for path in PATHS:
                if path.processor in skip:
                    self.collected.fail(path.processor, m.stem, skip[path.processor])
                    continue
                box: list[str | None] = [None]
                ok = self.collected.attempt(path.processor, m.stem,
                                            partial(self._trtexec, path, m, device, box))
                version = version or box[0]
                reason = "" if ok else self.collected.failures[-1].reason
                if not ok and path.processor.startswith("dla") and any(k in reason for k in _PLATFORM_LEVEL):
                    skip[path.processor] = reason
        return version

    def _trtexec(self, path: JetsonPath, model: Path, device: str, box: list[str | None]) -> Measurement | None:
        engine = f"{REMOTE_DIR}/engines/{model.stem}.{path.processor}.engine"
        argv = [self.trtexec, f"--onnx={REMOTE_DIR}/models/{model.name}", *path.flags, *TIMING_FLAGS,
                f"--saveEngine={engine}"]
        plog = f"{REMOTE_DIR}/power/{model.stem}.{path.processor}.log"
        started = self._ssh([TEGRASTATS, "--start", "--interval", str(TEGRASTATS_INTERVAL_MS), "--logfile", plog])
        res = self._ssh(argv)
        self._ssh([TEGRASTATS, "--stop"])
        if res is None:
            self._ssh(["cat", plog])
            return None
        if res.returncode == 255:
            raise DeployError(f"lost the ssh connection to {self.host}: {res.last_line()}")
        try:
            t = parse_trtexec(res.output)
        except ParseError as exc:
            raise StepFailed(f"{path.label}: trtexec exited {res.returncode}: {exc}") from exc
        box[0] = t.tensorrt_version
        p90 = f", p90 {t.p90_ms:g} ms" if t.p90_ms is not None else ""
        src = (f"measured on {device} with trtexec ({t.tensorrt_version or 'TensorRT version not printed'}) "
               f"{' '.join(path.flags + TIMING_FLAGS)}: GPU Compute Time median {t.median_ms:g} ms "
               f"(mean {t.mean_ms:g}{p90})")
        mj, how = (None, "")
        if started is not None and started.returncode == 0 and t.throughput_qps:
            mj, how = self._energy(plog, t.throughput_qps, device)
        self.r.say(f"  {path.processor:5s} {model.stem}: {t.median_ms:.3f} ms"
                   + (f", {mj:.3f} mJ" if mj is not None else ""))
        return Measurement(model.stem, path.processor, path.kind, t.median_ms, src, t.p90_ms, mj, how)

    def _energy(self, plog: str, qps: float, device: str) -> tuple[float | None, str]:
        """Energy per inference (mJ) and how, from the tegrastats log of one run (None if unreadable)."""
        res = self._ssh(["cat", plog])
        if res is None or res.returncode != 0:
            return None, ""
        duration_s = float(next(f.split("=")[1] for f in TIMING_FLAGS if f.startswith("--duration=")))
        try:
            mj, how = tegrastats_energy_mj(res.stdout, qps, duration_s, TEGRASTATS_INTERVAL_MS)
        except ParseError:
            return None, ""
        return mj, f"measured on {device} with {how}"

    def setup_venv(self, wheel: str | None) -> None:
        """Create ``~/edgert/venv`` and install the wheel there; failures are collected."""
        res = self._ssh(["python3", "-m", "venv", "--system-site-packages", f"{REMOTE_DIR}/venv"])
        if res is not None and res.returncode != 0:
            self.collected.fail("venv", None, f"python3 -m venv failed ({res.last_line()}); "
                                              "on JetPack: sudo apt install python3-venv")
            return
        if wheel is None:
            self.collected.fail("venv", None, "no wheel in the bundle to install; pass --wheel")
            return
        res = self._ssh([f"{REMOTE_DIR}/venv/bin/python", "-m", "pip", "install", wheel], timeout_s=1800)
        if res is not None and res.returncode != 0:
            self.collected.fail("venv", None, f"pip install {wheel} failed: {res.last_line()}")

    def install_service(self, workdir: Path) -> None:
        """Install and start a systemd unit running ``--service``'s command from the venv (needs sudo -n)."""
        assert self.service is not None
        res = self._ssh(["pwd"])
        user = self.host.split("@", 1)[0] if "@" in self.host else None
        home = res.stdout.strip() if res is not None and res.returncode == 0 else f"/home/{user or 'USER'}"
        unit = service_unit(self.service, home, user)
        local = workdir / SERVICE_NAME
        if self.r.dry_run:
            self.r.note_local(f"write {local}:\n{unit}")
        else:
            local.write_text(unit)
        steps = [
            ("copy", lambda: self._scp([local], f"{REMOTE_DIR}/")),
            ("install", lambda: self._ssh(["sudo", "-n", "install", "-m", "0644", f"{REMOTE_DIR}/{SERVICE_NAME}",
                                           f"/etc/systemd/system/{SERVICE_NAME}"])),
            ("reload", lambda: self._ssh(["sudo", "-n", "systemctl", "daemon-reload"])),
            ("enable", lambda: self._ssh(["sudo", "-n", "systemctl", "enable", "--now", SERVICE_NAME])),
        ]
        for what, step in steps:
            r = step()
            if r is not None and r.returncode != 0:
                self.collected.fail("service", None, f"{what} {SERVICE_NAME} failed ({r.last_line()}); it needs "
                                                     "passwordless sudo for systemctl, or install the unit by hand")
                return

    def run(self, output: str | Path) -> DeployResult:
        """Read the release, copy the bundle, profile, optionally set up venv/service, write the profile.

        Raises:
            DeployError: ssh cannot log in, the models cannot be copied, or nothing was measured.
        """
        release, board = self.read_release()
        device = describe_jetson(self.host, release, board, self.r.dry_run)
        self.r.say(f"[jetson] {device}")
        with tempfile.TemporaryDirectory(prefix="edgert-bundle-") as tmp:
            workdir = Path(tmp)
            wheel = self.copy_bundle(release, workdir)
            version: str | None = None
            if self.has_trtexec():
                version = self.profile(device)
            else:
                for m in self.models:
                    for p in PATHS:
                        self.collected.fail(p.processor, m.stem,
                                            f"trtexec not found at {self.trtexec} on {self.host}; it ships with "
                                            "JetPack's TensorRT (sudo apt install tensorrt) — or pass --trtexec PATH")
            if self.venv:
                self.setup_venv(wheel)
            if self.service is not None:
                self.install_service(workdir)
            if self.with_edgert is not None:
                self.profile_with_edgert(workdir)
        commands = list(self.r.commands)
        if self.r.dry_run:
            self.r.note_local(f"write the device profile to {output}")
            self._scp([output], f"{REMOTE_DIR}/profile.json")
            return DeployResult(None, self.collected, None, list(self.r.commands))
        if not self.collected.measurements:
            raise DeployError(f"no processor path produced a latency on {self.host}; "
                              + "; ".join(f.describe() for f in self.collected.failures[:4]))
        sources = {
            "device": device,
            "tool": f"trtexec at {self.trtexec} ({version or 'TensorRT version not printed'})",
            "latency_ms/*/*": "trtexec 'GPU Compute Time' median in ms; latency_p90_ms from its percentile(90%)",
        }
        if release is not None:
            sources["l4t"] = release.raw
        sources.update(self.edgert_sources)
        profile = build_profile(slug(board or self.host.split("@")[-1]), f"measured over ssh on {device}",
                                self.collected, sources)
        out = write_profile(profile, output)
        res = self._scp([out], f"{REMOTE_DIR}/profile.json")  # the bundle's config.json names it
        if res is not None and res.returncode != 0:
            self.r.say(f"warning: could not copy the profile to {self.host}:{REMOTE_DIR}/profile.json: "
                       f"{res.last_line()}")
        return DeployResult(profile, self.collected, out, commands)

    def profile_with_edgert(self, workdir: Path) -> None:
        """Profile the models with edgert itself on the Jetson (the linux target's steps); its numbers join
        the collection. A failure is recorded as the ``edgert`` path's, and trtexec's numbers stay."""
        assert self.with_edgert is not None
        opts = replace(self.with_edgert, wheel=self.with_edgert.wheel or self.wheel, system_site_packages=True,
                       remote_dir=REMOTE_DIR)
        try:
            obj = LinuxDeployer(self.host, self.models, self.r, opts, label="jetson").measure(workdir)
        except DeployError as exc:
            self.collected.fail("edgert", None, str(exc))
            return
        if obj is not None:
            found, self.edgert_sources = board_measurements(obj, {p.processor for p in PATHS})
            self.collected.measurements.extend(found)


def deploy_jetson(host: str, models: Sequence[str | Path], output: str | Path, dry_run: bool = False, *,
                  trtexec: str = DEFAULT_TRTEXEC, wheel: str | Path | None = None, venv: bool = False,
                  service: str | None = None, runner: Runner | None = None,
                  with_edgert: LinuxOptions | None = None) -> DeployResult:
    """Profile ``models`` on the Jetson ``host`` (user@host) and write a docs/design.md §6 profile to ``output``.

    Raises:
        ConfigError: a local file is missing or not an .onnx model.
        DeployError: ssh cannot log in, the models cannot be copied, or nothing was measured.

    ``with_edgert``: also profile with edgert itself on the Jetson (:mod:`edgert.deploy.linux`).
    """
    r = runner or Runner(dry_run=dry_run)
    d = JetsonDeployer(host, models, r, trtexec=trtexec, wheel=wheel, venv=venv, service=service,
                       with_edgert=with_edgert)
    return d.run(output)
