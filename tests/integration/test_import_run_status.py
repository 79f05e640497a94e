"""A real MLflow store's run states, tags and unmatched runs, through ``scalerl import`` and ``fit``.

The store holds a leave-one-out sweep (baseline and ``loss=cispo``, 3 seeds each, sigmoid curves
with a per-seed ceiling from a fixed RNG) plus one FAILED run of 5 collapsed points that the
mapping places as a 4th ``cispo`` seed: left out by default, the verdict must be exactly the one
the store gives without it, and the import must name the run it left out.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from scalerl import db
from scalerl.harness.cli import main

pytest.importorskip("mlflow")

STEPS = np.arange(1, 46)  # C_mid 10: 35 points past the inflection
CEILING = {"none": 0.5, "cispo": 0.7}
MAP = "knob: knob\nalternative: alternative\nseed: seed\nbaseline: {knob: none}\n"
FIT = ["--axis", "step", "--boot", "40", "--json", "--no-save"]


def sigmoid(a: float, rng: np.random.Generator) -> np.ndarray:
    ceiling = a + rng.normal(0.0, 0.006)  # seeds differ in their ceiling: seed noise to measure
    return ceiling / (1.0 + (10.0 / STEPS) ** 3.0) + rng.normal(0.0, 0.004, STEPS.size)


def log_run(
    client: object,
    eid: str,
    name: str,
    params: dict[str, str],
    steps: np.ndarray,
    values: np.ndarray,
    *,
    status: str = "FINISHED",
    tags: dict[str, str] | None = None,
) -> str:
    from mlflow.entities import Metric, Param

    run = client.create_run(eid, run_name=name, tags=tags or {})  # type: ignore[attr-defined]
    metrics = [
        Metric("val/pass_rate", float(v), 1_700_000_000_000 + 1000 * int(s), int(s))
        for s, v in zip(steps, values, strict=True)
    ]
    params_ = [Param(k, v) for k, v in params.items()]
    client.log_batch(run.info.run_id, params=params_, metrics=metrics)  # type: ignore[attr-defined]
    client.set_terminated(run.info.run_id, status=status)  # type: ignore[attr-defined]
    return str(run.info.run_id)


def write_sweep(uri: str) -> None:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    eid = client.create_experiment("loo")
    rng = np.random.default_rng(20251126)
    for alt, a in CEILING.items():
        for seed in range(3):
            params = {"knob": "none" if alt == "none" else "loss", "alternative": alt, "seed": str(seed)}
            log_run(client, eid, f"{alt}-seed{seed}", params, STEPS, sigmoid(a, rng))


def add_failed_run(uri: str) -> None:
    """A run that collapsed after 5 evaluations and was marked FAILED: a 4th cispo seed by its params."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    eid = client.get_experiment_by_name("loo").experiment_id
    params = {"knob": "loss", "alternative": "cispo", "seed": "3"}
    collapsed = np.array([0.02, 0.05, 0.03, 0.01, 0.0])
    log_run(client, eid, "cispo-seed3", params, STEPS[:5], collapsed, status="FAILED")


