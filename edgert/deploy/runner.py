"""The runner shared by ``edgert deploy android`` and ``edgert deploy jetson``.

:class:`Runner` runs (or, with ``dry_run``, only prints) host commands such as
``adb``, ``ssh`` and ``scp``. :class:`Collector` records, per processor path
and model, either a :class:`Measurement` or a :class:`PathFailure`, so that a
path that fails (a delegate the device lacks, an engine that does not build)
never stops the others.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from edgert.errors import EdgeRTError

if TYPE_CHECKING:
    from scheduler.profile import DeviceProfile

#: Seconds a single device command may take (engine builds on a Jetson take minutes).
DEFAULT_TIMEOUT_S = 1800.0


class DeployError(EdgeRTError):
    """Deployment cannot go on at all (no device, unauthorized, tool missing); the message says the fix."""


class StepFailed(EdgeRTError):
    """One step of one processor path failed; the others go on (the message says why)."""


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What a host command returned: exit status and decoded output."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        """stdout and stderr together (the tools log to either)."""
        return self.stdout + ("\n" + self.stderr if self.stderr else "")

    def last_line(self) -> str:
        """The last non-empty line of the output, for one-line error messages."""
        lines = [ln.strip() for ln in self.output.strip().splitlines() if ln.strip()]
        return lines[-1] if lines else f"exit status {self.returncode}, no output"


class Runner:
    """Runs host commands, or prints them (``dry_run``) and runs none.

    ``commands`` lists every command in order, run or printed, so a dry run
    is the exact plan of a real one.
    """

    def __init__(self, dry_run: bool = False, out: TextIO | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.dry_run = dry_run
        self.out = out if out is not None else sys.stdout
        self.timeout_s = timeout_s
        self.commands: list[tuple[str, ...]] = []

    def say(self, line: str) -> None:
        """Print a progress line."""
        print(line, file=self.out, flush=True)

    def run(self, argv: Sequence[str], *, timeout_s: float | None = None) -> CommandResult | None:
        """Run ``argv``; None in a dry run (after printing it).

        Raises:
            DeployError: the program itself is not on PATH (names it).
            StepFailed: it ran past ``timeout_s`` (seconds).
        """
        argv = tuple(str(a) for a in argv)
        self.commands.append(argv)
        if self.dry_run:
            self.say(f"+ {shlex.join(argv)}")
            return None
        limit = self.timeout_s if timeout_s is None else timeout_s
        try:
            proc = subprocess.run(argv, check=False, capture_output=True, text=True, errors="replace", timeout=limit)
        except FileNotFoundError as exc:
            raise DeployError(f"{argv[0]!r} is not on PATH; {_install_hint(argv[0])}") from exc
        except subprocess.TimeoutExpired as exc:
            raise StepFailed(f"{shlex.join(argv)} ran past {limit:.0f} s") from exc
        return CommandResult(argv, proc.returncode, proc.stdout or "", proc.stderr or "")

    def note_local(self, what: str) -> None:
        """A local action (build a wheel, write a file): printed in a dry run, not in the command list."""
        if self.dry_run:
            self.say(f"+ ({what})")


def _install_hint(program: str) -> str:
    name = program.rsplit("/", 1)[-1]
    return {
        "adb": "install Android platform-tools (apt install adb, or the SDK's platform-tools) and retry",
        "ssh": "install an OpenSSH client (apt install openssh-client) and retry",
        "scp": "install an OpenSSH client (apt install openssh-client) and retry",
    }.get(name, "install it or put it on PATH and retry")


@dataclass(frozen=True, slots=True)
class Measurement:
    """One measured latency: ``model`` on ``processor`` (a ``kind`` of docs/design.md §3), in ms, and how;
    ``energy_mj`` per inference (mJ) and how, when the power was sampled."""

    model: str
    processor: str
    kind: str
    latency_ms: float
    source: str
    p90_ms: float | None = None
    energy_mj: float | None = None
    energy_source: str = ""


@dataclass(frozen=True, slots=True)
class PathFailure:
    """A processor path that did not produce a number for ``model`` (None = every model), and why."""

    processor: str
    model: str | None
    reason: str

    def describe(self) -> str:
        """``gpu/hand: GPU acceleration is unsupported on this platform``."""
        return f"{self.processor}/{self.model or '*'}: {self.reason}"


@dataclass(slots=True)
class Collector:
    """Measurements and failures of one deployment, path by path."""

    measurements: list[Measurement] = field(default_factory=list)
    failures: list[PathFailure] = field(default_factory=list)

    def attempt(self, processor: str, model: str | None, step: Callable[[], Measurement | None]) -> bool:
        """Run ``step``; record its measurement, or its :class:`StepFailed` as a failure.

        Returns True when the step succeeded. A :class:`DeployError` (the device
        is gone) is not caught: it ends the deployment.
        """
        try:
            result = step()
        except StepFailed as exc:
            self.failures.append(PathFailure(processor, model, str(exc)))
            return False
        if result is not None:
            self.measurements.append(result)
        return True

    def fail(self, processor: str, model: str | None, reason: str) -> None:
        """Record a failure without running anything."""
        self.failures.append(PathFailure(processor, model, reason))

    def summary(self) -> str:
        """``measured 5 latencies; 2 path(s) failed: ...`` (one line per failure)."""
        head = f"measured {len(self.measurements)} latenc{'y' if len(self.measurements) == 1 else 'ies'}"
        if not self.failures:
            return head + "; no failures"
        lines = [f"{head}; {len(self.failures)} path(s) failed:"]
        lines += [f"  - {f.describe()}" for f in self.failures]
        return "\n".join(lines)


@dataclass(slots=True)
class DeployResult:
    """What a deployment produced: the profile (None in a dry run), its file, failures, and the plan."""

    profile: DeviceProfile | None
    collected: Collector
    output: Path | None
    commands: list[tuple[str, ...]]
