"""Which Vulkan adapters this host has, and whether each is hardware or software, without loading a
Vulkan driver into this process.

A software adapter (Vulkan device type ``CPU``: Mesa's lavapipe / llvmpipe, SwiftShader) is a real,
conformant GPU code path that computes on the CPU cores. LiteRT's GPU accelerator (WebGPU / Dawn on
Vulkan) uses one when it is the only adapter, so ``litert-compiled-gpu`` needs to know whether the
"gpu" it would run on is a GPU at all.

Loading a driver to ask costs memory for the life of the process: ``vkCreateInstance`` plus
``vkEnumeratePhysicalDevices`` with lavapipe adds about 50 MB resident, and it stays after
``vkDestroyInstance``. Reading the loader's ICD manifests alone cannot answer either: Mesa installs
manifests for Intel, Radeon and virtio drivers whether or not such hardware is present. So the
question is asked once in a child process (``python -m delegates._adapters``), which enumerates the
physical devices through ``libvulkan`` and prints them as JSON, and the answer is cached:

- in memory, for the life of this process;
- on disk, in ``$EDGERT_CACHE/adapters.json`` (else ``$XDG_CACHE_HOME/edgert``, else
  ``~/.cache/edgert``), keyed by a fingerprint of what decides the answer: the ICD manifests
  (path, size, mtime) in the loader's search directories, the driver libraries they name, the
  environment variables that steer the loader (``VK_ICD_FILENAMES``, ``VK_DRIVER_FILES``,
  ``VK_ADD_DRIVER_FILES``, ``XDG_DATA_DIRS``, ``XDG_CONFIG_DIRS``), the GPU device nodes
  (``/dev/dri``, ``/dev/nvidia*``, ``/dev/kgsl-3d0``, ``/dev/mali0``) and the Python executable. Any
  change to one of them (a driver installed, an adapter hidden with ``VK_ICD_FILENAMES``) misses the
  cache and probes again; deleting the file forces a probe too.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

#: ``VkPhysicalDeviceType`` values, by name.
DEVICE_TYPES: dict[int, str] = {0: "other", 1: "integrated", 2: "discrete", 3: "virtual", 4: "cpu"}

#: The environment variables the Vulkan loader reads to find drivers.
LOADER_ENV: tuple[str, ...] = ("VK_ICD_FILENAMES", "VK_DRIVER_FILES", "VK_ADD_DRIVER_FILES",
                               "XDG_DATA_DIRS", "XDG_CONFIG_DIRS")

#: Device nodes through which a GPU driver reaches hardware (Linux DRM, NVIDIA, Adreno, Mali).
GPU_NODES: tuple[str, ...] = ("/dev/dri/*", "/dev/nvidia*", "/dev/kgsl-3d0", "/dev/mali0")

#: How an ``error`` starts when the child itself failed (not cached: asked again next time).
PROBE_FAILED = "the Vulkan probe"

#: Seconds the child probe may take before its answer is "unknown".
PROBE_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class Adapter:
    """One Vulkan physical device: its name, its type (``cpu``, ``integrated``, ``discrete`` …) and the
    Vulkan API version it offers (``1.4.305``)."""

    name: str
    type: str
    api: str = ""

    @property
    def software(self) -> bool:
        """True for a device that computes on the CPU cores (Vulkan device type CPU)."""
        return self.type == "cpu"


@dataclass(frozen=True, slots=True)
class Adapters:
    """What the probe found: the adapters (hardware first), or ``error`` when it could not ask."""

    adapters: tuple[Adapter, ...] = ()
    error: str = ""

    @property
    def hardware(self) -> tuple[Adapter, ...]:
        """The adapters that are not software."""
        return tuple(a for a in self.adapters if not a.software)

    @property
    def software(self) -> tuple[Adapter, ...]:
        """The software adapters (lavapipe, SwiftShader)."""
        return tuple(a for a in self.adapters if a.software)

    @property
    def software_only(self) -> bool:
        """True when every adapter found is software (and there is at least one): a "GPU" path would
        compute on the CPU cores."""
        return bool(self.adapters) and not self.hardware


_memo: dict[str, Adapters] = {}
_lock = threading.Lock()


def vulkan_adapters(refresh: bool = False) -> Adapters:
    """This host's Vulkan adapters, from the cache when its fingerprint still holds, else from a child
    process (never from this one). ``refresh`` ignores both caches.

    Never raises: a host without a Vulkan loader has no adapters (``error`` says why).
    """
    key = fingerprint()
    with _lock:
        if not refresh and key in _memo:
            return _memo[key]
        found = None if refresh else _read_cache(key)
        if found is None:
            found = _probe_in_child()
            if not found.error.startswith(PROBE_FAILED):   # "no driver" is an answer; a crash is not
                _write_cache(key, found)
        _memo[key] = found
        return found


def _icd_dirs() -> list[str]:
    """The directories the Vulkan loader searches for ICD manifests (Linux), in its order."""
    config = os.environ.get("XDG_CONFIG_DIRS", "/etc/xdg").split(os.pathsep)
    data = os.environ.get("XDG_DATA_DIRS", "/usr/local/share:/usr/share").split(os.pathsep)
    home = [os.path.expanduser("~/.local/share")]
    return [os.path.join(d, "vulkan", "icd.d") for d in [*config, "/etc", *home, *data, "/usr/share"] if d]


def _manifests() -> list[str]:
    """The ICD manifest files the loader would read now (explicit lists first, then its directories)."""
    named = [p for var in ("VK_ICD_FILENAMES", "VK_DRIVER_FILES", "VK_ADD_DRIVER_FILES")
             for p in os.environ.get(var, "").split(os.pathsep) if p]
    found = sorted({p for d in _icd_dirs() for p in glob.glob(os.path.join(d, "*.json"))})
    return [*named, *found]


def _stat(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return f"{path}:-"
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def _driver_library(manifest: str) -> str | None:
    """The ``library_path`` an ICD manifest names, or None when it cannot be read."""
    try:
        with open(manifest, encoding="utf-8") as f:
            lib = json.load(f).get("ICD", {}).get("library_path")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(lib, str):
        return None
    return lib if os.sep not in lib or os.path.isabs(lib) else os.path.join(os.path.dirname(manifest), lib)


def fingerprint() -> str:
    """A digest of everything that decides the probe's answer (see the module docstring)."""
    manifests = _manifests()
    parts = [sys.executable, *(f"{v}={os.environ.get(v, '')}" for v in LOADER_ENV)]
    parts += [_stat(m) for m in manifests]
    parts += [_stat(lib) for m in manifests if (lib := _driver_library(m)) and os.sep in lib]
    parts += sorted(p for pat in GPU_NODES for p in glob.glob(pat))
    return hashlib.sha256("\n".join(parts).encode("utf-8", "replace")).hexdigest()[:32]


