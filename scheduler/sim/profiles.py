"""Device profiles for the simulator: the shipped ones by name, any JSON by path.

The shipped profiles (``scheduler/profiles/*.json``) are built from
``published_latencies.md``: each number's ``sources`` entry says whether it
is published (which table) or derived (and how).
"""

from __future__ import annotations

from pathlib import Path

from scheduler.errors import ConfigError, did_you_mean
from scheduler.profile import DeviceProfile

#: Where the shipped profiles live.
PROFILE_DIR = Path(__file__).resolve().parent.parent / "profiles"


def profile_names() -> list[str]:
    """Names of the shipped device profiles (``galaxy-s23``, ``pixel4``, ``xr2-gen2``)."""
    return sorted(p.stem for p in PROFILE_DIR.glob("*.json"))


def load_profile(profile: str | Path | DeviceProfile) -> DeviceProfile:
    """A profile by shipped name (``"galaxy-s23"``), by JSON path, or passed through.

    Raises:
        ConfigError: neither a shipped name nor an existing file (with "did you mean").
        TraceError: the file is not a valid profile (names the file and field).
    """
    if isinstance(profile, DeviceProfile):
        return profile
    text = str(profile)
    shipped = PROFILE_DIR / f"{text}.json"
    if shipped.is_file():
        return DeviceProfile.load(shipped)
    path = Path(text)
    if path.exists():   # a file, or a directory / device that load() names as such
        return DeviceProfile.load(path)
    if text.endswith(".json") or "/" in text:
        raise ConfigError(f"device profile file {text!r} not found; "
                          f"give a JSON path or one of: {', '.join(profile_names())}")
    raise did_you_mean("device profile", text, profile_names())
