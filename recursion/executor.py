"""The recursive executor: run a planned SubGraph as batched cell calls.

``Executor(entry, runtime).run(trees, fields)`` plans the batch
(``recursion.plan``), then drives a dataflow loop on the calling thread:
every group whose dependencies are done is gathered (one numpy fancy index
per InvokeOp input) and submitted as ONE cell call through the runner; when
its future completes, its outputs are stored with one slice copy and the
groups waiting on it are released. Independent groups are in flight at the
same time, so they run in parallel on the runtime's workers. A plan of one
shard (one worker, or one of ``encode``'s parts) has nothing to overlap: its
groups run in order as sync calls on the calling thread. No Python recursion
anywhere: depth only adds loop iterations.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from queue import SimpleQueue
from typing import Any

import numpy as np
import onnx

from edgert.errors import ConfigError, EdgeRTError, InferenceError
from recursion.forest import Forest
from recursion.plan import MAX_ROWS, Group, Plan, make_plan
from recursion.runners import CellHandle, Runner, as_runner, unique_name
from recursion.subgraph import Branch, SubGraph
from recursion.tree import Tree

__all__ = ["Executor", "RunResult", "RunStats"]


@dataclass(frozen=True, slots=True)
class RunStats:
    """What one run did: ``calls`` batched cell calls over ``waves`` waves; times in ms."""

    trees: int
    nodes: int
    invocations: int
    calls: int
    waves: int
    plan_ms: float
    run_ms: float


@dataclass(frozen=True, slots=True, eq=False)
class RunResult:
    """Outputs of every invocation of one run.

    ``buffers[sg_name][output]`` has one row per invocation of that SubGraph
    (plus a trailing zero sentinel row); ``pos[sg_name][node]`` is a global
    node's row (-1 if not invoked).
    """

    forest: Forest
    entry: str
    buffers: Mapping[str, Mapping[str, np.ndarray]]
    pos: Mapping[str, np.ndarray]
    stats: RunStats

    def roots(self, output: str, subgraph: str | None = None) -> np.ndarray:
        """``[T, …]``: ``output`` of the entry SubGraph (or ``subgraph``) at each tree's root."""
        sg = subgraph or self.entry
        return self.buffers[sg][output][self.pos[sg][self.forest.roots]]

    def nodes(self, output: str, subgraph: str | None = None) -> np.ndarray:
        """``[n, …]``: ``output`` at every node in global node order (zeros where not invoked).

        A node that was not invoked has row -1, which is the zero sentinel row.
        """
        sg = subgraph or self.entry
        return self.buffers[sg][output][self.pos[sg]]


_NP_DTYPE = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.DOUBLE: np.float64,
             onnx.TensorProto.INT64: np.int64, onnx.TensorProto.INT32: np.int32}


def _output_specs(cell: bytes, where: str) -> dict[str, tuple[tuple[int, ...], Any]]:
    """Per cell output: (shape after the batch dimension, numpy dtype); those dims must be static."""
    model = onnx.ModelProto()
    model.ParseFromString(cell)
    specs = {}
    for vi in model.graph.output:
        tt = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        if not dims or any(d is None for d in dims[1:]):
            raise ConfigError(f"{where}: output {vi.name!r} must be [batch, static dims…], got "
                              f"{[d if d is not None else '?' for d in dims]}")
        specs[vi.name] = (tuple(int(d) for d in dims[1:]), _NP_DTYPE.get(tt.elem_type, np.float32))
    return specs


