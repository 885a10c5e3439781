"""A small dense simplex solver for the overload plan's linear programs (numpy only).

The scheduler package may import only the standard library and numpy, and the
plans it solves are tiny (a few models × a few processors: tens of variables,
about fifteen rows), so a dense tableau is the simplest exact method. The
caller states the problem in equality form with a feasible starting basis
(for the overload plan: shed everything, all capacity slack), so no phase 1
is needed.

Pivoting: Dantzig's rule (most negative reduced cost) with ties to the lowest
column, the ratio test with ties to the lowest basic column; after
``_BLAND_AFTER`` pivots that do not improve the objective, Bland's rule
(lowest improving column), which cannot cycle. The result is deterministic
for a given input.
"""

from __future__ import annotations

import numpy as np

_EPS = 1e-9
_BLAND_AFTER = 8


class LPError(RuntimeError):
    """The simplex did not reach an optimum (unbounded, or out of iterations)."""


def minimize(c: np.ndarray, a: np.ndarray, b: np.ndarray, basis: list[int], max_iter: int = 500) -> np.ndarray:
    """``min c·x`` subject to ``a x = b``, ``x >= 0``, from the feasible basis ``basis``.

    Args:
        c: objective, shape (n,).
        a: constraint matrix, shape (m, n); the columns named in ``basis`` must form the identity.
        b: right-hand side, shape (m,), all ``>= 0`` (so the starting basis is feasible).
        basis: for each row, the column that is basic in it.
        max_iter: most pivots before giving up.

    Returns:
        The optimal ``x``, shape (n,).

    Raises:
        LPError: the problem is unbounded or the iteration limit is reached.
        ValueError: shapes do not match, ``b`` has a negative entry, or ``basis`` is not the identity.
    """
    m, n = a.shape
    t = _tableau(c, a, b, basis)
    basis = list(basis)
    stall = 0
    for _ in range(max_iter):
        red = t[m, :n]
        if stall < _BLAND_AFTER:
            col = int(np.argmin(red))
            if red[col] >= -_EPS:
                break
        else:
            neg = np.flatnonzero(red < -_EPS)
            if neg.size == 0:
                break
            col = int(neg[0])
        colv = t[:m, col]
        pos = colv > _EPS
        if not pos.any():
            raise LPError("the linear program is unbounded")
        ratios = np.full(m, np.inf)
        ratios[pos] = t[:m, n][pos] / colv[pos]
        best = ratios.min()
        rows = np.flatnonzero(ratios <= best + _EPS * max(1.0, abs(best)))
        row = int(min(rows, key=lambda r: basis[r]))
        stall = stall + 1 if best <= _EPS else 0
        piv = t[row] / t[row, col]
        t -= np.outer(t[:, col], piv)
        t[row] = piv
        basis[row] = col
    else:
        raise LPError(f"no optimum after {max_iter} pivots")
    x = np.zeros(n)
    x[basis] = np.maximum(t[:m, n], 0.0)
    return x


def _tableau(c: np.ndarray, a: np.ndarray, b: np.ndarray, basis: list[int]) -> np.ndarray:
    """The starting simplex tableau ``[[a, b], [reduced costs, -objective]]`` of :func:`minimize`'s problem.

    Raises:
        ValueError: shapes do not match, ``b`` has a negative entry, or ``basis`` is not the identity.
    """
    m, n = a.shape
    if c.shape != (n,) or b.shape != (m,) or len(basis) != m:
        raise ValueError(f"shapes do not match: c {c.shape}, a {a.shape}, b {b.shape}, basis of {len(basis)}")
    if (b < 0).any():
        raise ValueError("b must be >= 0 (the starting basis must be feasible)")
    if not np.array_equal(a[:, basis], np.eye(m)):
        raise ValueError("the basis columns of a must form the identity matrix")
    t = np.empty((m + 1, n + 1))
    t[:m, :n] = a
    t[:m, n] = b
    cb = c[basis]
    t[m, :n] = c - cb @ a          # reduced costs
    t[m, n] = -(cb @ b)            # minus the objective value
    return t
