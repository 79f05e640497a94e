"""``scalerl plan`` and ``scalerl config`` through the real CLI entry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from scalerl.harness.cli import main
from scalerl.harness.recipe import load_sweep, plan

RECIPES = Path(__file__).resolve().parents[3] / "recipes"


def test_plan_json_lists_the_loo_sweep(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(RECIPES / "loo.yaml"), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    names = [r["name"] for r in rows]
    assert names == [
        "baseline",
        "loo-8op",
        "loo-dapo",
        "loo-fp32",
        "loo-savg",
        "loo-plan",
        "loo-batch",
        "loo-lp",
        "loo-npr",
    ]
    assert len({r["run_id"] for r in rows}) == 9
    assert all(r["run_id"] == r["config_hash"][:16] + "-s0" for r in rows)
    assert rows[0]["knob"] is None and rows[0]["alternative"] is None
    assert (rows[2]["knob"], rows[2]["from"], rows[2]["alternative"]) == ("loss", "cispo", "dapo")
    assert {(r["budget"], r["unit"]) for r in rows} == {(16000.0, "gpu_hours")}
    # Same ids as the API gives, run after run.
    assert [r["run_id"] for r in rows] == [r.run_id for r in plan(load_sweep(RECIPES / "loo.yaml")).runs]


def test_plan_table_and_overrides(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(RECIPES / "tiny-loo.yaml"), "seeds=[0, 1]"]) == 0
    out = capsys.readouterr().out
    assert "9 variants x 2 seeds = 18 runs" in out
    lines = [ln.split() for ln in out.splitlines() if ln.startswith("loo-dapo")]
    assert [ln[1:5] for ln in lines] == [["loss", "cispo", "->", "dapo"]] * 2
    assert [ln[5] for ln in lines] == ["0", "1"]


def test_plan_warns_about_duplicates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "base.yaml").write_text(
        "extends: " + str(RECIPES / "scalerl.yaml") + "\ncheckpoint_every_steps: 10\n"
    )
    (tmp_path / "s.yaml").write_text(
        "sweep: d\nbase: base.yaml\ndesign: list\nlist:\n"
        "  - {name: a, overrides: {}}\n  - {name: b, overrides: {checkpoint_every_steps: 10}}\n"
        "  - {name: c, overrides: {checkpoint_every_steps: 20}}\n"
        "  - {name: d, overrides: {optimizer.lr: 3.0e-6}}\n"
    )
    assert main(["plan", str(tmp_path / "s.yaml"), "--json"]) == 0
    captured = capsys.readouterr()
    # The checkpoint cadence is not part of a run's identity, so b and c are the same run as a.
    assert [r["name"] for r in json.loads(captured.out)] == ["a", "d"]
    assert "variant 'b' resolves to the same config as 'a'" in captured.err
    assert "variant 'c' resolves to the same config as 'a'" in captured.err


def test_config_prints_a_variants_resolved_yaml(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", str(RECIPES / "loo.yaml"), "loo-lp", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    expected = next(r for r in plan(load_sweep(RECIPES / "loo.yaml")).runs if r.variant == "loo-lp")
    assert f"# run_id {expected.run_id[:-1]}3" in out
    assert yaml.safe_load(out) == expected.recipe.resolved()
    assert yaml.safe_load(out)["knobs"]["length_control"] == {
        "choice": "length_penalty",
        "params": {"l_max": 14336, "l_cache": 2048},
    }


def test_config_of_a_plain_recipe_with_override(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", str(RECIPES / "tiny.yaml"), "optimizer.lr=2e-3"]) == 0
    resolved = yaml.safe_load(capsys.readouterr().out)
    assert resolved["optimizer"]["lr"] == 0.002 and resolved["model"]["path"] is None
