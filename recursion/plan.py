"""Planning: expand a SubGraph over a batch of trees into batched groups.

Everything here is vectorised numpy over the whole batch; nothing recurses.

1. :class:`Forest` concatenates trees into one node numbering (post-order per
   tree, trees one after another).
2. Expansion finds which (SubGraph, node) invocations are needed and which
   branch each takes. With one self-recursive SubGraph (every model in
   ``recursion.models``) it is a single pass over subtree ranges; with several
   SubGraphs it walks the frontier one tree level at a time.
3. Waves: an invocation only needs its children, which are strictly lower, so
   the node's height is an as-soon-as-possible wave number.
4. Groups: invocations of one branch in one wave (and one shard of the batch,
   and, for children handed over stacked, one child-count bucket,
   :func:`coarse_buckets`) form a group = one batched cell call. Rows of
   a group are contiguous in its SubGraph's output buffers, so storing a
   result is a slice copy; inputs are gathered with one index array per
   InvokeOp (absent children point at a zero sentinel row). Children handed
   over summed (``InvokeOp(reduce="sum")``) need no common count: the group's
   nodes come in falling child count, so each child position is a prefix.
5. Dependencies between groups come from which groups produced the children,
   so independent groups (different shards, different branches) can run at
   the same time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from edgert.errors import ConfigError, InputError
from recursion.forest import Forest
from recursion.subgraph import SubGraph

__all__ = ["Forest", "Gather", "Group", "Plan", "make_plan"]


@dataclass(frozen=True, slots=True, eq=False)
class Gather:
    """One InvokeOp input of a group: ``buffers[sg][output][rows]`` → cell input ``name`` ([B, K, …]), or its
    sum over K ([B, …]) when ``counts`` is given: ``counts[k]`` of the group's nodes have more than ``k``
    children (they come first: a summed input's nodes are in falling child count)."""

    sg: int
    output: str
    name: str
    rows: np.ndarray
    counts: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True, eq=False)
class Group:
    """One batched cell call: ``stop - start`` nodes of one branch, rows ``start:stop`` of ``sg``'s buffers."""

    id: int
    sg: int
    branch: int
    wave: int
    start: int
    stop: int
    nodes: np.ndarray
    gathers: tuple[Gather, ...]
    deps: tuple[int, ...]


@dataclass(frozen=True, slots=True, eq=False)
class Plan:
    """The whole batched schedule of one run.

    Attributes:
        subgraphs: every SubGraph involved, index = ``Group.sg``.
        groups: in a valid execution order (every dependency first).
        rows: per SubGraph, how many invocations (buffer rows, sentinel excluded).
        pos: per SubGraph, int64 [n]: buffer row of each node, -1 if not invoked.
        waves: number of waves (max height + 1).
        shards: independent parts each wave was cut into (1: one sequential stream).
    """

    subgraphs: tuple[SubGraph, ...]
    groups: tuple[Group, ...]
    rows: tuple[int, ...]
    pos: tuple[np.ndarray, ...]
    waves: int
    shards: int = 1