class Executor:
    """Runs ``entry`` over batches of trees through ``runtime``.

    Args:
        entry: the SubGraph invoked on every root.
        runtime: an ``edgert.Runtime``, a Runner (``recursion.OrtRunner``), or
            None for the process-wide default edgert runtime.
        shards: split each wave into this many independent parts; None = the
            runner's parallelism (one part per worker).
        max_rows: most rows in one cell call; bigger groups are cut into chunks.
    """

    def __init__(self, entry: SubGraph, runtime: Any = None, shards: int | None = None,
                 max_rows: int = MAX_ROWS) -> None:
        self.entry = entry
        self.runner: Runner = as_runner(runtime)
        self.shards = shards
        self.max_rows = max_rows
        #: Reuse one invocation for nodes whose InvokeOp-free branch sees equal fields (see make_plan).
        self.memoize = True
        self._cells: dict[tuple[int, int], CellHandle] = {}
        self._cells_lock = threading.Lock()   # several runs may share the executor (one per thread)
        self._specs: dict[int, dict[str, tuple[tuple[int, ...], Any]]] = {}
        self.last_stats: RunStats | None = None

    def _cell(self, s: int, b: int, sg: SubGraph, br: Branch) -> CellHandle:
        key = (id(sg), b)
        with self._cells_lock:
            if key not in self._cells:
                self._cells[key] = self.runner.load_cell(unique_name(f"{sg.name}.{br.name}"), br.cell)
            return self._cells[key]

    def warm(self) -> None:
        """Load every branch's cell into the runtime now (before runs share the executor across threads)."""
        for s, sg in enumerate(self.entry.reachable()):
            for b, br in enumerate(sg.branches):
                self._cell(s, b, sg, br)

    def _spec(self, sg: SubGraph) -> dict[str, tuple[tuple[int, ...], Any]]:
        """Shape/dtype of each SubGraph output; every branch must agree."""
        if id(sg) not in self._specs:
            spec: dict[str, tuple[tuple[int, ...], Any]] = {}
            for br in sg.branches:
                cell = _output_specs(br.cell, f"SubGraph {sg.name!r} branch {br.name!r}")
                for cell_out, out in (br.outputs or {}).items():
                    if cell_out not in cell:
                        raise ConfigError(f"SubGraph {sg.name!r} branch {br.name!r}: cell has no output "
                                          f"{cell_out!r} (it has {sorted(cell)})")
                    if out in spec and spec[out] != cell[cell_out]:
                        raise ConfigError(f"SubGraph {sg.name!r}: branches disagree on output {out!r}: "
                                          f"{spec[out]} vs {cell[cell_out]}")
                    spec[out] = cell[cell_out]
            self._specs[id(sg)] = spec
        return self._specs[id(sg)]

    @staticmethod
    def _guard(g: Any, sgs: Sequence[SubGraph], handle: CellHandle, get: Any, arg: Any) -> Mapping[str, np.ndarray]:
        """``get(arg)``: a group's outputs; a foreign exception becomes InferenceError naming the cell."""
        try:
            return get(arg)
        except EdgeRTError:
            raise
        except Exception as exc:
            sg = sgs[g.sg]
            raise InferenceError(f"SubGraph {sg.name!r} branch {sg.branches[g.branch].name!r} (cell "
                                 f"{handle.name!r}, {g.stop - g.start} nodes) failed: {exc}") from exc

    def plan(self, trees: Sequence[Tree] | Forest, fields: Mapping[str, np.ndarray] | None = None,
             shards: int | None = None) -> Plan:
        """The batched schedule :meth:`run` would execute (pass it back as ``run(..., plan=)``)."""
        forest = trees if isinstance(trees, Forest) else Forest.from_trees(trees)
        return make_plan(self.entry, forest, fields or {}, shards or self.shards or self.runner.parallelism,
                         self.max_rows, self.memoize)

    def run(self, trees: Sequence[Tree] | Forest, fields: Mapping[str, np.ndarray] | None = None,
            shards: int | None = None, plan: Plan | None = None, keep: Collection[str] | None = None) -> RunResult:
        """Evaluate ``entry`` on every tree; returns every invocation's outputs.

        ``fields`` are node arrays ``[n, …]`` in the batch's global node order
        (``Forest.from_trees(trees)``). ``plan``: one :meth:`plan` made earlier for this same
        forest and fields (so planning can happen on another thread); None plans here. ``keep``: the
        SubGraph outputs the result holds; any other is stored only where an InvokeOp reads it, and
        left out of the result (None: every output). Raises what a cell call raised (InferenceError,
        RequestDropped …), naming the SubGraph and branch.
        """
        t0 = time.perf_counter()
        forest = trees if isinstance(trees, Forest) else Forest.from_trees(trees)
        fields = dict(fields or {})
        if plan is None:
            plan = make_plan(self.entry, forest, fields, shards or self.shards or self.runner.parallelism,
                             self.max_rows, self.memoize)
        elif len(plan.pos[0]) != forest.n:
            raise ConfigError(f"the plan given to run() covers {len(plan.pos[0])} nodes but the forest has {forest.n}; "
                              "make it with executor.plan(forest, fields) for this same forest")
        bufs = self._buffers(plan, keep)
        sgs = plan.subgraphs
        cells = {(g.sg, g.branch): self._cell(g.sg, g.branch, sgs[g.sg], sgs[g.sg].branches[g.branch])
                 for g in plan.groups}
        t1 = time.perf_counter()
        self._execute(plan, fields, bufs, cells)
        t2 = time.perf_counter()
        stats = RunStats(len(forest.roots), forest.n, sum(plan.rows), len(plan.groups), plan.waves,
                         (t1 - t0) * 1e3, (t2 - t1) * 1e3)
        self.last_stats = stats
        return RunResult(forest, self.entry.name,
                         {sg.name: bufs[s] for s, sg in enumerate(sgs)},
                         {sg.name: plan.pos[s] for s, sg in enumerate(sgs)}, stats)

    def _buffers(self, plan: Plan, keep: Collection[str] | None) -> list[dict[str, np.ndarray]]:
        """Per SubGraph, an output buffer per output kept (``keep``, and what InvokeOps read; None: all): a
        row per invocation, then the zero sentinel row."""
        read = {(id(op.target), out) for sg in plan.subgraphs for br in sg.branches for op in br.invokes
                for out in op.outputs}
        bufs: list[dict[str, np.ndarray]] = []
        for s, sg in enumerate(plan.subgraphs):
            spec = self._spec(sg)
            kept = [o for o in sg.outputs if keep is None or o in keep or (id(sg), o) in read]
            # every row but the trailing sentinel is written by its group before anything reads it, so
            # only the sentinel (what absent children gather) is zeroed: np.zeros would memset ~60 MB
            # per SST-test batch on this thread before the first cell call
            bufs.append({o: np.empty((plan.rows[s] + 1, *spec[o][0]), dtype=spec[o][1]) for o in kept})
            for b in bufs[-1].values():
                b[-1] = 0
        return bufs

    def _execute(self, plan: Plan, fields: Mapping[str, np.ndarray], bufs: list[dict[str, np.ndarray]],
                 cells: Mapping[tuple[int, int], CellHandle]) -> None:
        """Run every group of ``plan`` once its dependencies are done, writing its rows of ``bufs``: a plan of
        one shard in order on this thread; otherwise a lone ready group on this thread, several at once
        through their cells' ``submit``."""
        sgs = plan.subgraphs
        groups = plan.groups
        waiting = [len(g.deps) for g in groups]
        dependents: list[list[int]] = [[] for _ in groups]
        for g in groups:
            for d in g.deps:
                dependents[d].append(g.id)
        done_q: SimpleQueue = SimpleQueue()
        ready = deque(g for g in groups if not g.deps)

        def inputs_of(g: Any) -> dict[str, np.ndarray]:
            return _inputs(g, sgs, fields, bufs)

        def finish(g: Any, out: Mapping[str, np.ndarray]) -> None:
            _store(g, sgs, bufs, out)
            for d in dependents[g.id]:
                waiting[d] -= 1
                if waiting[d] == 0:
                    ready.append(groups[d])

        if plan.shards == 1:
            # One part: its groups one after another on this thread (they are in dependency order); a
            # lone stream gains nothing from handing calls to workers, and each hand-off costs the GIL.
            for g in groups:
                handle = cells[(g.sg, g.branch)]
                finish(g, self._guard(g, sgs, handle, handle.call, inputs_of(g)))
            return
        inflight = 0
        completed = 0
        while completed < len(groups):
            if ready and inflight == 0 and len(ready) == 1:
                # Nothing to overlap with: run it on this thread (no hand-offs).
                g = ready.popleft()
                handle = cells[(g.sg, g.branch)]
                out = self._guard(g, sgs, handle, handle.call, inputs_of(g))
                finish(g, out)
                completed += 1
                continue
            while ready:
                g = ready.popleft()
                fut = cells[(g.sg, g.branch)].submit(inputs_of(g))
                fut.add_done_callback(lambda f, g=g: done_q.put((g, f)))
                inflight += 1
            g, fut = done_q.get()
            inflight -= 1
            handle = cells[(g.sg, g.branch)]
            finish(g, self._guard(g, sgs, handle, lambda f, h=handle: h.unwrap(f.result()), fut))
            completed += 1


