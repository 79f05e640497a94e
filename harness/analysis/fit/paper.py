"""ScaleRL's App. A.5 fit with its grid widened to the data (DESIGN.md §4), vectorised in numpy.

The paper fits Eq. 1 by a grid over A (0.450..0.800 step 0.005) x 100 C_mid values, scipy's
``curve_fit`` for B in every cell, and keeps the cell with the least squared error; R0 is held
fixed. Its A range was chosen for its own curves. On other curves the faithful form widens the
grid to the data: A from max(R) - 0.2 to 1.0 on the paper's 0.005 lattice, 100 C_mid values
log-spaced from half the smallest to four times the largest compute, B > 0.

Why it is fast: for a fixed (C_mid, B) the curve is linear in D = A - R0, so the squared error of
every A on the grid is a quadratic whose three coefficients are sums over the points::

    SSE(A) = sum w r^2 - 2 D sum w r s + D^2 sum w s^2,   r = y - R0,
    s = logistic(B (log C - log C_mid)).

One pass over the points per (C_mid, B) pair prices every A at once. B is searched on a fine log
grid (adjacent values 6% apart over [1e-2, 1e2]); then the ``top_cells`` best (A, C_mid) cells
have B refined by golden-section search between the neighbours of their best grid B. That is the
per-cell least-squares B the paper's ``curve_fit`` looks for, found without depending on its start
(p0 = 1) and without ~14,000 Python-level optimiser calls per curve. A cell outside the
``top_cells`` could only win if refining its B gained more than the gap to the 64th best cell on
the B grid; tests/unit/analysis/test_paper_fit.py checks the result against a literal per-cell
bounded ``curve_fit`` loop on the same grid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from scalerl.harness.analysis.fit.curve import FloatArray

# Elements per (C_mid block x B x point) array: ~32 MB of float64, whatever the curve's length.
_CHUNK = 4_000_000
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
_GOLDEN_STEPS = 30  # shrinks a bracket of two B-grid steps (~12%) below 1e-7 relative


@dataclass(frozen=True)
class GridFit:
    """The winning cell: parameters, its weighted squared error, and which grid edges it sits on
    (``"A low"``, ``"A high"``, ``"C_mid low"``, ``"C_mid high"``, ``"B low"``, ``"B high"``)."""

    r0: float
    a: float
    b: float
    c_mid: float
    sse: float
    edges: tuple[str, ...]


def _logistic(z: FloatArray) -> FloatArray:
    # Clipped so exp never overflows; logistic(+-50) is 1 or 0 to double precision anyway.
    return np.asarray(1.0 / (1.0 + np.exp(-np.clip(z, -50.0, 50.0))), dtype=np.float64)


def grid_search(
    x: FloatArray,
    y: FloatArray,
    w: FloatArray,
    r0: float,
    a_grid: FloatArray,
    c_grid: FloatArray,
    b_grid: FloatArray,
    top_cells: int,
) -> GridFit:
    """Least squared error over the cells ``a_grid`` x ``c_grid`` with B fitted in each cell
    (within ``[b_grid[0], b_grid[-1]]``). ``x`` > 0; ``w`` are the per-point weights."""
    lx = np.log(x)
    lc = np.log(c_grid)
    lb = np.log(b_grid)
    r = y - r0
    wr = w * r
    srr = float(wr @ r)
    n_a, n_c, n_b, n = a_grid.size, c_grid.size, b_grid.size, x.size
    srs = np.empty((n_c, n_b))
    sss = np.empty((n_c, n_b))
    # Blocks of (C_mid, B) pairs small enough that memory stays bounded on long curves.
    b_block = max(1, min(n_b, _CHUNK // n))
    c_block = max(1, _CHUNK // (b_block * n))
    for ci in range(0, n_c, c_block):
        u = lx[None, :] - lc[ci : ci + c_block, None]  # (c, n)
        for bi in range(0, n_b, b_block):
            s = _logistic(b_grid[None, bi : bi + b_block, None] * u[:, None, :])  # (c, b, n)
            srs[ci : ci + c_block, bi : bi + b_block] = s @ wr
            np.square(s, out=s)
            sss[ci : ci + c_block, bi : bi + b_block] = s @ w
    jb = np.empty((n_a, n_c), dtype=np.intp)  # the best grid B of every (A, C_mid) cell
    cell_sse = np.empty((n_a, n_c))
    a_block = max(1, _CHUNK // (n_c * n_b))
    for ai in range(0, n_a, a_block):
        d = (a_grid[ai : ai + a_block] - r0)[:, None, None]
        sse = srr - 2.0 * d * srs[None] + d * d * sss[None]  # (a, c, b)
        jb[ai : ai + a_block] = np.argmin(sse, axis=2)
        cell_sse[ai : ai + a_block] = np.take_along_axis(sse, jb[ai : ai + a_block, :, None], axis=2)[..., 0]

    # Refine B in the best cells by golden section on log B between the grid neighbours.
    k = min(top_cells, n_a * n_c)
    flat = np.argpartition(cell_sse.ravel(), k - 1)[:k]
    ia, ic = np.unravel_index(flat, (n_a, n_c))
    jbk = jb[ia, ic]
    dk = (a_grid[ia] - r0)[:, None]
    uk = lx[None, :] - lc[ic][:, None]  # (k, n)

    def cost(log_b: FloatArray) -> FloatArray:
        res = r[None, :] - dk * _logistic(np.exp(log_b)[:, None] * uk)
        return np.asarray((res * res) @ w, dtype=np.float64)

    lo_b = lb[np.maximum(jbk - 1, 0)]
    hi_b = lb[np.minimum(jbk + 1, n_b - 1)]
    p = hi_b - _GOLDEN * (hi_b - lo_b)
    q = lo_b + _GOLDEN * (hi_b - lo_b)
    fp, fq = cost(p), cost(q)
    for _ in range(_GOLDEN_STEPS):
        left = fp < fq  # the minimum lies in [lo, q]: drop (q, hi]
        hi_b = np.where(left, q, hi_b)
        lo_b = np.where(left, lo_b, p)
        q_new = np.where(left, p, lo_b + _GOLDEN * (hi_b - lo_b))
        p_new = np.where(left, hi_b - _GOLDEN * (hi_b - lo_b), q)
        f_eval = cost(np.where(left, p_new, q_new))
        fq, fp = np.where(left, fp, f_eval), np.where(left, f_eval, fq)
        p, q = p_new, q_new
    ref_b = np.where(fp < fq, p, q)
    ref_sse = np.minimum(fp, fq)
    grid_sse = cell_sse[ia, ic]
    # Golden section never evaluates the grid point itself: keep it where it was better.
    use_grid = grid_sse <= ref_sse
    best_b = np.where(use_grid, lb[jbk], ref_b)
    best_sse = np.where(use_grid, grid_sse, ref_sse)
    i = int(np.argmin(best_sse))
    a_i, c_i = int(ia[i]), int(ic[i])
    b = float(np.exp(best_b[i]))
    edges = []
    if n_a > 1 and a_i == 0:
        edges.append("A low")
    if n_a > 1 and a_i == n_a - 1:
        edges.append("A high")
    if c_i == 0:
        edges.append("C_mid low")
    if c_i == n_c - 1:
        edges.append("C_mid high")
    if b <= b_grid[0] * (1 + 1e-9):
        edges.append("B low")
    if b >= b_grid[-1] * (1 - 1e-9):
        edges.append("B high")
    return GridFit(r0, float(a_grid[a_i]), b, float(c_grid[c_i]), float(best_sse[i]), tuple(edges))
