"""The forecast interval calibrations the library ships, read from data files with where they came from.

Each calibration is one JSON file in ``forecast/data/`` (package data of the wheel): the
:class:`~.intervals.IntervalCalibration` fields, which forecasts use it, and its provenance: the
benchmark command that fitted it on the real curves in /work/shared/data/real-rl-curves, the date
and machine, the sources and the commit of that run (:func:`provenance`), and when the values were
first shipped (``first_shipped``). The benchmarks write
them (``python -m bench.forecast_sweep --write-calibrations``, ``python -m bench.forecast
--write-calibrations``); bench/README.md has the held-out coverage of each. Which forecast uses
which:

- :data:`DEFAULT_CALIBRATION` (``default.json``): the single-curve forecast
  (:func:`.ensemble.forecast_curve`);
- :data:`SWEEP_CALIBRATION` (``sweep.json``): a forecast that borrows from its sweep
  (:func:`.sweep_prior.forecast_with_siblings`) whose siblings are at its own stage, and every sweep
  forecast of the forecast pruners;
- :data:`FINISHED_SWEEP_CALIBRATION` (``finished_sweep.json``): the same where the siblings ran
  on (:func:`.sweep_prior.siblings_finished`);
- :data:`LINEAR_CALIBRATION` (``linear.json``): the constants shipped before, kept for the
  forecast pruners' single-curve forecasts, whose defaults were chosen and measured with them.

The files are read once, when this module is imported; a missing or damaged one raises
:class:`~scalerl.harness.errors.ConfigError` naming the file and the field.
"""

from __future__ import annotations

import dataclasses
import json
from importlib import resources
from typing import Any

from scalerl.harness.analysis.forecast.intervals import IntervalCalibration
from scalerl.harness.errors import ConfigError

# The shipped calibrations: constant name -> file stem in forecast/data/.
FILES = {
    "DEFAULT_CALIBRATION": "default",
    "LINEAR_CALIBRATION": "linear",
    "SWEEP_CALIBRATION": "sweep",
    "FINISHED_SWEEP_CALIBRATION": "finished_sweep",
}
PROVENANCE_FIELDS = ("command", "date", "machine", "sources", "commit")
_FIELDS = tuple(f.name for f in dataclasses.fields(IntervalCalibration))
_FIX = "reinstall scalerl-harness, or regenerate it: python -m bench.forecast_sweep --write-calibrations"


def _document(stem: str) -> tuple[str, dict[str, Any]]:
    where = resources.files("scalerl.harness.analysis.forecast").joinpath("data", f"{stem}.json")
    name = f"scalerl/harness/analysis/forecast/data/{stem}.json"
    try:
        doc = json.loads(where.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ConfigError(f"cannot read a shipped calibration: {err}", file=name, fix=_FIX) from None
    if not isinstance(doc, dict):
        raise ConfigError("must hold a JSON object", file=name, value=type(doc).__name__, fix=_FIX)
    return name, doc


def read_calibration(stem: str) -> IntervalCalibration:
    """The calibration in ``forecast/data/<stem>.json``: every field of
    :class:`~.intervals.IntervalCalibration`, no other (a ConfigError names the file and field)."""
    return calibration_of(*_document(stem))


def calibration_of(name: str, doc: dict[str, Any]) -> IntervalCalibration:
    """The calibration of a parsed calibration file ``doc`` (``name`` is the file, for errors)."""
    fields = doc.get("calibration")
    if not isinstance(fields, dict) or set(fields) != set(_FIELDS):
        got = sorted(fields) if isinstance(fields, dict) else fields
        raise ConfigError(
            f"calibration must have exactly the fields {', '.join(_FIELDS)}",
            file=name,
            field="calibration",
            value=got,
            fix=_FIX,
        )
    try:
        return IntervalCalibration(
            levels=tuple(float(v) for v in fields["levels"]),
            quantiles=tuple(float(v) for v in fields["quantiles"]),
            **{k: float(fields[k]) for k in _FIELDS if k not in ("levels", "quantiles")},
        )
    except (TypeError, ValueError) as err:
        raise ConfigError(f"not a calibration: {err}", file=name, field="calibration", fix=_FIX) from None


def provenance(stem: str) -> dict[str, Any]:
    """Where ``forecast/data/<stem>.json`` came from: at least the command, date, machine, sources
    and commit of the benchmark run that fitted it."""
    name, doc = _document(stem)
    prov = doc.get("provenance")
    missing = [k for k in PROVENANCE_FIELDS if not isinstance(prov, dict) or k not in prov]
    if missing:
        raise ConfigError(
            f"provenance lacks {', '.join(missing)}", file=name, field="provenance", value=prov, fix=_FIX
        )
    assert isinstance(prov, dict)
    return prov


def first_shipped(stem: str) -> dict[str, Any]:
    """When the values of ``forecast/data/<stem>.json`` were first shipped: commit, date, command."""
    name, doc = _document(stem)
    first = doc.get("first_shipped")
    if not isinstance(first, dict) or not {"commit", "date", "command"} <= set(first):
        raise ConfigError(
            "first_shipped must give the commit, date and command", file=name, field="first_shipped", fix=_FIX
        )
    return first


DEFAULT_CALIBRATION = read_calibration(FILES["DEFAULT_CALIBRATION"])
LINEAR_CALIBRATION = read_calibration(FILES["LINEAR_CALIBRATION"])
SWEEP_CALIBRATION = read_calibration(FILES["SWEEP_CALIBRATION"])
FINISHED_SWEEP_CALIBRATION = read_calibration(FILES["FINISHED_SWEEP_CALIBRATION"])
