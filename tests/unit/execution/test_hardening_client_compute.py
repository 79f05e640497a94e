"""Issue 26, second hostile pass, on the writer every path shares (client, trainer, tails,
importers): a compute value that is not a finite number >= 0 (an int past a double, a string,
a boolean, None, a negative: compute is cumulative) is a StoreError naming the run, step and
unit, never a raw OverflowError and never a stored point."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalerl import db
from scalerl.harness import client
from tests.unit.execution.helpers import client_run


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
    store = client_run(tmp_path, monkeypatch)
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