def cache_path() -> Path:
    """``$EDGERT_CACHE/adapters.json``, else under ``$XDG_CACHE_HOME/edgert`` or ``~/.cache/edgert``."""
    root = os.environ.get("EDGERT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "edgert")
    return Path(root) / "adapters.json"


def _parse(doc: object) -> Adapters | None:
    if not isinstance(doc, dict) or not isinstance(doc.get("adapters"), list):
        return None
    try:
        ads = [Adapter(str(a["name"]), str(a["type"]), str(a.get("api", ""))) for a in doc["adapters"]]
    except (KeyError, TypeError):
        return None
    ads.sort(key=lambda a: a.software)   # hardware first: a real GPU beside a software one is preferred
    return Adapters(tuple(ads), str(doc.get("error", "")))


def _read_cache(key: str) -> Adapters | None:
    with contextlib.suppress(OSError, ValueError):
        doc = json.loads(cache_path().read_text(encoding="utf-8"))
        if isinstance(doc, dict) and doc.get("fingerprint") == key:
            return _parse(doc)
    return None


def _write_cache(key: str, found: Adapters) -> None:
    path = cache_path()
    doc = {"fingerprint": key, "adapters": [{"name": a.name, "type": a.type, "api": a.api} for a in found.adapters],
           **({"error": found.error} if found.error else {})}
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(doc, indent=1), encoding="utf-8")
        os.replace(tmp, path)


