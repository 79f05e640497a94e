"""Issue 26, second hostile pass, on the writer every path shares (client, trainer, tails,
importers): a compute value that is not a finite number >= 0 (an int past a double, a string,
a boolean, None, a negative: compute is cumulative) is a StoreError naming the run, step and
unit, never a raw OverflowError and never a stored point."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalerl import db
from scalerl.harness import client


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        (10**400, "<an int past a double's range>"),
        ("many", "'many'"),
        (True, "True"),
        (None, "None"),
        (-5.0, "-5.0"),
    ],
    ids=["int-past-a-double", "str", "bool", "none", "negative"],
)
def test_a_compute_value_that_is_not_a_finite_number_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, raw: object, shown: str
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = db.open_store(url, spool_dir=tmp_path / "spool")
    store.ensure_sweep("s", {})
    store.register_run(db.RunRecord("r1", "s", "baseline", 0, {}, "h"))
    attempt = store.start_attempt("r1")
    monkeypatch.setenv("SCALERL_RUN_ID", "r1")
    monkeypatch.setenv("SCALERL_ATTEMPT", str(attempt))
    monkeypatch.setenv("SCALERL_DB_URL", url)
    monkeypatch.setenv("SCALERL_SPOOL_DIR", str(tmp_path / "spool"))
    try:
        with pytest.raises(db.StoreError) as info:
            client.log(3, {"val/pass_rate": 0.5}, compute={"flops": raw})  # type: ignore[dict-item]
        client.log(4, {"val/pass_rate": 0.6}, compute={"flops": 1e12})
    finally:
        client.close()
    assert str(info.value).startswith(f"run 'r1' step 3: compute flops={shown} must be finite")
    df = db.curves(store, "s", "val/pass_rate")
    assert df["step"].tolist() == [4]  # the refused point was not stored; the next one was
    store.close()
