"""The shipped interval calibrations are data files that bench writes and the library reads: the
values are bit for bit the constants shipped (before they became files, or as a benchmark last
printed them), each file says where it came from, and the wheel carries them."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest

from scalerl.harness.analysis.forecast import calibrations
from scalerl.harness.analysis.forecast.intervals import CALIBRATED_LEVELS, IntervalCalibration
from scalerl.harness.errors import ConfigError
from tests.unit.execution.helpers import REPO

# The constants as they were written in the library until issue 35 (harness/analysis/forecaster.py
# and hierarchical.py at fb6d90a), literally; the two sweep calibrations as issue 37 refitted them
# for its sweep forecast (python -m bench.forecast_targets --write-calibrations, 2026-11-28), the
# values it printed.
SHIPPED = {
    "DEFAULT_CALIBRATION": IntervalCalibration(
        levels=CALIBRATED_LEVELS,
        quantiles=(0.281, 0.355, 0.451, 0.576, 0.809, 1.144, 1.634),
        horizon_slope=0.0,
        spread_weight=1.0,
        log_horizon_slope=2.0,
        own_weight=2.0,
    ),
    "LINEAR_CALIBRATION": IntervalCalibration(
        levels=CALIBRATED_LEVELS,
        quantiles=(0.734, 0.932, 1.21, 1.572, 2.171, 2.851, 3.783),
        horizon_slope=0.5,
        spread_weight=1.0,
    ),
    "SWEEP_CALIBRATION": IntervalCalibration(
        levels=CALIBRATED_LEVELS,
        quantiles=(0.457, 0.592, 0.762, 1.007, 1.431, 1.87, 2.557),
        horizon_slope=0.0,
        spread_weight=1.0,
        log_horizon_slope=2.0,
        move_weight=0.0,
        sibling_weight=2.0,
    ),
    "FINISHED_SWEEP_CALIBRATION": IntervalCalibration(
        levels=CALIBRATED_LEVELS,
        quantiles=(0.664, 0.843, 1.066, 1.364, 1.81, 2.216, 2.729),
        horizon_slope=0.0,
        spread_weight=1.0,
        log_horizon_slope=0.5,
        move_weight=0.0,
        sibling_weight=0.5,
    ),
}


def _bits(cal: IntervalCalibration) -> list[str]:
    out = []
    for f in dataclasses.fields(cal):
        v = getattr(cal, f.name)
        out += [float(x).hex() for x in v] if isinstance(v, tuple) else [float(v).hex()]
    return out


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_the_files_hold_the_constants_shipped_before_bit_for_bit(name: str) -> None:
    loaded = getattr(calibrations, name)
    assert _bits(loaded) == _bits(SHIPPED[name])
    assert loaded == SHIPPED[name] == calibrations.read_calibration(calibrations.FILES[name])


@pytest.mark.parametrize("stem", sorted(calibrations.FILES.values()))
def test_each_file_says_where_it_came_from(stem: str) -> None:
    prov = calibrations.provenance(stem)
    assert prov["command"].startswith("OMP_NUM_THREADS=1 python") and "bench" in prov["command"]
    assert len(prov["commit"]) == 40 and int(prov["commit"], 16) >= 0
    assert prov["date"].startswith("2026-") and prov["machine"]
    first = calibrations.first_shipped(stem)
    assert len(first["commit"]) == 40 and first["date"] <= prov["date"] and "bench" in first["command"]
    assert set(prov["sources"]) == {
        "wandb-export-deep-grpo",
        "tensorboard-verl-async",
        "verl-fork-parsed",
        "speedrl-dapo-json",
    }


def test_the_wheel_carries_every_file() -> None:
    data = REPO / "harness" / "analysis" / "forecast" / "data"
    files = sorted(p.name for p in data.glob("*.json"))
    assert files == sorted(f"{s}.json" for s in calibrations.FILES.values())
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    globs = pyproject["tool"]["setuptools"]["package-data"]["scalerl.harness.analysis.forecast"]
    assert all(any(Path("data", f).match(g) for g in globs) for f in files)


def test_a_damaged_file_is_named_with_the_field_and_the_fix() -> None:
    good = calibrations.read_calibration("linear")
    fields = dataclasses.asdict(good)
    with pytest.raises(ConfigError, match=r"data/x\.json.*calibration.*own_weight.*fix: reinstall"):
        calibrations.calibration_of(
            "data/x.json", {"calibration": {k: v for k, v in fields.items() if k != "own_weight"}}
        )
    with pytest.raises(ConfigError, match=r"data/x\.json.*not a calibration"):
        calibrations.calibration_of("data/x.json", {"calibration": {**fields, "quantiles": "wide"}})
    with pytest.raises(ConfigError, match=r"nope\.json.*cannot read"):
        calibrations.read_calibration("nope")
