"""``edgert deploy linux``: install edgert on any Linux board over ssh and profile there with edgert itself.

Steps (each printed, and none run, with ``dry_run``), over the system ``ssh``/``scp`` with
``BatchMode=yes`` (key authentication, never a password prompt; ``~/.ssh/config`` applies, or the
file given as ``ssh_config``; ``host`` is ``user@host[:port]``):

1. One ``ssh`` reads the board's facts: ``uname -m``, ``uname -r``, ``/proc/device-tree/model`` and the
   version of its Python. A Python below 3.11 (or none) stops here with one line saying the fix.
2. ``scp`` an edgert wheel (``wheel``, or one built from this source tree with ``pip wheel --no-deps``),
   the models, and the wheels of ``wheelhouse`` (for a board without network access for pip) to
   ``~/edgert/``.
3. Create ``~/edgert/venv`` and install the wheel there with its dependencies (NumPy, ONNX Runtime,
   LiteRT: the board's own wheels, from PyPI or the wheelhouse), then each extra of ``extras`` the
   board can take (one that fails is recorded and the others go on).
4. Run ``edgert devices --json`` and ``edgert profile`` there on every path the board has (or the
   ``delegates`` named), and bring the profile home: it keeps what ``edgert profile`` wrote on the
   board (board model, architecture, kernel, versions, and whether it ran under emulation) and
   gains how it was deployed and which paths the board has.
"""

from __future__ import annotations

import json
import re
import shlex
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from edgert.deploy.profile_writer import slug
from edgert.deploy.remote import Remote, build_wheel
from edgert.deploy.runner import Collector, CommandResult, DeployError, DeployResult, Measurement, Runner
from edgert.errors import ConfigError
from scheduler.profile import DeviceProfile

#: Where the bundle goes on the board (relative to the login's home directory).
REMOTE_DIR = "edgert"
MIN_PYTHON = (3, 11)
#: pip output that means the board cannot reach the package index.
_NO_NETWORK = re.compile(r"Failed to establish a new connection|Temporary failure in name resolution|"
                         r"Network is unreachable|No matching distribution found|Could not find a version|"
                         r"Read timed out|ProxyError|SSLError")


def facts_command(python: str) -> str:
    """One shell line printing ``uname -m``, ``uname -r``, the Python's version and the device-tree model."""
    return (f"uname -m; uname -r; {shlex.quote(python)} -V 2>&1 || true; "
            "cat /proc/device-tree/model 2>/dev/null || true")


def parse_facts(text: str) -> BoardFacts:
    """The :class:`BoardFacts` of :func:`facts_command`'s output."""
    lines = text.splitlines()
    version = re.search(r"Python (\d+\.\d+(?:\.\d+)?)", lines[2] if len(lines) > 2 else "")
    model = " ".join(lines[3:]).replace("\x00", "").strip()
    return BoardFacts(lines[0].strip() if lines else "", lines[1].strip() if len(lines) > 1 else "", model,
                      version.group(1) if version else "")


@dataclass(frozen=True, slots=True)
class BoardFacts:
    """What the board said about itself before anything was installed."""

    arch: str
    kernel: str
    model: str
    python: str

    def describe(self, host: str) -> str:
        """``Raspberry Pi 5 Model B Rev 1.0 (pi@pi5; aarch64, Linux 6.6.31, Python 3.11.2)``."""
        return (f"{self.model or 'no device tree model'} ({host}; {self.arch or 'unknown arch'}, "
                f"Linux {self.kernel or '?'}, Python {self.python or 'none'})")


@dataclass
class LinuxOptions:
    """The knobs of a Linux deployment (see :func:`deploy_linux`)."""

    wheel: str | Path | None = None
    wheelhouse: str | Path | None = None
    #: a pip constraints file (``pip install -c``) shipped with the bundle, e.g. to pin a dependency's version
    constraint: str | Path | None = None
    extras: tuple[str, ...] = ()
    python: str = "python3"
    ssh_config: str | None = None
    runs: int = 20
    warmup: int = 3
    delegates: tuple[str, ...] = ()
    #: the venv sees the board's system packages (JetPack's TensorRT / CUDA builds on a Jetson)
    system_site_packages: bool = False
    remote_dir: str = REMOTE_DIR


