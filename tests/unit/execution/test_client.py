"""scalerl.harness.client: a lab's script logs points (with their sample counts) into the run's store."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalerl import db
from scalerl.harness import client
from scalerl.harness.errors import ConfigError
from tests.unit.execution.helpers import client_run


def test_client_log_carries_n_into_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = client_run(tmp_path, monkeypatch)
    try:
        client.log(0, {"val/pass_rate": 0.25, "loss": 1.5}, compute={"samples": 64}, n={"val/pass_rate": 256})
        client.log(1, {"val/pass_rate": 0.5}, compute={"samples": 128})
    finally:
        client.close()
    df = db.curves(store, "s", "val/pass_rate")
    assert df["value"].tolist() == [0.25, 0.5] and df["samples"].tolist() == [64.0, 128.0]
    assert df["n"].tolist()[0] == 256.0 and df["n"].isna().tolist() == [False, True]
    assert db.curves(store, "s", "loss")["n"].isna().all()
    store.close()


def test_only_rank_0_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    """On rank 1 (SLURM_PROCID / RANK) log() is a no-op: it needs no run and opens no store."""
    from scalerl.harness import client
    from scalerl.harness.execution.rank import process_rank

    monkeypatch.delenv("SCALERL_RUN_ID", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.setenv("SLURM_PROCID", "1")
    assert process_rank() == 1
    client.log(3, {"val/pass_rate": 0.5})  # would raise ConfigError on rank 0 without a run
    assert client._writer is None
    monkeypatch.setenv("RANK", "0")  # torchrun's RANK wins over srun's task id
    assert process_rank() == 0
    with pytest.raises(ConfigError):
        client.log(3, {"val/pass_rate": 0.5})
