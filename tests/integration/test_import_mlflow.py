"""``scalerl import mlflow:URI --experiment E`` + a mapping, then ``scalerl fit`` gives verdicts.

Both tracking stores are real and written by the test through the mlflow API: a ``file:`` store and
a ``sqlite:///`` store. Baseline runs reach 0.5, ``loss=cispo`` runs 0.7 (3 seeds each, noise 0.005),
so ``loss=cispo`` must come out an asymptote-mover with dA near +0.2.
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


def sigmoid(a: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return a / (1.0 + (10.0 / STEPS) ** 3.0) + rng.normal(0.0, 0.005, STEPS.size)


def write_experiment(uri: str) -> None:
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param

    client = MlflowClient(tracking_uri=uri)
    eid = client.create_experiment("loo")
    for alt, a in CEILING.items():
        for seed in range(3):
            run = client.create_run(eid, run_name=f"{alt}-seed{seed}")
            values = sigmoid(a, 100 * seed + len(alt))
            params = [Param("knob", "none" if alt == "none" else "loss"), Param("alternative", alt)]
            metrics = [
                Metric("val/pass_rate", float(v), 1_700_000_000_000 + 1000 * int(s), int(s))
                for s, v in zip(STEPS, values, strict=True)
            ]
            client.log_batch(run.info.run_id, params=[*params, Param("seed", str(seed))], metrics=metrics)
            client.set_terminated(run.info.run_id)


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_mlflow_import_with_mapping_gives_an_asymptote_verdict(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 refuses file stores without it
    uri = f"file:{tmp_path / 'mlruns'}" if kind == "file" else f"sqlite:///{tmp_path / 'mlflow.db'}"
    write_experiment(uri)
    mapping = tmp_path / "map.yaml"
    mapping.write_text("knob: knob\nalternative: alternative\nseed: seed\nbaseline: {knob: none}\n")
    url = f"sqlite:///{tmp_path / 's.db'}"
    source = ["--mlflow-uri", uri] if kind == "sqlite" else [f"mlflow:{uri}"]
    args = ["import", *source, "--experiment", "loo", "--sweep", "ml", "--map", str(mapping), "--db", url]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "mapped 6 run(s) onto 2 variant(s): baseline, loss=cispo" in out
    assert "imported 6 curve(s), 270 point(s) into sweep 'ml': 6 run(s) (6 new)" in out

    store = db.open_store(url)
    runs = db.queries.runs(store, "ml")
    store.close()
    got = sorted(
        zip(
            runs["variant"],
            runs["knob"].fillna("-"),
            runs["alternative"].fillna("-"),
            runs["seed"],
            strict=True,
        )
    )
    assert got == [("baseline", "-", "-", s) for s in range(3)] + [
        ("loss=cispo", "loss", "cispo", s) for s in range(3)
    ]

    # Give the seed noise (these synthetic runs carry none to measure), as a lab would from replicates.
    assert main(["fit", "ml", "--axis", "step", "--boot", "30", "--seed-sd", "0.02", "--db", url]) == 0
    out = capsys.readouterr().out
    assert "verdicts skipped" not in out
    assert "1 verdicts" in out
    row = next(line for line in out.splitlines() if line.startswith("loss "))
    knob, variant, verdict, a_base, a_var, d_a = row.split()[:6]
    assert (knob, variant, verdict) == ("loss", "loss=cispo", "asymptote-mover")
    assert float(a_base) == pytest.approx(0.5, abs=0.01) and float(a_var) == pytest.approx(0.7, abs=0.01)
    assert float(d_a) == pytest.approx(0.2, abs=0.015)

    fit_json = ["fit", "ml", "--axis", "step", "--boot", "30", "--json", "--no-save", "--seed-sd", "0.02"]
    assert main([*fit_json, "--db", url]) == 0
    (verdict,) = json.loads(capsys.readouterr().out)["verdicts"]
    assert verdict["knob"] == "loss" and verdict["alternative"] == "cispo"
    assert verdict["verdict"] == "asymptote-mover" and verdict["d_a"] == pytest.approx(0.2, abs=0.015)


def test_mlflow_errors_name_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    write_experiment(uri)
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["import", f"mlflow:{uri}", "--experiment", "nope", "--sweep", "x", "--db", url]) == 7
    assert "no experiment named 'nope' (fix: use one of: Default, loo)" in capsys.readouterr().err
    assert main(["import", f"mlflow:{uri}", "--sweep", "x", "--db", url]) == 7
    assert "fix: pass --experiment NAME" in capsys.readouterr().err
    # The baseline value no run has: the error lists the values the runs do have.
    bad = ["import", f"mlflow:{uri}", "--experiment", "loo", "--sweep", "x", "--db", url]
    assert main([*bad, "--variant-from", "alternative", "--seed-from", "seed", "--baseline", "grpo"]) == 3
    err = capsys.readouterr().err
    assert "no run matches the baseline (values found: alternative: cispo, none)" in err
    assert main([*bad, "--variant-from", "alternative", "--seed-from", "lr", "--baseline", "none"]) == 3
    err = capsys.readouterr().err
    assert "has no param 'lr' (its params: alternative, knob, seed)" in err
