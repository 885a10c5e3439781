"""ssh / scp to a board named ``user@host[:port]``, and the edgert wheel shipped to it.

Used by ``edgert deploy linux`` (and through it ``edgert deploy jetson --with-edgert``). Commands go
through a :class:`~edgert.deploy.runner.Runner`, so a dry run prints them and runs none. ``ssh`` and
``scp`` are the system's: ``~/.ssh/config`` applies unless another file is named (``-F``), and
``BatchMode=yes`` means key authentication only, never a password prompt.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from edgert.deploy.runner import CommandResult, DeployError, Runner
from edgert.errors import ConfigError

SSH_OPTIONS: tuple[str, ...] = ("-o", "BatchMode=yes", "-o", "ConnectTimeout=15")


def split_host(host: str) -> tuple[str, int | None]:
    """``user@host:2222`` → (``user@host``, 2222); ``user@[::1]:22`` → (``user@::1``, 22); no port → None.

    Raises:
        ConfigError: the text is empty, starts with ``-``, or its port is not a number in 1..65535.
    """
    if not host or host.startswith("-"):
        raise ConfigError(f"--host {host!r} is not a host; give user@host[:port] as for ssh")
    user, _, rest = host.rpartition("@")
    prefix = f"{user}@" if user else ""
    if rest.startswith("["):
        name, _, tail = rest[1:].partition("]")
        port = tail[1:] if tail.startswith(":") else ""
    elif rest.count(":") == 1:
        name, _, port = rest.partition(":")
    else:
        name, port = rest, ""
    if not port:
        return prefix + name, None
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--host {host!r}: the port {port!r} is not a number in 1..65535")
    return prefix + name, int(port)


@dataclass
class Remote:
    """ssh/scp to one board through a :class:`Runner` (``ssh_config``: a file for ``-F``; None: ~/.ssh/config)."""

    host: str
    runner: Runner
    ssh_config: str | None = None
    dest: str = field(init=False)
    port: int | None = field(init=False)

    def __post_init__(self) -> None:
        self.dest, self.port = split_host(self.host)

    def _opts(self, port_flag: str) -> list[str]:
        cfg = ["-F", self.ssh_config] if self.ssh_config else []
        return [*cfg, *SSH_OPTIONS, *([port_flag, str(self.port)] if self.port else [])]

    def ssh(self, command: str, timeout_s: float | None = None) -> CommandResult | None:
        """Run a shell command line on the board."""
        return self.runner.run(["ssh", *self._opts("-p"), self.dest, command], timeout_s=timeout_s)

    def put(self, sources: Sequence[str | Path], dest: str) -> CommandResult | None:
        """Copy local files to ``dest`` on the board."""
        return self.runner.run(["scp", "-q", *self._opts("-P"), *map(str, sources), f"{self._scp_host()}:{dest}"])

    def get(self, source: str, dest: str | Path) -> CommandResult | None:
        """Copy ``source`` on the board to the local ``dest``."""
        return self.runner.run(["scp", "-q", *self._opts("-P"), f"{self._scp_host()}:{source}", str(dest)])

    def _scp_host(self) -> str:
        user, _, name = self.dest.rpartition("@")
        name = f"[{name}]" if ":" in name else name
        return f"{user}@{name}" if user else name


def build_wheel(runner: Runner, workdir: Path) -> Path:
    """An edgert wheel built from this source tree into ``workdir`` with ``pip wheel --no-deps``.

    Builds without build isolation first (no index needed); where this environment cannot (setuptools
    without ``bdist_wheel``, say), it retries in pip's isolated build environment.

    Raises:
        DeployError: edgert is not installed from a source tree, or the build failed.
    """
    root = Path(__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file():
        raise DeployError("edgert is not installed from a source tree; pass --wheel PATH (an edgert wheel)")
    base = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(workdir), str(root)]
    res = runner.run([*base[:5], "--no-build-isolation", *base[5:]], timeout_s=600)
    if res is None:
        return workdir / f"edgert-{_version()}-py3-none-any.whl"
    if res.returncode != 0:
        res = runner.run(base, timeout_s=600)
        assert res is not None
    found = sorted(workdir.glob("edgert-*.whl"))
    if res.returncode != 0 or not found:
        errors = [ln.strip() for ln in res.output.splitlines() if ln.strip().lower().startswith("error")]
        raise DeployError(f"could not build the edgert wheel: {errors[-1] if errors else res.last_line()}")
    return found[-1]


def _version() -> str:
    """edgert's installed version (the wheel a dry run names), or ``<version>``."""
    from importlib import metadata

    try:
        return metadata.version("edgert")
    except metadata.PackageNotFoundError:
        return "<version>"
