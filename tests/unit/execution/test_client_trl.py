"""scalerl.harness.client_trl: the TrainerCallback streams a (TRL) Trainer's logs into an attached
run, driven through transformers' own CallbackHandler, TrainerState and TrainerControl. The
arguments are a stand-in holding the one field the callback reads (``world_size``): building real
TrainingArguments costs seconds of torch set-up for nothing the callback uses."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from scalerl import db
from scalerl.harness import client
from scalerl.harness.client_trl import scalerl_callback
from scalerl.harness.errors import ConfigError
from scalerl.harness.execution import attach

transformers = pytest.importorskip("transformers")


def test_the_callback_writes_logged_values_with_cumulative_compute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in ("SCALERL_RUN_ID", "SCALERL_ATTEMPT", "RANK", "SLURM_PROCID"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("SCALERL_SPOOL_DIR", str(tmp_path / "spool"))
    monkeypatch.setattr(client, "_active", None)
    monkeypatch.setattr(attach, "code_dir", lambda: tmp_path)  # provenance outside any repository
    from transformers.trainer_callback import CallbackHandler, TrainerControl, TrainerState

    url = f"sqlite:///{tmp_path / 'store.db'}"
    args = SimpleNamespace(world_size=2)  # two devices: gpu_hours = 2 x wall time
    state, control = TrainerState(), TrainerControl()
    with client.init(
        sweep="trl", knob="loss", alternative="dapo", seed=0, config={"lr": 1e-6}, db=url
    ) as run:
        handler = CallbackHandler([scalerl_callback(run, n_params=1000)], None, None, None, None)
        handler.on_train_begin(args, state, control)
        # What GRPOTrainer logs: its metrics and num_tokens (cumulative), then Trainer's summary.
        for step, logs in (
            (1, {"reward": 0.25, "loss": 0.5, "num_tokens": 100.0, "epoch": 0.1}),
            (2, {"reward": 0.5, "loss": 0.25, "num_tokens": 250.0, "epoch": 0.2, "eval_reward": 0.4}),
            (2, {"train_runtime": 3.0, "train_loss": 0.4, "total_flos": 0.0, "epoch": 0.2}),
        ):
            state.global_step = step
            handler.on_log(args, state, control, logs=logs)
        handler.on_train_end(args, state, control)
    assert run.status == "completed"
    store = db.open_store(url, create=False)
    try:
        reward = db.curves(store, "trl", "reward")
        assert reward["step"].tolist() == [1, 2] and reward["value"].tolist() == [0.25, 0.5]
        assert reward["tokens"].tolist() == [100.0, 250.0]
        assert reward["flops"].tolist() == [8.0 * 1000 * 100, 8.0 * 1000 * 250]
        wall = reward["wall_s"].tolist()
        assert 0 < wall[0] < wall[1] and reward["gpu_hours"].tolist() == pytest.approx(
            [2 * w / 3600 for w in wall]
        )
        assert db.curves(store, "trl", "eval_reward")["value"].tolist() == [0.4]
        for name in ("num_tokens", "epoch", "train_runtime", "train_loss", "total_flos"):
            assert db.curves(store, "trl", name).empty, name
    finally:
        store.close()


def test_the_callback_refuses_what_is_not_a_run() -> None:
    with pytest.raises(ConfigError, match=r"needs the Run client\.init returned, not dict"):
        scalerl_callback({})  # type: ignore[arg-type]


def test_the_callback_stops_a_superseded_single_process_run_and_only_warns_under_ranks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in ("SCALERL_RUN_ID", "SCALERL_ATTEMPT", "SCALERL_DB_URL", "RANK", "SLURM_PROCID"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("SCALERL_SPOOL_DIR", str(tmp_path / "spool"))
    monkeypatch.setattr(client, "_active", None)
    monkeypatch.setattr(attach, "code_dir", lambda: tmp_path)
    from transformers.trainer_callback import TrainerControl

    url = f"sqlite:///{tmp_path / 'store.db'}"
    first = client.init(sweep="s", seed=0, config={"lr": 1.0}, db=url)
    callback = scalerl_callback(first)
    one, many = SimpleNamespace(world_size=1), SimpleNamespace(world_size=4)
    control = TrainerControl(should_save=True)  # a save_steps boundary
    first.log(0, {"val/pass_rate": 0.1}, compute={"flops": 1.0})
    first.flush()
    callback.on_step_end(one, None, control)
    assert (control.should_save, control.should_training_stop) == (True, False)
    monkeypatch.setattr(client, "_active", None)
    second = client.init(sweep="s", seed=0, config={"lr": 1.0}, db=url, resume_step=0)
    first.log(1, {"val/pass_rate": 0.2}, compute={"flops": 2.0})
    first.flush()
    ranks = TrainerControl(should_save=True)
    callback.on_step_end(many, None, ranks)  # ranks must agree to stop: only a warning
    assert (ranks.should_save, ranks.should_training_stop) == (True, False)
    callback.on_step_end(one, None, control)
    assert (control.should_save, control.should_training_stop) == (False, True)
    assert first.finish() == "superseded"
    second.log(1, {"val/pass_rate": 0.3}, compute={"flops": 2.0})
    assert second.finish() == "completed"
