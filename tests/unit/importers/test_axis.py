"""A compute axis the run logs as a metric (``--axis-column``, ``--axis-cumulative``): the join by
step, the running total, the unit a name stands for, and the defaults an import leaves its sweep."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from scalerl import db
from scalerl.harness.cli import main
from scalerl.harness.errors import ImportFormatError
from scalerl.harness.importers.axis import on_logged_axis
from scalerl.harness.importers.base import (
    ImportedCurve,
    ImportLosses,
    ImportResult,
    losses_kept,
    read_curves,
    read_file,
)
from scalerl.harness.importers.ingest import import_defaults, infer_unit


def curve(metric: str, steps: list[int], values: list[float], run: str = "r") -> ImportedCurve:
    st = np.asarray(steps, dtype=np.int64)
    return ImportedCurve("src", run, metric, "step", st, st.astype(float), np.asarray(values, dtype=float))


def test_points_take_the_axis_logged_at_their_step() -> None:
    result = ImportResult(
        "src",
        "test",
        (
            curve("val", [0, 2, 4], [0.1, 0.2, 0.3]),
            curve("perf/gpu_hours", [1, 2, 3, 4], [0.5, 1.0, 1.5, 2.0]),
        ),
        ImportLosses(),
    )
    (placed,) = on_logged_axis([result], "perf/gpu_hours")
    (val,) = placed.curves  # the axis left the metrics: its values are the x now
    assert val.x_name == "perf/gpu_hours" and not val.x_cumulative
    assert val.steps.tolist() == [2, 4] and val.x.tolist() == [1.0, 2.0] and val.values.tolist() == [0.2, 0.3]
    # Step 0 has no gpu_hours logged: dropped and counted, never placed at a guessed compute.
    assert placed.losses.counts == {"bad-axis": 1}
    assert "run 'r' metric 'val' step 0: no 'perf/gpu_hours' there" in placed.losses.describe()


def test_running_total_of_a_per_step_count() -> None:
    tokens = curve("perf/total_num_tokens", [1, 2, 3, 4], [100, 120, 80, 100])
    result = ImportResult("src", "test", (curve("val", [0, 2, 4], [0.1, 0.2, 0.3]), tokens), ImportLosses())
    # As logged it falls (120 -> 80): a per-step count. The run loses its points, counted against
    # it with the fix (issue 40: raised, it refused imports that left the run out).
    (falling,) = on_logged_axis([result], "perf/total_num_tokens")
    assert [len(c) for c in falling.curves] == [0] and falling.losses.counts == {"bad-axis-column": 3}
    assert re.search(
        r"falls from 120 at step 2 to 80 at step 3.*--axis-cumulative", falling.losses.describe()
    )
    assert not losses_kept(falling, {"r"})
    (placed,) = on_logged_axis([result], "perf/total_num_tokens", cumulative=True)
    (val,) = placed.curves
    # Step 0 (verl's validation before training) sits at no compute; steps 2 and 4 at the sums.
    assert val.x.tolist() == [0.0, 220.0, 400.0] and val.x_cumulative
    assert not placed.losses


def test_a_run_without_the_axis_loses_its_points_and_an_unlogged_axis_is_named() -> None:
    result = ImportResult(
        "src",
        "test",
        (
            curve("val", [1, 2], [0.1, 0.2], run="a"),
            curve("tokens", [1, 2], [5, 5], run="a"),
            curve("val", [1, 2, 3], [0.1, 0.2, 0.3], run="b"),
        ),
        ImportLosses(),
    )
    (placed,) = on_logged_axis([result], "tokens", cumulative=True)
    # b's curve stays, empty, so that the import can still leave the run out (and its losses).
    assert [(c.run, c.x.tolist()) for c in placed.curves] == [("a", [5.0, 10.0]), ("b", [])]
    assert placed.losses.counts == {"bad-axis": 3}
    assert not losses_kept(placed, {"b"}) and losses_kept(placed, {"a"}).counts == {"bad-axis": 3}
    assert "run 'b' metric 'val': the run logs no 'tokens'" in placed.losses.describe()
    with pytest.raises(ImportFormatError, match=r"no run logs the axis 'perf/flops'.*one of: tokens, val"):
        on_logged_axis([result], "perf/flops")
    negative = ImportResult("src", "t", (curve("val", [1], [0.1]), curve("n", [1], [-3.0])), ImportLosses())
    (refused,) = on_logged_axis([negative], "n", cumulative=True)
    assert refused.losses.counts == {"bad-axis-column": 1}
    assert "'n' is -3 at step 1; a per-step count is never negative" in refused.losses.describe()


@pytest.mark.parametrize(
    ("name", "unit"),
    [
        ("perf/gpu_hours", "gpu_hours"),
        ("perf/total_num_tokens", "tokens"),
        ("train/flops", "flops"),
        ("num_samples", "samples"),
        ("accumulated_training_time", "wall_s"),
        ("perf/time_per_step", "wall_s"),  # its running total is the wall time
        ("Relative Time (Process)", "wall_s"),
        ("_step", "step"),
        ("tokens", "tokens"),
    ],
)
def test_the_unit_a_name_stands_for(name: str, unit: str) -> None:
    assert infer_unit(name) == unit


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("perf/throughput", "is a rate"),
        ("tokens_per_second", "is a rate"),
        ("perf/mfu/actor", "is a rate"),
        ("perf/max_memory_allocated_gb", "its name names no compute unit"),
        ("wall_hours", "it could be gpu_hours or wall_s"),
    ],
)
def test_names_that_are_no_amount_or_ambiguous_name_the_flag(name: str, needle: str) -> None:
    with pytest.raises(ImportFormatError, match="--axis-unit") as err:
        infer_unit(name)
    assert needle in str(err.value)


def test_import_defaults() -> None:
    assert import_defaults(["val/acc"], ["tokens"]) == ({"metric": "val/acc", "axis": "tokens"}, None)
    # The reference trainer's metric, then the one validation metric, then verl's val-core one.
    assert import_defaults(["val/pass_rate", "val/x"], ["wall_s"])[0] == {
        "metric": "val/pass_rate",
        "axis": "gpu_hours",  # a time axis fills gpu_hours too; fits have no wall_s axis
    }
    assert import_defaults(["critic/score", "val-core/gsm8k/acc/mean@1"], ["step"])[0]["metric"] == (
        "val-core/gsm8k/acc/mean@1"
    )
    verl = ["val-aux/gsm8k/reward/mean@1", "val-core/gsm8k/acc/mean@1", "critic/score"]
    assert import_defaults(verl, ["tokens"])[0]["metric"] == "val-core/gsm8k/acc/mean@1"
    # --metric names the default; a glob names none.
    assert import_defaults(["a", "b"], ["step"], "b")[0]["metric"] == "b"
    defaults, note = import_defaults(["a", "b"], ["step", "tokens"], "*")
    assert defaults == {} and note is not None
    assert "no default axis: the runs fill step, tokens" in note and "no default metric among 2" in note


def write_verl(path: Path, tokens_per_step: int, ceiling: float, steps: int = 40) -> None:
    """verl's JSON lines: validation before training at step 0, then per-step token counts."""
    rows = [{"step": 0, "val-core/gsm8k/acc/mean@1": 0.05}]
    for s in range(1, steps + 1):
        c = s * tokens_per_step
        row: dict[str, float] = {"step": s, "perf/total_num_tokens": tokens_per_step, "critic/score": 0.1}
        row["val-core/gsm8k/acc/mean@1"] = 0.05 + (ceiling - 0.05) / (1 + (8 * tokens_per_step / c) ** 2)
        rows.append(row)
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_jsonl_running_total_and_the_defaults_the_sweep_keeps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "base_s0" / "metrics.jsonl"
    write_verl(f, 1000, 0.6)
    (val,) = read_curves(f, metric="val-core/*", axis_column="perf/total_num_tokens", axis_cumulative=True)
    assert val.steps[:3].tolist() == [0, 1, 2] and val.x[:3].tolist() == [0.0, 1000.0, 2000.0]
    names = {c.metric for c in read_file(f, axis_column="perf/total_num_tokens", axis_cumulative=True).curves}
    assert names == {"critic/score", "val-core/gsm8k/acc/mean@1"}

    url = f"sqlite:///{tmp_path / 's.db'}"
    args = ["import", str(f), "--sweep", "v", "--db", url, "--axis-column", "perf/total_num_tokens"]
    assert main([*args, "--axis-cumulative"]) == 0
    out = capsys.readouterr().out
    assert (
        "sweep 'v' defaults for fit/report/forecast: metric 'val-core/gsm8k/acc/mean@1' on axis 'tokens'"
        in out
    )
    store = db.open_store(url)
    try:
        spec = db.queries.sweeps(store).set_index("name").loc["v", "spec"]
        points = db.queries.curves(store, "v", "val-core/gsm8k/acc/mean@1")
        (run_id,) = db.queries.runs(store, "v")["run_id"]
        info = store.get_run(str(run_id))
    finally:
        store.close()
    assert info is not None and info.config["axis"] == "perf/total_num_tokens"
    assert info.config["axis_cumulative"] is True
    assert spec["fit"] == {"metric": "val-core/gsm8k/acc/mean@1", "axis": "tokens"}
    assert points["tokens"].tolist()[:3] == [0.0, 1000.0, 2000.0] and points["tokens"].max() == 40_000
    # The report takes the stored metric and axis; on an axis no point carries it stops, saying
    # what is missing, and writes nothing.
    page = tmp_path / "v.html"
    assert main(["report", "v", "-o", str(page), "--axis", "flops", "--db", url]) == 6
    err = capsys.readouterr().err
    assert "no fits for metric 'val-core/gsm8k/acc/mean@1' on axis 'flops'" in err
    assert "run `scalerl fit v --metric val-core/gsm8k/acc/mean@1 --axis AXIS`" in err
    assert "its points carry: tokens, step" in err and not page.exists()
    assert main(["report", "v", "-o", str(page), "--db", url]) == 0
    assert "fits: computed" in capsys.readouterr().out
    assert "against compute (tokens)" in page.read_text(encoding="utf-8")
    # --axis-cumulative alone names what it needs.
    assert main(["import", str(f), "--sweep", "v", "--db", url, "--axis-cumulative"]) == 7
    assert "no --axis-column names one" in capsys.readouterr().err


