"""Downsampling a curve for display, never for fitting.

A run with 10,000 points is drawn with a few hundred. The report lets the reader switch the
compute axis between linear and log, and a sample that keeps the shape in one view can flatten
the other (the early, fast-rising part is a sliver on a linear axis), so :func:`display_indices`
keeps the union of two Largest-Triangle-Three-Buckets samples: one in linear x and one in log x.
LTTB (Steinarsson, 2013) splits the points into equal-count buckets and keeps, from each bucket,
the point that makes the largest triangle with the point kept before it and the mean of the
next bucket, which preserves peaks and turns that a stride would skip.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]


def lttb(x: FloatArray, y: FloatArray, n_out: int) -> IntArray:
    """Indices of ``n_out`` points chosen by LTTB; ``x`` must be sorted ascending.

    Always keeps the first and the last point. Returns every index when ``len(x) <= n_out``.
    """
    n = len(x)
    if n_out >= n or n <= 2:
        return np.arange(n, dtype=np.intp)
    if n_out < 3:
        return np.array([0, n - 1], dtype=np.intp)
    # n_out - 2 buckets between the fixed first and last point; the last point is its own
    # "bucket" so the final middle bucket has a next-bucket mean too.
    # linspace ends at n - 1, so the last start is the last point's own bucket.
    starts = np.unique(np.linspace(1, n - 1, n_out - 1).astype(np.intp))
    ends = np.append(starts[1:], n)
    counts = (ends - starts).astype(np.float64)
    # Every bucket's mean up front (one reduceat), so the sequential loop only does the argmax.
    mean_x = np.add.reduceat(x, starts) / counts
    mean_y = np.add.reduceat(y, starts) / counts
    n_buckets = len(starts) - 1
    keep = np.empty(n_buckets + 2, dtype=np.intp)
    keep[0], keep[-1] = 0, n - 1
    prev = 0
    for i in range(n_buckets):
        lo, hi = starts[i], ends[i]
        cx, cy = mean_x[i + 1], mean_y[i + 1]
        ax, ay = x[prev], y[prev]
        # Twice the triangle area; the constant factor does not change the argmax.
        area = np.abs((ax - cx) * (y[lo:hi] - ay) - (ax - x[lo:hi]) * (cy - ay))
        prev = int(lo + np.argmax(area))
        keep[i + 1] = prev
    return keep


def display_indices(x: FloatArray, y: FloatArray, max_points: int) -> IntArray:
    """Sorted indices to draw a curve with at most about ``max_points`` points.

    The union of an LTTB sample in linear ``x`` and one in ``log10(x)`` (over the positive
    ``x``), so the curve keeps its shape under both axis types, and of the points holding the
    lowest and the highest finite ``y``. ``x`` must be sorted ascending.
    """
    n = len(x)
    if n <= max_points:
        return np.arange(n, dtype=np.intp)
    half = max(max_points // 2, 3)
    linear = lttb(x, y, half)
    positive = np.flatnonzero(x > 0)
    if len(positive) > 2:
        logged = positive[lttb(np.log10(x[positive]), y[positive], half)]
        linear = np.union1d(linear, logged)
    finite = np.flatnonzero(np.isfinite(y))
    if finite.size:  # LTTB keeps peaks but does not promise the lowest and highest point: add them
        linear = np.union1d(linear, finite[[np.argmin(y[finite]), np.argmax(y[finite])]])
    return np.asarray(linear, dtype=np.intp)


def grid_indices(n: int, max_points: int) -> IntArray:
    """Sorted ranks (0 .. ``n - 1``) to draw a curve of ``n`` points from at most about
    ``max_points`` of them, chosen without reading the curve: for a view that cannot afford to
    read every point before it draws (the live view's first look at a lab-scale sweep reads only
    these ranks, by index seeks).

    The same two halves as :func:`display_indices`: ``max_points // 2`` ranks evenly spaced (the
    linear-axis view) and ``max_points // 2`` evenly spaced in ``log(rank + 1)`` (the log-axis
    view, where the early points spread out: on a compute axis ``x`` grows with the step), with
    the first and the last point. What it cannot do without the values is LTTB's choice within a
    bucket (the point that keeps a peak), so a spike narrower than a bucket may be drawn as
    its neighbours; fits never see this sample."""
    if n <= max_points:
        return np.arange(n, dtype=np.intp)
    half = max(max_points // 2, 3)
    linear = np.rint(np.linspace(0, n - 1, half)).astype(np.intp)
    logged = np.rint(np.geomspace(1, n, half)).astype(np.intp) - 1
    return np.asarray(np.union1d(linear, logged), dtype=np.intp)
