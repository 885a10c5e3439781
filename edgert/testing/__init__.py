"""Tools for testing and benchmarking edgert, not needed to run it.

:mod:`edgert.testing.genmodels` builds small real networks (MLP, CNN, multi-input, ...)
as ``.onnx`` (``onnx.helper``) and ``.tflite`` (a flatbuffer writer over the schema that
``ai_edge_litert`` ships), with random weights, so tests and benchmarks run real backends
without TensorFlow or torch.
"""
