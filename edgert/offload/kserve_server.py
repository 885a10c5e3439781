"""``edgert cloud serve --kserve HOST:PORT --models DIR``: an Open Inference Protocol server for a directory of ONNX files.

It is MLServer (Seldon's server of the protocol, gRPC and REST) with edgert's ONNX Runtime
model runtime (:mod:`edgert.offload._kserve_runtime`): :func:`build_repository` writes one
``model-settings.json`` per ``.onnx`` file of ``DIR`` (model name = file stem, version ``1``),
:func:`serve_forever` starts MLServer on that repository in this process. Any server of the
protocol does as well (Triton with its ONNX Runtime backend, KServe); this one needs no
container, so the tests and benchmarks start it as a plain process.
"""

from __future__ import annotations

import asyncio
import json
import logging
import tempfile
from pathlib import Path

from edgert.errors import ConfigError

#: The MLServer implementation of the ONNX runtime, as model-settings.json names it.
IMPLEMENTATION = "edgert.offload._kserve_runtime.OnnxRuntimeModel"

log = logging.getLogger("edgert.cloud")


def build_repository(models: str | Path, repo: str | Path, *, version: str = "1", threads: int = 1) -> list[str]:
    """Write an MLServer model repository under ``repo`` serving every ``.onnx`` file of ``models``.

    Returns the model names (file stems).

    Raises:
        ConfigError: ``models`` is not a directory, or it has no ``.onnx`` file.
    """
    src = Path(models)
    if not src.is_dir():
        raise ConfigError(f"--models {str(src)!r} is not a directory (give a directory of .onnx files)")
    files = sorted(src.glob("*.onnx"))
    if not files:
        raise ConfigError(f"--models {str(src)!r} has no .onnx file to serve")
    names = []
    for f in files:
        d = Path(repo) / f.stem
        d.mkdir(parents=True, exist_ok=True)
        settings = {"name": f.stem, "implementation": IMPLEMENTATION,
                    "parameters": {"uri": str(f.resolve()), "version": version, "extra": {"threads": threads}}}
        (d / "model-settings.json").write_text(json.dumps(settings, indent=2))
        names.append(f.stem)
    return names


def server_settings(host: str, grpc_port: int, http_port: int) -> dict[str, object]:
    """MLServer's ``settings.json``: both protocols on the given ports, no metrics server, inference in
    the server process (``parallel_workers`` 0: no worker processes to leave behind)."""
    if grpc_port == http_port:
        raise ConfigError(f"the gRPC and REST ports must differ (both {grpc_port})")
    return {"host": host, "grpc_port": grpc_port, "http_port": http_port, "metrics_endpoint": None,
            "parallel_workers": 0, "debug": False, "load_models_at_startup": True}


def serve_forever(models: str | Path, host: str, grpc_port: int, http_port: int, *, version: str = "1",
                  threads: int = 1) -> None:
    """Serve ``models`` over gRPC (``grpc_port``) and REST (``http_port``) until SIGTERM/SIGINT.

    Raises:
        ConfigError: no models, equal ports.
        MissingExtra: MLServer is not installed (``pip install 'edgert[kserve-server]'``).
    """
    from edgert.extras import require  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="edgert-kserve-") as repo:
        names = build_repository(models, repo, version=version, threads=threads)   # bad input before the import
        require("mlserver", "edgert cloud serve --kserve")
        (Path(repo) / "settings.json").write_text(json.dumps(server_settings(host, grpc_port, http_port)))
        log.info("serving %s over the Open Inference Protocol: gRPC %s:%d, REST %s:%d", ", ".join(names),
                 host, grpc_port, host, http_port)
        asyncio.run(_serve(repo))


async def _serve(repo: str) -> None:
    from mlserver import MLServer  # noqa: PLC0415 - the server process only
    from mlserver.cli.serve import load_settings  # noqa: PLC0415

    settings, models = await load_settings(repo)
    server = MLServer(settings)
    await server.start(models)
