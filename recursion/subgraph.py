"""``SubGraph`` and ``InvokeOp``: a recursive definition, written once.

After Jeong et al. (EuroSys'18): a SubGraph is a named computation over one
tree node with named outputs. Its body is a branch on the node (leaf vs
internal, or any vectorised predicate); each branch is a *cell* — an ONNX
graph with a dynamic batch dimension — fed by node fields and by
:class:`InvokeOp` s, which call a SubGraph (itself included) on every child
of the node and hand the children's outputs to the cell::

    lstm = SubGraph("tree_lstm", outputs=("h", "c"))
    lstm.branch(is_leaf, leaf_cell, fields={"word": "word"})
    lstm.branch(is_internal, node_cell,
                invokes=[InvokeOp(lstm, {"h": "h_ch", "c": "c_ch"})])

The definition is declarative data: the executor (``recursion.executor``)
expands it over a batch of trees without Python recursion and runs all ready
invocations of one branch as one batched call.

Cell input conventions (all batch-major, batch dimension first):

* a node field ``fields={"word": "word"}`` arrives as ``[B]`` (or ``[B, …]``);
* an InvokeOp output arrives stacked over the children as ``[B, K, …]``,
  where K is the group's child count (or ``pad_to``); absent children are
  zero rows, so a cell must treat a zero child state as "no child" (true for
  sums over children and for N-ary TreeLSTM/TreeRNN/RNTN with zero padding);
* with ``reduce="sum"`` it arrives as the sum over the children, ``[B, …]``
  (zeros for a node without children): summed as it is gathered, so a cell
  that only needs the sum (Child-Sum TreeLSTM) neither reduces nor pads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from edgert.errors import ConfigError

__all__ = ["Branch", "InvokeOp", "NodePredicate", "SubGraph", "arity_at_most", "is_internal", "is_leaf"]

#: How an InvokeOp can hand over its children's outputs: stacked (None) or summed.
REDUCTIONS = (None, "sum")

#: A vectorised branch condition: (arity [B] int64, node field arrays) -> bool [B].
NodePredicate = Callable[[np.ndarray, Mapping[str, np.ndarray]], np.ndarray]


def is_leaf(arity: np.ndarray, fields: Mapping[str, np.ndarray]) -> np.ndarray:
    """Branch condition: the node has no children."""
    return arity == 0


def is_internal(arity: np.ndarray, fields: Mapping[str, np.ndarray]) -> np.ndarray:
    """Branch condition: the node has at least one child."""
    return arity > 0


def arity_at_most(n: int) -> NodePredicate:
    """Branch condition: internal node with 1..n children."""

    def pred(arity: np.ndarray, fields: Mapping[str, np.ndarray]) -> np.ndarray:
        return (arity > 0) & (arity <= n)

    pred.__name__ = f"arity_at_most({n})"
    return pred


@dataclass(frozen=True, slots=True, eq=False)
class InvokeOp:
    """Invoke ``target`` on every child of the current node.

    Attributes:
        target: the SubGraph to call on each child (may be the enclosing one).
        outputs: ``{target output name: cell input name}``; each arrives as
            ``[B, K, …]`` stacked over the children, left to right.
        pad_to: stack exactly this many children (zero rows for the absent
            ones); a node with more children fails planning with an error.
            ``None`` stacks the group's child count (the executor groups nodes
            by a bucket of child counts, :func:`recursion.plan.coarse_buckets`).
        reduce: ``"sum"``: each output arrives summed over the children,
            ``[B, …]``, instead of stacked; nodes of any child count share one
            call. ``None``: stacked.
    """

    target: SubGraph
    outputs: Mapping[str, str]
    pad_to: int | None = None
    reduce: str | None = None


@dataclass(frozen=True, slots=True, eq=False)
class Branch:
    """One arm of a SubGraph's branch: when ``when`` holds, run ``cell``.

    Attributes:
        when: vectorised predicate over the nodes (see :data:`NodePredicate`).
        cell: ONNX model bytes; batch dimension first on every input/output.
        fields: ``{cell input name: node field name}``.
        invokes: InvokeOps whose stacked outputs feed the cell.
        outputs: ``{cell output name: SubGraph output name}``; default: same names.
        name: short name used for the cell in the runtime (``leaf``, ``node`` …).
    """

    when: NodePredicate
    cell: bytes
    fields: Mapping[str, str] = field(default_factory=dict)
    invokes: tuple[InvokeOp, ...] = ()
    outputs: Mapping[str, str] | None = None
    name: str = ""


class SubGraph:
    """A named recursive computation over one tree node (see the module docstring).

    Args:
        name: unique name; the runtime names its cells ``<name>.<branch>``.
        outputs: names of the values every branch produces for a node.
    """

    def __init__(self, name: str, outputs: Sequence[str]) -> None:
        if not name or not outputs:
            raise ConfigError("SubGraph needs a name and at least one output, e.g. SubGraph('lstm', outputs=('h', 'c'))")
        self.name = name
        self.outputs: tuple[str, ...] = tuple(outputs)
        self.branches: list[Branch] = []

    def branch(
        self,
        when: NodePredicate,
        cell: bytes,
        *,
        fields: Mapping[str, str] | None = None,
        invokes: Sequence[InvokeOp] = (),
        outputs: Mapping[str, str] | None = None,
        name: str | None = None,
    ) -> SubGraph:
        """Add an arm; arms are tried in order and the first whose ``when`` holds runs.

        Returns ``self`` so arms can be chained. Raises ConfigError when the
        arm's outputs do not cover the SubGraph's outputs or an InvokeOp
        names an output its target lacks.
        """
        if isinstance(cell, str) or not isinstance(cell, (bytes, bytearray)):
            raise ConfigError(f"SubGraph {self.name!r}: a branch cell must be ONNX model bytes "
                              "(model.SerializeToString()), got " + type(cell).__name__)
        out_map = dict(outputs) if outputs is not None else {o: o for o in self.outputs}
        missing = set(self.outputs) - set(out_map.values())
        if missing:
            raise ConfigError(f"SubGraph {self.name!r}: branch does not produce {sorted(missing)}; "
                              f"map cell outputs to them with outputs={{cell_output: {min(missing)!r}}}")
        for op in invokes:
            if op.reduce not in REDUCTIONS:
                raise ConfigError(f"InvokeOp of {op.target.name!r}: reduce={op.reduce!r}; use one of {REDUCTIONS}")
            bad = set(op.outputs) - set(op.target.outputs)
            if bad:
                raise ConfigError(f"InvokeOp of {op.target.name!r} asks for {sorted(bad)}; "
                                  f"it has outputs {list(op.target.outputs)}")
        arm = Branch(when, bytes(cell), dict(fields or {}), tuple(invokes), out_map,
                     name or f"b{len(self.branches)}")
        if any(b.name == arm.name for b in self.branches):
            raise ConfigError(f"SubGraph {self.name!r} already has a branch named {arm.name!r}")
        self.branches.append(arm)
        return self

    def reachable(self) -> list[SubGraph]:
        """This SubGraph and every SubGraph its InvokeOps can reach (iterative walk)."""
        seen: dict[int, SubGraph] = {id(self): self}
        todo = [self]
        while todo:
            sg = todo.pop()
            for br in sg.branches:
                for op in br.invokes:
                    if id(op.target) not in seen:
                        seen[id(op.target)] = op.target
                        todo.append(op.target)
        return list(seen.values())

    def __repr__(self) -> str:
        return f"SubGraph({self.name!r}, outputs={self.outputs}, branches={[b.name for b in self.branches]})"