def _inputs(g: Group, sgs: Sequence[SubGraph], fields: Mapping[str, np.ndarray],
            bufs: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """A group's cell inputs: its nodes' fields, and one gather per InvokeOp input from the buffers."""
    br = sgs[g.sg].branches[g.branch]
    inputs = {name: fields[f][g.nodes] for name, f in br.fields.items()}
    for ga in g.gathers:
        src = bufs[ga.sg][ga.output]
        if ga.counts is None:   # stacked: one flat take (faster than 2-D fancy indexing)
            inputs[ga.name] = np.take(src, ga.rows.ravel(), axis=0).reshape(ga.rows.shape + src.shape[1:])
        else:
            inputs[ga.name] = _children_sum(src, ga.rows, ga.counts)
    return inputs


def _children_sum(src: np.ndarray, rows: np.ndarray, counts: Sequence[int]) -> np.ndarray:
    """``src[rows].sum(1)`` for rows whose k-th column is real for the first ``counts[k]`` rows only: a take
    and an add per child position, over those rows alone (no padded child is read)."""
    if rows.shape[1] == 0:
        return np.zeros((len(rows), *src.shape[1:]), dtype=src.dtype)
    total = np.take(src, rows[:, 0], axis=0)
    for k in range(1, rows.shape[1]):
        total[:counts[k]] += np.take(src, rows[:counts[k], k], axis=0)
    return total


def _store(g: Group, sgs: Sequence[SubGraph], bufs: list[dict[str, np.ndarray]],
           out: Mapping[str, np.ndarray]) -> None:
    """Copy a group's outputs into its rows (``start:stop``) of its SubGraph's buffers (those kept)."""
    b = bufs[g.sg]
    for cell_out, name in (sgs[g.sg].branches[g.branch].outputs or {}).items():
        if name in b:                           # (an output not kept is not stored)
            b[name][g.start:g.stop] = out[cell_out]
