"""Plain CSVs of parsed training logs: one step column plus one column per metric.

This is what a lab gets by parsing its trainer's console output (e.g. verl's
``step:1 - critic/rewards/mean:0.0 - ...`` lines) into a table. The file is one run, named after
the file's stem. The step column is the first column whose name is a known step name (``step``,
``global_step``, ``_step``, ``iteration``); every other numeric column is a metric, and empty cells
mean "not logged at this step". ``axis_column`` picks another column as the x axis (its values are
used as they are, so pass a cumulative quantity: a per-step duration is not a compute axis). A cell
reading ``nan`` / ``inf`` is a logged value, not an empty one; repeated columns, bad or repeated
steps and non-finite values are counted as in :data:`scalerl.harness.importers.base.LOSS_POLICY`.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from scalerl.harness.errors import ImportFormatError
from scalerl.harness.importers.base import (
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


@register
class ParsedCsvImporter(CurveImporter):
    name = "csv"

    def sniff(self, path: Path, head: bytes) -> bool:
        # utf-8-sig: a CSV saved by Excel starts with a byte-order mark, which is not part of its header.
        first = head.split(b"\n", 1)[0].decode("utf-8-sig", "replace")
        cols = [c.strip().strip('"') for c in first.split(",")]
        return path.suffix.lower() == ".csv" and any(is_step_name(c) for c in cols)

    def read(self, path: Path, *, axis_column: str | None, losses: LossLog) -> list[ImportedCurve]:
        try:
            with path.open(newline="", encoding="utf-8-sig") as fh:
                rows = list(csv.reader(fh))
        except (OSError, UnicodeDecodeError, csv.Error) as err:
            raise ImportFormatError(f"{path}: cannot read as CSV: {err}") from None
        if not rows:
            raise ImportFormatError(f"{path}:1: empty file (fix: export the parsed log with a header row)")
        header = [h.strip() for h in rows[0]]
        columns = first_columns(header, path, losses)
        step_idx = next((j for j, h in columns.items() if is_step_name(h)), None)
        if step_idx is None:
            raise ImportFormatError(
                f"{path}:1: no step column in header {header[:6]} (fix: name the step column 'step')"
            )
        x_idx = step_idx
        if axis_column is not None:
            if axis_column not in header:
                raise ImportFormatError(
                    f"{path}:1: axis column {axis_column!r} not in the header "
                    f"(fix: use one of {header[:10]}{' ...' if len(header) > 10 else ''})"
                )
            x_idx = header.index(axis_column)
        steps: list[int] = []
        xs: list[float] = []
        where: list[str] = []
        table: list[list[float | None]] = []
        for lineno, row in enumerate(rows[1:], start=2):
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) != len(header):
                raise ImportFormatError(
                    f"{path}:{lineno}: {len(row)} cells but the header has {len(header)} "
                    "(fix: quote cells that contain commas, or re-parse the log)"
                )
            vals = [parse_float(row[j], path, lineno, name) for j, name in columns.items()]
            by_col = dict(zip(columns, vals, strict=True))
            raw_step = by_col[step_idx]
            if raw_step is None:
                raise ImportFormatError(
                    f"{path}:{lineno}: column {header[step_idx]!r} is empty (fix: every row needs its step)"
                )
            step = check_step(raw_step, f"line {lineno}", losses)
            if step is None:
                continue
            steps.append(step)
            x = by_col[x_idx]
            xs.append(math.nan if x is None else x)
            where.append(f"line {lineno}")
            table.append([by_col[j] for j in columns])
        run = path.stem.removesuffix("_parsed")
        curves = []
        for k, (j, name) in enumerate(columns.items()):
            if j in (step_idx, x_idx):
                continue
            st: list[int] = []
            xv: list[float] = []
            vals_k: list[float] = []
            wh: list[str] = []
            for s, x, r, w in zip(steps, xs, table, where, strict=True):
                v = r[k]
                if v is not None:  # an empty cell: not logged at this step
                    st.append(s)
                    xv.append(x)
                    vals_k.append(v)
                    wh.append(w)
            if st:
                curves.append(make_curve(path, run, name, header[x_idx], st, xv, vals_k, wh, losses))
        return curves
