"""Deprecated alias of :mod:`edgert.models` (kept while ``apps/xr_demo.py`` still imports it)."""

from edgert.models import (  # noqa: F401
    CUSTOM_OP_MODELS, MEDIAPIPE_MODELS, MEDIAPIPE_VERSION, ZOOS, cache_dir, default_dir, fetch,
    mediapipe_paths, missing_file_hint, names, path, sha256, verified,
)
