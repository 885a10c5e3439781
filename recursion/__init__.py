"""SubGraph / InvokeOp recursion: tree-structured networks with batched, parallel node evaluation.

    import recursion
    from recursion.models import ChildSumTreeLSTM
    trees = [recursion.parse_ptb(line) for line in open(recursion.data.sst_path("test"))]
    model = ChildSumTreeLSTM.from_npz("weights.npz")
    H = model.encode(trees)     # [len(trees), hidden]

A model is one recursive :class:`SubGraph` (leaf / internal branches, each an
ONNX cell, with :class:`InvokeOp` s on the children); the :class:`Executor`
expands it over a batch of trees without Python recursion and runs every
group of ready invocations of one cell as one request through an
``edgert.Runtime`` — sharing processors and the scheduler with the app's
other models.
"""

from edgert.extras import require as _require

_require("onnx", "recursion (tree models build their cells as ONNX graphs)")
del _require

from recursion import data  # noqa: E402
from recursion.executor import Executor, RunResult, RunStats
from recursion.forest import Forest
from recursion.plan import Plan, make_plan
from recursion.runners import (
    CellHandle,
    OrtRunner,
    Runner,
    RuntimeRunner,
    default_runtime,
)
from recursion.subgraph import (
    Branch,
    InvokeOp,
    SubGraph,
    arity_at_most,
    is_internal,
    is_leaf,
)
from recursion.ptb import PTBParseError, parse_ptb, read_forest, read_ptb
from recursion.tree import Tree

__all__ = [
    "Branch", "CellHandle", "data", "Executor", "Forest", "InvokeOp", "OrtRunner", "PTBParseError", "Plan",
    "RunResult", "RunStats", "Runner", "RuntimeRunner", "SubGraph", "Tree", "arity_at_most",
    "default_runtime", "is_internal", "is_leaf", "make_plan", "parse_ptb", "read_forest", "read_ptb",
]