def _probe_in_child() -> Adapters:
    """Run :func:`_enumerate` in a child Python and parse its JSON line."""
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}
    try:
        proc = subprocess.run([sys.executable, "-m", "delegates._adapters"], capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_S, env=env, cwd=root, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Adapters(error=f"{PROBE_FAILED} did not finish: {exc}")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    parsed = None
    with contextlib.suppress(ValueError):
        parsed = _parse(json.loads(lines[-1])) if lines else None
    if parsed is None:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
        return Adapters(error=f"{PROBE_FAILED} failed (exit {proc.returncode}): {tail}")
    return parsed


def _enumerate() -> dict[str, object]:
    """In the child: every Vulkan physical device's name, type and API version, through ``libvulkan``."""
    import ctypes  # noqa: PLC0415

    lib = None
    for name in ("libvulkan.so.1", "libvulkan.so", "libvulkan.1.dylib", "vulkan-1.dll"):
        with contextlib.suppress(OSError):
            lib = ctypes.CDLL(name)
            break
    if lib is None:
        return {"adapters": [], "error": "no Vulkan loader (libvulkan.so.1) on this host"}

    class AppInfo(ctypes.Structure):
        _fields_ = [("sType", ctypes.c_uint32), ("pNext", ctypes.c_void_p), ("app", ctypes.c_char_p),
                    ("appVersion", ctypes.c_uint32), ("engine", ctypes.c_char_p),
                    ("engineVersion", ctypes.c_uint32), ("apiVersion", ctypes.c_uint32)]

    class CreateInfo(ctypes.Structure):
        _fields_ = [("sType", ctypes.c_uint32), ("pNext", ctypes.c_void_p), ("flags", ctypes.c_uint32),
                    ("pApplicationInfo", ctypes.POINTER(AppInfo)), ("layers", ctypes.c_uint32),
                    ("ppLayers", ctypes.c_void_p), ("extensions", ctypes.c_uint32), ("ppExtensions", ctypes.c_void_p)]

    app = AppInfo(0, None, b"edgert-probe", 1, b"edgert", 1, (1 << 22) | (1 << 12))   # VK_API_VERSION_1_1
    info = CreateInfo(1, None, 0, ctypes.pointer(app), 0, None, 0, None)
    inst = ctypes.c_void_p()
    rc = lib.vkCreateInstance(ctypes.byref(info), None, ctypes.byref(inst))
    if rc != 0:
        return {"adapters": [], "error": f"vkCreateInstance returned {rc} (no Vulkan driver usable here)"}
    count = ctypes.c_uint32(0)
    lib.vkEnumeratePhysicalDevices(inst, ctypes.byref(count), None)
    devs = (ctypes.c_void_p * count.value)()
    lib.vkEnumeratePhysicalDevices(inst, ctypes.byref(count), devs)
    out = []
    for dev in devs[:count.value]:
        props = ctypes.create_string_buffer(4096)    # VkPhysicalDeviceProperties is ~824 bytes
        lib.vkGetPhysicalDeviceProperties(ctypes.c_void_p(dev), props)
        raw = props.raw
        api, kind = int.from_bytes(raw[0:4], "little"), int.from_bytes(raw[16:20], "little")
        name = raw[20:276].split(b"\0", 1)[0].decode("utf-8", "replace")
        out.append({"name": name, "type": DEVICE_TYPES.get(kind, "other"),
                    "api": f"{api >> 22 & 0x7F}.{api >> 12 & 0x3FF}.{api & 0xFFF}"})
    lib.vkDestroyInstance(inst, None)
    return {"adapters": out}


if __name__ == "__main__":   # the child process of _probe_in_child
    print(json.dumps(_enumerate()), flush=True)