def test_a_later_import_replaces_the_defaults_and_a_recipe_sweep_keeps_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "base_s0" / "metrics.jsonl"
    write_verl(f, 1000, 0.6)
    url = f"sqlite:///{tmp_path / 's.db'}"

    def fit_section(sweep: str) -> dict[str, object]:
        store = db.open_store(url)
        try:
            return dict(db.queries.sweeps(store).set_index("name").loc[sweep, "spec"]["fit"])
        finally:
            store.close()

    assert main(["import", str(f), "--sweep", "v", "--db", url]) == 0
    assert fit_section("v") == {"metric": "val-core/gsm8k/acc/mean@1", "axis": "step"}
    tokens = ["--axis-column", "perf/total_num_tokens", "--axis-cumulative"]
    assert main(["import", str(f), "--sweep", "v", "--metric", "critic/score", *tokens, "--db", url]) == 0
    assert fit_section("v") == {"metric": "critic/score", "axis": "tokens"}
    # A sweep a recipe created keeps its fit section: the import only adds runs to it.
    store = db.open_store(url)
    store.ensure_sweep("loo", {"design": "loo", "fit": {"metric": "val/pass_rate", "axis": "flops"}})
    store.close()
    capsys.readouterr()
    assert main(["import", str(f), "--sweep", "loo", *tokens, "--db", url]) == 0
    assert (
        "'val/pass_rate' on axis 'flops' (kept: the sweep was not created by an import)"
        in capsys.readouterr().out
    )
    assert fit_section("loo") == {"metric": "val/pass_rate", "axis": "flops"}
