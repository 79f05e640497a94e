"""Writing the interval calibrations the library ships (harness/analysis/forecast/data/*.json).

The benchmarks that fit them on all four sources (bench/forecast.py: ``linear``;
bench/forecast_sweep.py: ``default``, ``sweep``, ``finished_sweep``) pass what they fitted to
:func:`report`, which prints it beside the shipped file and, with ``write``, replaces the file:
the calibration with its quantiles rounded to 3 decimals (as every shipped constant was), and
where it came from (:mod:`bench.provenance`: command, date, machine, commit; the sources of
:mod:`bench.data`). The library reads them (:mod:`scalerl.harness.analysis.forecast.calibrations`);
``git diff`` shows what a refit changed.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import replace
from pathlib import Path

from bench import provenance
from bench.data import SOURCES
from scalerl.harness.analysis.forecast.calibrations import read_calibration
from scalerl.harness.analysis.forecast.intervals import IntervalCalibration

DATA = provenance.ROOT / "harness" / "analysis" / "forecast" / "data"
DECIMALS = 3


def rounded(cal: IntervalCalibration) -> IntervalCalibration:
    """``cal`` as it is shipped: quantiles to :data:`DECIMALS` decimals (the grid's weights and
    slopes are exact already)."""
    return replace(cal, quantiles=tuple(round(q, DECIMALS) for q in cal.quantiles))


def report(stem: str, cal: IntervalCalibration, *, output: str, procedure: str, write: bool) -> Path | None:
    """Print the refit of ``<stem>.json`` beside the shipped one; with ``write``, replace the file
    (keeping its ``name`` and ``used_by``). Returns the path written, or None."""
    cal = rounded(cal)
    path = DATA / f"{stem}.json"
    shipped = read_calibration(stem)
    same = cal == shipped
    print(f"{stem}.json: {'the same as shipped' if same else 'differs from the shipped'}: {cal}")
    if not same:
        print(f"  shipped: {shipped}")
    if not write:
        return None
    doc = json.loads(path.read_text())
    doc["calibration"] = dataclasses.asdict(cal)
    doc["provenance"] = {
        "command": provenance.command(),
        "output": output,
        "procedure": procedure,
        "date": provenance.now(),
        "machine": provenance.machine(),
        "sources": list(SOURCES),
        "commit": provenance.commit(ignore=(str(DATA.relative_to(provenance.ROOT)),)),
        "how": "written by the benchmark (--write-calibrations)",
    }
    path.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"  wrote {path}")
    return path