class LinuxDeployer:
    """Deploys edgert to one Linux board and profiles there (see module doc)."""

    def __init__(self, host: str, models: Sequence[str | Path], runner: Runner,
                 options: LinuxOptions | None = None, label: str = "linux") -> None:
        self.host = host
        self.o = options or LinuxOptions()
        self.r = runner
        self.remote = Remote(host, runner, self.o.ssh_config)
        self.models = [Path(m) for m in models]
        self.label = label
        self.collected = Collector()
        self._check_local()

    @property
    def venv_python(self) -> str:
        """The venv's Python on the board (relative to the login's home)."""
        return f"{self.o.remote_dir}/venv/bin/python"

    def _check_local(self) -> None:
        if not self.models:
            raise ConfigError("no models given; pass --models M.tflite|M.onnx ...")
        seen: dict[str, Path] = {}
        for m in self.models:
            if m.suffix not in (".tflite", ".onnx"):
                raise ConfigError(f"model {str(m)!r} is neither .tflite nor .onnx")
            if not m.is_file():
                raise ConfigError(f"model {str(m)!r} not found")
            if m.stem in seen:
                raise ConfigError(f"two models are named {m.stem!r} ({seen[m.stem]} and {m}); rename one")
            seen[m.stem] = m
        if self.o.wheel is not None and not Path(self.o.wheel).is_file():
            raise ConfigError(f"wheel {str(self.o.wheel)!r} not found; build one with `pip wheel --no-deps .`")
        if self.o.wheelhouse is not None and not sorted(Path(self.o.wheelhouse).glob("*.whl")):
            raise ConfigError(f"--wheelhouse {str(self.o.wheelhouse)!r} holds no .whl files; fill it with "
                              f"{wheelhouse_hint('aarch64', '3.11')}")
        if self.o.constraint is not None and not Path(self.o.constraint).is_file():
            raise ConfigError(f"--constraint {str(self.o.constraint)!r} not found")
        if self.o.runs < 1 or self.o.warmup < 0:
            raise ConfigError(f"--runs must be >= 1 and --warmup >= 0 (got {self.o.runs}, {self.o.warmup})")

    # -- steps ------------------------------------------------------------------------------------
    def read_facts(self) -> BoardFacts:
        """The board's architecture, kernel, device-tree model and Python version ("" parts in a dry run).

        Raises:
            DeployError: ssh cannot log in, or the board has no Python 3.11+ (the message says the fix).
        """
        res = self.remote.ssh(facts_command(self.o.python), timeout_s=120)
        if res is None:
            return BoardFacts("", "", "", "")
        if res.returncode == 255:
            raise DeployError(f"cannot log in to {self.host} over ssh ({res.last_line()}); check that "
                              f"`ssh {self.remote.dest}` works without a password (key in ~/.ssh/config, "
                              f"or ssh-copy-id {self.remote.dest})")
        facts = parse_facts(res.stdout)
        parts = tuple(int(p) for p in re.findall(r"\d+", facts.python)[:2])
        if not facts.python:
            raise DeployError(f"{self.host} has no {self.o.python}: edgert needs Python 3.11+ on the board; "
                              "install it (Debian/Ubuntu: sudo apt install python3 python3-venv) or name one "
                              "with --python PATH")
        if parts < MIN_PYTHON:
            raise DeployError(f"{self.host} has Python {facts.python} and edgert needs 3.11+; install a newer one "
                              "(e.g. sudo apt install python3.11 python3.11-venv) and pass --python python3.11")
        return facts

    def copy_bundle(self, workdir: Path) -> str:
        """Copy the models, the edgert wheel and the wheelhouse to the board; the wheel's path there.

        Raises:
            DeployError: a directory could not be made or a copy failed.
        """
        rd = self.o.remote_dir
        res = self.remote.ssh(shlex.join(["mkdir", "-p", f"{rd}/models", f"{rd}/wheels"]), timeout_s=120)
        if res is not None and res.returncode != 0:
            raise DeployError(f"cannot create ~/{rd} on {self.host}: {res.last_line()}")
        wheel = Path(self.o.wheel) if self.o.wheel is not None else build_wheel(self.r, workdir)
        house = sorted(Path(self.o.wheelhouse).glob("*.whl")) if self.o.wheelhouse is not None else []
        pins = [Path(self.o.constraint)] if self.o.constraint is not None else []
        for what, files, dest in (("models", self.models, f"{rd}/models/"),
                                  ("wheels", [wheel, *house, *pins], f"{rd}/wheels/")):
            res = self.remote.put(files, dest)
            if res is not None and res.returncode != 0:
                raise DeployError(f"could not copy the {what} to {self.host}:{dest}: {res.last_line()}")
        return f"{rd}/wheels/{wheel.name}"

    def install(self, wheel: str, facts: BoardFacts) -> None:
        """Create the venv and install the wheel (with its dependencies), then each extra the board takes.

        Raises:
            DeployError: the venv or the core install failed (the message says the fix).
        """
        rd = self.o.remote_dir
        venv = [self.o.python, "-m", "venv", *(["--system-site-packages"] if self.o.system_site_packages else []),
                f"{rd}/venv"]
        res = self.remote.ssh(f"test -x {shlex.quote(self.venv_python)} || {shlex.join(venv)}", timeout_s=600)
        if res is not None and res.returncode != 0:
            raise DeployError(f"could not create a venv on {self.host} ({res.last_line()}); on Debian/Ubuntu: "
                              "sudo apt install python3-venv")
        index = ["--no-index", "--find-links", f"{rd}/wheels"] if self.o.wheelhouse is not None else []
        if self.o.constraint is not None:
            index += ["-c", f"{rd}/wheels/{Path(self.o.constraint).name}"]
        pip = [self.venv_python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *index]
        for argv in ([*pip, wheel], [*pip, "--force-reinstall", "--no-deps", wheel]):
            res = self.remote.ssh(shlex.join(argv))
            if res is not None and res.returncode != 0:
                raise self._pip_error(res, facts)
        for extra in self.o.extras:
            res = self.remote.ssh(shlex.join([*pip, f"{wheel}[{extra}]"]))
            if res is not None and res.returncode != 0:
                self.collected.fail(f"extra {extra}", None, f"pip install edgert[{extra}] failed on this board: "
                                                            f"{res.last_line()}")

    def _pip_error(self, res: CommandResult, facts: BoardFacts) -> DeployError:
        if _NO_NETWORK.search(res.output) is None:
            return DeployError(f"pip install on {self.host} failed: {res.last_line()}")
        py = ".".join(facts.python.split(".")[:2]) or "3.11"
        if self.o.wheelhouse is not None:
            return DeployError(f"the wheelhouse lacks a wheel this board needs ({res.last_line()}); add it: "
                               f"{wheelhouse_hint(facts.arch or 'aarch64', py)}")
        return DeployError(f"{self.host} cannot install edgert's dependencies with pip ({res.last_line()}); "
                           f"ship them: {wheelhouse_hint(facts.arch or 'aarch64', py)}, then pass --wheelhouse DIR")

    def devices(self) -> list[dict[str, object]]:
        """``edgert devices --json`` on the board (empty in a dry run).

        Raises:
            DeployError: edgert does not run on the board.
        """
        res = self.remote.ssh(_reporting(shlex.join([f"{self.o.remote_dir}/venv/bin/edgert", "devices", "--json"])),
                              timeout_s=600)
        if res is None:
            return []
        try:
            if res.returncode != 0:
                raise ValueError(self._crash(res) or res.last_line())
            listed = json.loads(res.stdout)
        except ValueError as exc:
            raise DeployError(f"`edgert devices --json` failed on {self.host}: {exc}") from exc
        for d in listed:
            state = "yes" if d.get("available") else f"no ({str(d.get('reason', ''))[:80]})"
            self.r.say(f"  {d.get('name', '?'):24} {d.get('processor', '?'):5} {state}")
        return list(listed)

    @staticmethod
    def _crash(res: CommandResult) -> str:
        """Empty unless the board's process died by a signal (shell status 128 + N); else what and the known fix."""
        if not 128 < res.returncode < 255:
            return ""
        sig = res.returncode - 128
        name = {4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 9: "SIGKILL", 11: "SIGSEGV"}.get(sig, f"signal {sig}")
        return (f"it crashed ({name}); on an arm64 board emulated by qemu-user before 8.2, whose /proc/cpuinfo "
                "shows the host's x86 CPU, ONNX Runtime and LiteRT crash so: use qemu-user 10 (Debian 12: "
                "bookworm-backports); elsewhere, try other versions with --constraint FILE")

    def profile(self, name: str) -> str:
        """Run ``edgert profile`` on the board over the models; the profile's path there.

        Raises:
            DeployError: it measured nothing or failed (its last line says why).
        """
        rd = self.o.remote_dir
        argv = [f"{rd}/venv/bin/edgert", "profile", *(f"{rd}/models/{m.name}" for m in self.models),
                "--runs", str(self.o.runs), "--warmup", str(self.o.warmup), "--name", name,
                *(["--delegates", ",".join(self.o.delegates)] if self.o.delegates else []), "-o", f"{rd}/profile.json"]
        res = self.remote.ssh(_reporting(shlex.join(argv)))
        if res is not None:
            for line in res.stdout.splitlines():
                self.r.say(f"  {line.strip()}")
            if res.returncode != 0:
                raise DeployError(f"`edgert profile` failed on {self.host}: {self._crash(res) or res.last_line()}")
        return f"{rd}/profile.json"

    def measure(self, workdir: Path) -> dict[str, object] | None:
        """Read the facts, copy, install, list the paths and profile; the board's profile as JSON (None: dry run).

        Raises:
            DeployError: a step that the others depend on failed.
        """
        facts = self.read_facts()
        self.r.say(f"[{self.label}] {facts.describe(self.host) if facts.arch else self.host + ' (dry run: not queried)'}")
        wheel = self.copy_bundle(workdir)
        self.install(wheel, facts)
        listed = self.devices()
        remote = self.profile(slug(facts.model or self.remote.dest.rpartition("@")[2]))
        local = workdir / "board-profile.json"
        res = self.remote.get(remote, local)
        if res is None:
            return None
        if res.returncode != 0:
            raise DeployError(f"could not copy {self.host}:{remote} home: {res.last_line()}")
        obj = json.loads(local.read_text())
        sources = obj.setdefault("sources", {})
        sources["deploy"] = (f"edgert deploy {self.label} over ssh to {self.host}: {Path(wheel).name} in "
                             f"~/{self.o.remote_dir}/venv, edgert profile --runs {self.o.runs} --warmup {self.o.warmup}")
        sources["deploy/board"] = facts.describe(self.host)
        sources["deploy/paths"] = ", ".join(f"{d.get('name')} ({d.get('processor')})" for d in listed
                                            if d.get("available")) or "none available"
        for f in self.collected.failures:
            sources[f"unmeasured/*/{f.processor}"] = f.reason
        if "emulation" in sources:
            self.r.say(f"note: {sources['emulation']}")
        return obj

    def run(self, output: str | Path) -> DeployResult:
        """Deploy, profile on the board and write the profile to ``output`` (nothing in a dry run).

        Raises:
            DeployError: ssh cannot log in, Python or pip cannot install edgert, or nothing was measured.
        """
        with tempfile.TemporaryDirectory(prefix="edgert-linux-") as tmp:
            obj = self.measure(Path(tmp))
        if obj is None:
            self.r.note_local(f"write the device profile to {output}")
            return DeployResult(None, self.collected, None, list(self.r.commands))
        out = Path(output)
        if out.parent and not out.parent.exists():
            out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(obj, indent=2) + "\n")
        profile = DeviceProfile.load(out)
        for model, row in profile.latency_ms.items():
            for proc, ms in row.items():
                kind = next(p.kind for p in profile.processors if p.name == proc)
                self.collected.measurements.append(
                    Measurement(model, proc, kind, ms, profile.sources.get(f"latency_ms/{model}/{proc}", "")))
        return DeployResult(profile, self.collected, out, list(self.r.commands))


