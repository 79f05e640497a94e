"""Issue 15 items 5 and 6: what an import loses is counted per reason, never dropped silently.

Each test corrupts a copy of a real file (tmp_path) the way a real export goes wrong, and pins the
count, the place and what is kept.
"""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
from pathlib import Path

import pytest

from scalerl import db
from scalerl.harness.cli import main
from scalerl.harness.errors import ImportFormatError
from scalerl.harness.importers import read_curves
from scalerl.harness.importers.base import LOSS_POLICY, read_file

REAL = Path("/work/shared/data/real-rl-curves")
TB = REAL / "tensorboard-verl-async" / "q3b_fsdp_base.tfevents"  # 6,260 records, 6,259 points
VERL = REAL / "verl-fork-parsed" / "dp_2_gpu_20251110_100611_parsed.csv"  # 116 rows, 23 metrics
WANDB = REAL / "wandb-export-deep-grpo" / "loss_weight.csv"
SPEEDRL = REAL / "speedrl-dapo-json" / "1.5B-Math-DAPO-NuminaMath-N24" / "processed_metrics.json"
REWARD = "critic/rewards/mean"


def _copy(src: Path, tmp_path: Path, name: str | None = None) -> Path:
    dst = tmp_path / (name or src.name)
    shutil.copyfile(src, dst)
    return dst


def _rows(path: Path) -> list[list[str]]:
    with path.open(newline="") as fh:
        return list(csv.reader(fh))


def _write_rows(path: Path, rows: list[list[str]]) -> None:
    with path.open("w", newline="") as fh:
        csv.writer(fh).writerows(rows)


def test_tensorboard_crc_failure_skips_one_record_and_says_where(tmp_path: Path) -> None:
    path = _copy(TB, tmp_path)
    data = bytearray(path.read_bytes())
    mid = len(data) // 2
    data[mid : mid + 4] = bytes(b ^ 0xFF for b in data[mid : mid + 4])
    path.write_bytes(bytes(data))
    with pytest.raises(ImportFormatError) as err:
        read_curves(path)
    assert "crc-failure 1 (record 3131 (byte 178252): header checksum)" in str(err.value)
    assert str(path) in str(err.value) and "--allow-partial" in str(err.value)
    # The reader resynchronises on the next sound record: one point of 6,259 is lost, not half.
    result = read_file(path)
    assert result.points == 6258 and dict(result.losses.counts) == {"crc-failure": 1}


