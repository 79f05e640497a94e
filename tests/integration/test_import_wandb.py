"""``scalerl import`` of W&B runs + a mapping, then ``scalerl fit`` gives verdicts.

Offline: real run directories written by ``wandb.init`` / ``wandb.log`` in offline mode. Baseline
runs reach 0.5, ``loss=cispo`` runs 0.7 (3 seeds each, noise 0.005), so ``loss=cispo`` must come out
an asymptote-mover with dA near +0.2. Projects (``wandb:ENTITY/PROJECT``) need the network and an
API key, so that path is tested with a fake ``Api`` holding the same runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scalerl import db
from scalerl.harness.cli import main
from scalerl.harness.errors import ImportFormatError
from scalerl.harness.importers.wandb_runs import read_wandb_offline, read_wandb_project
from tests.integration.helpers import wandb_offline_env

pytest.importorskip("wandb")

STEPS = np.arange(1, 46)  # C_mid 10: 35 points past the inflection
CEILING = {"none": 0.5, "cispo": 0.7}
FLAGS = ["--variant-from", "alternative", "--seed-from", "seed", "--baseline", "none"]


def sigmoid(a: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return a / (1.0 + (10.0 / STEPS) ** 3.0) + rng.normal(0.0, 0.005, STEPS.size)


def runs() -> Iterable[tuple[str, dict[str, Any], np.ndarray]]:
    for alt, a in CEILING.items():
        for seed in range(3):
            config = {"knob": "none" if alt == "none" else "loss", "alternative": alt, "seed": seed}
            yield f"{alt}-seed{seed}", config, sigmoid(a, 100 * seed + len(alt))


# The runs are written in a child process: wandb.init sets os.environ and starts a service process,
# neither of which should leak into the test process.
WRITER = textwrap.dedent(
    """
    import json, sys
    import wandb
    for name, config, values in json.load(sys.stdin):
        run = wandb.init(project="loo", name=name, config=config)
        for step, value in enumerate(values, start=1):
            run.log({"val/pass_rate": value, "lr": 1e-6}, step=step)
        run.finish()
    """
)


@pytest.fixture(scope="module")
def offline_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("wb")
    env = wandb_offline_env(root)
    payload = json.dumps([(n, c, v.tolist()) for n, c, v in runs()])
    subprocess.run(
        [sys.executable, "-c", WRITER],
        input=payload,
        text=True,
        check=True,
        timeout=120,
        env={**os.environ, **env},
    )
    return root / "wandb"


def check_verdict(url: str, sweep: str, knob: str, variant: str, capsys: pytest.CaptureFixture[str]) -> None:
    store = db.open_store(url)
    got = db.queries.runs(store, sweep)
    store.close()
    rows = sorted(zip(got["variant"], got["knob"].fillna("-"), got["seed"], strict=True))
    assert rows == sorted([("baseline", "-", s) for s in range(3)] + [(variant, knob, s) for s in range(3)])
    assert (
        # Give the seed noise (these synthetic runs carry none to measure), as a lab would from replicates.
        main(
            [
                "fit",
                sweep,
                "--axis",
                "step",
                "--boot",
                "30",
                "--metric",
                "val/pass_rate",
                "--seed-sd",
                "0.02",
                "--db",
                url,
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "1 verdicts" in out
    row = next(line for line in out.splitlines() if line.startswith(f"{knob} "))
    cells = row.split()[:6]
    assert cells[:3] == [knob, variant, "asymptote-mover"]
    a_base, a_var, d_a = cells[3:]
    assert float(a_base) == pytest.approx(0.5, abs=0.01) and float(a_var) == pytest.approx(0.7, abs=0.01)
    assert float(d_a) == pytest.approx(0.2, abs=0.015)


@pytest.mark.parametrize("how", ["prefix+flags", "detected+map"])
def test_offline_runs_import_with_mapping_gives_an_asymptote_verdict(
    how: str, offline_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    if how == "prefix+flags":  # --variant-from: knob = the param, variant = param=value
        source, mapping, knob, variant = (
            f"wandb-offline:{offline_dir}",
            FLAGS,
            "alternative",
            "alternative=cispo",
        )
    else:  # a plain directory holding offline-run-* is found; a --map file names knob and alternative
        path = tmp_path / "map.yaml"
        path.write_text("knob: knob\nalternative: alternative\nseed: seed\nbaseline: {knob: none}\n")
        source, mapping, knob, variant = str(offline_dir.parent), ["--map", str(path)], "loss", "loss=cispo"
    args = ["import", source, "--sweep", "w", "--metric", "val/pass_rate", *mapping, "--db", url]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.count(".wandb: 1 curve(s), 45 point(s)") == 6
    assert f"mapped 6 run(s) onto 2 variant(s): {', '.join(sorted(['baseline', variant]))}" in out
    assert "imported 6 curve(s), 270 point(s) into sweep 'w': 6 run(s) (6 new)" in out
    check_verdict(url, "w", knob, variant, capsys)


def test_offline_reader_keeps_names_params_and_every_point(offline_dir: Path) -> None:
    results = read_wandb_offline(offline_dir)
    assert [r.format for r in results] == ["wandb-offline"] * 6 and not any(r.losses for r in results)
    curves = {(c.run, c.metric): c for r in results for c in r.curves}
    assert sorted({run for run, _ in curves}) == sorted(n for n, _, _ in runs())
    pr = curves[("cispo-seed2", "val/pass_rate")]
    assert dict(pr.params) == {"knob": "loss", "alternative": "cispo", "seed": "2"}
    np.testing.assert_array_equal(pr.steps, STEPS)
    np.testing.assert_allclose(pr.values, sigmoid(0.7, 205), rtol=1e-12)
    assert curves[("none-seed0", "lr")].values.tolist() == [1e-6] * 45
    # One run directory on its own; a time axis.
    one = read_wandb_offline(Path(results[0].source).parent, axis_column="_runtime")
    assert (
        len(one) == 1 and (np.diff(one[0].curves[0].x) >= 0).all() and one[0].curves[0].x_name == "_runtime"
    )


def test_offline_damage_is_counted_not_hidden(offline_dir: Path, tmp_path: Path) -> None:
    first = read_wandb_offline(offline_dir)[0]
    run_dir = Path(first.source).parent
    copy = tmp_path / run_dir.name
    copy.mkdir()
    (log,) = run_dir.glob("run-*.wandb")
    data = bytearray(log.read_bytes())
    (copy / log.name).write_bytes(bytes(data[:-5]))  # cut short inside the last record
    (result,) = read_wandb_offline(copy)
    assert result.losses.counts == {"truncated-tail": 1}
    data[len(data) // 2] ^= 0xFF  # a flipped byte inside one record: its checksum fails
    (copy / log.name).write_bytes(bytes(data))
    (result,) = read_wandb_offline(copy)
    assert result.losses.counts == {"crc-failure": 1}  # and reading resumed at the next record
    assert [c.run for c in result.curves] == [first.curves[0].run] * 2
    assert all(44 <= len(c) <= 45 for c in result.curves)
    with pytest.raises(ImportFormatError, match="no W&B offline runs"):
        read_wandb_offline(tmp_path / "nothing-here")
    with pytest.raises(
        ImportFormatError, match="no metric matches 'loss' \\(fix: use one of: lr, val/pass_rate\\)"
    ):
        read_wandb_offline(offline_dir, metric="loss")


@dataclass
class FakeRun:
    id: str
    name: str | None
    config: Mapping[str, Any]
    rows: list[dict[str, Any]] = field(default_factory=list)
    state: str | None = None
    tags: list[str] = field(default_factory=list)

    def scan_history(self) -> Iterable[Mapping[str, Any]]:
        return iter(self.rows)


@dataclass
class FakeApi:
    """Stands in for ``wandb.Api`` (no network here): the runs of one project."""

    project: str
    by_path: dict[str, list[FakeRun]]
    asked: list[str] = field(default_factory=list)

    def runs(self, path: str) -> list[FakeRun]:
        self.asked.append(path)
        return self.by_path[path]


def fake_api() -> FakeApi:
    fakes = []
    for i, (name, config, values) in enumerate(runs()):
        rows = [
            {
                "_step": s,
                "_runtime": 2.0 * s,
                "_timestamp": 1e9 + s,
                "val/pass_rate": float(v),
                "media": {"x": 1},
            }
            for s, v in zip(STEPS.tolist(), values, strict=True)
        ]
        fakes.append(FakeRun(f"id{i}", name, {**config, "_wandb": {"x": 1}, "opt": {"lr": 1e-6}}, rows))
    return FakeApi("lab/loo", {"lab/loo": fakes})


def test_project_reader_with_a_fake_api(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api = fake_api()
    result = read_wandb_project("lab/loo", api=api)
    assert api.asked == ["lab/loo"] and result.format == "wandb" and not result.losses
    assert len(result.curves) == 6 and result.points == 270
    first = result.curves[0]
    assert dict(first.params) == {"knob": "none", "alternative": "none", "seed": "0", "opt.lr": "1e-06"}
    timed = read_wandb_project("lab/loo", api=api, axis_column="_timestamp")
    assert timed.curves[0].x[:3].tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(ImportFormatError, match="expected ENTITY/PROJECT"):
        read_wandb_project("loo", api=api)
    # Any other axis is a metric the runs log (harness/importers/axis.py): one they do not is named.
    with pytest.raises(ImportFormatError, match=r"no run logs the axis 'epoch'.*one of: val/pass_rate\)"):
        read_wandb_project("lab/loo", api=api, axis_column="epoch")
    import wandb

    class Refusing:
        def runs(self, path: str) -> list[FakeRun]:
            raise wandb.errors.CommError("Could not find project loo")

    with pytest.raises(ImportFormatError, match="W&B API: Could not find project loo \\(fix: check the path"):
        read_wandb_project("lab/loo", api=Refusing())

    # Through the CLI: wandb.Api is replaced by the fake.
    monkeypatch.setattr(wandb, "Api", lambda: api)
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["import", "wandb:lab/loo", "--sweep", "p", *FLAGS, "--db", url]) == 0
    assert "imported 6 curve(s), 270 point(s) into sweep 'p'" in capsys.readouterr().out
    check_verdict(url, "p", "alternative", "alternative=cispo", capsys)


STATUS_WRITER = textwrap.dedent(
    """
    import time
    import wandb
    run = wandb.init(project="st", name="ok", config={"seed": 0}, tags=["baseline", "team=rl"])
    for step in range(1, 6):
        run.log({"val/pass_rate": 0.1 * step}, step=step)
    run.finish()
    run = wandb.init(project="st", name="diverged", config={"seed": 1}, tags=["team=rl"])
    for step in range(1, 4):
        run.log({"val/pass_rate": 0.0}, step=step)
    run.finish(exit_code=1)
    # Crashed at step 5, resumed from the step-2 checkpoint: steps 3-5 logged again.
    run = wandb.init(project="st", name="resumed", id="res0001", config={"seed": 2})
    for step in range(1, 6):
        run.log({"val/pass_rate": 0.01 * step}, step=step)
    run.finish(exit_code=1)
    # W&B names an offline directory by the second it started: a resume within the same second
    # would write into (and replace) the first part's log; a real restart comes much later.
    time.sleep(1.5)
    run = wandb.init(project="st", name="resumed", id="res0001", resume="allow", config={"seed": 2})
    for step in range(3, 9):
        run.log({"val/pass_rate": 0.1 * step}, step=step)
    run.finish()
    """
)


def test_offline_run_states_and_tags_come_from_the_transaction_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = wandb_offline_env(tmp_path)
    subprocess.run([sys.executable, "-c", STATUS_WRITER], check=True, timeout=120, env={**os.environ, **env})
    by_run = {c.run: c for r in read_wandb_offline(tmp_path / "wandb") for c in r.curves}
    ok, bad = by_run["ok"], by_run["diverged"]
    assert (ok.status, ok.source_status) == ("completed", "finished")
    assert (bad.status, bad.source_status) == ("failed", "failed (exit code 1)")
    assert dict(ok.tags) == {"baseline": "true", "team": "rl"} and dict(bad.tags) == {"team": "rl"}
    # The resumed run's two offline directories are one run: the later values kept, counted.
    res = by_run["resumed"]
    assert res.steps.tolist() == list(range(1, 9)) and res.relogged == (3, 4, 5)
    assert res.values.tolist() == pytest.approx([0.01, 0.02, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8])
    assert (res.status, res.source_status) == ("completed", "finished (after 1 restart(s))")

    url = f"sqlite:///{tmp_path / 's.db'}"
    assert (
        main(["import", str(tmp_path / "wandb"), "--sweep", "st", "--only", "tag:baseline", "--db", url]) == 0
    )
    out = capsys.readouterr().out
    assert "left out run 'diverged': does not match --only tag:baseline" in out
    assert main(["import", str(tmp_path / "wandb"), "--sweep", "st2", "--db", url]) == 0
    out = capsys.readouterr().out
    assert "left out run 'diverged': failed (exit code 1): left out of the verdicts" in out
    assert "run 'resumed': 3 step(s) re-logged after a restart; later values kept" in out
    store = db.open_store(url)
    stored = {s: db.queries.runs(store, s) for s in ("st", "st2")}
    store.close()
    # Left out by --only (the user's choice): not stored; by its state: stored, failed, no points.
    assert [sorted(f["variant"]) for f in stored.values()] == [["ok"], ["diverged", "ok", "resumed"]]
    diverged = stored["st2"].set_index("variant").loc["diverged"]
    assert (diverged["status"], diverged["n_points"]) == ("failed", 0)
    assert stored["st"]["status"].tolist() == ["completed"]


def test_project_run_states_and_tags_through_the_api() -> None:
    api = fake_api()
    crashed, killed = api.by_path["lab/loo"][2], api.by_path["lab/loo"][3]
    crashed.state, crashed.tags = "crashed", ["team=rl"]
    killed.state = "killed"
    result = read_wandb_project("lab/loo", api=api)
    got = {c.run: (c.status, c.source_status, dict(c.tags)) for c in result.curves}
    assert got["none-seed2"] == ("failed", "crashed", {"team": "rl"})
    assert got["cispo-seed0"] == ("cancelled", "killed", {})
    # A run the fake gives no state counts as finished.
    assert got["none-seed0"] == ("completed", None, {})
