"""Vulkan adapter detection: asked of a child process, cached by a fingerprint, never loaded here.

The parts that need a software adapter (Mesa's lavapipe, which ``.ci/run`` installs) skip with the
reason where this host has none."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from delegates import _adapters
from delegates._adapters import Adapter, Adapters, vulkan_adapters

HAS_SOFTWARE = vulkan_adapters().software_only
needs_lavapipe = pytest.mark.skipif(not HAS_SOFTWARE, reason="no software Vulkan adapter here (install Mesa's "
                                    "lavapipe: mesa-vulkan-drivers >= 24, as .ci/run does)")


def run_py(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


def test_software_and_hardware_are_told_apart_and_hardware_comes_first() -> None:
    found = _adapters._parse({"adapters": [{"name": "llvmpipe", "type": "cpu"},
                                           {"name": "Adreno 740", "type": "integrated"}]})
    assert found is not None
    assert [a.name for a in found.adapters] == ["Adreno 740", "llvmpipe"]
    assert not found.software_only and [a.name for a in found.software] == ["llvmpipe"]
    assert Adapters((Adapter("SwiftShader Device", "cpu"),)).software_only
    assert not Adapters().software_only   # no adapter at all is not a software one


def test_the_answer_is_cached_on_disk_by_fingerprint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Test double for the child probe: counts its calls; the cache file and fingerprint are real."""
    monkeypatch.setenv("EDGERT_CACHE", str(tmp_path))
    monkeypatch.setattr(_adapters, "_memo", {})
    calls = []

    def child() -> Adapters:
        calls.append(1)
        return Adapters((Adapter("llvmpipe (test double)", "cpu"),))

    monkeypatch.setattr(_adapters, "_probe_in_child", child)
    assert vulkan_adapters().software_only and len(calls) == 1
    doc = json.loads((tmp_path / "adapters.json").read_text())
    assert doc["fingerprint"] == _adapters.fingerprint() and doc["adapters"][0]["type"] == "cpu"
    _adapters._memo.clear()
    assert vulkan_adapters().adapters[0].name == "llvmpipe (test double)" and len(calls) == 1   # from disk
    monkeypatch.setenv("VK_ICD_FILENAMES", "/nonexistent.json")   # what decides the answer changed
    _adapters._memo.clear()
    vulkan_adapters()
    assert len(calls) == 2


def test_a_failed_probe_is_not_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Test double for the child probe: it crashes once."""
    monkeypatch.setenv("EDGERT_CACHE", str(tmp_path))
    monkeypatch.setattr(_adapters, "_memo", {})
    crashed = Adapters(error=f"{_adapters.PROBE_FAILED} failed (exit 1)")
    monkeypatch.setattr(_adapters, "_probe_in_child", lambda: crashed)
    assert vulkan_adapters().error and not (tmp_path / "adapters.json").exists()


def test_hiding_every_driver_leaves_no_adapter(tmp_path: Path) -> None:
    code = "from delegates._adapters import vulkan_adapters as v; a = v(); print(len(a.adapters), a.software_only)"
    proc = run_py(code, VK_ICD_FILENAMES="/nonexistent.json", EDGERT_CACHE=str(tmp_path))
    assert proc.returncode == 0 and proc.stdout.split() == ["0", "False"], proc.stderr


@needs_lavapipe
def test_detection_loads_no_vulkan_driver_into_this_process(tmp_path: Path) -> None:
    code = ("from delegates._adapters import vulkan_adapters as v; a = v(refresh=True); "
            "maps = open('/proc/self/maps').read(); "
            "print(a.software_only, 'libvulkan' in maps, 'lvp' in maps or 'lavapipe' in maps)")
    proc = run_py(code, EDGERT_CACHE=str(tmp_path))
    assert proc.returncode == 0 and proc.stdout.split() == ["True", "False", "False"], proc.stdout + proc.stderr


@needs_lavapipe
def test_devices_names_the_software_adapter_and_keeps_the_gpu_processor() -> None:
    proc = subprocess.run([sys.executable, "-m", "edgert.cli", "devices", "--json"], capture_output=True,
                          text=True, timeout=120)
    row = {d["name"]: d for d in json.loads(proc.stdout)}["litert-compiled-gpu"]
    assert row["processor"] == "gpu" and row["software"] is True and row["adapter"]
    assert row["tolerance"] <= 0.05 and "CPU cores" in row["reason"]
    table = subprocess.run([sys.executable, "-m", "edgert.cli", "devices"], capture_output=True, text=True, timeout=120)
    assert "software adapter" in table.stdout and "computes on this host's CPU" in table.stdout.replace("\n  ", " ")


def test_ci_installs_the_software_driver_from_the_machines_own_apt_sources() -> None:
    """.ci/run installs lavapipe (mesa-vulkan-drivers >= 24, from bookworm-backports on Debian 12) and
    derives that suite from the machine's own sources: no host is written in the repo."""
    import re

    text = (Path(__file__).resolve().parents[2] / ".ci" / "run").read_text()
    suite = text[text.index("backports() {"):text.index("need_mesa()")]
    block = text[text.index("need_mesa()"):text.index('python -m pip install')]
    assert "libvulkan1" in block and "mesa-vulkan-drivers" in block and '"$v" -lt 24' in block
    assert "$(backports)" in block, "the Vulkan step does not take mesa from the backports suite"
    assert "debian.sources" in suite and "Suites: bookworm-backports" in suite
    assert not re.search(r"https?://", suite + block), "a host is named in .ci/run's Vulkan step"
