"""An MLServer model runtime that serves ``.onnx`` files with ONNX Runtime (the server side of kserve offload).

MLServer (Seldon) speaks the Open Inference Protocol over gRPC and REST; this runtime is the
few lines it needs to run ONNX models: it reports each model's real inputs and outputs as its
metadata (names, datatypes, shapes with ``-1`` for dynamic dimensions), checks every request
against them (a wrong name, datatype or shape is a 400 naming the input, expected and given)
and runs ONNX Runtime on the CPU, single-threaded unless the model settings' ``extra.threads``
says otherwise. Referenced from ``model-settings.json`` as
``"implementation": "edgert.offload._kserve_runtime.OnnxRuntimeModel"``; see
:mod:`edgert.offload.kserve_server` for a repository built from a directory of files.

Imports MLServer: only the server process imports this module (MLServer's protobuf messages and
``tritonclient.grpc``'s share names and cannot live in one process).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnxruntime as ort
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.errors import InferenceError
from mlserver.types import InferenceRequest, InferenceResponse, MetadataTensor
from mlserver.utils import get_model_uri

from edgert.offload._kserve_transport import DATATYPES

#: ONNX Runtime's type strings -> the protocol's datatypes.
_ORT_TYPES = {"tensor(float)": "FP32", "tensor(double)": "FP64", "tensor(float16)": "FP16",
              "tensor(int8)": "INT8", "tensor(int16)": "INT16", "tensor(int32)": "INT32", "tensor(int64)": "INT64",
              "tensor(uint8)": "UINT8", "tensor(uint16)": "UINT16", "tensor(uint32)": "UINT32",
              "tensor(uint64)": "UINT64", "tensor(bool)": "BOOL"}

def _tensor(arg: Any) -> MetadataTensor:
    dt = _ORT_TYPES.get(arg.type)
    if dt is None:
        raise ValueError(f"tensor {arg.name!r} has type {arg.type}, which this runtime does not serve")
    return MetadataTensor(name=arg.name, datatype=dt, shape=[d if isinstance(d, int) and d >= 0 else -1
                                                              for d in arg.shape])


class OnnxRuntimeModel(MLModel):
    """One ``.onnx`` file (``parameters.uri``) served with ONNX Runtime on the CPU."""

    async def load(self) -> bool:
        """Open the file; publish its inputs and outputs as the model's metadata."""
        path = await get_model_uri(self.settings)
        opts = ort.SessionOptions()
        extra = (self.settings.parameters.extra if self.settings.parameters else None) or {}
        opts.intra_op_num_threads = int(extra.get("threads", 1))
        opts.inter_op_num_threads = 1
        self._session = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        self.inputs = [_tensor(i) for i in self._session.get_inputs()]
        self.outputs = [_tensor(o) for o in self._session.get_outputs()]
        self.ready = True
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        """Check the inputs against the metadata, run, answer the requested (or all) outputs.

        Raises:
            InferenceError: (HTTP 400 / gRPC INVALID_ARGUMENT) a missing, unknown or mistyped
                input, an unknown output, or ONNX Runtime failed.
        """
        given = {i.name: i for i in payload.inputs}
        feeds = {}
        for spec in self.inputs or []:
            inp = given.pop(spec.name, None)
            want = f"{spec.datatype}{list(spec.shape)}"
            if inp is None:
                raise InferenceError(f"model {self.name!r} needs input {spec.name!r} ({want}); "
                                     f"got {', '.join(repr(n) for n in [i.name for i in payload.inputs]) or 'none'}")
            shape = list(inp.shape)
            if inp.datatype != spec.datatype or len(shape) != len(spec.shape) or any(
                    e >= 0 and e != g for e, g in zip(spec.shape, shape)):
                raise InferenceError(f"input {spec.name!r} of model {self.name!r} is {want}, got {inp.datatype}{shape}")
            feeds[spec.name] = np.asarray(NumpyCodec.decode_input(inp), dtype=DATATYPES[spec.datatype]).reshape(shape)
        if given:
            raise InferenceError(f"model {self.name!r} has no input(s) {', '.join(map(repr, given))}")
        names = [o.name for o in self.outputs or []]
        wanted = [o.name for o in payload.outputs] if payload.outputs else names
        unknown = [n for n in wanted if n not in names]
        if unknown:
            raise InferenceError(f"model {self.name!r} has no output(s) {', '.join(map(repr, unknown))} "
                                 f"(outputs: {', '.join(names)})")
        try:
            outs = self._session.run(wanted, feeds)
        except Exception as exc:  # noqa: BLE001 - onnxruntime's own exceptions: one 400 with its message
            raise InferenceError(f"ONNX Runtime failed on model {self.name!r}: {exc}") from exc
        return InferenceResponse(model_name=self.name, model_version=self.version, id=payload.id,
                                 outputs=[NumpyCodec.encode_output(n, np.asarray(a)) for n, a in zip(wanted, outs)])
