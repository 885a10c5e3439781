"""The one exception tree of edgert.

It lives in the lowest layer (``scheduler`` imports nothing of ours) so that
every layer raises the same classes; the public home is ``edgert`` (and
``edgert.errors``), which re-exports them::

    EdgeRTError                 root: catch this to catch everything of ours
    ├── ConfigError             unknown scheduler / delegate / profile name, bad option
    ├── ModelLoadError          missing, corrupt or unsupported model file
    ├── InputError              wrong input name, shape or dtype (raised before queueing)
    ├── DelegateUnavailable     a delegate asked for by name cannot run on this host
    ├── InferenceError          the backend raised while running a request
    ├── RequestDropped          the sync call's request was dropped (``reason`` says why)
    ├── OffloadError            the cloud path failed (broker, timeout, remote error)
    ├── TraceError              malformed trace / profile / scenario input
    ├── edgert.deploy.DeployError  a deploy step failed (no device, unauthorized, tool missing)
    └── edgert.deploy.ParseError   a device tool printed something we cannot read

Foreign exceptions (onnxruntime, LiteRT, MQTT) are translated where they
cross into our code and chained with ``raise ... from exc``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class EdgeRTError(Exception):
    """Root of every error edgert raises on purpose."""


class ConfigError(EdgeRTError, ValueError):
    """A configuration value is not one we know (names the value and the choices)."""


class ModelLoadError(EdgeRTError):
    """A model file is missing, corrupt, or no delegate of this host can run it."""


class InputError(EdgeRTError, ValueError):
    """An input does not match the model (name, shape or dtype); nothing was queued."""


class DelegateUnavailable(EdgeRTError):
    """A delegate was asked for by name but cannot run here; ``reason`` says why."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"delegate {name!r} is unavailable on this host: {reason}")
        self.name = name
        self.reason = reason


class InferenceError(EdgeRTError):
    """The backend raised while running a request (the original is ``__cause__``)."""


class RequestDropped(EdgeRTError):
    """Raised by a sync call whose request was dropped; ``reason`` says why."""

    def __init__(self, model: str, reason: str) -> None:
        super().__init__(f"request for model {model!r} was dropped: {reason}")
        self.model = model
        self.reason = reason


class OffloadError(EdgeRTError):
    """The cloud path failed: broker unreachable, timeout, or an error reply."""


class TraceError(EdgeRTError, ValueError):
    """A trace, profile or scenario file is malformed (names the file and line)."""


def did_you_mean(kind: str, given: str, choices: Iterable[str]) -> ConfigError:
    """Build a ConfigError for an unknown name, suggesting the closest choices.

    >>> str(did_you_mean("scheduler", "round_robn", ["round_robin", "fixed_worker"]))
    "unknown scheduler 'round_robn'; did you mean 'round_robin'? (choices: fixed_worker, round_robin)"
    """
    choices = sorted(set(choices))
    close = difflib.get_close_matches(given, choices, n=2, cutoff=0.5)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return ConfigError(f"unknown {kind} {given!r}{hint} (choices: {', '.join(choices)})")