def import_and_fit(
    uri: str, url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[str, list[dict[str, object]]]:
    mapping = tmp_path / "map.yaml"
    mapping.write_text(MAP)
    args = ["import", f"mlflow:{uri}", "--experiment", "loo", "--sweep", "ml", "--map", str(mapping)]
    assert main([*args, *extra, "--db", url]) == 0
    out = capsys.readouterr().out
    assert main(["fit", "ml", *FIT, "--db", url]) == 0
    return out, json.loads(capsys.readouterr().out)["verdicts"]


def test_a_failed_run_is_left_out_named_and_changes_no_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    write_sweep(uri)
    # The same six MLflow runs (same run ids, so the same stored runs) before and after the
    # failed run joins the store.
    out_clean, clean = import_and_fit(uri, f"sqlite:///{tmp_path / 'clean.db'}", tmp_path, capsys)
    assert "left out" not in out_clean
    add_failed_run(uri)
    url = f"sqlite:///{tmp_path / 'with.db'}"
    out, verdicts = import_and_fit(uri, url, tmp_path, capsys)

    assert (
        "left out run 'cispo-seed3': failed (FAILED): left out of the verdicts (--include-failed keeps it)"
        in out
    )
    assert "mapped 6 run(s) onto 2 variant(s): baseline, loss=cispo" in out
    assert len(clean) == 1 and clean[0]["verdict"] == "asymptote-mover"
    assert verdicts == clean  # every number of the verdict, intervals included
    store = db.open_store(url)
    runs = db.queries.runs(store, "ml")
    store.close()
    # Still listed (ls, status, the report): stored with its state and no point, in no verdict.
    done = runs[runs["status"] == "completed"]
    (failed,) = runs[runs["status"] != "completed"].itertuples()
    assert len(done) == 6 and done["n_points"].min() > 0
    assert (failed.status, failed.variant, failed.seed, failed.n_points) == ("failed", "loss=cispo", 3, 0)
    assert failed.error.startswith("left out of the import: failed (FAILED)")

    # --json names it too.
    mapping = tmp_path / "map.yaml"
    args = [
        "import",
        f"mlflow:{uri}",
        "--experiment",
        "loo",
        "--sweep",
        "ml",
        "--map",
        str(mapping),
        "--json",
    ]
    assert main([*args, "--db", f"sqlite:///{tmp_path / 'json.db'}"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["runs"] == 6 and [(o["run"], o["status"]) for o in summary["left_out"]] == [
        ("cispo-seed3", "failed")
    ]

    # Pooled as a seed (--include-failed), the run is one of loss=cispo's seeds: its 5 flat points
    # give no fit of their own, so the verdict rests on the other three and names it.
    url_all = f"sqlite:///{tmp_path / 'all.db'}"
    out_all, pooled = import_and_fit(uri, url_all, tmp_path, capsys, "--include-failed")
    assert "left out" not in out_all and "mapped 7 run(s)" in out_all
    assert len(pooled) == 1 and pooled[0]["verdict"] == "asymptote-mover"
    assert "no usable fit of its own, so not among loss=cispo's seeds:" in str(pooled[0]["reason"])
    assert "no usable fit" not in str(clean[0]["reason"])
    store = db.open_store(url_all)
    runs = db.queries.runs(store, "ml")
    store.close()
    failed = runs[runs["status"] == "failed"]
    assert len(failed) == 1 and int(failed["seed"].iloc[0]) == 3


def test_tags_filters_states_and_unmatched_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    eid = client.create_experiment("tagged")
    rng = np.random.default_rng(7)
    # Knob and alternative live in MLflow tags here; the seed and lr in params.
    for alt, a in CEILING.items():
        for seed in range(2):
            tags = {"knob": "none" if alt == "none" else "loss", "alt": alt, "team": "rl"}
            params = {"seed": str(seed), "lr": "0.0001"}
            log_run(client, eid, f"{alt}-{seed}", params, STEPS, sigmoid(a, rng), tags=tags)
    # A smoke test without the mapping's tags, a killed run, another team's run, a debug run.
    log_run(
        client, eid, "smoke", {"seed": "0", "lr": "0.0001"}, STEPS, sigmoid(0.6, rng), tags={"team": "rl"}
    )
    tags = {"knob": "loss", "alt": "cispo", "team": "rl"}
    log_run(
        client,
        eid,
        "killed",
        {"seed": "5", "lr": "0.0001"},
        STEPS,
        sigmoid(0.7, rng),
        status="KILLED",
        tags=tags,
    )
    other = {"knob": "loss", "alt": "cispo", "team": "vision"}
    log_run(client, eid, "vision-0", {"seed": "7", "lr": "0.0001"}, STEPS, sigmoid(0.7, rng), tags=other)
    log_run(client, eid, "debug-1", {"seed": "8", "lr": "0.001"}, STEPS, sigmoid(0.7, rng), tags=tags)

    mapping = tmp_path / "map.yaml"
    mapping.write_text("knob: 'tag:knob'\nalternative: 'tag:alt'\nseed: seed\nbaseline: {'tag:knob': none}\n")
    url = f"sqlite:///{tmp_path / 's.db'}"
    args = ["import", f"mlflow:{uri}", "--experiment", "tagged", "--sweep", "t", "--map", str(mapping)]
    chosen = ["--only", "tag:team=rl", "--only", "param:lr=1e-4", "--exclude", "name:debug-*"]
    assert main([*args, *chosen, "--db", url]) == 0
    out = capsys.readouterr().out
    assert "left out run 'vision-0': does not match --only tag:team=rl" in out
    assert "left out run 'debug-1': does not match --only param:lr=1e-4" in out  # lr 0.001
    assert "left out run 'killed': cancelled (KILLED): left out of the verdicts" in out
    assert "skipped run 'smoke': the mapping does not match it: run 'smoke' has no param 'tag:knob'" in out
    assert "mapped 4 run(s) onto 2 variant(s): baseline, loss=cispo" in out
    store = db.open_store(url)
    runs = db.queries.runs(store, "t")
    info = store.get_run(str(runs["run_id"].iloc[0]))
    store.close()
    assert sorted(zip(runs["variant"], runs["seed"], runs["status"], strict=True)) == [
        ("baseline", 0, "completed"),
        ("baseline", 1, "completed"),
        ("loss=cispo", 0, "completed"),
        ("loss=cispo", 1, "completed"),
        ("loss=cispo", 5, "cancelled"),  # killed: listed with its state, no points, no verdict
    ]
    assert info is not None
    config = info.config
    assert config["tags"]["team"] == "rl" and config["source_status"] == "FINISHED"
    assert not any(k.startswith("mlflow.") for k in config["tags"])

    # --exclude on a name; a killed run kept with --include-failed lands as a cancelled seed.
    url2 = f"sqlite:///{tmp_path / 's2.db'}"
    kept = [
        "--only",
        "tag:team=rl",
        "--exclude",
        "name:debug-*",
        "--exclude",
        "name:smoke",
        "--include-failed",
    ]
    assert main([*args, *kept, "--db", url2]) == 0
    out = capsys.readouterr().out
    assert "left out run 'debug-1': matches --exclude name:debug-*" in out
    assert "mapped 5 run(s) onto 2 variant(s)" in out
    store = db.open_store(url2)
    runs = db.queries.runs(store, "t")
    store.close()
    assert runs.set_index("seed").loc[5, "status"] == "cancelled"

    # --strict: the unmatched smoke run fails the import, and nothing is written.
    url3 = tmp_path / "s3.db"
    assert main([*args, *chosen, "--strict", "--db", f"sqlite:///{url3}"]) == 3
    assert "run 'smoke' has no param 'tag:knob'" in capsys.readouterr().err
    assert not url3.exists()
    # A malformed filter names the flag, the value and the fix.
    assert main([*args, "--only", "team=rl", "--db", f"sqlite:///{url3}"]) == 3
    assert "--only='team=rl': not a run filter (fix: write name:GLOB" in capsys.readouterr().err


def test_what_a_left_out_run_lost_does_not_fail_the_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run that diverged to NaN and FAILED, and a probe run the mapping does not match that logs
    no compute axis: both are left out, so their losses (non-finite values, every point off the
    axis) do not stop the import; kept with --include-failed, the NaN points count again."""
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    write_sweep(uri)
    client = MlflowClient(tracking_uri=uri)
    eid = client.get_experiment_by_name("loo").experiment_id
    # The sweep's runs log GPU-hours (step / 10) beside the pass rate; the probe logs none.
    for run in client.search_runs([eid]):
        hours = [(s, s / 10.0) for s in STEPS.tolist()]
        for step, value in hours:
            client.log_metric(run.info.run_id, "perf/gpu_hours", value, step=int(step))
    diverged = np.array([0.1, 0.2, np.nan, np.nan])
    params = {"knob": "loss", "alternative": "cispo", "seed": "3"}
    rid = log_run(client, eid, "cispo-seed3", params, STEPS[:4], diverged, status="FAILED")
    for step in STEPS[:4].tolist():
        client.log_metric(rid, "perf/gpu_hours", step / 10.0, step=int(step))
    log_run(client, eid, "probe", {}, STEPS[:3], np.array([0.3, 0.3, 0.3]))

    mapping = tmp_path / "map.yaml"
    mapping.write_text(MAP)
    args = ["import", f"mlflow:{uri}", "--experiment", "loo", "--sweep", "ml", "--map", str(mapping)]
    args += ["--axis-column", "perf/gpu_hours"]
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert main([*args, "--db", url]) == 0
    out = capsys.readouterr().out
    assert "lost: bad-axis 3" in out and "non-finite-value 2" in out  # said, then forgiven
    assert "left out run 'cispo-seed3': failed (FAILED)" in out
    assert "skipped run 'probe': the mapping does not match it" in out
    assert "what it lost is in runs left out of the import, so it does not count" in out
    store = db.open_store(url)
    points = db.queries.curves(store, "ml", "val/pass_rate")
    runs = db.queries.runs(store, "ml")
    store.close()
    assert sorted(runs["status"]) == ["completed"] * 6 + ["failed"]
    assert len(points) == 6 * STEPS.size and points["gpu_hours"].max() == pytest.approx(4.5)

    # Kept as a seed, its NaN points are this import's losses again: refused, nothing written.
    url2 = tmp_path / "s2.db"
    assert main([*args, "--include-failed", "--db", f"sqlite:///{url2}"]) == 7
    assert "non-finite-value 2 (run 'cispo-seed3'" in capsys.readouterr().err
    assert not url2.exists()


def test_a_running_imported_run_stays_running_and_cancel_says_it_has_no_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    eid = client.create_experiment("live")
    log_run(client, eid, "live", {}, STEPS[:4], np.full(4, 0.3), status="RUNNING")
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["import", f"mlflow:{uri}", "--experiment", "live", "--sweep", "live", "--db", url]) == 0
    capsys.readouterr()
    assert main(["cancel", "live", "--db", url]) == 1  # nothing the harness could stop
    assert ": imported (its source still says running): no job to stop" in capsys.readouterr().out
    store = db.open_store(url)
    runs = db.queries.runs(store, "live")
    store.close()
    assert runs["status"].tolist() == ["running"]
