"""Optional dependencies, public so that apps built on edgert name the extra the same way (:func:`require`).

The core needs numpy, onnxruntime and ai-edge-litert only.

Everything else comes with an extra of ``pyproject.toml``; a feature that needs a
missing one raises :class:`~edgert.errors.EdgeRTError` naming the extra::

    --plot needs matplotlib: pip install 'edgert[plot]'

=========  ===========================================  ==============================
extra      packages                                     features
=========  ===========================================  ==============================
cli        rich                                         live tables, progress bars
plot       matplotlib                                   ``--plot``, ``--frames DIR`` without OpenCV
cloud      paho-mqtt, aiomqtt, amqtt                    ``--offload``, ``edgert cloud``
kserve     tritonclient[grpc]                           ``--offload kserve://…``
trees      onnx                                         ``recursion`` (tree models)
cluster    dask[distributed]                            ``edgert sweep --cluster``
parquet    pyarrow                                      ``edgert sweep -o F.parquet``
test       onnx, pytest, LoadGen …                      the test suite, genmodels
=========  ===========================================  ==============================
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from edgert.errors import EdgeRTError

#: import name -> (distribution name, extra that installs it).
EXTRA_OF: dict[str, tuple[str, str]] = {
    "rich": ("rich", "cli"),
    "matplotlib": ("matplotlib", "plot"),
    "paho": ("paho-mqtt", "cloud"),
    "aiomqtt": ("aiomqtt", "cloud"),
    "amqtt": ("amqtt", "cloud"),
    "onnx": ("onnx", "trees"),
    "mlperf_loadgen": ("mlcommons-loadgen", "loadgen"),
    "pyinstrument": ("pyinstrument", "profile"),
    "tritonclient": ("tritonclient[grpc]", "kserve"),
    "mlserver": ("mlserver", "kserve-server"),
    "distributed": ("dask[distributed]", "cluster"),
    "pyarrow": ("pyarrow", "parquet"),
}


class MissingExtra(EdgeRTError, ImportError):
    """A feature needs an optional package that is not installed; the message names the extra."""


def has(module: str) -> bool:
    """Whether the top-level package of ``module`` (``"rich"``, ``"paho.mqtt"``) is importable."""
    return importlib.util.find_spec(module.split(".")[0]) is not None


def require(module: str, feature: str) -> ModuleType:
    """Import ``module`` for ``feature``, or raise :class:`MissingExtra` naming the extra to install.

    >>> require("json", "--json").__name__
    'json'
    """
    top = module.split(".")[0]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] != top:
            raise   # the package is there but one of its own imports is broken: show that
        dist, extra = EXTRA_OF.get(top, (top, "all"))
        raise MissingExtra(f"{feature} needs {dist}: pip install 'edgert[{extra}]'") from exc
