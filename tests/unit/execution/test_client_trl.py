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
