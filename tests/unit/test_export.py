"""``scalerl export``'s values and its W&B project writer (the public API, faked: no network here);
MLflow and W&B offline runs are written for real in tests/integration/test_first_hour.py."""

from __future__ import annotations

import math
from typing import Any

import pytest

from scalerl.harness.errors import ConfigError
from scalerl.harness.export import Target, run_values, write_mlflow, write_wandb


def test_values_carry_the_fit_the_forecast_and_the_verdict() -> None:
    values = run_values(
        {"a": 0.71, "b": 2.0, "c_mid": math.nan},
        {"value": 0.70, "lo": 0.68, "hi": 0.72, "compute": 30.0},
        {"verdict": "asymptote-mover", "d_a": 0.1, "d_a_lo": 0.09, "d_a_hi": 0.11},
        sweep="ml",
        variant="loss_type=dapo",
        knob="loss_type",
    )
    assert values == {
        "sweep": "ml", "variant": "loss_type=dapo", "knob": "loss_type", "verdict": "asymptote-mover",
        "A": 0.71, "B": 2.0, "forecast": 0.70, "forecast_lo": 0.68, "forecast_hi": 0.72,
        "forecast_at": 30.0, "d_a": 0.1, "d_a_lo": 0.09, "d_a_hi": 0.11,
    }  # fmt: skip
    base = run_values(
        {"a": 0.6, "b": 2.0, "c_mid": 8.0}, None, None, sweep="ml", variant="baseline", knob=None
    )
    assert "verdict" not in base and "knob" not in base and base["C_mid"] == 8.0


class _Summary(dict[str, Any]):
    updates = 0

    def update(self, *args: Any, **kwargs: Any) -> None:  # W&B's summary.update() saves it
        super().update(*args, **kwargs)
        type(self).updates += 1


class _Api:
    def __init__(self) -> None:
        self.runs: dict[str, Any] = {}

    def run(self, path: str) -> Any:
        return self.runs.setdefault(path, type("Run", (), {"summary": _Summary()})())


def test_a_wandb_project_run_gets_its_summary_through_the_public_api() -> None:
    api = _Api()
    link = {"tracker": "wandb", "path": "lab/loo/abc1", "run_id": "abc1"}
    target = Target("r-s0", "dapo-s0", "wandb", link, {"A": 0.7, "verdict": "asymptote-mover"})
    write_wandb([target], {"wandb_api": api})
    assert dict(api.runs["lab/loo/abc1"].summary) == {"scalerl/A": 0.7, "scalerl/verdict": "asymptote-mover"}
    assert _Summary.updates == 1


def test_a_stored_uri_without_its_password_asks_for_the_real_one() -> None:
    pytest.importorskip("mlflow")
    link = {"tracker": "mlflow", "tracking_uri": "postgresql://lab:***@db/mlflow", "run_id": "x"}
    with pytest.raises(ConfigError, match="pass --mlflow-uri"):
        write_mlflow([Target("r", "r", "mlflow", link, {"A": 0.5})], {})
