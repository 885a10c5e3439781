"""Optional dependencies, public so that apps built on edgert name the extra the same way (:func:`require`).

The core needs numpy, onnxruntime and ai-edge-litert only.

Everything else comes with an extra of ``pyproject.toml``; a feature that needs a
missing one raises :class:`~edgert.errors.EdgeRTError` naming the extra::

    --plot needs matplotlib: pip install 'edgert[plot]'

=============  ===========================================  ==============================
extra          packages                                     features
=============  ===========================================  ==============================
cli            rich                                         live tables, progress bars
plot           matplotlib                                   ``--plot``, ``--frames DIR`` without OpenCV
cloud          paho-mqtt, aiomqtt, amqtt                    ``--offload``, ``edgert cloud``
kserve         tritonclient[grpc]                           ``--offload kserve://…``
kserve-server  mlserver (Python < 3.13)                     ``edgert cloud serve --kserve``
trees          onnx                                         ``recursion`` (tree models)
cluster        dask[distributed]                            ``edgert sweep --cluster``
parquet        pyarrow                                      ``edgert sweep -o F.parquet``
test           onnx, pytest, LoadGen …                      the test suite, genmodels
=============  ===========================================  ==============================
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
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

#: import name -> (the first Python version its newest release does not install on, why).
PYTHON_BELOW: dict[str, tuple[tuple[int, int], str]] = {
    "mlserver": ((3, 13), "MLServer 1.7.1, its newest release, needs Python < 3.13"),
}


def unavailable_here(module: str) -> str | None:
    """Why ``module``'s extra installs nothing on this Python (None where it does)."""
    below = PYTHON_BELOW.get(module.split(".")[0])
    if below is None or sys.version_info[:2] < below[0]:
        return None
    return f"{below[1]} (this is {sys.version_info[0]}.{sys.version_info[1]}); run it on Python 3.11 or 3.12"


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
        why = unavailable_here(top)
        if why is not None:
            raise MissingExtra(f"{feature} needs {dist}: {why}") from exc
        raise MissingExtra(f"{feature} needs {dist}: pip install 'edgert[{extra}]'") from exc