def test_tensorboard_truncated_to_half_counts_the_cut_record(tmp_path: Path) -> None:
    path = _copy(TB, tmp_path)
    path.write_bytes(TB.read_bytes()[: TB.stat().st_size // 2])
    with pytest.raises(ImportFormatError, match=r"truncated-tail 1 \(record 3131 \(byte 178252\)"):
        read_curves(path)
    result = read_file(path)
    assert result.points == 3129 and dict(result.losses.counts) == {"truncated-tail": 1}


def test_duplicate_csv_column_is_an_error_naming_both_positions(tmp_path: Path) -> None:
    rows = _rows(VERL)
    j = rows[0].index(REWARD)
    # A second "critic/rewards/mean" column (holding critic/rewards/max) at the end.
    dup = [[*r, r[j + 1]] for r in rows]
    dup[0][-1] = REWARD
    path = tmp_path / VERL.name
    _write_rows(path, dup)
    with pytest.raises(ImportFormatError) as err:
        read_curves(path)
    assert f"{path}: duplicate-column 1 (column '{REWARD}' at 6 and 25)" in str(err.value)
    # --allow-partial: the first column is kept, the repeat is counted.
    curves = read_curves(path, allow_partial=True)
    reward = [c for c in curves if c.metric == REWARD]
    assert len(curves) == 23 and len(reward) == 1
    assert reward[0].values.tolist() == read_curves(VERL, metric=REWARD)[0].values.tolist()


def test_duplicate_wandb_column_keeps_the_first(tmp_path: Path) -> None:
    rows = _rows(WANDB)
    dup = [[*r, r[1]] for r in rows]
    path = tmp_path / WANDB.name
    _write_rows(path, dup)
    with pytest.raises(ImportFormatError, match=r"duplicate-column 1 \(column '.*mean@1' at 2 and 14\)"):
        read_curves(path)
    assert sum(len(c) for c in read_curves(path, allow_partial=True)) == 2277


def test_duplicate_step_keeps_the_last_and_counts_the_rest(tmp_path: Path) -> None:
    rows = _rows(VERL)
    j = rows[0].index(REWARD)
    again = list(rows[50])  # step 50 logged twice in a row: no restart in between
    again[j] = "0.99"
    path = tmp_path / VERL.name
    _write_rows(path, [*rows[:51], again, *rows[51:]])
    n_logged = sum(1 for c in again[1:] if c.strip())  # metrics that row logs
    with pytest.raises(ImportFormatError) as err:
        read_curves(path)
    assert f"duplicate-step {n_logged} (line 51: step 50, " in str(err.value)
    result = read_file(path)
    assert dict(result.losses.counts) == {"duplicate-step": n_logged} and n_logged == 21
    reward = next(c for c in result.curves if c.metric == REWARD)
    assert len(reward) == 116 and reward.values[reward.steps.tolist().index(50)] == 0.99
    assert reward.relogged == ()


def test_a_step_logged_again_after_the_steps_went_back_is_a_resume_not_a_loss(tmp_path: Path) -> None:
    rows = _rows(VERL)
    j = rows[0].index(REWARD)
    relogged = [list(r) for r in rows[50:53]]  # steps 50-52 logged again after a restart
    for r in relogged:
        r[j] = "0.99"
    path = tmp_path / VERL.name
    _write_rows(path, [*rows, *relogged])
    result = read_file(path)
    assert not result.losses  # the resume rule: nothing lost, nothing refused
    reward = next(c for c in result.curves if c.metric == REWARD)
    assert reward.relogged == (50, 51, 52) and len(reward) == 116
    at = reward.steps.tolist().index
    assert float(rows[50][j]) != 0.99  # the later value replaced the first one logged
    assert [reward.values[at(s)] for s in (49, 50, 52)] == [float(rows[49][j]), 0.99, 0.99]


@pytest.mark.parametrize("bad", ["nan", "inf", "-inf"])
def test_nan_and_inf_are_treated_alike(tmp_path: Path, bad: str) -> None:
    rows = _rows(VERL)
    j = rows[0].index(REWARD)
    rows[10][j] = bad  # line 11, step 10
    path = tmp_path / VERL.name
    _write_rows(path, rows)
    with pytest.raises(ImportFormatError, match=rf"non-finite-value 1 \(line 11: {REWARD} -?(nan|inf)\)"):
        read_curves(path)
    # Kept (not dropped) with --allow-partial: the value is there as logged.
    reward = read_curves(path, metric=REWARD, allow_partial=True)[0]
    assert len(reward) == 116
    got = reward.values[reward.steps.tolist().index(10)]
    assert (math.isnan(got) and bad == "nan") or got == float(bad)


def test_jsonl_nan_and_infinity_are_counted_alike(tmp_path: Path) -> None:
    lines = SPEEDRL.read_text().splitlines()
    key = "val-core/MATH500-Qwen-instruct/acc/mean@1"
    for i, literal in ((1, "NaN"), (2, "Infinity")):
        obj = json.loads(lines[i])
        obj[key] = 0.0
        lines[i] = json.dumps(obj).replace(f'"{key}": 0.0', f'"{key}": {literal}')
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = read_file(path, metric=key)
    assert dict(result.losses.counts) == {"non-finite-value": 2}
    assert result.losses.examples["non-finite-value"] == (f"line 2: {key} nan", f"line 3: {key} inf")
    assert len(result.curves[0]) == 34


@pytest.mark.parametrize(
    ("step", "why"),
    [
        ("inf", "step inf is infinite"),
        ("nan", "step nan is not a number"),
        ("-3", "step -3.0 is negative"),
        ("7.5", "step 7.5 is not a whole number"),
        ("1e30", "step 1e+30 is too large"),
    ],
)
def test_bad_step_is_a_per_row_loss(tmp_path: Path, step: str, why: str) -> None:
    rows = _rows(VERL)
    rows[10][0] = step
    path = tmp_path / VERL.name
    _write_rows(path, rows)
    with pytest.raises(ImportFormatError, match=rf"bad-step 1 \(line 11: {re.escape(why)}\)"):
        read_curves(path)
    reward = read_curves(path, metric=REWARD, allow_partial=True)[0]
    assert len(reward) == 115 and 10 not in reward.steps.tolist()


def test_jsonl_infinite_step(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"step": 1, "r": 0.1}\n{"step": Infinity, "r": 0.2}\n{"step": 3, "r": 0.3}\n')
    result = read_file(path)
    assert result.losses.examples == {"bad-step": ("line 2: step inf is infinite",)}
    assert result.curves[0].steps.tolist() == [1, 3]


def test_metric_filter_counts_only_the_losses_it_keeps(tmp_path: Path) -> None:
    rows = _rows(VERL)
    rows[10][rows[0].index("critic/vf_loss")] = "nan"
    path = tmp_path / VERL.name
    _write_rows(path, rows)
    assert not read_file(path, metric=REWARD).losses
    assert dict(read_file(path, metric="critic/*").losses.counts) == {"non-finite-value": 1}


def _store_has(url: str, sweep: str) -> bool:
    store = db.open_store(url)
    try:
        return sweep in set(db.queries.sweeps(store)["name"])
    finally:
        store.close()


def test_cli_fails_writes_nothing_then_allow_partial_imports_the_sound_part(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    rows = _rows(VERL)
    j = rows[0].index(REWARD)
    rows[10][j], rows[11][j] = "nan", "inf"  # steps 10 and 11
    rows[20][0] = "inf"  # an inf step: a per-row loss, not an overflow
    bad = tmp_path / VERL.name
    _write_rows(bad, rows)
    clean = _copy(REAL / "verl-fork-parsed" / "dp_2_gpu_20251111_044742_parsed.csv", tmp_path)
    args = ["import", str(clean), str(bad), "--sweep", "s", "--metric", REWARD, "--db", url]

    assert main(args) == 7
    out, err = capsys.readouterr()
    assert f"{clean}: 1 curve(s), 116 point(s)\n" in out
    assert (
        f"{bad}: 1 curve(s), 115 point(s); lost: bad-step 1 (line 21: step inf is infinite); "
        f"non-finite-value 2 (line 11: {REWARD} nan, line 12: {REWARD} inf)" in out
    )
    assert "nothing imported" in err and "--allow-partial" in err and "negative step" not in err
    assert not _store_has(url, "s")

    assert main([*args, "--allow-partial"]) == 0
    out = capsys.readouterr().out
    assert "lost: bad-step 1" in out and "imported 2 curve(s), 231 point(s) into sweep 's'" in out
    store = db.open_store(url)
    curves = db.queries.curves(store, "s")
    store.close()
    run = curves[curves["variant"] == "dp_2_gpu_20251110_100611"].set_index("step")["value"]
    assert len(run) == 115 and 20 not in run.index
    assert math.isnan(run[10]) and run[11] == math.inf  # both stored as non-finite points


def test_cli_clean_import_prints_no_loss(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["import", str(TB), str(VERL), "--sweep", "ok", "--db", url]) == 0
    out = capsys.readouterr().out
    assert f"{TB}: 63 curve(s), 6259 point(s)\n" in out and f"{VERL}: 23 curve(s), 2443 point(s)\n" in out
    assert "lost" not in out


def test_every_reason_has_a_policy() -> None:
    assert set(LOSS_POLICY) == {
        "crc-failure",
        "truncated-tail",
        "duplicate-column",
        "bad-value",
        "bad-step",
        "bad-axis",
        "duplicate-step",
        "non-finite-value",
        "bad-axis-column",
        "not-regular-file",
    }
    assert all(p.startswith(("dropped:", "kept:")) for p in LOSS_POLICY.values())
