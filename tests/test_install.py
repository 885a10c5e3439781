"""Lean install: the core needs numpy, onnxruntime and ai-edge-litert; a feature whose extra is missing
names the extra.

A core-only install is reproduced in a subprocess whose import system refuses the optional packages
(``BLOCKER`` below), so the product code meets exactly the ModuleNotFoundError a clean venv gives it.
The real fresh-venv check (``pip install .`` in a new venv) is described in docs/install.md.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OPTIONAL = ("rich", "matplotlib", "paho", "aiomqtt", "amqtt", "onnx", "pyinstrument", "mlperf_loadgen")

#: Prepended to each snippet: an import finder that refuses the optional packages, as a core install does.
BLOCKER = f"""
import importlib.abc, sys
class _CoreOnly(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {OPTIONAL!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, _CoreOnly())
"""


def _core_only(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", BLOCKER + textwrap.dedent(code)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_the_core_dependencies_are_the_three_runtimes() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {re.split(r"[<>=!~ \[]", d)[0].lower() for d in meta["dependencies"]}
    assert core == {"numpy", "onnxruntime", "ai-edge-litert"}
    extras = meta["optional-dependencies"]
    for name in ("cli", "plot", "cloud", "trees", "all", "test", "bench"):
        assert name in extras, name
    # the product's extras carry no reference peer's pins: MediaPipe runs in its own venv (apps/xr/reference.py)
    assert not any("mediapipe" in d for ds in extras.values() for d in ds), extras
    for d in (*extras["trees"], *extras["kserve"], *extras["test"]):
        assert "<" not in d.split(";")[0], d


def test_the_supported_pythons_are_stated_once() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert meta["requires-python"] == ">=3.11"
    versions = [c.rsplit(" :: ", 1)[1] for c in meta["classifiers"] if re.fullmatch(r".*Python :: 3\.\d+", c)]
    assert versions == ["3.11", "3.12", "3.13"], meta["classifiers"]
    assert "Python 3.11, 3.12 and 3.13" in (ROOT / "README.md").read_text()
    assert sys.version_info >= (3, 11)


def test_core_only_import_and_a_sync_call_on_a_mediapipe_model(mediapipe_dir: Path) -> None:
    proc = _core_only(f"""
        import numpy as np, edgert
        with edgert.Runtime(cpu_workers=1) as rt:
            palm = rt.load(edgert.models.path("palm_detection_lite", directory={str(mediapipe_dir)!r}))
            out = palm(np.zeros((1, 192, 192, 3), np.float32))
        print(len(out))
        print(sorted(m for m in sys.modules if m.split(".")[0] in {OPTIONAL!r}))
    """)
    assert proc.returncode == 0, proc.stderr
    n_outputs, optional_loaded = proc.stdout.split("\n")[:2]
    assert int(n_outputs) == 2 and optional_loaded == "[]", proc.stdout


def test_core_only_features_name_their_extra() -> None:
    proc = _core_only("""
        import edgert
        from edgert.bench.plot import plot_records
        for what, call in (("plot", lambda: plot_records([], "/tmp/x.png")),
                           ("cloud", lambda: edgert.Runtime(offload="auto")),
                           ("trees", lambda: __import__("recursion"))):
            try:
                call()
            except edgert.EdgeRTError as exc:
                print(what, "|", exc)
    """)
    assert proc.returncode == 0, proc.stderr
    lines = dict(ln.split(" | ", 1) for ln in proc.stdout.splitlines())
    assert lines["plot"] == "--plot needs matplotlib: pip install 'edgert[plot]'"
    assert lines["cloud"] == "offload needs paho-mqtt: pip install 'edgert[cloud]'"
    assert "pip install 'edgert[trees]'" in lines["trees"]


def test_core_only_command_line_works_and_names_extras() -> None:
    proc = _core_only("""
        from edgert.cli import main
        assert main(["devices"]) == 0
        assert main(["run", "xr-demo", "--seconds", "1", "--plot", "x.png"]) == 2
        assert main(["run", "xr-demo", "--seconds", "1", "--frames", "."]) == 2
        assert main(["cloud", "serve", "--broker", "mqtt://127.0.0.1:1", "--models", "."]) == 2
    """)
    assert proc.returncode == 0, proc.stderr
    assert "litert-xnnpack" in proc.stdout
    assert "edgert cloud serve needs aiomqtt: pip install 'edgert[cloud]'" in proc.stderr
    assert "--plot needs matplotlib: pip install 'edgert[plot]'" in proc.stderr
    # --frames reads images with OpenCV (the xr extra, which the demo needs anyway) and falls back to
    # matplotlib: with OpenCV there, it needs no plot extra and looks at the directory
    assert "--frames '.': no .png/.jpg/.jpeg/.bmp images there" in proc.stderr