def _reporting(command: str) -> str:
    """``command; exit $?``: the login shell forks the command instead of replacing itself by it, so a crash
    comes back as the shell's status 128 + signal instead of ssh's bare 255."""
    return f"{command}; exit $?"


def board_measurements(obj: dict[str, object], taken: set[str]) -> tuple[list[Measurement], dict[str, str]]:
    """The measurements of a board profile (JSON) as deploy measurements, a column in ``taken`` renamed
    ``edgert-<column>``; and its other sources under ``edgert/<key>`` (for ``jetson --with-edgert``)."""
    kinds = {p["name"]: p["kind"] for p in obj["processors"]}  # type: ignore[attr-defined]
    sources: dict[str, str] = obj.get("sources", {})  # type: ignore[assignment]
    p90: dict[str, dict[str, float]] = obj.get("latency_p90_ms", {})  # type: ignore[assignment]
    found = []
    for model, row in obj["latency_ms"].items():  # type: ignore[attr-defined]
        for proc, ms in row.items():
            src = sources.get(f"latency_ms/{model}/{proc}", "edgert profile on the board")
            found.append(Measurement(model, f"edgert-{proc}" if proc in taken else proc, kinds[proc], float(ms),
                                     src, p90.get(model, {}).get(proc)))
    return found, {f"edgert/{k}": v for k, v in sources.items() if not k.startswith("latency_ms/")}