def _expand(entry: SubGraph, subgraphs: list[SubGraph], forest: Forest,
            fields: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """branch index per node for each SubGraph (-1: not invoked), without recursion."""
    if len(subgraphs) == 1 and all(all(op.target is entry for op in br.invokes) for br in entry.branches):
        return [_expand_self(entry, forest, fields)]
    n = forest.n
    arity = forest.arity
    index = {id(sg): i for i, sg in enumerate(subgraphs)}
    branch = [np.full(n, -1, dtype=np.int64) for _ in subgraphs]
    pending: list[list[np.ndarray]] = [[] for _ in subgraphs]
    pending[0].append(forest.roots.copy())
    seen = [np.zeros(n, dtype=bool) for _ in subgraphs]
    seen[0][forest.roots] = True
    while any(pending):   # the frontier, one SubGraph at a time
        s = next(i for i, p in enumerate(pending) if p)
        nodes = np.concatenate(pending[s])
        pending[s] = []
        sg = subgraphs[s]
        b = _branches_for(sg, nodes, forest, arity, fields)
        branch[s][nodes] = b
        for bi, br in enumerate(sg.branches):
            if not br.invokes:
                continue
            kids = forest.children_of(nodes[b == bi])
            for op in br.invokes:
                t = index[id(op.target)]
                new = kids[~seen[t][kids]]
                if len(new):
                    seen[t][new] = True
                    pending[t].append(new)
    return branch


def _expand_self(entry: SubGraph, forest: Forest, fields: Mapping[str, np.ndarray]) -> np.ndarray:
    """:func:`_expand` for one self-recursive SubGraph, in one pass: every node could be invoked; a node
    whose branch invokes nothing cuts off its descendants (a contiguous id range)."""
    n = forest.n
    arity = forest.arity
    b_all = np.full(n, -1, dtype=np.int64)
    for b, br in enumerate(entry.branches):
        hit = np.asarray(br.when(arity, fields), dtype=bool) & (b_all < 0)
        b_all[hit] = b
    invokes = np.array([len(br.invokes) > 0 for br in entry.branches] + [True])
    cut = np.flatnonzero((arity > 0) & ~invokes[b_all])
    if len(cut) == 0:                   # (every internal node invokes: all are live)
        if np.any(b_all < 0):
            _branches_for(entry, np.arange(n, dtype=np.int64), forest, arity, fields)  # raises, naming the node
        return b_all
    cover = np.zeros(n + 1, dtype=np.int64)
    np.add.at(cover, forest.first[cut], 1)
    np.add.at(cover, cut, -1)
    live = np.cumsum(cover[:-1]) == 0
    if np.any(live & (b_all < 0)):
        _branches_for(entry, np.flatnonzero(live), forest, arity, fields)  # raises with the node named
    return np.where(live, b_all, -1)


def _branches_for(sg: SubGraph, nodes: np.ndarray, forest: Forest, arity: np.ndarray,
                  fields: Mapping[str, np.ndarray]) -> np.ndarray:
    """The branch of ``sg`` each of ``nodes`` takes (the first whose ``when`` holds).

    Raises:
        InputError: a node matches no branch (named by tree and position).
    """
    out = np.full(len(nodes), -1, dtype=np.int64)
    sub = {k: v[nodes] for k, v in fields.items()}
    for b, br in enumerate(sg.branches):
        hit = np.asarray(br.when(arity[nodes], sub), dtype=bool) & (out < 0)
        out[hit] = b
    if np.any(out < 0):
        bad = int(nodes[np.argmax(out < 0)])
        t = int(np.searchsorted(forest.offsets, bad, side="right")) - 1
        raise InputError(f"SubGraph {sg.name!r}: no branch matches node {bad - int(forest.offsets[t])} of "
                         f"tree {t} (arity {int(arity[bad])}); add a branch for it")
    return out


#: a memoized duplicate: (SubGraph index, duplicate nodes, their representatives)
_Alias = tuple[int, np.ndarray, np.ndarray]

#: Default cap on the rows of one cell call: per-row cost is lowest at a few hundred to ~1000
#: rows (the working set stays in cache); larger waves are cut into independent chunks.
MAX_ROWS = 1024


def _first_equal(nodes: np.ndarray, arrays: Sequence[np.ndarray]) -> np.ndarray:
    """For each node, the first node (in ``nodes`` order) whose field values are all equal to its own."""
    if not arrays:
        return np.full(len(nodes), nodes[0])
    cols = [np.ascontiguousarray(np.asarray(a)[nodes]).reshape(len(nodes), -1) for a in arrays]
    raw = np.hstack([c.view(np.uint8).reshape(len(nodes), -1) for c in cols])
    if raw.shape[1] == 8 and len(cols) == 1 and cols[0].dtype == np.int64:  # common case: one id
        ids = cols[0][:, 0]
        if ids.min() >= 0 and ids.max() < 4 * len(ids) + 65536:   # small ids: first position per id by scatter
            at = np.full(int(ids.max()) + 1, len(ids), dtype=np.int64)
            np.minimum.at(at, ids, np.arange(len(ids)))
            return nodes[at[ids]]
        _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    else:
        _, first, inverse = np.unique(raw, axis=0, return_index=True, return_inverse=True)
    return nodes[first[inverse.reshape(-1)]]


def make_plan(entry: SubGraph, forest: Forest, fields: Mapping[str, np.ndarray], shards: int = 1,
              max_rows: int = MAX_ROWS, memoize: bool = True) -> Plan:
    """Expand ``entry`` over ``forest`` and cut it into batched groups.

    Args:
        entry: the SubGraph invoked on every root.
        forest: the batch.
        fields: node field arrays, each ``[n, …]`` (e.g. ``{"word": ids}``).
        shards: split every wave into this many parts by node position, so
            independent parts can run on different workers at once.
        max_rows: cut a group larger than this into even chunks (also independent).
        memoize: a branch without InvokeOps is a pure function of its node
            fields, so nodes with equal field values (a word repeated across
            the batch) share one invocation and one buffer row.

    Raises InputError when a node matches no branch or has more children
    than an InvokeOp's ``pad_to``; ConfigError when a branch names a field
    that was not given.
    """
    subgraphs = entry.reachable()
    _check_fields(subgraphs, forest, fields)
    branch = _expand(entry, subgraphs, forest, fields)
    n = forest.n
    arity = forest.arity
    shards = max(1, int(shards))
    shard_of = np.minimum(np.arange(n, dtype=np.int64) * shards // max(n, 1), shards - 1)
    sg_a, node_a, b_a, k_a, wave_a, aliases = _invocations(subgraphs, branch, forest, arity, fields, memoize)
    shard_a = shard_of[node_a]
    k_a = coarse_buckets(np.stack((wave_a, shard_a, sg_a, b_a)), k_a)
    # a summed input's nodes in falling child count, so that the k-th children are a prefix of the group
    summed = np.concatenate([[any(op.reduce for op in br.invokes) for br in sg.branches] for sg in subgraphs])
    first_branch = np.cumsum([0] + [len(sg.branches) for sg in subgraphs])
    fewer = np.where(summed[first_branch[sg_a] + b_a], int(arity.max()) - arity[node_a], 0)
    order = _sorted_order((wave_a, shard_a, sg_a, b_a, k_a, fewer, node_a))
    sg_a, node_a, b_a, k_a, wave_a, shard_a = (c[order] for c in (sg_a, node_a, b_a, k_a, wave_a, shard_a))
    row_a, pos, rows = _buffer_rows(len(subgraphs), sg_a, node_a, n, aliases)
    starts, ends = _group_bounds((wave_a, shard_a, sg_a, b_a, k_a), max_rows)
    producer = [np.full(r + 1, -1, dtype=np.int64) for r in rows]  # the group that writes each row; sentinel -1
    group_of = np.repeat(np.arange(len(starts)), ends - starts)
    for s in range(len(subgraphs)):
        mine = sg_a == s
        producer[s][row_a[mine]] = group_of[mine]
    gathers, deps = _group_inputs(subgraphs, forest, sg_a, b_a, node_a, starts, ends, pos, rows, producer)
    groups = tuple(Group(g, int(sg_a[a]), int(b_a[a]), int(wave_a[a]), int(row_a[a]), int(row_a[z - 1]) + 1,
                         node_a[a:z], gathers[g], deps[g])
                   for g, (a, z) in enumerate(zip(starts.tolist(), ends.tolist())))
    return Plan(tuple(subgraphs), groups, tuple(rows), tuple(pos), int(forest.height.max()) + 1, shards)


def _sorted_order(keys: Sequence[np.ndarray]) -> np.ndarray:
    """``np.lexsort`` of non-negative int columns, most significant first (the last column unique): as one
    int64 key when their ranges fit, which sorts several times faster."""
    spans = [int(k.max()) + 1 if len(k) else 1 for k in keys]
    if int(np.prod([float(x) for x in spans])) >= 2**62:
        return np.lexsort(tuple(reversed(keys)))
    key = np.zeros(len(keys[0]), dtype=np.int64)
    for col, span in zip(keys, spans):
        key = key * span + col
    return np.argsort(key)


def _group_bounds(keys: Sequence[np.ndarray], max_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Where each group starts and ends among the sorted invocations: one group per run of equal ``keys``,
    a run larger than ``max_rows`` cut into even chunks."""
    m = len(keys[0])
    change = np.zeros(m, dtype=bool)
    change[0] = True
    for col in keys:
        change[1:] |= col[1:] != col[:-1]
    starts = np.flatnonzero(change)
    ends = np.append(starts[1:], m)
    pieces = -(-(ends - starts) // max(1, int(max_rows)))
    if np.any(pieces > 1):
        run = np.repeat(np.arange(len(starts)), pieces)
        step = np.arange(len(run)) - np.repeat(np.cumsum(pieces) - pieces, pieces)   # chunk of its run
        starts = np.round(starts[run] + step * (ends - starts)[run] / pieces[run]).astype(np.int64)
        ends = np.append(starts[1:], m)
    return starts, ends


#: Coarse child-count buckets (:func:`coarse_buckets`), in units of one row of a cell call: a call's own
#: cost (dispatch, gathers, stores; ~40-60 us through a Runtime) is about CALL_ROWS rows, and a padded
#: child adds about CHILD_ROW of a row (Child-Sum TreeLSTM, H 150, on ONNX Runtime: ~1.5 us a row, and a
#: zero child ~0.15 us, only summed).
CALL_ROWS = 40.0
CHILD_ROW = 0.1


def coarse_buckets(keys: np.ndarray, arity: np.ndarray) -> np.ndarray:
    """Per invocation, the child count its group stacks to: the top of its bucket (0 stays 0).

    Invocations with equal ``keys`` columns (wave, shard, SubGraph, branch) are cut by child count into
    contiguous buckets; each bucket is one call padded with zero children to its largest count. The
    cut minimises the modelled cost, ``CALL_ROWS`` per call plus ``1 + CHILD_ROW * K`` per row (a
    dynamic programme over the distinct counts of each key: fewer calls on narrow levels, exact
    counts on wide ones).
    """
    out = arity.copy()
    live = np.flatnonzero(arity > 0)
    if len(live) == 0:
        return out
    key = np.zeros(len(live), dtype=np.int64)        # the key columns and the count as one sortable int
    for col in (*keys[:, live], arity[live]):
        key = key * (int(col.max()) + 1) + col
    uniq, inverse, counts = _distinct(key)
    k = uniq % (int(arity.max()) + 1)
    starts = np.flatnonzero(np.diff(uniq // (int(arity.max()) + 1), prepend=-1))
    top = k.copy()
    for a, z in zip(starts.tolist(), np.append(starts[1:], len(uniq)).tolist()):
        if z - a > 1:                   # (one count: its own bucket)
            top[a:z] = _cut(k[a:z].tolist(), counts[a:z].tolist())
    out[live] = top[inverse]
    return out


def _distinct(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(keys, return_inverse=True, return_counts=True)`` of non-negative ints; by counting, without
    a sort, when their range is small (a few per key)."""
    top = int(keys.max()) + 1 if len(keys) else 0
    if top > 4 * len(keys) + 65536:
        uniq, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
        return uniq, inverse.reshape(-1), counts
    counts = np.bincount(keys, minlength=top)
    uniq = np.flatnonzero(counts)
    rank = np.zeros(top, dtype=np.int64)
    rank[uniq] = np.arange(len(uniq))
    return uniq, rank[keys], counts[uniq]


def _cut(ks: list[int], ns: list[int]) -> list[int]:
    """For ascending child counts ``ks`` with ``ns`` rows each: the bucket top of each, cheapest cut."""
    m = len(ks)
    best = [0.0] * (m + 1)
    start = [0] * (m + 1)
    for j in range(1, m + 1):
        rows = 0
        best[j] = float("inf")
        for i in range(j, 0, -1):       # bucket ks[i-1 .. j-1], padded to ks[j-1]
            rows += ns[i - 1]
            cost = best[i - 1] + CALL_ROWS + rows * (1.0 + CHILD_ROW * ks[j - 1])
            if cost < best[j]:
                best[j], start[j] = cost, i - 1
    top = [0] * m
    j = m
    while j > 0:
        i = start[j]
        top[i:j] = [ks[j - 1]] * (j - i)
        j = i
    return top


def _check_fields(subgraphs: list[SubGraph], forest: Forest, fields: Mapping[str, np.ndarray]) -> None:
    """ConfigError for a SubGraph without branches or a branch naming a field not given; InputError for a
    field whose length is not the batch's node count."""
    for sg in subgraphs:
        if not sg.branches:
            raise ConfigError(f"SubGraph {sg.name!r} has no branches; add one with sg.branch(when, cell, ...)")
        for br in sg.branches:
            missing = set(br.fields.values()) - set(fields)
            if missing:
                raise ConfigError(f"SubGraph {sg.name!r} branch {br.name!r} needs node fields {sorted(missing)}; "
                                  f"given {sorted(fields)}")
    for k, v in fields.items():
        if len(v) != forest.n:
            raise InputError(f"node field {k!r} has {len(v)} rows, the batch has {forest.n} nodes")


def _invocations(subgraphs: list[SubGraph], branch: list[np.ndarray], forest: Forest, arity: np.ndarray,
                 fields: Mapping[str, np.ndarray], memoize: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                          np.ndarray, np.ndarray, list[_Alias]]:
    """Every invocation that gets a buffer row, as columns: SubGraph, node, branch, child count (for
    stacking without ``pad_to``, 0 otherwise), wave; and the memoized duplicates as
    ``(SubGraph, duplicate nodes, their representatives)``.

    Raises:
        InputError: a node has more children than its branch's ``pad_to``.
    """
    keys_sg, keys_node, keys_b, keys_k = [], [], [], []
    aliases: list[_Alias] = []
    no_invokes = []
    for s, sg in enumerate(subgraphs):
        nodes = np.flatnonzero(branch[s] >= 0)
        b = branch[s][nodes]
        stacked = np.array([any(op.pad_to is None and op.reduce is None for op in br.invokes)
                            for br in sg.branches])
        pad = np.array([max([op.pad_to or 0 for op in br.invokes] + [0]) for br in sg.branches])
        a = arity[nodes]
        over = (pad[b] > 0) & (a > pad[b])
        if np.any(over):
            i = int(nodes[np.argmax(over)])
            raise InputError(f"SubGraph {sg.name!r} branch {sg.branches[int(branch[s][i])].name!r} takes at most "
                             f"{int(pad[branch[s][i]])} children, a node has {int(arity[i])}; binarize the trees "
                             "or use a model with a larger N")
        bucket = np.where(stacked[b], a, 0)
        if memoize:
            keep = np.flatnonzero(_memoize(s, sg, nodes, b, fields, aliases))
            nodes, b, bucket = nodes[keep], b[keep], bucket[keep]
        keys_sg.append(np.full(len(nodes), s, dtype=np.int64))
        keys_node.append(nodes)
        keys_b.append(b)
        keys_k.append(bucket)
        no_invokes.append(np.array([not br.invokes for br in sg.branches])[b])
    node_a = np.concatenate(keys_node)
    # A branch without InvokeOps needs nothing: it is ready in wave 0 whatever its height.
    wave_a = np.where(np.concatenate(no_invokes), 0, forest.height[node_a])
    return np.concatenate(keys_sg), node_a, np.concatenate(keys_b), np.concatenate(keys_k), wave_a, aliases


def _memoize(s: int, sg: SubGraph, nodes: np.ndarray, b: np.ndarray, fields: Mapping[str, np.ndarray],
             aliases: list[_Alias]) -> np.ndarray:
    """Which of ``nodes`` (taking branches ``b`` of SubGraph ``sg``, index ``s``) keep their own invocation:
    of the nodes of a branch without InvokeOps whose fields are all equal, only the first; the others are
    appended to ``aliases`` with it."""
    keep = np.ones(len(nodes), dtype=bool)
    for bi, br in enumerate(sg.branches):
        sel = np.flatnonzero(b == bi)
        if br.invokes or len(sel) < 2:
            continue
        rep = _first_equal(nodes[sel], [fields[f] for f in br.fields.values()])
        keep[sel] = rep == nodes[sel]
        aliases.append((s, nodes[sel][~keep[sel]], rep[~keep[sel]]))
    return keep


def _buffer_rows(n_sg: int, sg_a: np.ndarray, node_a: np.ndarray, n: int,
                 aliases: list[_Alias]) -> tuple[np.ndarray, list[np.ndarray], list[int]]:
    """Buffer rows per SubGraph, in the sorted order: each invocation's row, each node's row per SubGraph
    (-1: not invoked; a memoized duplicate shares its representative's), each SubGraph's row count."""
    pos = []
    rows = []
    row_a = np.empty(len(node_a), dtype=np.int64)
    for s in range(n_sg):
        sel = np.flatnonzero(sg_a == s)
        row_a[sel] = np.arange(len(sel))
        p = np.full(n, -1, dtype=np.int64)
        p[node_a[sel]] = np.arange(len(sel))
        pos.append(p)
        rows.append(len(sel))
    for s, dup, rep in aliases:
        pos[s][dup] = pos[s][rep]
    return row_a, pos, rows


def _group_inputs(subgraphs: list[SubGraph], forest: Forest, sg_a: np.ndarray, b_a: np.ndarray,
                  node_a: np.ndarray, starts: np.ndarray, ends: np.ndarray, pos: list[np.ndarray],
                  rows: list[int], producer: list[np.ndarray]) -> tuple[list[tuple[Gather, ...]],
                                                                        list[tuple[int, ...]]]:
    """Per group, its input gathers (one per InvokeOp output: the buffer row of each node's k-th child, the
    zero sentinel row where absent; k up to the group's most children, or the op's ``pad_to``; a summed
    input also counts the nodes with more than k children) and the
    groups it depends on (the producers of those rows). Every group of a branch at once: one flat array of
    rows a branch and op, a group's rows a view of it."""
    n_groups = len(starts)
    gathers: list[list[Gather]] = [[] for _ in range(n_groups)]
    links = [np.empty(0, dtype=np.int64)]    # group * (n_groups + 1) + 1 + the group it depends on
    sizes = ends - starts
    arity = forest.arity
    for s, sg in enumerate(subgraphs):
        for bi, br in enumerate(sg.branches):
            mine = np.flatnonzero((sg_a[starts] == s) & (b_a[starts] == bi))   # this branch's groups, in order
            if not br.invokes or len(mine) == 0:
                continue
            nodes = node_a[np.flatnonzero((sg_a == s) & (b_a == bi))]
            kids = arity[nodes]
            first = np.concatenate(([0], np.cumsum(sizes[mine])))    # each group's first node among ``nodes``
            most = np.maximum.reduceat(kids, first[:-1])
            # every child of every node: which node, which of its children
            of = np.repeat(np.arange(len(nodes)), kids)
            nth = np.arange(len(of)) - np.repeat(np.cumsum(kids) - kids, kids)
            child = forest.child_idx[forest.child_ptr[nodes][of] + nth]
            group_of_node = np.repeat(np.arange(len(mine)), sizes[mine])
            more = _more_than(kids, group_of_node, int(kids.max(initial=0)))
            for op in br.invokes:
                t = subgraphs.index(op.target)
                width = most if op.pad_to is None else np.full(len(mine), op.pad_to)
                at = np.concatenate(([0], np.cumsum(width * sizes[mine])))   # each group's first slot
                slot = at[group_of_node] + (np.arange(len(nodes)) - first[group_of_node]) * width[group_of_node]
                flat = np.full(int(at[-1]), rows[t], dtype=np.int64)
                row = pos[t][child]
                flat[slot[of] + nth] = row
                for i, g in enumerate(mine.tolist()):
                    r = flat[at[i]:at[i + 1]].reshape(int(sizes[g]), int(width[i]))
                    counts = tuple(more[i, :int(width[i])].tolist()) if op.reduce else None
                    gathers[g].extend(Gather(t, out, name, r, counts) for out, name in op.outputs.items())
                made_by = producer[t][row]
                links.append((mine[group_of_node[of]] * (n_groups + 1) + 1 + made_by)[made_by >= 0])
    pairs = _distinct(np.concatenate(links))[0]
    owner, dep = pairs // (n_groups + 1), pairs % (n_groups + 1) - 1
    bounds = np.searchsorted(owner, np.arange(n_groups + 1)).tolist()
    return ([tuple(g) for g in gathers],
            [tuple(dep[a:z].tolist()) for a, z in zip(bounds[:-1], bounds[1:])])


def _more_than(kids: np.ndarray, group: np.ndarray, most: int) -> np.ndarray:
    """int64 [groups, most + 1]: ``[g, k]``, how many nodes of group ``g`` have more than ``k`` children
    (``kids``: each node's child count, ``group``: its group, ascending from 0)."""
    width = most + 1
    per_count = np.bincount(group * width + kids, minlength=(int(group[-1]) + 1) * width).reshape(-1, width)
    at_least = per_count[:, ::-1].cumsum(axis=1)[:, ::-1]     # [g, k]: nodes with k children or more
    return np.concatenate((at_least[:, 1:], np.zeros((len(at_least), 1), dtype=np.int64)), axis=1)
