"""The trl runner's knob mapping against the installed TRL's ``GRPOConfig``: each expressible knob
lands on the right field, each inexpressible one is refused by name, ``unsupported: ignore`` lists
what it dropped, and the kwargs build a real ``GRPOConfig``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from scalerl.harness.errors import ConfigError
from scalerl.harness.execution.runners.base import get_runner
from scalerl.harness.execution.runners.trl import Verifier, char_tokenizer, grpo_config_kwargs, max_steps
from scalerl.harness.recipe.schema import Recipe
from scalerl.harness.rl.tasks import make_task
from scalerl.harness.rl.tokenizer import CharTokenizer

# Every knob on an alternative TRL expresses (the ScaleRL defaults elsewhere).
EXPRESSIBLE = {
    "pipeline": {"choice": "ppo_off_policy"},
    "aggregation": {"choice": "token_avg"},
    "zero_variance_filter": {"choice": "off"},
    "length_control": {"choice": "length_penalty"},
    "no_positive_resampling": {"choice": "off"},
}
REFUSED = [
    ("pipeline", "pipeline_rl", "in-flight"),
    ("aggregation", "prompt_avg", "prompt-level"),
    ("zero_variance_filter", "on", "zero-variance"),
    ("length_control", "interruption", "interruption"),
    ("no_positive_resampling", "on", "pass rate"),
]


def recipe(unsupported: str = "error", budget: dict[str, Any] | None = None, **knobs: Any) -> Recipe:
    return Recipe.model_validate(
        {
            "name": "t",
            "runner": {"type": "trl", "unsupported": unsupported},
            "knobs": {**EXPRESSIBLE, **{k: {"choice": v} for k, v in knobs.items()}},
            "budget": budget or {"value": 30, "unit": "steps"},
        }
    )


def test_registered_and_knobs_stay_in_the_run_identity() -> None:
    assert type(get_runner("trl")).__name__ == "TrlRunner"
    a, b = recipe(loss="cispo"), recipe(loss="dapo")
    assert a.resolved()["knobs"]["loss"]["choice"] == "cispo"
    assert a.resolved() != b.resolved()  # under trl the knobs change the run


@pytest.mark.parametrize(("knob", "choice", "reason"), REFUSED)
def test_an_inexpressible_knob_is_refused_by_name(knob: str, choice: str, reason: str) -> None:
    with pytest.raises(ConfigError) as err:
        grpo_config_kwargs(recipe(**{knob: choice}))
    text = str(err.value)
    assert f"knobs.{knob}.choice" in text and reason in text and "runner.unsupported: ignore" in text


def test_check_specs_refuses_before_submission() -> None:
    from scalerl.harness.execution.runners.trl import check_specs

    ok: Any = SimpleNamespace(typed_recipe=recipe)
    bad: Any = SimpleNamespace(typed_recipe=lambda: recipe(pipeline="pipeline_rl"))
    check_specs([ok])
    with pytest.raises(ConfigError, match=re.escape("knobs.pipeline.choice")):
        check_specs([ok, bad])


def test_cispo_with_sample_averaging_is_refused() -> None:
    with pytest.raises(ConfigError, match=re.escape("knobs.aggregation.choice")):
        grpo_config_kwargs(recipe(loss="cispo", aggregation="sample_avg"))


def test_ignore_lists_every_dropped_knob_of_the_scalerl_baseline() -> None:
    base = Recipe.model_validate({"name": "t", "runner": {"type": "trl", "unsupported": "ignore"}})
    kw, ignored = grpo_config_kwargs(base)
    assert [i.split(":")[0] for i in ignored] == [
        "knobs.pipeline.choice=pipeline_rl",
        "knobs.aggregation.choice=prompt_avg",
        "knobs.zero_variance_filter.choice=on",
        "knobs.length_control.choice=interruption",
        "knobs.no_positive_resampling.choice=on",
    ]
    # What remains is still mapped: CISPO (token-averaged), FP32 head, batch normalisation.
    assert (kw["loss_type"], kw["epsilon_high"], kw["cast_lm_head_to_fp32"], kw["scale_rewards"]) == (
        "cispo", 4.0, True, "batch",
    )  # fmt: skip
    assert kw["steps_per_generation"] == 1 and kw["per_device_train_batch_size"] == 48 * 16


@pytest.mark.parametrize(
    ("loss", "agg", "expected"),
    [
        ("cispo", "token_avg", {"loss_type": "cispo", "epsilon_high": 4.0}),
        ("dapo", "token_avg", {"loss_type": "dapo", "epsilon": 0.2, "epsilon_high": 0.28}),
        ("dapo", "sample_avg", {"loss_type": "grpo", "epsilon": 0.2, "epsilon_high": 0.28}),
        ("grpo", "sample_avg", {"loss_type": "grpo", "epsilon": 0.2, "epsilon_high": 0.2}),
        ("gspo", "sample_avg", {"loss_type": "grpo", "epsilon": 3e-4, "epsilon_high": 4e-4,
                                "importance_sampling_level": "sequence"}),
    ],
)  # fmt: skip
def test_loss_and_aggregation(loss: str, agg: str, expected: dict[str, Any]) -> None:
    kw, ignored = grpo_config_kwargs(recipe(loss=loss, aggregation=agg))
    assert ignored == []
    assert {k: kw.get(k) for k in expected} == expected
    if loss != "gspo":
        assert "importance_sampling_level" not in kw


@pytest.mark.parametrize(("norm", "scale"), [("batch", "batch"), ("prompt", "group"), ("none", "none")])
def test_advantage_norm_and_lm_head(norm: str, scale: str) -> None:
    kw, _ = grpo_config_kwargs(recipe(advantage_norm=norm, lm_head="model_dtype"))
    assert kw["scale_rewards"] == scale and kw["cast_lm_head_to_fp32"] is False


def test_scale_optimizer_generation_and_budget() -> None:
    kw, _ = grpo_config_kwargs(recipe())
    # ScaleRL's 48 prompts x 16 generations, PPO-off-policy-8: 8 minibatches of 96 completions.
    assert (kw["num_generations"], kw["per_device_train_batch_size"], kw["steps_per_generation"]) == (
        16,
        96,
        8,
    )
    assert (kw["max_completion_length"], kw["max_steps"], kw["beta"]) == (14_336, 30, 0.0)
    assert (kw["learning_rate"], kw["adam_epsilon"], kw["warmup_steps"], kw["max_grad_norm"]) == (
        5e-7, 1e-15, 100, 1.0,
    )  # fmt: skip
    assert (kw["temperature"], kw["top_p"], kw["use_vllm"]) == (1.0, 1.0, False)
    assert max_steps(recipe(budget={"value": 1000, "unit": "samples"})) == 11  # ceil(1000 / 96)
    with pytest.raises(ConfigError, match=re.escape("budget.unit")):
        grpo_config_kwargs(recipe(budget={"value": 1.0, "unit": "flops"}))


def test_prompts_must_split_into_the_off_policy_minibatches() -> None:
    r = Recipe.model_validate(
        {"name": "t", "runner": {"type": "trl"}, "knobs": EXPRESSIBLE, "scale": {"prompts_per_batch": 12}}
    )
    with pytest.raises(ConfigError, match=re.escape("scale.prompts_per_batch")):
        grpo_config_kwargs(r)


@pytest.mark.parametrize("loss", ["cispo", "dapo", "gspo", "grpo"])
def test_kwargs_build_the_installed_grpo_config(loss: str, tmp_path: Path) -> None:
    trl = pytest.importorskip("trl")
    agg = "token_avg" if loss == "cispo" else "sample_avg"
    kw, _ = grpo_config_kwargs(recipe(loss=loss, aggregation=agg, advantage_norm="none"))
    cfg = trl.GRPOConfig(**kw, output_dir=str(tmp_path), use_cpu=True, report_to="none")
    for key, value in kw.items():
        assert getattr(cfg, key) == value, key
    assert cfg.generation_batch_size == 48 * 16  # one ScaleRL batch per generation


def test_char_tokenizer_matches_the_tiny_policy_ids() -> None:
    pytest.importorskip("transformers")
    tok, ref = char_tokenizer(), CharTokenizer()
    text = "<bos>a3b4=a3b7</think>7<eos>"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert ids == ref.encode(text)
    assert tok.decode(ids, skip_special_tokens=True) == "a3b4=a3b7</think>7"
    assert (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id) == (ref.pad_id, ref.bos_id, ref.eos_id)


def test_verifier_scores_with_the_task() -> None:
    reward = Verifier(make_task("arith", {}))
    assert reward(["", "", ""], ["a3</think>7", "a3</think>6", "7"], ["7", "7", "7"]) == [1.0, 0.0, 0.0]


def test_ignored_knobs_are_recorded_with_the_run(tmp_path: Path) -> None:
    from scalerl.harness.execution.runners.trl import UNSUPPORTED_FILE, TrlRunner

    ctx: Any = SimpleNamespace(workdir=tmp_path, db_url=None)
    TrlRunner._record_ignored(ctx, ["knobs.pipeline.choice=pipeline_rl: x"])
    assert json.loads((tmp_path / UNSUPPORTED_FILE).read_text()) == {
        "ignored": ["knobs.pipeline.choice=pipeline_rl: x"]
    }


def test_resume_step_is_the_last_complete_checkpoint(tmp_path: Path) -> None:
    runner = get_runner("trl")
    assert runner.resume_step(tmp_path) is None
    for step, complete in ((10, True), (20, True), (30, False)):
        d = tmp_path / "trl" / f"checkpoint-{step}"
        d.mkdir(parents=True)
        if complete:
            (d / "trainer_state.json").write_text("{}")
    assert runner.resume_step(tmp_path) == 20


def test_the_stream_stops_a_superseded_run_without_saving(tmp_path: Path) -> None:
    """A newer attempt took the run over (ctx.superseded): stop after this step and save nothing,
    even at a save_steps boundary (the newer attempt owns output_dir)."""
    import threading

    from scalerl.harness.execution.runners.base import RunContext
    from scalerl.harness.execution.runners.trl import _make_stream
    from scalerl.harness.execution.spec import RunSpec

    rec = recipe()
    spec = RunSpec(
        sweep="s", variant="baseline", knob=None, alternative=None, seed=0, run_id="r-s0",
        recipe=rec.model_dump(mode="json"), workdir=str(tmp_path),
    )  # fmt: skip
    fenced = {"now": False}
    ctx = RunContext(spec, 1, None, tmp_path, threading.Event(), None, superseded=lambda: fenced["now"])  # type: ignore[arg-type]
    stream = _make_stream(ctx, rec, None, [], None, 1000, None)
    args = SimpleNamespace(per_device_train_batch_size=4)
    state = SimpleNamespace(global_step=3, max_steps=100)
    control = SimpleNamespace(should_save=True, should_training_stop=False)  # a save_steps boundary
    stream.on_step_end(args, state, control)
    assert (control.should_save, control.should_training_stop, stream.stopped) == (True, False, False)
    fenced["now"] = True
    stream.on_step_end(args, state, control)
    assert (control.should_save, control.should_training_stop, stream.stopped) == (False, True, True)


def test_an_older_trl_is_refused_by_name_with_the_runner_extra() -> None:
    from scalerl.harness.execution.runners.trl import TRL_RUNNER_FIX, check_trl_version

    for fine in ("1.16.0", "1.16.0.dev0", "1.17", "2.0.1"):
        check_trl_version(fine)
    with pytest.raises(ConfigError, match=r"needs TRL >= 1\.16, and this environment has 1\.15\.0") as err:
        check_trl_version("1.15.0")
    assert TRL_RUNNER_FIX in str(err.value) and "[trl-runner]" in TRL_RUNNER_FIX
