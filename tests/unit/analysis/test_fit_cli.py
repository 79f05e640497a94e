"""``scalerl fit`` end to end on a real SQLite file store holding a synthetic LOO sweep."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scalerl import db
from scalerl.harness.cli import main
from tests.unit.analysis.sweeps import TRUTH, synthetic_sweep

SPEC = {"fit": {"metric": "val/pass_rate", "axis": "flops", "window": {"start": 0.0}, "margin": 0.02}}


@pytest.fixture(scope="module")
def store_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('fitcli') / 'scalerl.db'}"
    store = db.open_store(url)
    store.ensure_sweep("loo", SPEC)
    for name, vc in synthetic_sweep(seeds=2, noise=0.003).items():  # quiet enough to decide every knob
        for seed, (run_id, (compute, values)) in enumerate(zip(vc.run_ids, vc.curves, strict=True)):
            store.register_run(
                db.RunRecord(
                    run_id=run_id,
                    sweep="loo",
                    variant=name,
                    seed=seed,
                    config={"v": name},
                    config_hash=run_id,
                    knob=vc.knob,
                    alternative=vc.alternative,
                )
            )
            attempt = store.start_attempt(run_id, executor="debug")
            with store.writer(run_id, attempt) as w:
                for step, (c, v) in enumerate(zip(compute.tolist(), values.tolist(), strict=True)):
                    w.add(
                        step,
                        {"val/pass_rate": v, "train/reward": v - 0.1},
                        {"flops": c, "gpu_hours": c / 1e3},
                    )
            store.finish_run(run_id, attempt, "completed")
    store.close()
    return url


def test_fit_json_and_store_rows(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fit", "loo", "--db", store_url, "--json", "--boot", "60"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # An object, as every command's --json; the store's column names, one spelling (issue 38).
    assert (doc["sweep"], doc["metric"], doc["axis"], doc["saved"]) == ("loo", "val/pass_rate", "flops", True)
    assert doc["fits"] == {"total": 15, "ok": 15}
    out = doc["verdicts"]
    verdicts = {r["variant"]: r for r in out}
    assert {k: r["verdict"] for k, r in verdicts.items()} == {
        "loo-dapo": "asymptote-mover",
        "loo-savg": "efficiency-shaper",
        "loo-lp": "efficiency-shaper",
        "loo-fp32": "no-effect",
    }
    assert {r["knob"] for r in out} == {k for k, *_ in TRUTH.values() if k}
    assert verdicts["loo-dapo"]["d_a"] == pytest.approx(-0.08, abs=0.02)
    assert not any("dA" in r or "dB" in r for r in out)
    assert verdicts["loo-lp"]["d_b"] == pytest.approx(1.0, abs=0.35)
    store = db.open_store(store_url)
    fits = db.queries.fits(store, "loo")
    stored = db.queries.verdicts(store, "loo")
    store.close()
    assert len(fits) == 10 + 5  # 10 runs + 5 pooled variants (run_id NULL)
    assert fits["run_id"].isna().sum() == 5 and set(fits["status"]) == {"ok"}
    assert set(fits["axis"]) == {"flops"} and set(fits["metric"]) == {"val/pass_rate"}
    base = fits[(fits["variant"] == "baseline") & fits["run_id"].isna()].iloc[0]
    assert base["a"] == pytest.approx(0.70, abs=0.02) and base["a_lo"] < base["a"] < base["a_hi"]
    assert len(stored) == 4 and set(stored["verdict"]) == {
        "asymptote-mover",
        "efficiency-shaper",
        "no-effect",
    }


def test_fit_table_with_overrides(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    # Another metric and axis, and a margin so wide that nothing moves the ceiling.
    code = main(
        [
            "fit",
            "loo",
            "--db",
            store_url,
            "--metric",
            "train/reward",
            "--axis",
            "gpu_hours",
            "--margin",
            "0.2",
            "--boot",
            "40",
            # 1% of the compute range (to 1.7 GPU-hours), before the inflection at 5: a window that
            # started past it would leave no rise to pin the ceilings (verdicts/ceiling.py).
            "--window-fraction",
            "0.01",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "sweep loo: metric train/reward on gpu_hours; 15 fits (15 ok), 4 verdicts" in out
    lines = {ln.split()[1]: ln for ln in out.splitlines() if ln.startswith(("loss", "lm_head"))}
    assert "asymptote-mover" not in lines["loo-dapo"]
    assert "inside +/-0.200" in lines["loo-dapo"]  # judged against the 0.2 margin: no effect


def test_fit_errors_are_clean(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fit", "nope", "--db", store_url]) == 3  # NotFoundError, as in every command
    assert "SWEEP='nope': no such sweep in the store (fix: use one of: loo" in capsys.readouterr().err
    assert main(["fit", "loo", "--db", store_url, "--metric", "nope/metric"]) == 3
    assert "metric='nope/metric': no run of sweep 'loo' logged this metric" in capsys.readouterr().err
    assert main(["fit", "loo", "--db", store_url, "--method", "magic"]) == 3  # ConfigError
    assert "unknown fitter" in capsys.readouterr().err
    assert main(["fit", "loo", "--db", store_url, "--axis", "tokens"]) == 6
    assert "no point has the 'tokens' compute axis" in capsys.readouterr().err


def test_fit_leaves_no_file_behind(store_url: str) -> None:
    assert Path(store_url.removeprefix("sqlite:///")).is_file()


def test_fit_prints_the_same_forecasts_as_forecast_curve(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import numpy as np

    from scalerl.harness.analysis.fit.bootstrap import pool
    from scalerl.harness.analysis.forecast.ensemble import forecast_curve
    from scalerl.harness.analysis.forecast.sweep_prior import forecast_with_siblings
    from scalerl.harness.analysis.groups import group_curves

    assert main(["fit", "loo", "--db", store_url, "--boot", "20"]) == 0
    out = capsys.readouterr().out
    assert "forecasts at 2x each variant's largest flops (90% prediction intervals" in out
    lines = out.splitlines()
    store = db.open_store(store_url)
    frame = db.queries.curves(store, "loo", "val/pass_rate")
    store.close()
    groups = group_curves(frame, "flops")
    assert len(groups) == 5
    names = list(groups)
    pooled = {v: pool(list(vc.curves)) for v, vc in groups.items()}
    ats = {v: 2.0 * float(np.max(pooled[v][0])) for v in names}
    # Every variant has 4 siblings with fitted ceilings, so every forecast borrows from them, except
    # the knob that moves the ceiling (loo-dapo: 0.62 against the others' 0.70): its own points
    # refuse the siblings' prior (issue 37), and it is forecast alone, near its own ceiling.
    sweep = forecast_with_siblings(
        [pooled[v] for v in names],
        [[ats[v]] for v in names],
        [[pooled[o] for o in names if o != v] for v in names],
    )
    for variant, sf in zip(names, sweep, strict=True):
        fc, at = sf.forecast, ats[variant]
        # The variant's header line (saying which forecast), then its forecast line.
        i = next(k for k, ln in enumerate(lines) if ln.startswith(f"  {variant} (2 run(s)"))
        if variant == "loo-dapo":
            assert fc.status == "ok" and sf.method == "single" and sf.conflict < -2.0
            assert "lie below its sibling variants' curves" in lines[i]
            assert abs(fc.value[0] - TRUTH[variant][1]) < 0.01
        else:
            assert fc.status == "ok" and sf.method == "sweep" and sf.siblings == 4
            assert lines[i].endswith("[sweep prior: prior from 4 sibling variant(s)]")
        expected = f"    at {at:.4g}: {fc.value[0]:.4f} [{fc.lo[0]:.4f}, {fc.hi[0]:.4f}]"
        assert lines[i + 1] == expected
        # Synthetic sweep: true ceilings 0.62-0.70, so the forecast at 2x lies near them.
        assert 0.55 < fc.value[0] < 0.8 and fc.lo[0] < fc.value[0] < fc.hi[0]
    # `scalerl forecast` prints the same numbers for the same sweep; --no-siblings gives
    # forecast_curve on the variant's own points.
    assert main(["forecast", "loo", "--db", store_url, "--json"]) == 0
    js = {v["variant"]: v for v in json.loads(capsys.readouterr().out)["variants"]}
    assert js["baseline"]["method"] == "sweep"
    assert js["baseline"]["forecasts"][0]["value"] == pytest.approx(
        float(sweep[names.index("baseline")].forecast.value[0]), rel=1e-12
    )
    assert main(["forecast", "loo", "--db", store_url, "--json", "--no-siblings"]) == 0
    js = {v["variant"]: v for v in json.loads(capsys.readouterr().out)["variants"]}
    x, y = pooled["baseline"]
    fc = forecast_curve(x, y, [ats["baseline"]], level=0.9)
    assert js["baseline"]["method"] == "single" and js["baseline"]["method_note"] == "siblings turned off"
    assert js["baseline"]["forecasts"][0]["value"] == pytest.approx(float(fc.value[0]), rel=1e-12)


def test_fit_json_has_no_forecast_lines(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fit", "loo", "--db", store_url, "--json", "--boot", "20"]) == 0
    assert "forecasts at" not in capsys.readouterr().out


def test_fit_with_the_paper_procedure(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    # `--method paper` (the App. A.5 grid widened to the data) end to end; train/reward on flops is
    # a (metric, axis) no other test here stores.
    argv = ["fit", "loo", "--db", store_url, "--metric", "train/reward", "--boot", "10", "--method", "paper"]
    assert main(argv) == 0
    assert "sweep loo: metric train/reward on flops; 15 fits (15 ok), 4 verdicts" in capsys.readouterr().out
    store = db.open_store(store_url)
    fits = db.queries.fits(store, "loo", metric="train/reward", axis="flops")
    store.close()
    assert len(fits) == 15 and set(fits["method"]) == {"paper"} and set(fits["status"]) == {"ok"}
    base = fits[(fits["variant"] == "baseline") & fits["run_id"].isna()].iloc[0]
    # train/reward = pass rate - 0.1 here, so its ceiling is the baseline's 0.70 - 0.1, on the lattice.
    assert base["a"] == pytest.approx(0.60, abs=0.02)
    assert base["a"] == pytest.approx(round(base["a"] / 0.005) * 0.005, abs=1e-9)
