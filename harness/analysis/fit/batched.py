"""The fast batched sigmoid fitter: every curve of a report fitted at once, in numpy.

Work happens in normalised log-compute, ``t = (log C - mu) / sd`` per curve, where the curve is
``R = R0 + (A - R0) * sigmoid(beta * (t - u))`` with ``B = beta / sd`` and
``log C_mid = mu + sd * u``; normalising keeps every curve's problem equally conditioned.

1. Coarse search over A (closed form for the rest). For a candidate A (and known R0),
   ``logit((R - R0) / (A - R0)) = beta * t - beta * u`` is a straight line in t, so its best
   (beta, u) is a weighted linear least squares solved in closed form for all curves and all
   candidates together. The weights ``(p (1 - p))^2`` are the delta-method factor that makes the
   log-space residual approximate the residual in the metric's own units. Each candidate is then
   scored by its true squared error and the best one per curve seeds step 2.
2. Levenberg-Marquardt on (R0?, A, log beta, u) in the original residual space, all curves in one
   batch (per-curve damping, analytic Jacobian, ``np.linalg.solve`` on stacked normal equations),
   projected onto the bounds after each step; a step is kept only where it lowers the error.

Padding: curves of different lengths are stacked into (n, m) arrays with a 0/1 mask.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from scalerl.harness.analysis.fit.curve import FloatArray

# Bounds in normalised units: beta spans gentle to near-step curves; u may sit far outside the
# data (a curve before its inflection), which finalize() then reports as pre-inflection.
LOG_BETA_BOUNDS = (float(np.log(1e-2)), float(np.log(80.0)))
U_BOUNDS = (-12.0, 12.0)
_P_EPS = 1e-3
# Gain factors over (max(y) - R0) for the coarse A search: below 1 because the noisy maximum
# overshoots a reached ceiling, far above 1 for curves still climbing.
_A_FACTORS = np.array([0.85, 0.92, 0.97, 1.0, 1.03, 1.07, 1.12, 1.2, 1.3, 1.45, 1.65, 1.9, 2.3, 3.0, 4.5])


@dataclass(frozen=True)
class Batch:
    """Stacked, padded curves. ``t`` is normalised log-compute; ``m`` is the 0/1 point mask and
    ``w`` the least-squares weight of each point (equal to ``m`` for an unweighted fit)."""

    t: FloatArray
    y: FloatArray
    w: FloatArray
    mu: FloatArray
    sd: FloatArray
    r0: FloatArray
    m: FloatArray


def stack(
    xs: list[FloatArray], ys: list[FloatArray], r0: FloatArray, ws: list[FloatArray | None] | None = None
) -> Batch:
    """Pad curves (compute > 0, finite) into arrays and normalise their log-compute.

    ``ws`` holds optional per-point weights per curve (None = all 1); the normalisation of
    log-compute uses the mask only, so weights change the objective and nothing else.
    """
    n = len(xs)
    m = max((x.size for x in xs), default=1)
    lx = np.zeros((n, m))
    y = np.zeros((n, m))
    mask = np.zeros((n, m))
    w = np.zeros((n, m))
    for i, (xi, yi) in enumerate(zip(xs, ys, strict=True)):
        k = xi.size
        lx[i, :k] = np.log(xi)
        y[i, :k] = yi
        mask[i, :k] = 1.0
        wi = None if ws is None else ws[i]
        w[i, :k] = 1.0 if wi is None else wi
    cnt = np.maximum(mask.sum(1), 1.0)
    mu = (lx * mask).sum(1) / cnt
    sd = np.sqrt((((lx - mu[:, None]) * mask) ** 2).sum(1) / cnt)
    sd = np.where(sd > 1e-12, sd, 1.0)
    t = (lx - mu[:, None]) / sd[:, None] * mask
    return Batch(t=t, y=y, w=w, mu=mu, sd=sd, r0=np.asarray(r0, dtype=np.float64), m=mask)


def _line_fit(t: FloatArray, z: FloatArray, wt: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Weighted least-squares line z = alpha + beta t over the last axis, in closed form."""
    s = wt.sum(-1) + 1e-300
    st = (wt * t).sum(-1)
    sz = (wt * z).sum(-1)
    stt = (wt * t * t).sum(-1)
    stz = (wt * t * z).sum(-1)
    den = s * stt - st * st
    beta = np.where(np.abs(den) > 1e-300, (s * stz - st * sz) / np.where(den == 0, 1.0, den), 0.0)
    alpha = (sz - beta * st) / s
    return alpha, beta


