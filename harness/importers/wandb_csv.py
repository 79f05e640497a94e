"""W&B panel CSV exports: an x column, then ``<run> - <metric>`` with ``__MIN`` / ``__MAX``.

The first column is the panel's x axis (``Step``, or e.g. ``Relative Time (Process)``). A run's
cell is empty on rows where it logged nothing, so each run keeps only its non-empty rows. The
``__MIN`` / ``__MAX`` columns are the panel's smoothing envelope and are ignored. W&B system series
(``_step``, ``_runtime``, ``_timestamp``) are axes, not metrics: when the x axis is not a step,
the run's own ``_step`` series (if exported) gives each point its step; otherwise points are
numbered 0, 1, 2, ... in x order. ``axis_column`` may name the first column or a per-run series
(``_step``, ``_runtime``) to use as x instead.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

from harness.errors import ImportFormatError
from harness.importers.base import (
    SYSTEM_NAMES,
    CurveImporter,
    ImportedCurve,
    is_step_name,
    make_curve,
    parse_float,
    register,
)

_SEP = " - "


@register
class WandbCsvImporter(CurveImporter):
    name = "wandb-csv"
    priority = 10

    def sniff(self, path: Path, head: bytes) -> bool:
        first = head.split(b"\n", 1)[0].decode("utf-8", "replace")
        return path.suffix.lower() == ".csv" and _SEP in first and ("__MIN" in first or '" - ' in first)

    def read(self, path: Path, *, axis_column: str | None = None) -> list[ImportedCurve]:
        try:
            with path.open(newline="", encoding="utf-8") as fh:
                rows = list(csv.reader(fh))
        except (OSError, UnicodeDecodeError, csv.Error) as err:
            raise ImportFormatError(f"{path}: cannot read as CSV: {err} (fix: re-export from W&B)") from None
        if not rows or len(rows[0]) < 2:
            raise ImportFormatError(
                f"{path}:1: expected a header with an x column and '<run> - <metric>' columns "
                "(fix: use W&B's panel menu 'Export panel data' > CSV)"
            )
        header = rows[0]
        x_col = header[0]
        series: dict[tuple[str, str], int] = {}
        for j, name in enumerate(header[1:], start=1):
            if name.endswith("__MIN") or name.endswith("__MAX"):
                continue
            if _SEP not in name:
                raise ImportFormatError(
                    f"{path}:1: column {j + 1} {name!r} is not '<run> - <metric>' "
                    "(fix: this looks like a plain CSV; import it with --format csv)"
                )
            run, metric = name.rsplit(_SEP, 1)
            series[(run.strip(), metric.strip())] = j
        runs = sorted({r for r, _ in series}, key=lambda r: min(series[k] for k in series if k[0] == r))
        use_own_axis = axis_column not in (None, x_col)
        if use_own_axis and not all((r, axis_column) in series for r in runs):
            raise ImportFormatError(
                f"{path}:1: axis column {axis_column!r} is neither the x column {x_col!r} nor a "
                f"series every run has (fix: use --axis-column {x_col!r} or one of "
                f"{sorted({m for _, m in series if m.lower() in SYSTEM_NAMES})})"
            )
        x_name = str(axis_column) if use_own_axis else x_col
        cells: dict[tuple[str, str], list[tuple[float, float, float]]] = defaultdict(list)
        for lineno, row in enumerate(rows[1:], start=2):
            if not row:
                continue
            if len(row) != len(header):
                raise ImportFormatError(
                    f"{path}:{lineno}: {len(row)} cells but the header has {len(header)} "
                    "(fix: the file is truncated or hand-edited; re-export it)"
                )
            x_val = parse_float(row[0], path, lineno, x_col)
            for run in runs:
                step_col = series.get((run, "_step"))
                step = parse_float(row[step_col], path, lineno, header[step_col]) if step_col else x_val
                own_x = (
                    parse_float(row[series[(run, str(axis_column))]], path, lineno, str(axis_column))
                    if use_own_axis
                    else x_val
                )
                for (r, metric), j in series.items():
                    if r != run or metric.lower() in SYSTEM_NAMES:
                        continue
                    v = parse_float(row[j], path, lineno, header[j])
                    if v == v:  # not NaN: this run logged this metric on this row
                        cells[(run, metric)].append((step, own_x, v))
        curves = []
        for (run, metric), pts in cells.items():
            step_is_x = is_step_name(x_col) or (run, "_step") in series
            steps = [p[0] for p in pts]
            if not step_is_x or any(st != st for st in steps):  # no usable step: number the points
                steps = list(range(len(pts)))
            curves.append(
                make_curve(path, run, metric, x_name, steps, [p[1] for p in pts], [p[2] for p in pts])
            )
        return curves
