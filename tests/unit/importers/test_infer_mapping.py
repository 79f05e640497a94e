"""The knob found from the params (``--baseline-run`` alone, ``infer: true``), the compute axis found
from the logged metrics, and ``scalerl import --dry-run``: on parsed CSV files with a
``params.json`` beside each (the importers that read params from MLflow and W&B are exercised in
tests/integration/test_first_hour.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from scalerl.harness.cli import main
from scalerl.harness.errors import ConfigError
from scalerl.harness.importers.axis import pick_axis
from scalerl.harness.importers.base import ImportedCurve, ImportLosses, ImportResult
from scalerl.harness.importers.mapping import RunMapping, from_flags, load_mapping

BASE = {"loss_type": "cispo", "kl_coef": "0.001", "lr": "1e-6"}


def runs(**changes: dict[str, str]) -> dict[str, dict[str, str]]:
    """Run name -> params: three seeds of the baseline and of each named change."""
    out = {}
    for name, change in {"baseline": {}, **changes}.items():
        for seed in range(3):
            out[f"{name}-s{seed}"] = {**BASE, **change, "seed": str(seed), "out": f"/ckpt/{name}-{seed}"}
    return out


def test_the_knob_is_the_one_param_that_differs_from_the_baseline() -> None:
    mapping = from_flags(None, "seed", None, "baseline-*", None)
    params = runs(dapo={"loss_type": "dapo"}, nokl={"kl_coef": "0.0"})
    params["lr-s9"] = {**BASE, "lr": "0.000001", "seed": "9", "out": "/ckpt/lr-9"}
    roles, skipped = mapping.match(params)
    assert not skipped
    got = {run: (r.variant, r.knob, r.alternative, r.seed) for run, r in roles.items()}
    assert got["dapo-s2"] == ("loss_type=dapo", "loss_type", "dapo", 2)
    assert got["nokl-s0"] == ("kl_coef=0.0", "kl_coef", "0.0", 0)
    # 0.000001 is the baseline's 1e-6: the same config under another name is a baseline run.
    assert got["lr-s9"] == ("baseline", None, None, 9)
    inference = mapping.inferred(params)
    assert inference.compared == ("kl_coef", "loss_type", "lr")
    assert inference.ignored == {"out": "differs between the baseline's own runs", "seed": "the seed"}
    assert "knob inferred from kl_coef, loss_type, lr (not compared: out: differs" in inference.describe()


def test_a_run_that_changes_two_params_is_listed_not_guessed() -> None:
    mapping = from_flags(None, "seed", None, "baseline-*", None)
    params = runs(both={"loss_type": "dapo", "kl_coef": "0.0"})
    roles, skipped = mapping.match(params)
    assert set(skipped) == {"both-s0", "both-s1", "both-s2"}
    assert (
        "differs from the baseline in 2 params: kl_coef (0.0 vs 0.001), loss_type (dapo vs cispo)"
        in (skipped["both-s0"])
    )
    with pytest.raises(ConfigError, match="--ignore-param NAME"):
        mapping.match(params, strict=True)
    # Told that kl_coef is no knob here, each is a loss_type variant.
    ignoring = from_flags(None, "seed", None, "baseline-*", None, ignore=["kl_coef"])
    roles, skipped = ignoring.match(params)
    assert not skipped and roles["both-s1"].variant == "loss_type=dapo"


def test_one_seed_per_run_and_an_id_param() -> None:
    """One baseline run cannot show which params are per run; text that differs in every run is
    an id, a number that does may be the knob (a one-seed lr sweep)."""
    params = {
        "base": {"lr": "1e-4", "run_id": "a1"},
        "lr3": {"lr": "3e-4", "run_id": "b2"},
        "lr10": {"lr": "1e-3", "run_id": "c3"},
    }
    roles, _ = from_flags(None, None, None, "base", None).match(params)
    assert {r: v.variant for r, v in roles.items()} == {
        "base": "baseline",
        "lr3": "lr=3e-4",
        "lr10": "lr=1e-3",
    }


def test_a_map_file_infers_too(tmp_path: Path) -> None:
    path = tmp_path / "map.yaml"
    path.write_text(
        "infer: true\nseed: seed\nbaseline: {loss_type: cispo, kl_coef: '0.001'}\nignore: [out]\n"
    )
    mapping = load_mapping(path)
    assert mapping.infer and mapping.ignore == ("out",)
    roles, _ = mapping.match(runs(dapo={"loss_type": "dapo"}))
    assert roles["dapo-s0"].variant == "loss_type=dapo"
    path.write_text("infer: true\nknob: knob\nalternative: alt\nbaseline_run: b\n")
    with pytest.raises(ConfigError, match="an inferred knob excludes variant and knob/alternative"):
        load_mapping(path)
    with pytest.raises(ConfigError, match="--ignore-param applies to an inferred knob only"):
        from_flags("loss", None, "cispo", None, None, ignore=["out"])
    assert RunMapping(variant="loss", baseline={"loss": "cispo"}).place("x", {"loss": "dapo"}) == (
        "loss=dapo",
        "loss",
        "dapo",
    )


def _curve(run: str, metric: str, values: list[float]) -> ImportedCurve:
    steps = np.arange(len(values), dtype=np.int64)
    return ImportedCurve("src", run, metric, "step", steps, steps.astype(float), np.asarray(values, float))


def _result(*curves: ImportedCurve) -> ImportResult:
    return ImportResult("src", "csv", curves, ImportLosses())


def test_the_axis_is_a_logged_compute_total_that_grows() -> None:
    acc = [0.1, 0.2, 0.3, 0.35]
    res = _result(
        *(_curve(r, "val/acc", acc) for r in ("a", "b")),
        *(_curve(r, "perf/gpu_hours", [0.5, 1.0, 1.5, 2.0]) for r in ("a", "b")),
        *(_curve(r, "perf/total_num_tokens", [100, 120, 90, 110]) for r in ("a", "b")),  # per step
        *(_curve(r, "perf/throughput", [5, 6, 7, 8]) for r in ("a", "b")),  # a rate: never an axis
    )
    choice = pick_axis([res])
    assert (choice.metric, choice.unit) == ("perf/gpu_hours", "gpu_hours")
    assert choice.line.startswith("axis: perf/gpu_hours (gpu_hours), picked from the logged metrics")
    # Without the hours, the per-step count is named with its fix, and the step kept.
    res = _result(*(c for c in res.curves if c.metric != "perf/gpu_hours"))
    choice = pick_axis([res])
    assert choice.metric is None and "--axis-column perf/total_num_tokens --axis-cumulative" in choice.line
    # A constant per-step count never falls, and is no total either.
    flat = _result(
        *(_curve(r, "val/acc", acc) for r in "ab"), *(_curve(r, "tokens", [64.0] * 4) for r in "ab")
    )
    assert pick_axis([flat]).metric is None
    # A total one run does not log, or that misses a point's step, is said, not picked.
    gap = _result(_curve("a", "val/acc", acc), _curve("a", "flops", [1.0, 2.0, 3.0]))
    choice = pick_axis([gap])
    assert choice.metric is None and "not logged at the step of 1 other point(s)" in choice.line


def write_csv(folder: Path, params: dict[str, str], ceiling: float, seed: int) -> Path:
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    lines = ["step,val/acc,samples_seen"]
    for step in range(1, 31):
        acc = ceiling / (1 + (6 / step) ** 3) + rng.normal(0, 0.004)
        lines.append(f"{step},{acc:.5f},{64 * step}")
    path = folder / f"{folder.name}.csv"  # a CSV run is named after its file
    path.write_text("\n".join(lines) + "\n")
    (folder / "params.json").write_text(json.dumps(params))
    return path


def test_import_dry_run_shows_the_inferred_mapping_and_axis_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = []
    for name, change, ceiling in (("baseline", {}, 0.6), ("dapo", {"loss_type": "dapo"}, 0.7)):
        for seed in range(2):
            params = {**BASE, **change, "seed": seed}
            files.append(str(write_csv(tmp_path / f"{name}-s{seed}", params, ceiling, seed)))
    store = tmp_path / "s.db"
    argv = ["import", *files, "--sweep", "csv", "--baseline-run", "baseline-*", "--seed-from", "seed"]
    assert main([*argv, "--db", str(store), "--dry-run", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["dry_run"] is True and not store.exists()
    assert doc["axis_choice"]["metric"] == "samples_seen" and doc["axis_choice"]["unit"] == "samples"
    assert doc["inferred"]["compared"] == ["kl_coef", "loss_type", "lr"]
    lands = {
        r["run"]: (r["variant"], r["knob"], r["alternative"], r["seed"], r["points"]) for r in doc["runs"]
    }
    assert lands == {
        "baseline-s0": ("baseline", None, None, 0, 30),
        "baseline-s1": ("baseline", None, None, 1, 30),
        "dapo-s0": ("loss_type=dapo", "loss_type", "dapo", 0, 30),
        "dapo-s1": ("loss_type=dapo", "loss_type", "dapo", 1, 30),
    }
    assert main([*argv, "--db", str(store)]) == 0
    out = capsys.readouterr().out
    assert "sweep 'csv' defaults for fit/report/forecast: metric 'val/acc' on axis 'samples'" in out


def test_fit_without_a_baseline_says_there_are_no_verdicts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 38: `verdicts skipped` was followed by `every knob is decided` with 0 verdicts."""
    files = [str(write_csv(tmp_path / f"run-{k}", BASE, 0.6 + 0.05 * k, k)) for k in range(2)]
    store = str(tmp_path / "s.db")
    assert main(["import", *files, "--sweep", "bare", "--db", store]) == 0
    capsys.readouterr()
    assert main(["fit", "bare", "--db", store, "--boot", "20", "--no-save"]) == 0
    out = capsys.readouterr().out
    assert "0 verdicts" in out and "verdicts skipped" in out
    assert "no knob verdicts: the sweep has no single baseline variant" in out
    assert "every knob is decided" not in out


