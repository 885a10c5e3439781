"""Native libraries on disk: find a vendor ``.so`` (QNN, a GPU delegate) where device images keep them."""

from __future__ import annotations

import ctypes.util
import os
import re
from collections.abc import Iterable
from pathlib import Path

#: Where device images keep vendor libraries (Android, Jetson, plain Linux).
LIBRARY_DIRS: tuple[str, ...] = (
    "/vendor/lib64", "/system/vendor/lib64", "/system/lib64", "/odm/lib64", "/data/local/tmp",
    "/usr/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu/tegra", "/usr/lib/x86_64-linux-gnu",
    "/usr/local/lib", "/usr/lib",
)


def find_library(name: str, extra_dirs: Iterable[str | Path] = ()) -> str | None:
    """Full path of shared library ``name`` (e.g. ``libQnnTFLiteDelegate.so``), or None.

    Looks in ``extra_dirs``, ``$LD_LIBRARY_PATH``, :data:`LIBRARY_DIRS`, then
    asks the dynamic linker (``ctypes.util.find_library``). A ``name`` that is
    already a path is returned when the file exists.
    """
    if os.sep in name:
        return name if Path(name).is_file() else None
    env = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if d]
    for d in [*map(str, extra_dirs), *env, *LIBRARY_DIRS]:
        p = Path(d) / name
        if p.is_file():
            return str(p)
    stem = re.sub(r"^lib|\.so.*$", "", name)
    return ctypes.util.find_library(stem)


def searched_dirs(extra_dirs: Iterable[str | Path] = ()) -> str:
    """A short account of where :func:`find_library` looked, for error messages."""
    extra = ", ".join(map(str, extra_dirs))
    return ((extra + ", " if extra else "") + "$LD_LIBRARY_PATH, /vendor/lib64, /system/lib64, /data/local/tmp, "
            "/usr/lib/<arch>[/tegra], /usr/local/lib and the linker cache")