def _sse(b: Batch, r0: FloatArray, a: FloatArray, beta: FloatArray, u: FloatArray) -> FloatArray:
    """Squared error for parameters of any leading shape broadcast against (n, ..., m)."""
    extra = a.ndim - 1
    t = b.t.reshape(b.t.shape[:1] + (1,) * extra + b.t.shape[1:])
    y = b.y.reshape(t.shape)
    w = b.w.reshape(t.shape)
    s = _logistic(beta[..., None] * (t - u[..., None]))
    f = r0[..., None] + (a - r0)[..., None] * s
    return ((y - f) ** 2 * w).sum(-1)


def _logistic(z: FloatArray) -> FloatArray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # overflow-free sigmoid


def coarse_init(
    b: Batch, a_bounds: tuple[float, float], fixed_a: FloatArray | None
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Best (A, log beta, u) per curve from the closed-form search over candidate A values."""
    n = b.y.shape[0]
    r0 = b.r0
    if fixed_a is not None:
        cand = fixed_a[:, None]
    else:
        ymax = np.where(b.m > 0, b.y, -np.inf).max(1)
        gain = np.maximum(ymax - r0, 1e-3)
        cand = r0[:, None] + gain[:, None] * _A_FACTORS[None, :]
        cand = np.concatenate([cand, np.full((n, 1), a_bounds[1])], axis=1)
        cand = np.clip(cand, a_bounds[0], a_bounds[1])
    k = cand.shape[1]
    denom = cand - r0[:, None]
    denom = np.where(np.abs(denom) < 1e-9, 1e-9, denom)
    p = (b.y[:, None, :] - r0[:, None, None]) / denom[:, :, None]
    p = np.clip(p, _P_EPS, 1.0 - _P_EPS)
    z = np.log(p / (1.0 - p))
    wt = (p * (1.0 - p)) ** 2 * b.w[:, None, :]
    t = np.broadcast_to(b.t[:, None, :], p.shape)
    alpha, beta = _line_fit(t, z, wt)
    # A non-positive slope has no sigmoid reading; fall back to a gentle curve at the data centre.
    good = beta > 1e-6
    beta = np.where(good, beta, 1.0)
    u = np.where(good, -alpha / np.where(good, beta, 1.0), 0.0)
    logb = np.clip(np.log(beta), *LOG_BETA_BOUNDS)
    u = np.clip(u, *U_BOUNDS)
    sse = _sse(b, np.broadcast_to(r0[:, None], (n, k)), cand, np.exp(logb), u)
    best = np.nanargmin(np.where(np.isfinite(sse), sse, np.inf), axis=1)
    rows = np.arange(n)
    return cand[rows, best], logb[rows, best], u[rows, best]


def levenberg_marquardt(
    b: Batch,
    theta: FloatArray,
    *,
    free: tuple[bool, bool, bool, bool],
    a_bounds: tuple[float, float],
    max_iter: int,
    tol: float = 1e-10,
) -> tuple[FloatArray, FloatArray]:
    """Refine theta = (r0, a, log beta, u), shape (n, 4), on the free columns; returns (theta, sse).

    Only curves still improving are iterated (an active set), so a batch costs about as much as
    its slowest curves, not max_iter passes over everything. A curve leaves the set once an
    accepted step improves its error by less than ``tol`` (relative), or its damping has grown so
    large that no step is being accepted.
    """
    cols = [i for i, f in enumerate(free) if f]
    # A fitted R0 stays in the metric's range (A's bounds); a fixed one is left as given.
    r0_lo, r0_hi = a_bounds if free[0] else (-np.inf, np.inf)
    lo = np.array([r0_lo, a_bounds[0], LOG_BETA_BOUNDS[0], U_BOUNDS[0]])
    hi = np.array([r0_hi, a_bounds[1], LOG_BETA_BOUNDS[1], U_BOUNDS[1]])
    eye = np.eye(len(cols))
    theta = theta.copy()
    sse = _sse(b, theta[:, 0], theta[:, 1], np.exp(theta[:, 2]), theta[:, 3])
    lam = np.full(theta.shape[0], 1e-3)
    active = np.flatnonzero(np.isfinite(sse))
    for _ in range(max_iter):
        if active.size == 0:
            break
        t, y, w = b.t[active], b.y[active], b.w[active]
        rw = np.sqrt(w)  # residuals and Jacobian rows scale by sqrt(weight): weighted LS
        th = theta[active]
        beta = np.exp(th[:, 2])[:, None]
        d = t - th[:, 3][:, None]
        s = _logistic(beta * d)
        gain = (th[:, 1] - th[:, 0])[:, None]
        r = (y - (th[:, 0][:, None] + gain * s)) * rw
        ds = s * (1.0 - s)
        jac_all = (1.0 - s, s, gain * ds * beta * d, -gain * ds * beta)
        jac = np.stack([jac_all[c] for c in cols], axis=-1) * rw[..., None]
        jt = jac.transpose(0, 2, 1)
        jtj = jt @ jac  # batched matmul: much faster than einsum for these shapes
        g = (jt @ r[..., None])[..., 0]
        diag = np.einsum("nii->ni", jtj)
        lhs = jtj + lam[active][:, None, None] * (diag[:, :, None] * eye + 1e-12 * eye)
        try:
            step = np.linalg.solve(lhs, g[..., None])[..., 0]
        except np.linalg.LinAlgError:  # a singular system somewhere in the stack
            step = (np.linalg.pinv(lhs) @ g[..., None])[..., 0]
        step = np.where(np.isfinite(step), step, 0.0)
        cand = th.copy()
        cand[:, cols] += step
        cand = np.clip(cand, lo, hi)
        s_new = _logistic(np.exp(cand[:, 2])[:, None] * (t - cand[:, 3][:, None]))
        f_new = cand[:, 0][:, None] + (cand[:, 1] - cand[:, 0])[:, None] * s_new
        new = (((y - f_new) ** 2) * w).sum(1)
        old = sse[active]
        better = np.isfinite(new) & (new < old)
        rel = np.where(better, (old - new) / np.maximum(old, 1e-300), 0.0)
        theta[active] = np.where(better[:, None], cand, th)
        sse[active] = np.where(better, new, old)
        lam[active] = np.clip(np.where(better, lam[active] * 0.3, lam[active] * 5.0), 1e-9, 1e9)
        done = (better & (rel < tol)) | (lam[active] >= 1e6)
        active = active[~done]
    return theta, sse


def _buckets(lengths: NDArray[np.int64], ratio: float = 1.3, min_size: int = 64) -> list[NDArray[np.int64]]:
    """Index groups of similar length: padding every curve to the longest one would multiply the
    work by max/mean length (a 1,000-point real curve among 50-point ones costs 20x)."""
    order = np.argsort(lengths, kind="stable")
    groups: list[list[int]] = []
    for i in order.tolist():
        if groups and (lengths[i] <= ratio * lengths[groups[-1][0]] or len(groups[-1]) < min_size):
            groups[-1].append(i)
        else:
            groups.append([i])
    return [np.array(g, dtype=np.int64) for g in groups]


def fit_batch(
    xs: list[FloatArray],
    ys: list[FloatArray],
    r0: FloatArray,
    *,
    fit_r0: bool,
    fixed_a: FloatArray | None,
    a_bounds: tuple[float, float],
    max_iter: int,
    ws: list[FloatArray | None] | None = None,
) -> FloatArray:
    """Fit stacked curves; returns (n, 5) rows of (r0, a, b, c_mid, sse) in original units.

    ``ws`` (one entry per curve, None = unweighted) holds least-squares weights per point; the
    returned sse is then the weighted one."""
    out = np.zeros((len(xs), 5))
    if not xs:
        return out
    r0 = np.asarray(r0, dtype=np.float64)
    for idx in _buckets(np.array([x.size for x in xs], dtype=np.int64)):
        b = stack(
            [xs[i] for i in idx], [ys[i] for i in idx], r0[idx], None if ws is None else [ws[i] for i in idx]
        )
        a0, logb0, u0 = coarse_init(b, a_bounds, None if fixed_a is None else fixed_a[idx])
        theta = np.stack([b.r0, a0, logb0, u0], axis=1)
        theta, sse = levenberg_marquardt(
            b, theta, free=(fit_r0, fixed_a is None, True, True), a_bounds=a_bounds, max_iter=max_iter
        )
        bb = np.exp(theta[:, 2]) / b.sd
        c_mid = np.exp(b.mu + b.sd * theta[:, 3])
        out[idx] = np.stack([theta[:, 0], theta[:, 1], bb, c_mid, sse], axis=1)
    return out
