"""Free-form ``params:``: typed values, hashed into the run id, swept through dotted keys; and the
rule that sections a command runner does not template stay out of its run id."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from scalerl.harness.errors import ConfigError
from scalerl.harness.recipe import config_hash, load_recipe, load_sweep, plan, run_id
from scalerl.harness.recipe.schema import REFERENCE_ONLY, Recipe

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "recipes" / "examples"

COMMAND = {"type": "command", "argv": ["train.py", "--lr", "{params.lr}", "--seed", "{seed}"]}


def _write(tmp_path: Path, data: dict[str, Any], name: str = "r.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _recipe(runner: dict[str, Any] | None = None, **fields: Any) -> Recipe:
    data: dict[str, Any] = {"name": "p", **fields}
    if runner is not None:
        data["runner"] = runner
    return Recipe.model_validate(data)


# --------------------------------------------------------------------------- schema
def test_values_keep_their_yaml_types(tmp_path: Path) -> None:
    text = (
        "name: p\nparams: {lr: 1e-3, steps: 3, half: 3.0, rm: rm-v2, on: true, none: null, xs: [1, 2.5, a]}\n"
    )
    (tmp_path / "r.yaml").write_text(text)
    params = load_recipe(tmp_path / "r.yaml").params
    assert params == {"lr": 0.001, "steps": 3, "half": 3.0, "rm": "rm-v2", "on": True, "none": None,
                      "xs": (1, 2.5, "a")}  # fmt: skip
    assert [type(params[k]) for k in ("lr", "steps", "half", "on")] == [float, int, float, bool]
    assert type(params["xs"][0]) is int  # type: ignore[index]


@pytest.mark.parametrize(
    ("line", "field", "reason"),
    [
        ("params: {my-lr: 1}", "params.my-lr", "is not an identifier"),
        ("params: {9lives: 1}", "params.9lives", "is not an identifier"),
        ("params: {opt: {lr: 1}}", "params.opt", "not dict"),
        ("params: {xs: [[1]]}", "params.xs", "not list"),
        ("params: {x: .nan}", "params.x", "not nan"),
    ],
)
def test_bad_params_name_file_line_field_and_fix(tmp_path: Path, line: str, field: str, reason: str) -> None:
    (tmp_path / "r.yaml").write_text(f"name: p\n{line}\n")
    with pytest.raises(ConfigError) as info:
        load_recipe(tmp_path / "r.yaml")
    err = info.value
    assert (Path(str(err.file)).name, err.line, err.field) == ("r.yaml", 2, field)
    assert reason in err.reason and err.fix


def test_cli_override_sets_a_param_with_its_type(tmp_path: Path) -> None:
    path = _write(tmp_path, {"name": "p", "runner": COMMAND, "params": {"lr": 1e-3}})
    recipe = load_recipe(path, ["params.lr=3e-4", "params.layers=4"])
    assert recipe.params == {"lr": 3e-4, "layers": 4}
    assert type(recipe.params["layers"]) is int
    with pytest.raises(ConfigError) as info:
        load_recipe(path, ["params.bad-key=1"])
    assert info.value.field == "params.bad-key" and "command line" in str(info.value.file)


# --------------------------------------------------------------------------- hashing
def test_params_enter_the_hash_and_integral_floats_equal_ints() -> None:
    def rid(**params: Any) -> str:
        return run_id(_recipe(COMMAND, params=params), 0)

    assert rid(lr=3) == rid(lr=3.0)  # canonical JSON (and the template) write both as 3
    assert len({rid(lr=3), rid(lr="3"), rid(lr=4), rid(lr=3, b=None), rid(lr=[3])}) == 5


def test_empty_params_leave_the_run_id_alone() -> None:
    ref = _recipe()
    assert "params" not in ref.resolved()
    assert config_hash(_recipe(params={})) == config_hash(ref)
    assert config_hash(_recipe(params={"x": 1})) != config_hash(ref)
    assert ref.resolved().keys() >= set(REFERENCE_ONLY)  # the reference trainer keeps every section


# --------------------------------------------------------------------------- identity per runner
def test_command_runner_keeps_only_templated_sections() -> None:
    bare = _recipe(COMMAND, params={"lr": 1})
    assert sorted(bare.resolved()) == ["budget", "params", "runner"]
    # A section the command never sees cannot change its run.
    tuned = _recipe(COMMAND, params={"lr": 1}, optimizer={"lr": 1e-3}, scale={"max_gen_len": 20_000})
    assert config_hash(tuned) == config_hash(bare)

    loss = {**COMMAND, "argv": ["t.py", "{knobs.loss.choice}"], "env": {"LEN": "{scale.max_gen_len}"}}
    kept = _recipe(loss, knobs={"loss": {"choice": "dapo"}})
    assert sorted(kept.resolved()) == ["budget", "knobs", "runner", "scale"]
    assert kept.resolved()["knobs"]["loss"] == {
        "choice": "dapo",
        "params": {"eps_low": 0.2, "eps_high": 0.28},
    }
    other_knob = _recipe(loss, knobs={"loss": {"choice": "dapo"}, "pipeline": {"choice": "ppo_off_policy"}})
    assert config_hash(other_knob) != config_hash(kept)  # the whole knobs section is kept


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["t.py", "{alternative}"], {"knobs"}),
        (["t.py", "{knob}", "{seed}", "{run_id}"], {"knobs"}),
        (["t.py", "{variant}"], set(REFERENCE_ONLY)),
        (["t.py", "{{model.x}}"], set()),  # a literal brace is not a placeholder
    ],
)
def test_run_fields_that_stand_for_sections(argv: list[str], expected: set[str]) -> None:
    assert set(_recipe({"type": "command", "argv": argv}).used_sections()) == expected


def test_replay_runner_keeps_no_reference_sections() -> None:
    replay = {"type": "replay", "file": "curve.csv"}
    a, b = _recipe(replay), _recipe(replay, optimizer={"lr": 1e-3})
    assert sorted(a.resolved()) == ["budget", "runner"]
    assert config_hash(a) == config_hash(b)


# --------------------------------------------------------------------------- designs
def _command_base(tmp_path: Path) -> None:
    _write(tmp_path, {"name": "p", "runner": COMMAND, "params": {"lr": 1e-3, "rm": "v1"}}, "base.yaml")


def test_grid_over_a_param_plans_distinct_runs(tmp_path: Path) -> None:
    _command_base(tmp_path)
    sweep = {"sweep": "g", "base": "base.yaml", "design": "grid", "grid": {"params.lr": [1e-4, 3e-4]},
             "overrides": {"params.rm": "v2"}}  # fmt: skip
    p = plan(load_sweep(_write(tmp_path, sweep, "s.yaml")))
    assert [(r.variant, r.recipe.params) for r in p.runs] == [
        ("grid-lr=0.0001", {"lr": 1e-4, "rm": "v2"}),
        ("grid-lr=0.0003", {"lr": 3e-4, "rm": "v2"}),
    ]
    assert len({r.run_id for r in p.runs}) == 2 and p.duplicates == ()


def test_list_variants_set_params_and_equal_params_are_duplicates(tmp_path: Path) -> None:
    _command_base(tmp_path)
    variants = [
        {"name": "ref", "overrides": {}},
        {"name": "same", "overrides": {"params.lr": 1e-3}},
        {"name": "hi", "overrides": {"params.lr": 1e-2, "params.extra": [1, 2]}},
    ]
    sweep = {"sweep": "l", "base": "base.yaml", "design": "list", "list": variants}
    p = plan(load_sweep(_write(tmp_path, sweep, "s.yaml")))
    assert [r.variant for r in p.runs] == ["ref", "hi"]
    assert p.runs[1].recipe.params == {"lr": 1e-2, "rm": "v1", "extra": (1, 2)}
    assert [d.variant for d in p.duplicates] == ["same"]


def test_optuna_space_over_a_param_passes_check_space(tmp_path: Path) -> None:
    from scalerl.harness.search.space import check_space

    _command_base(tmp_path)
    sweep = {
        "sweep": "o",
        "base": "base.yaml",
        "design": "optuna",
        "optuna": {"space": {"params.lr": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True}},
                   "n_trials": 2, "objective": {"kind": "final", "direction": "maximize"}},
        "fit": {"metric": "val/pass_rate", "axis": "step", "window": {"fraction": 0.1}},
    }  # fmt: skip
    spec = load_sweep(_write(tmp_path, sweep, "s.yaml"))
    check_space(spec)
    bad_space = {"params.my-lr": {"type": "categorical", "choices": [1, 2]}}
    bad = {**sweep, "optuna": {**sweep["optuna"], "space": bad_space}}
    with pytest.raises(ConfigError) as info:
        check_space(load_sweep(_write(tmp_path, bad, "bad.yaml")))
    assert info.value.field == "optuna.space.params.my-lr" and "not an identifier" in info.value.reason


def test_the_params_example_sweeps_kl_coef() -> None:
    p = plan(load_sweep(EXAMPLES / "command-params-sweep.yaml"))
    assert [r.recipe.params for r in p.runs] == [
        {"kl_coef": 0.001, "reward_model": "rm-v2"},
        {"kl_coef": 0.003, "reward_model": "rm-v2"},
    ]
    assert len({r.run_id for r in p.runs}) == 2
    assert sorted(p.runs[0].recipe.resolved()) == ["budget", "knobs", "params", "runner"]


def test_templated_paths_keep_their_sections() -> None:
    runner = {
        "type": "command",
        "argv": ["t.py"],
        "metrics_file": "{task.name}.jsonl",
        "tensorboard_dir": "tb-{eval.k}",
    }
    assert set(_recipe(runner).used_sections()) == {"task", "eval"}