def test_a_wandb_panel_export_infers_from_params_in_its_run_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A W&B panel CSV carries no config: --run-regex reads the params from the run names, and the
    knob is inferred from them as from MLflow's or W&B's own params."""
    names = [f"{loss}_kl{kl}_s{seed}" for loss, kl in (("cispo", "0.001"), ("dapo", "0.001"), ("cispo", "0"))
             for seed in range(2)]  # fmt: skip
    header = ["Step"] + [
        col for n in names for col in (f"{n} - val/acc", f"{n} - val/acc__MIN", f"{n} - val/acc__MAX")
    ]
    lines = [",".join(f'"{h}"' for h in header)]
    for step in range(1, 21):
        cells = [str(step)]
        for _ in names:
            cells += [f"{0.6 / (1 + (5 / step) ** 3):.4f}"] * 3
        lines.append(",".join(cells))
    export = tmp_path / "wandb_export.csv"
    export.write_text("\n".join(lines) + "\n")
    regex = r"(?P<loss_type>[a-z]+)_kl(?P<kl_coef>[\d.]+)_s(?P<seed>\d+)"
    argv = ["import", str(export), "--sweep", "w", "--baseline-run", "cispo_kl0.001_*", "--seed-from", "seed"]
    assert main([*argv, "--run-regex", regex, "--dry-run", "--json", "--db", str(tmp_path / "s.db")]) == 0
    rows = {r["run"]: (r["variant"], r["seed"]) for r in json.loads(capsys.readouterr().out)["runs"]}
    assert rows["dapo_kl0.001_s1"] == ("loss_type=dapo", 1)
    assert rows["cispo_kl0_s0"] == ("kl_coef=0", 0)
    assert rows["cispo_kl0.001_s1"] == ("baseline", 1)
