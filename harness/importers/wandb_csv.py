"""W&B panel CSV exports: an x column, then ``<run> - <metric>`` with ``__MIN`` / ``__MAX``.

The first column is the panel's x axis (``Step``, or e.g. ``Relative Time (Process)``). A run's
cell is empty on rows where it logged nothing, so each run keeps only its non-empty rows. The
``__MIN`` / ``__MAX`` columns are the panel's smoothing envelope and are ignored. W&B system series
(``_step``, ``_runtime``, ``_timestamp``) are axes, not metrics: when the x axis is not a step,
the run's own ``_step`` series (if exported) gives each point its step; otherwise points are
numbered 0, 1, 2, ... in x order. ``axis_column`` may name the first column or a per-run series
(``_step``, ``_runtime``) to use as x instead. Repeated columns, bad or repeated steps and NaN /
±inf cells are counted as in :data:`scalerl.harness.importers.base.LOSS_POLICY`.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from pathlib import Path

from scalerl.harness.errors import ImportFormatError
from scalerl.harness.importers.base import (
    SYSTEM_NAMES,
    CurveImporter,
    ImportedCurve,
    LossLog,
    check_step,
    first_columns,
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

    # A W&B run's name is its own (the export's ``<run> - <metric>`` columns), and several exported
    # panels hold the same run: curves of one name from different files are one run.
    names_from_path = False

    def sniff(self, path: Path, head: bytes) -> bool:
        # utf-8-sig: a CSV saved by Excel starts with a byte-order mark, which is not part of its header.
        first = head.split(b"\n", 1)[0].decode("utf-8-sig", "replace")
        return path.suffix.lower() == ".csv" and _SEP in first and ("__MIN" in first or '" - ' in first)

    def read(self, path: Path, *, axis_column: str | None, losses: LossLog) -> list[ImportedCurve]:
        try:
            with path.open(newline="", encoding="utf-8-sig") as fh:
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
        for j, name in first_columns(header, path, losses).items():
            if j == 0 or name.endswith("__MIN") or name.endswith("__MAX"):
                continue
            if _SEP not in name:
                raise ImportFormatError(
                    f"{path}:1: column {j + 1} {name!r} is not '<run> - <metric>' "
                    "(fix: this looks like a plain CSV; import it with --format csv)"
                )
            run, metric = name.rsplit(_SEP, 1)
            series.setdefault((run.strip(), metric.strip()), j)
        runs = sorted({r for r, _ in series}, key=lambda r: min(series[k] for k in series if k[0] == r))
        use_own_axis = axis_column not in (None, x_col)
        if use_own_axis and not all((r, axis_column) in series for r in runs):
            raise ImportFormatError(
                f"{path}:1: axis column {axis_column!r} is neither the x column {x_col!r} nor a "
                f"series every run has (fix: use --axis-column {x_col!r} or one of "
                f"{sorted({m for _, m in series if m.lower() in SYSTEM_NAMES})})"
            )
        x_name = str(axis_column) if use_own_axis else x_col
        # A run's points are numbered 0, 1, 2, ... when no column gives their step.
        numbered = {r: not (is_step_name(x_col) or (r, "_step") in series) for r in runs}
        cells: dict[tuple[str, str], list[tuple[int, float, float, str]]] = defaultdict(list)
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
                values = {
                    metric: v
                    for (r, metric), j in series.items()
                    if r == run
                    and metric.lower() not in SYSTEM_NAMES
                    and (v := parse_float(row[j], path, lineno, header[j])) is not None
                }
                if not values:
                    continue  # this run logged nothing on this row
                where = f"line {lineno}"
                step_col = series.get((run, "_step"))
                raw_step = parse_float(row[step_col], path, lineno, header[step_col]) if step_col else x_val
                step = 0
                if not numbered[run]:
                    if raw_step is None:
                        numbered[run] = True  # no step on a row that has values: number them all
                    else:
                        checked = check_step(raw_step, f"{where} ({run})", losses)
                        if checked is None:
                            continue
                        step = checked
                own_x = (
                    parse_float(row[series[(run, str(axis_column))]], path, lineno, str(axis_column))
                    if use_own_axis
                    else x_val
                )
                x = math.nan if own_x is None else own_x
                for metric, v in values.items():
                    cells[(run, metric)].append((step, x, v, where))
        curves = []
        for (run, metric), pts in cells.items():
            steps = list(range(len(pts))) if numbered[run] else [p[0] for p in pts]
            curves.append(
                make_curve(
                    path,
                    run,
                    metric,
                    x_name,
                    steps,
                    [p[1] for p in pts],
                    [p[2] for p in pts],
                    [p[3] for p in pts],
                    losses,
                )
            )
        return curves
