"""scalerl.harness.Sweep (harness/api.py) plans what ``scalerl plan`` plans, and fails as the loader does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from scalerl.harness import ConfigError, Sweep
from scalerl.harness.cli import main
from tests.unit.execution.helpers import REPO

TINY_LOO = REPO / "recipes" / "tiny-loo.yaml"


def test_plan_matches_the_cli_run_ids(capsys: pytest.CaptureFixture[str]) -> None:
    planned = Sweep.from_yaml(TINY_LOO).plan()
    assert main(["plan", str(TINY_LOO), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(planned.runs) == 27 == len(rows)
    assert [r.run_id for r in planned.runs] == [r["run_id"] for r in rows]
    assert len(planned.variant_names) == 9
    assert planned.variant_names[0] == "baseline"


def test_overrides_reach_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    planned = Sweep.from_yaml(TINY_LOO, ["seeds=[0]", "scale.max_gen_len=20"]).plan()
    assert main(["plan", str(TINY_LOO), "--json", "seeds=[0]", "scale.max_gen_len=20"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(planned.runs) == 9
    assert [r.run_id for r in planned.runs] == [r["run_id"] for r in rows]
    assert planned.runs[0].recipe.scale.max_gen_len == 20


def test_from_dict_plans_what_from_yaml_plans() -> None:
    data = yaml.safe_load(TINY_LOO.read_text())
    from_dict = Sweep.from_dict(data, ["seeds=[1, 2]"], base_dir=TINY_LOO.parent)
    from_yaml = Sweep.from_yaml(TINY_LOO, ["seeds=[1, 2]"])
    assert from_dict.name == from_yaml.name == data["sweep"]
    a, b = from_dict.plan(), from_yaml.plan()
    assert len(a.runs) == 18
    assert [(r.variant, r.seed, r.run_id, r.config_hash) for r in a.runs] == [
        (r.variant, r.seed, r.run_id, r.config_hash) for r in b.runs
    ]


def test_a_bad_override_names_the_field() -> None:
    with pytest.raises(ConfigError) as err:
        Sweep.from_yaml(TINY_LOO, ["seeds=oops"])
    assert err.value.field is not None and err.value.field.startswith("seeds")
    with pytest.raises(ConfigError) as err:
        Sweep.from_yaml(TINY_LOO, ["nonsense.key=1"])
    assert err.value.field == "nonsense.key"
    assert "neither a sweep nor a recipe field" in str(err.value)


def test_a_bad_dict_names_the_field_and_no_temporary_file() -> None:
    data = yaml.safe_load(TINY_LOO.read_text())
    with pytest.raises(ConfigError) as err:
        Sweep.from_dict({**data, "max_retries": -3}, base_dir=TINY_LOO.parent)
    assert err.value.field == "max_retries"
    assert err.value.value == -3
    assert err.value.file is None and "scalerl-sweep-" not in str(err.value)
    with pytest.raises(ConfigError) as err:
        Sweep.from_dict({**data, "base": "missing.yaml"}, base_dir=TINY_LOO.parent)
    assert err.value.field == "base"


def test_open_needs_an_existing_store_and_sweep(tmp_path: Path) -> None:
    from scalerl.harness.errors import StoreError

    with pytest.raises(StoreError):
        Sweep.open("nope", db=f"sqlite:///{tmp_path / 'missing.db'}")
    assert not (tmp_path / "missing.db").exists()  # reading never creates a store


def test_a_sweep_opened_by_name_cannot_plan(tmp_path: Path) -> None:
    sweep = Sweep("loo", db=f"sqlite:///{tmp_path / 's.db'}")
    with pytest.raises(ConfigError, match="needs the sweep's file"):
        sweep.plan()


def test_import_harness_stays_light() -> None:
    code = (
        "import sys, scalerl; print('scalerl.harness' in sys.modules); import scalerl.harness; "
        "print('scalerl.harness.api' in sys.modules, 'pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", "False"]
    code = (
        "from scalerl.harness import Sweep; import scalerl; print(Sweep.__module__, scalerl.Sweep is Sweep)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["scalerl.harness.api", "True"]
