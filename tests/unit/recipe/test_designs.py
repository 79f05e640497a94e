"""Sweep designs and the planner: the variants each design produces, seeds, duplicates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scalerl.harness.recipe import KNOB_SPECS, load_sweep, plan

REPO = Path(__file__).resolve().parents[3]
RECIPES = REPO / "recipes"

BASE_YAML = """\
name: small
knobs:
  length_control:
    alternatives:
      interruption: {phrase: " =", budget_min: 8, budget_max: 12, answer_tokens: 4}
      length_penalty: {l_max: 16, l_cache: 4}
scale: {prompts_per_batch: 4, generations_per_prompt: 4, max_gen_len: 16}
budget: {value: 20, unit: steps}
"""


def _sweep(tmp_path: Path, body: str) -> Path:
    (tmp_path / "base.yaml").write_text(BASE_YAML)
    path = tmp_path / "sweep.yaml"
    path.write_text("sweep: t\nbase: base.yaml\n" + body)
    return path


def _knob_diff(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return [k for k in a["knobs"] if a["knobs"][k] != b["knobs"][k]]


def test_paper_loo_sweep_has_baseline_and_eight_single_knob_variants() -> None:
    p = plan(load_sweep(RECIPES / "loo.yaml"))
    expected = ["baseline", *(s.loo_name for s in KNOB_SPECS.values())]
    assert list(p.variant_names) == expected
    assert expected[1:] == [
        "loo-8op",
        "loo-dapo",
        "loo-fp32",
        "loo-savg",
        "loo-plan",
        "loo-batch",
        "loo-lp",
        "loo-npr",
    ]
    assert len({r.run_id for r in p.runs}) == 9 and p.duplicates == ()
    base = p.runs[0].recipe.resolved()
    for run, spec in zip(p.runs[1:], KNOB_SPECS.values(), strict=True):
        resolved = run.recipe.resolved()
        assert _knob_diff(base, resolved) == [spec.name]
        assert (run.knob, run.from_alternative, run.alternative) == (spec.name, spec.baseline, spec.loo)
        assert {k: v for k, v in resolved.items() if k != "knobs"} == {
            k: v for k, v in base.items() if k != "knobs"
        }
    assert p.runs[0].budget.value == 16000 and p.runs[0].budget.unit == "gpu_hours"
    sweep = p.sweep
    assert (sweep.fit.axis, sweep.fit.window.start, sweep.fit.margin) == ("gpu_hours", 1500, 0.02)
    assert sweep.resources.gpus == 8 and sweep.executor == "slurm"


def test_loo_subset_with_named_alternative_and_seeds(tmp_path: Path) -> None:
    path = _sweep(
        tmp_path,
        "design: loo\nloo:\n  knobs:\n    loss: gspo\n    lm_head: {name: bf16-head}\nseeds: [3, 4]\n",
    )
    p = plan(load_sweep(path))
    assert [(r.variant, r.knob, r.alternative, r.seed) for r in p.runs] == [
        ("baseline", None, None, 3),
        ("baseline", None, None, 4),
        ("loo-loss-gspo", "loss", "gspo", 3),
        ("loo-loss-gspo", "loss", "gspo", 4),
        ("bf16-head", "lm_head", "model_dtype", 3),
        ("bf16-head", "lm_head", "model_dtype", 4),
    ]
    assert p.runs[0].run_id.endswith("-s3") and p.runs[1].run_id.endswith("-s4")
    assert p.runs[0].run_id[:16] == p.runs[1].run_id[:16] != p.runs[2].run_id[:16]
    assert p.runs[2].recipe.resolved()["knobs"]["loss"] == {
        "choice": "gspo",
        "params": {"eps_low": 0.0003, "eps_high": 0.0004},
    }


def test_forward_design_adds_knobs_back_cumulatively(tmp_path: Path) -> None:
    body = (
        "design: forward\nforward:\n  start: {loss: grpo, pipeline: ppo_off_policy}\n"
        "  steps: [loss, pipeline]\n"
    )
    p = plan(load_sweep(_sweep(tmp_path, body)))
    rows = [(r.variant, r.knob, r.from_alternative, r.alternative) for r in p.runs]
    assert rows == [
        ("fwd-start", None, None, None),
        ("fwd-1-loss", "loss", "grpo", "cispo"),
        ("fwd-2-pipeline", "pipeline", "ppo_off_policy", "pipeline_rl"),
    ]
    choices = [(r.recipe.knobs.loss.choice, r.recipe.knobs.pipeline.choice) for r in p.runs]
    assert choices == [("grpo", "ppo_off_policy"), ("cispo", "ppo_off_policy"), ("cispo", "pipeline_rl")]


def test_forward_design_one_at_a_time(tmp_path: Path) -> None:
    body = (
        "design: forward\nforward:\n  start: {loss: grpo, pipeline: ppo_off_policy}\n"
        "  steps: [loss, {knob: pipeline, name: plus-pipe}]\n  cumulative: false\n"
    )
    p = plan(load_sweep(_sweep(tmp_path, body)))
    choices = {r.variant: (r.recipe.knobs.loss.choice, r.recipe.knobs.pipeline.choice) for r in p.runs}
    assert choices == {
        "fwd-start": ("grpo", "ppo_off_policy"),
        "fwd-1-loss": ("cispo", "ppo_off_policy"),
        "plus-pipe": ("grpo", "pipeline_rl"),
    }


def test_default_forward_starts_from_every_loo_alternative(tmp_path: Path) -> None:
    p = plan(load_sweep(_sweep(tmp_path, "design: forward\n")))
    assert len(p.runs) == 1 + len(KNOB_SPECS)
    start = p.runs[0].recipe
    assert all(getattr(start.knobs, k).choice == s.loo for k, s in KNOB_SPECS.items())
    last = p.runs[-1].recipe.resolved()
    baseline = plan(load_sweep(_sweep(tmp_path, "design: loo\nloo: {knobs: [loss]}\n"))).runs[0]
    assert last == baseline.recipe.resolved() and p.runs[-1].run_id == baseline.run_id


def test_grid_design_is_the_cartesian_product(tmp_path: Path) -> None:
    body = "design: grid\ngrid:\n  scale.prompts_per_batch: [2, 8]\n  optimizer.lr: [1.0e-4, 1e-3]\n"
    p = plan(load_sweep(_sweep(tmp_path, body)))
    got = [(r.variant, r.recipe.scale.prompts_per_batch, r.recipe.optimizer.lr) for r in p.runs]
    assert got == [
        ("grid-prompts_per_batch=2-lr=0.0001", 2, 1e-4),
        ("grid-prompts_per_batch=2-lr=0.001", 2, 1e-3),
        ("grid-prompts_per_batch=8-lr=0.0001", 8, 1e-4),
        ("grid-prompts_per_batch=8-lr=0.001", 8, 1e-3),
    ]
    assert all(r.knob is None for r in p.runs) and len({r.run_id for r in p.runs}) == 4


def test_list_design_and_duplicates_are_reported_not_run(tmp_path: Path) -> None:
    body = (
        "design: list\nlist:\n"
        "  - {name: ref, overrides: {}}\n"
        "  - {name: same-lr, overrides: {optimizer.lr: 5.0e-7}}\n"  # the default lr: same config
        "  - {name: long, overrides: {scale.max_gen_len: 32, knobs.loss.choice: dapo}}\n"
    )
    p = plan(load_sweep(_sweep(tmp_path, body)))
    assert [r.variant for r in p.runs] == ["ref", "long"]
    assert p.runs[1].recipe.scale.max_gen_len == 32 and p.runs[1].recipe.knobs.loss.choice == "dapo"
    assert len(p.duplicates) == 1
    dup = p.duplicates[0]
    assert (dup.variant, dup.same_as, dup.config_hash[:16]) == ("same-lr", "ref", p.runs[0].run_id[:16])
    assert "'same-lr'" in dup.message and "'ref'" in dup.message


def test_sweep_overrides_apply_to_every_variant_and_budget_replaces_the_recipes(tmp_path: Path) -> None:
    body = (
        "overrides: {optimizer.lr: 2.0e-4, task.params: {digits: 3}}\n"
        "design: loo\nloo: {knobs: [loss]}\nbudget: {value: 1.0e12, unit: flops}\n"
    )
    path = _sweep(tmp_path, body)
    p = plan(load_sweep(path, ["scale.prompts_per_batch=6", "seeds=[1, 2]", "fit.window={fraction: 0.25}"]))
    assert {r.recipe.optimizer.lr for r in p.runs} == {2e-4}
    assert {r.recipe.scale.prompts_per_batch for r in p.runs} == {6}
    assert {r.recipe.task.params["digits"] for r in p.runs} == {3}
    assert {(r.budget.value, r.budget.unit) for r in p.runs} == {(1e12, "flops")}
    assert [r.seed for r in p.runs] == [1, 2, 1, 2]
    assert p.sweep.fit.window.fraction == 0.25 and p.sweep.fit.window.start is None


def test_tiny_preset_and_tiny_loo_validate() -> None:
    p = plan(load_sweep(RECIPES / "tiny-loo.yaml"))
    tiny = p.runs[0].recipe
    assert tiny.name == "tiny" and tiny.model.path is None and tiny.task.name == "arith"
    assert tiny.budget.unit in ("steps", "flops")
    assert tiny.scale.max_gen_len <= 256 and tiny.generation.backend == "hf"
    # 9 variants x 3 seeds: the seed noise is measured, not assumed (issue 11).
    assert len(p.runs) == 27 and len({r.run_id for r in p.runs}) == 27 and p.sweep.seeds == [0, 1, 2]
    assert {r.recipe.eval.n_val * r.recipe.eval.k for r in p.runs} == {640}
    assert (p.sweep.fit.axis, p.sweep.fit.metric) == ("flops", "val/pass_rate")
    # tiny inherits what it does not override from the ScaleRL baseline.
    assert tiny.knobs.loss.alternatives.dapo.eps_high == 0.28
    assert tiny.knobs.no_positive_resampling.alternatives.on.threshold == 0.9


def test_shipped_forward_and_grid_sweeps_meet_the_loo_sweep() -> None:
    loo = {r.variant: r.run_id for r in plan(load_sweep(RECIPES / "loo.yaml")).runs}
    fwd = plan(load_sweep(RECIPES / "forward.yaml"))
    assert len(fwd.runs) == 9 and len({r.run_id for r in fwd.runs}) == 9
    # All ScaleRL knobs but the last added = loo-npr; all of them = the baseline: same ids.
    assert fwd.runs[-2].run_id == loo["loo-npr"] and fwd.runs[-1].run_id == loo["baseline"]
    grid = plan(load_sweep(RECIPES / "scale-grid.yaml"))
    cells = {(r.recipe.scale.prompts_per_batch, r.recipe.scale.max_gen_len) for r in grid.runs}
    assert (
        cells == {(b, n) for b in (24, 48, 96) for n in (14336, 16384)}
        and len({r.run_id for r in grid.runs}) == 6
    )
