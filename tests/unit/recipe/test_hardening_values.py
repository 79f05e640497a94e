"""Issue 26, second hostile pass, on the recipes: values a config must refuse with its file, line,
field and fix, whatever YAML spelling or section they arrive in.

- NaN and infinities in any typed float field (``lr: 1e309``, ``eps: .inf``): refused, never
  dumped (and hashed) as null;
- a boolean where a number goes (``budget.value: true``): refused, never read as 1;
- nesting deeper than a config ever is: a ConfigError, never a RecursionError traceback;
- two search choices that are one value to the run's hash (``1`` and ``1.0``): refused, never two
  trials of one run;
- a secret in a command runner's ``env`` / ``argv`` or in a recipe's ``params``: refused (it would
  be stored with the run's config and printed by ``scalerl config``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from scalerl.harness.errors import ConfigError
from scalerl.harness.recipe import load_recipe, load_sweep
from scalerl.harness.recipe.yamlio import MAX_DEPTH, parse_yaml
from tests.unit.execution.helpers import REPO

TINY = REPO / "recipes" / "tiny.yaml"
SECRET = "hunter2-secret"


def _recipe(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "r.yaml"
    path.write_text(f"extends: {TINY}\nname: r\n{body}")
    return path


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("optimizer: {lr: 1e309}\n", "optimizer.lr=inf"),
        ("optimizer: {eps: .inf}\n", "optimizer.eps=inf"),
        ("optimizer: {lr: .nan}\n", "optimizer.lr=nan"),
        ("budget: {value: -.inf, unit: steps}\n", "budget.value=-inf"),
    ],
)
def test_a_non_finite_float_is_refused_with_its_line(tmp_path: Path, body: str, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_recipe(_recipe(tmp_path, body))
    msg = str(info.value)
    assert f"r.yaml:3: {field}: not a finite number" in msg and "fix: write a finite number" in msg


@pytest.mark.parametrize(
    "override", ["budget.value=true", "eval.every_steps=true", "optimizer.lr=false", "scale.max_gen_len=true"]
)
def test_a_boolean_where_a_number_goes_is_refused(override: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_recipe(TINY, [override])
    key, _, value = override.partition("=")
    assert f"{key}='{value}': {value} is a boolean, not a number (fix: write a number)" in str(info.value)


def test_booleans_still_fill_boolean_fields_and_numbers_number_fields() -> None:
    recipe = load_recipe(TINY, ["model.gradient_checkpointing=true", "optimizer.lr=1e-3"])
    assert recipe.model.gradient_checkpointing is True and recipe.optimizer.lr == 0.001


@pytest.mark.parametrize("depth", [MAX_DEPTH + 5, 3000])
def test_deep_nesting_is_a_config_error_not_a_recursion_error(depth: int) -> None:
    text = "task: {params: " + "[" * depth + "]" * depth + "}\n"
    with pytest.raises(ConfigError, match=f"nests lists or mappings more than {MAX_DEPTH} levels deep"):
        parse_yaml(text, "deep.yaml")


def test_search_choices_that_hash_alike_are_refused(tmp_path: Path) -> None:
    sweep = {
        "sweep": "s",
        "base": str(TINY),
        "design": "optuna",
        "optuna": {
            "space": {"optimizer.warmup_steps": {"type": "categorical", "choices": [5, 5.0]}},
            "sampler": {"type": "grid"},
            "n_trials": 2,
        },
        "seeds": [0],
    }
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(sweep))
    with pytest.raises(ConfigError, match=r"choices repeat: 5 and 5\.0 are one value .* same run"):
        load_sweep(path)


@pytest.mark.parametrize(
    ("runner", "where"),
    [
        ({"env": {"WANDB_API_KEY": SECRET}}, "runner.env.WANDB_API_KEY"),
        ({"env": {"PGPassWord": SECRET}}, "runner.env.PGPassWord"),
        ({"env": {"DB": f"postgresql://u:{SECRET}@h/db"}}, "runner.env.DB"),
        ({"argv": ["{python}", "t.py", f"--password={SECRET}"]}, "runner.argv[2]"),
    ],
)
def test_a_secret_in_a_command_runner_is_refused(
    tmp_path: Path, runner: dict[str, object], where: str
) -> None:
    section = {"type": "command", "argv": ["{python}", "t.py"], **runner}
    path = _recipe(tmp_path, yaml.safe_dump({"runner": section}))
    with pytest.raises(ConfigError) as info:
        load_recipe(path)
    msg = str(info.value)
    assert f"{where} holds a password, token or other secret" in msg and SECRET not in msg


def test_a_secret_named_param_is_refused_and_not_echoed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_recipe(_recipe(tmp_path, f"params: {{hf_token: {SECRET}}}\n"))
    msg = str(info.value)
    assert "params key 'hf_token' names a secret" in msg and SECRET not in msg


def test_ordinary_env_and_params_still_load(tmp_path: Path) -> None:
    section = {
        "type": "command",
        "argv": ["{python}", "t.py", "--max-tokens", "512"],
        "env": {"RUN": "{run_id}"},
    }
    path = _recipe(
        tmp_path, yaml.safe_dump({"runner": section, "params": {"max_tokens": 512, "eos_token": "x"}})
    )
    assert load_recipe(path).params["max_tokens"] == 512


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("scale: {prompts_per_batch: 1e18}\n", "sequences per step, more than 1048576"),
        ("scale: {prompts_per_batch: 4096, generations_per_prompt: 4096}\n", "16777216 sequences per step"),
        ("scale: {max_gen_len: 1e9}\n", "must be <= 1048576"),
    ],
)
def test_a_batch_no_machine_holds_is_refused_at_the_recipe(tmp_path: Path, body: str, message: str) -> None:
    # Probe Y9: accepted before, and the trainer would try to allocate it.
    with pytest.raises(ConfigError, match=message):
        load_recipe(_recipe(tmp_path, body))
