"""Command-runner templating: placeholders from run fields and the resolved config."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from scalerl.harness.errors import ConfigError
from scalerl.harness.execution.runners.base import RunContext
from scalerl.harness.execution.runners.command import build_command, check_templates
from scalerl.harness.execution.runners.template import Template, flatten
from scalerl.harness.execution.spec import RunSpec
from scalerl.harness.recipe.schema import Recipe


def _template() -> Template:
    config = {"knobs": {"loss": {"choice": "dapo", "params": {"eps_low": 0.2}}}, "budget": {"value": 40.0}}
    return Template({"seed": 3, "run_id": "abc-s3"}, config)


def test_renders_fields_dotted_config_and_literal_braces() -> None:
    t = _template()
    assert t.render("--loss={knobs.loss.choice}", where="argv[0]") == "--loss=dapo"
    assert t.render("{knobs.loss.params.eps_low}", where="x") == "0.2"
    assert t.render("{budget.value}", where="x") == "40"  # integral float -> "40", not "40.0"
    assert t.render("run-{run_id}-seed{seed}", where="x") == "run-abc-s3-seed3"
    assert t.render("{{literal}}", where="x") == "{literal}"


def test_unknown_placeholder_names_it_and_lists_valid_ones() -> None:
    with pytest.raises(ConfigError) as err:
        _template().render_all(["train.py", "--lr={optim.lr}"], where="runner.argv")
    msg = str(err.value)
    assert "runner.argv[1]='--lr={optim.lr}'" in msg
    assert "unknown placeholder {optim.lr}" in msg
    assert "seed, run_id, budget.value, knobs.loss.choice" in msg


def test_format_specs_are_refused() -> None:
    with pytest.raises(ConfigError, match="format specs"):
        _template().render("{seed:03d}", where="x")


def test_flatten_keeps_lists_as_leaves() -> None:
    assert flatten({"a": {"b": [1, 2], "c": {}}}) == {"a.b": [1, 2], "a.c": {}}


def test_params_render_with_their_types() -> None:
    config = {"params": {"lr": 0.0003, "steps": 3, "half": 3.0, "rm": "rm-v2", "on": True, "xs": [1, "a"]}}
    t = Template({"seed": 0}, config)
    got = t.render_all(["{params.lr}", "{params.steps}", "{params.half}", "{params.rm}", "{params.on}",
                        "{params.xs}"], where="runner.argv")  # fmt: skip
    assert got == ["0.0003", "3", "3", "rm-v2", "true", '[1, "a"]']


def test_unknown_param_names_the_template_and_the_declared_params() -> None:
    t = Template({"seed": 0}, {"params": {"lr": 1, "kl_coef": 2}, "budget": {"value": 1}})
    with pytest.raises(ConfigError) as err:
        t.render_all(["train.py", "--x={params.nope}"], where="runner.argv")
    assert err.value.field == "runner.argv[1]" and err.value.value == "--x={params.nope}"
    assert err.value.reason == "unknown placeholder {params.nope}"
    assert (
        err.value.fix == "declare it under params: in the recipe, or use a declared one (params: kl_coef, lr)"
    )
    with pytest.raises(ConfigError) as none:
        Template({}, {"budget": {"value": 1}}).render("{params.lr}", where="runner.env.LR")
    assert none.value.fix is not None and none.value.fix.endswith("(params: none)")


def _spec(tmp_path: Path, runner: dict[str, Any], params: dict[str, Any]) -> RunSpec:
    recipe = Recipe.model_validate({"name": "c", "runner": runner, "params": params})
    return RunSpec(sweep="s", variant="baseline", knob=None, alternative=None, seed=2, run_id="r-s2",
                   recipe=recipe.model_dump(mode="json"), workdir=str(tmp_path))  # fmt: skip


def test_build_command_templates_params_into_argv_and_env(tmp_path: Path) -> None:
    runner = {"type": "command", "argv": ["t.py", "--kl-coef", "{params.kl_coef}", "--seed", "{seed}"],
              "env": {"RM": "{params.reward_model}"}}  # fmt: skip
    spec = _spec(tmp_path, runner, {"kl_coef": 0.001, "reward_model": "rm-v2"})
    ctx = RunContext(spec, 1, None, tmp_path, threading.Event(), None)  # type: ignore[arg-type]
    argv, env, _ = build_command(ctx)
    assert argv == ["t.py", "--kl-coef", "0.001", "--seed", "2"]
    assert env["RM"] == "rm-v2" and env["SCALERL_RUN_ID"] == "r-s2"


def test_check_templates_rejects_an_undeclared_param_before_submission(tmp_path: Path) -> None:
    runner = {"type": "command", "argv": ["t.py"], "env": {"LR": "{params.lr_typo}"}}
    with pytest.raises(ConfigError) as err:
        check_templates(_spec(tmp_path, runner, {"lr": 0.1}))
    assert (err.value.field, err.value.value) == ("runner.env.LR", "{params.lr_typo}")
    assert err.value.fix is not None and "(params: lr)" in err.value.fix
