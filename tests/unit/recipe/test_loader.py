"""The loader: line numbers, YAML 1.2 floats, extends chains, dotted overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalerl.harness.errors import ConfigError
from scalerl.harness.recipe import load_recipe
from scalerl.harness.recipe.overrides import parse_cli_overrides
from scalerl.harness.recipe.yamlio import Source, parse_yaml


def test_parse_yaml_records_lines_and_reads_exponent_floats() -> None:
    data, src = parse_yaml("a:\n  b: 1e-3\n  c: [1, 2e2]\nd: '1e3'\ne: 10\n", "f.yaml")
    assert data == {"a": {"b": 0.001, "c": [1, 200.0]}, "d": "1e3", "e": 10}
    assert src.entries[("a", "b")] == Source("f.yaml", 2)
    assert src.entries[("a", "c", 1)] == Source("f.yaml", 3)
    assert src.entries[("e",)] == Source("f.yaml", 5)
    assert src.get(("a", "b", "missing")) == Source("f.yaml", 2)


def test_cli_overrides_are_yaml_typed() -> None:
    items = ["a.b=1e-3", "s=[0, 1]", "p=null", "t=on", "b=true", "q='x'", "m={k: 2}"]
    got = {o.key: o.value for o in parse_cli_overrides(items)}
    # YAML 1.2: on/off are names (the knobs' alternatives), only true/false are booleans.
    assert got == {"a.b": 0.001, "s": [0, 1], "p": None, "t": "on", "b": True, "q": "x", "m": {"k": 2}}


def test_extends_chain_merges_deeply_and_traces_lines(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(
        "name: a\noptimizer: {lr: 1.0e-4, warmup_steps: 3}\nscale: {max_gen_len: 16}\n"
        "knobs:\n  length_control:\n    alternatives:\n"
        "      interruption: {budget_min: 4, budget_max: 8, answer_tokens: 4}\n"
        "      length_penalty: {l_max: 16, l_cache: 4}\n"
    )
    (tmp_path / "b.yaml").write_text("extends: a.yaml\nname: b\noptimizer: {lr: 2.0e-4}\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.yaml").write_text("extends: ../b.yaml\nscale: {prompts_per_batch: 2}\n")
    c = load_recipe(tmp_path / "sub" / "c.yaml", ["optimizer.warmup_steps=7"])
    assert (c.name, c.optimizer.lr, c.optimizer.warmup_steps) == ("b", 2e-4, 7)
    assert (c.scale.max_gen_len, c.scale.prompts_per_batch) == (16, 2)
    # An error in a value inherited from the grandparent names the grandparent's file and line.
    with pytest.raises(ConfigError) as info:
        load_recipe(tmp_path / "sub" / "c.yaml", ["scale.max_gen_len=8"])
    assert "a.yaml:7" in str(info.value) and "exceeds scale.max_gen_len (8)" in str(info.value)
    # An override's own bad value names the command line.
    with pytest.raises(ConfigError) as info:
        load_recipe(tmp_path / "sub" / "c.yaml", ["optimizer.warmup_steps=-2"])
    assert info.value.file == "<command line> 'optimizer.warmup_steps=-2'"
    assert info.value.field == "optimizer.warmup_steps" and info.value.value == -2


def test_mapping_override_merges_and_scalar_override_replaces(tmp_path: Path) -> None:
    (tmp_path / "r.yaml").write_text(
        "name: r\ntask: {params: {digits: 2, ops: '+'}}\nscale: {max_gen_len: 16}\n"
        "knobs:\n  length_control:\n    choice: length_penalty\n"
        "    alternatives: {length_penalty: {l_max: 16, l_cache: 4}}\n"
    )
    r = load_recipe(
        tmp_path / "r.yaml", ["task.params={digits: 3}", "knobs.length_control.choice=length_penalty"]
    )
    assert r.task.params == {"digits": 3, "ops": "+"}
    r2 = load_recipe(tmp_path / "r.yaml", ["task.params.ops='*'"])
    assert r2.task.params == {"digits": 2, "ops": "*"}


def test_baseline_recipe_spells_out_every_knob_and_alternative() -> None:
    import yaml

    from scalerl.harness.recipe import Knobs

    repo = Path(__file__).resolve().parents[3]
    raw = yaml.safe_load((repo / "recipes" / "scalerl.yaml").read_text())
    for name, field in Knobs.model_fields.items():
        knob_cls = field.annotation
        assert knob_cls is not None
        written = raw["knobs"][name]
        assert "choice" in written and set(written["alternatives"]) == set(knob_cls.alternative_names())
    r = load_recipe(repo / "recipes" / "scalerl.yaml")
    assert (r.scale.prompts_per_batch * r.scale.generations_per_prompt, r.scale.max_gen_len) == (768, 14336)
    assert (r.knobs.pipeline.alternatives.pipeline_rl.k, r.knobs.loss.alternatives.cispo.eps_max) == (8, 4.0)
    assert r.knobs.no_positive_resampling.alternatives.on.threshold == 0.9
    assert (r.optimizer.lr, r.optimizer.eps, r.optimizer.weight_decay) == (5e-7, 1e-15, 0.01)


def test_a_sweep_can_extend_a_sweep_and_keeps_its_base_relative_to_the_writer(tmp_path: Path) -> None:
    from scalerl.harness.recipe import load_sweep, plan

    recipes = Path(__file__).resolve().parents[3] / "recipes"
    (tmp_path / "mine.yaml").write_text(
        f"extends: {recipes / 'loo.yaml'}\nsweep: mine\nseeds: [5]\nloo: {{knobs: [loss]}}\nexecutor: debug\n"
    )
    sweep = load_sweep(tmp_path / "mine.yaml")
    assert sweep.path == tmp_path / "mine.yaml" and sweep.base == "scalerl.yaml"
    assert sweep.base_recipe.name == "scalerl"  # found next to loo.yaml, not next to mine.yaml
    p = plan(sweep)
    assert [(r.variant, r.seed) for r in p.runs] == [("baseline", 5), ("loo-dapo", 5)]
    assert (sweep.executor, sweep.fit.window.start, sweep.resources.gpus) == ("debug", 1500, 8)
    loo = plan(load_sweep(recipes / "loo.yaml"))
    assert p.runs[1].run_id[:16] == next(r.run_id[:16] for r in loo.runs if r.variant == "loo-dapo")