def wheelhouse_hint(arch: str, python: str) -> str:
    """The ``pip download`` line that fills a wheelhouse for a board of ``arch`` with Python ``python`` (X.Y).

    pip takes an explicit ``--platform`` tag literally (``manylinux_2_28`` does not admit a ``manylinux_2_27``
    wheel), so the line names the tags of the wheels numpy, onnxruntime and ai-edge-litert publish."""
    machine = {"arm64": "aarch64", "amd64": "x86_64"}.get(arch, arch)
    plats = " ".join(f"--platform {tag}_{machine}" for tag in ("manylinux2014", "manylinux_2_27", "manylinux_2_28"))
    return (f"pip download --only-binary=:all: {plats} --python-version {python} -d DIR "
            "numpy onnxruntime ai-edge-litert")


def deploy_linux(host: str, models: Sequence[str | Path], output: str | Path, dry_run: bool = False, *,
                 options: LinuxOptions | None = None, runner: Runner | None = None) -> DeployResult:
    """Install edgert on the Linux board ``host`` (user@host[:port]), profile ``models`` there, write ``output``.

    Raises:
        ConfigError: a local file is missing or not a model, or an option is out of range.
        DeployError: ssh cannot log in, the board cannot install edgert, or nothing was measured.
    """
    r = runner or Runner(dry_run=dry_run)
    return LinuxDeployer(host, models, r, options).run(output)
