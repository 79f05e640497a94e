"""``scalerl import LOGDIR``: one run per directory of standard-named event files, mapped to variants."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from scalerl import db
from scalerl.harness.cli import main
from scalerl.harness.importers.tensorboard import read_logdir

pytest.importorskip("tensorboard")


def write_events(
    run_dir: Path, stamp: int, points: list[tuple[int, float]], hparams: dict[str, str] | None = None
) -> None:
    """One standard ``events.out.tfevents.<stamp>.<host>.<pid>.<n>`` file in ``run_dir``."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
    from tensorboard.plugins.hparams import plugin_data_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    scratch = run_dir / "scratch"
    writer = EventFileWriter(str(scratch))
    if hparams:
        info = plugin_data_pb2.SessionStartInfo()
        for k, v in hparams.items():
            info.hparams[k].string_value = v
        content = plugin_data_pb2.HParamsPluginData(version=0, session_start_info=info).SerializeToString()
        meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="hparams", content=content))
        value = Summary.Value(tag="_hparams_/session_start_info", metadata=meta)
        writer.add_event(Event(wall_time=time.time(), summary=Summary(value=[value])))
    for step, v in points:
        summary = Summary(value=[Summary.Value(tag="reward", simple_value=v)])
        writer.add_event(Event(wall_time=time.time(), step=step, summary=summary))
    writer.close()
    (written,) = scratch.iterdir()
    written.rename(run_dir / f"events.out.tfevents.{stamp}.host.1.0")
    scratch.rmdir()


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    root = tmp_path / "logs"
    base = root / "lr_1e-3_s0"
    base.mkdir(parents=True)
    write_events(base, 1700000009, [(0, 0.1), (1, 0.2)])
    write_events(base, 1700000010, [(2, 0.3), (3, 0.4)])  # resumed: a second file, same run
    (base / "params.json").write_text(json.dumps({"lr": "1e-3", "seed": 0}))
    other = root / "lr_3e-3_s0"
    other.mkdir()
    write_events(other, 1700000009, [(0, 0.15), (1, 0.25), (2, 0.35)], hparams={"lr": "3e-3", "seed": "0"})
    return root


def test_each_directory_is_one_run_and_files_append(logdir: Path) -> None:
    results = read_logdir(logdir)
    assert [r.source for r in results] == [str(logdir / "lr_1e-3_s0"), str(logdir / "lr_3e-3_s0")]
    first, second = (r.curves[0] for r in results)
    assert first.run == "lr_1e-3_s0" and second.run == "lr_3e-3_s0"
    assert first.steps.tolist() == [0, 1, 2, 3]
    assert first.values.tolist() == pytest.approx([0.1, 0.2, 0.3, 0.4])
    assert first.params == {"lr": "1e-3", "seed": "0"}  # params.json
    assert second.params == {"lr": "3e-3", "seed": "0"}  # hparams
    assert not any(r.losses for r in results)


def test_logdir_import_with_flags_mapping(
    logdir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    args = ["import", str(logdir), "--sweep", "tb", "--db", url]
    assert main([*args, "--variant-from", "lr", "--seed-from", "seed", "--baseline", "1e-3"]) == 0
    out = capsys.readouterr().out
    assert "mapped 2 run(s) onto 2 variant(s): baseline, lr=3e-3" in out
    assert "7 point(s) into sweep 'tb': 2 run(s) (2 new)" in out
    store = db.open_store(url)
    runs = db.queries.runs(store, "tb").sort_values("variant")
    store.close()
    assert runs["variant"].tolist() == ["baseline", "lr=3e-3"]
    assert runs["knob"].tolist()[1] == "lr" and runs["n_points"].tolist() == [4, 3]


def test_run_regex_reads_params_from_directory_names(
    logdir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (logdir / "lr_1e-3_s0" / "params.json").unlink()
    mapping = tmp_path / "map.yaml"
    mapping.write_text(
        "run_regex: 'lr_(?P<rate>[^_]+)_s(?P<s>\\d+)'\nvariant: rate\nseed: s\nbaseline_run: 'lr_1e-3_*'\n"
    )
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["import", str(logdir), "--sweep", "tb", "--map", str(mapping), "--db", url]) == 0
    assert "onto 2 variant(s): baseline, rate=3e-3" in capsys.readouterr().out


def test_a_resumed_verl_run_that_re_logs_steps_imports_by_the_resume_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # verl's layout: one directory per experiment; the restart from the step-20 checkpoint after a
    # crash at step 30 writes a second event file that logs steps 21-30 again, then goes on to 40.
    run = tmp_path / "tensorboard_log" / "grpo" / "qwen-s0"
    run.mkdir(parents=True)
    write_events(run, 1700000009, [(s, s / 100) for s in range(1, 31)])
    write_events(run, 1700003600, [(s, s / 100 + 0.5) for s in range(21, 41)])
    (result,) = read_logdir(tmp_path / "tensorboard_log")
    (curve,) = result.curves
    assert not result.losses  # a resume is no loss
    assert curve.relogged == tuple(range(21, 31))
    assert curve.steps.tolist() == list(range(1, 41))
    assert curve.values[19] == pytest.approx(0.20) and curve.values[20] == pytest.approx(0.71)  # later kept

    url = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["import", str(tmp_path / "tensorboard_log"), "--sweep", "verl", "--db", url]) == 0
    out = capsys.readouterr().out
    assert "run 'grpo/qwen-s0': 10 step(s) re-logged after a restart; later values kept" in out
    assert "40 point(s) into sweep 'verl'" in out
    store = db.open_store(url)
    frame = db.queries.curves(store, "verl", "reward")
    store.close()
    assert frame["step"].tolist() == list(range(1, 41))
    assert frame["value"].tolist()[20:30] == pytest.approx([s / 100 + 0.5 for s in range(21, 31)])

    # A step logged twice within one file (no restart between) is still a loss.
    write_events(run, 1700007200, [(41, 0.9), (41, 0.91)])
    (result,) = read_logdir(tmp_path / "tensorboard_log")
    assert result.losses.counts == {"duplicate-step": 1} and result.curves[0].relogged == tuple(range(21, 31))
