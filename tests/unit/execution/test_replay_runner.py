"""The replay runner on real curve files (a W&B panel export and verl JSON lines) into a fake
sink: exact points, stop and resume without gaps or duplicates, the budget cap, the speed, and
the errors a bad source gets."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from scalerl.harness.errors import ConfigError, ExecutionError
from scalerl.harness.execution.runners import get_runner
from scalerl.harness.execution.runners.base import Outcome, RunContext
from scalerl.harness.execution.runners.replay import CHECKPOINT, ReplayRunner, check_sources
from scalerl.harness.execution.spec import RunSpec
from scalerl.harness.importers import read_curves
from scalerl.harness.recipe.loader import load_recipe
from scalerl.harness.recipe.schema import Recipe

REAL = Path("/work/shared/data/real-rl-curves")
WANDB = REAL / "wandb-export-deep-grpo" / "tree_methods_training_instability__test_reward.csv"
JSONL = REAL / "speedrl-dapo-json" / "1.5B-Math-FAST-RLOO-dataDAPO-N4+20" / "processed_metrics.json"
WANDB_METRIC = "val-core/openai/gsm8k/acc/mean@1"
MATH500 = "val-core/MATH500-Qwen-instruct/acc/mean@1"
REPO = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.skipif(not REAL.is_dir(), reason="the real curves are not on this machine")


class FakeSink:
    """Records every add (duplicates included) and the flushes between them."""

    def __init__(self, stop_after: int | None = None, stop: threading.Event | None = None) -> None:
        self.points: list[tuple[int, dict[str, float], dict[str, float], dict[str, int]]] = []
        self.flushes: list[int] = []  # number of points added at each flush
        self.stop_after, self.stop = stop_after, stop

    def add(
        self,
        step: int,
        metrics: Mapping[str, float],
        compute: Mapping[str, float],
        n: Mapping[str, int] | None = None,
    ) -> None:
        self.points.append((step, dict(metrics), dict(compute), dict(n or {})))
        if self.stop is not None and len(self.points) == self.stop_after:
            self.stop.set()

    def flush(self) -> None:
        self.flushes.append(len(self.points))


def _spec(
    tmp_path: Path, runner: dict[str, Any], budget: dict[str, Any] | None = None, **extra: Any
) -> RunSpec:
    recipe = Recipe.model_validate(
        {"name": "replay", "runner": runner, "budget": budget or {"value": 100_000, "unit": "steps"}, **extra}
    )
    return RunSpec(
        sweep="replay",
        variant="baseline",
        knob=None,
        alternative=None,
        seed=0,
        run_id="r0-s0",
        recipe=recipe.model_dump(mode="json"),
        workdir=str(tmp_path / "work"),
    )


def _run(
    spec: RunSpec, sink: FakeSink, stop: threading.Event | None = None, runner: ReplayRunner | None = None
) -> Outcome:
    workdir = Path(spec.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    ctx = RunContext(
        spec=spec, attempt=1, sink=sink, workdir=workdir, stop=stop or threading.Event(), db_url=None
    )
    return (runner or ReplayRunner()).run(ctx)


def _wandb_source() -> list[tuple[int, float]]:
    (curve,) = read_curves(WANDB)
    return list(zip(curve.steps.tolist(), curve.values.tolist(), strict=True))


def _jsonl_source() -> list[dict[str, Any]]:
    return [json.loads(line) for line in JSONL.read_text().splitlines() if line.strip()]


def test_the_registry_knows_the_replay_runner() -> None:
    assert isinstance(get_runner("replay"), ReplayRunner)


def test_wandb_csv_is_replayed_point_for_point(tmp_path: Path) -> None:
    sink = FakeSink()
    assert _run(_spec(tmp_path, {"type": "replay", "file": str(WANDB)}), sink) is Outcome.COMPLETED
    source = _wandb_source()
    assert len(source) == 186 and source[0] == (0, 0.4988627748294162) and source[-1][0] == 925
    assert [(s, m[WANDB_METRIC]) for s, m, _, _ in sink.points] == source
    assert all(set(m) == {WANDB_METRIC} and c == {} and n == {} for _, m, c, n in sink.points)  # a step axis
    assert sink.flushes[-1] == 186  # everything flushed before COMPLETED
    assert json.loads((tmp_path / "work" / CHECKPOINT).read_text()) == {"step": 925}


def test_verl_jsonl_with_metric_globs_and_a_compute_mapping(tmp_path: Path) -> None:
    runner = {
        "type": "replay",
        "file": str(JSONL),
        "metrics": ["val-core/MATH500-*/acc/mean@1", "val-core/AMC-*/acc/mean@4"],
        "compute": {
            "gpu_hours": {"column": "accumulated_training_time", "scale": 2 / 3600},
            "flops": {"column": "step", "scale": 1e15},
            "wall_s": "accumulated_training_time",
        },
    }
    sink = FakeSink()
    assert _run(_spec(tmp_path, runner), sink) is Outcome.COMPLETED
    lines = _jsonl_source()
    assert len(sink.points) == len(lines) == 18
    for (step, metrics, compute, _), line in zip(sink.points, lines, strict=True):
        assert step == line["train_global_steps"]
        assert metrics == {
            MATH500: line[MATH500],
            "val-core/AMC-Qwen-instruct/acc/mean@4": line["val-core/AMC-Qwen-instruct/acc/mean@4"],
        }
        t = line["accumulated_training_time"]
        assert compute == pytest.approx({"gpu_hours": t * 2 / 3600, "flops": step * 1e15, "wall_s": t})
    assert sink.points[0][1][MATH500] == 0.404


def test_default_compute_of_a_time_axis_is_what_import_stores(tmp_path: Path) -> None:
    # W&B "Relative Time (Process)" seconds: wall_s, and gpu_hours on one device, as `scalerl import`.
    path = REAL / "wandb-export-deep-grpo" / "scale_budget.csv"
    curve = read_curves(path)[0]
    sink = FakeSink()
    _run(_spec(tmp_path, {"type": "replay", "file": str(path), "run": curve.run}), sink)
    assert [s for s, _, _, _ in sink.points] == curve.steps.tolist()
    expected = [{"wall_s": x, "gpu_hours": x / 3600} for x in curve.x.tolist()]
    assert [c for _, _, c, _ in sink.points] == expected


def test_stop_midway_then_a_new_attempt_resumes_without_gaps_or_duplicates(tmp_path: Path) -> None:
    spec = _spec(tmp_path, {"type": "replay", "file": str(WANDB)}, checkpoint_every_steps=50)
    stop = threading.Event()
    first = FakeSink(stop_after=77, stop=stop)
    assert _run(spec, first, stop) is Outcome.STOPPED
    assert len(first.points) == 77 and first.flushes[-1] == 77  # flushed before stopping
    last = first.points[-1][0]
    assert ReplayRunner().resume_step(Path(spec.workdir)) == last == 380
    # Periodic checkpoints: every time the replay crossed a multiple of 50 steps, after a flush.
    assert first.flushes[:3] == [1, 11, 21]

    second = FakeSink()
    assert _run(spec, second) is Outcome.COMPLETED
    assert second.points[0][0] == last + 5
    replayed = [(s, m[WANDB_METRIC]) for s, m, _, _ in first.points + second.points]
    assert replayed == _wandb_source()
    # A requeue after completion resumes at the end and replays nothing.
    third = FakeSink()
    assert _run(spec, third) is Outcome.COMPLETED and third.points == []


def test_stop_before_the_first_point_leaves_no_checkpoint(tmp_path: Path) -> None:
    spec = _spec(tmp_path, {"type": "replay", "file": str(WANDB)})
    stop = threading.Event()
    stop.set()
    sink = FakeSink()
    assert _run(spec, sink, stop) is Outcome.STOPPED
    assert sink.points == [] and not (tmp_path / "work" / CHECKPOINT).exists()
    assert ReplayRunner().resume_step(tmp_path / "work") is None


def test_budget_in_steps_caps_the_replay(tmp_path: Path) -> None:
    sink = FakeSink()
    spec = _spec(tmp_path, {"type": "replay", "file": str(WANDB)}, {"value": 102, "unit": "steps"})
    assert _run(spec, sink) is Outcome.COMPLETED
    assert [s for s, _, _, _ in sink.points] == list(range(0, 101, 5))


def test_budget_in_a_compute_unit_caps_the_replay(tmp_path: Path) -> None:
    runner = {
        "type": "replay",
        "file": str(JSONL),
        "metrics": [MATH500],
        "compute": {"gpu_hours": {"column": "accumulated_training_time", "scale": 1 / 3600}},
    }
    sink = FakeSink()
    assert _run(_spec(tmp_path, runner, {"value": 3.0, "unit": "gpu_hours"}), sink) is Outcome.COMPLETED
    hours = [line["accumulated_training_time"] / 3600 for line in _jsonl_source()]
    kept = [h for h in hours if h <= 3.0]
    assert 0 < len(kept) < len(hours)
    assert [c["gpu_hours"] for _, _, c, _ in sink.points] == pytest.approx(kept)


def test_a_budget_unit_the_source_lacks_is_a_config_error(tmp_path: Path) -> None:
    spec = _spec(tmp_path, {"type": "replay", "file": str(WANDB)}, {"value": 1e18, "unit": "flops"})
    with pytest.raises(ConfigError) as info:
        _run(spec, FakeSink())
    assert info.value.field == "budget.unit" and "runner.compute.flops" in str(info.value)


def test_a_source_shorter_than_the_budget_completes_at_its_end(tmp_path: Path) -> None:
    sink = FakeSink()
    spec = _spec(tmp_path, {"type": "replay", "file": str(WANDB)}, {"value": 10_000, "unit": "steps"})
    assert _run(spec, sink) is Outcome.COMPLETED
    assert sink.points[-1][0] == 925


def test_speed_waits_between_points(tmp_path: Path) -> None:
    waits: list[float] = []
    spec = _spec(
        tmp_path,
        {"type": "replay", "file": str(JSONL), "metrics": [MATH500], "speed": 4},
    )
    sink = FakeSink()
    assert _run(spec, sink, runner=ReplayRunner(sleep=waits.append)) is Outcome.COMPLETED
    assert waits == [0.25] * (len(sink.points) - 1)

    waits.clear()
    fast = _spec(tmp_path / "fast", {"type": "replay", "file": str(JSONL), "metrics": [MATH500], "speed": 0})
    _run(fast, FakeSink(), runner=ReplayRunner(sleep=waits.append))
    assert waits == []


def test_a_stop_during_the_wait_stops_before_the_next_point(tmp_path: Path) -> None:
    stop = threading.Event()
    spec = _spec(tmp_path, {"type": "replay", "file": str(JSONL), "metrics": [MATH500], "speed": 0.001})
    sink = FakeSink()
    assert _run(spec, sink, stop, ReplayRunner(sleep=lambda s: stop.set())) is Outcome.STOPPED
    assert [s for s, _, _, _ in sink.points] == [0]
    assert ReplayRunner().resume_step(tmp_path / "work") == 0


def test_default_wait_is_on_the_stop_event(tmp_path: Path) -> None:
    # No injected sleep: a stop set during a 1000 s wait ends it at once.
    stop = threading.Event()
    spec = _spec(tmp_path, {"type": "replay", "file": str(JSONL), "metrics": [MATH500], "speed": 0.001})
    sink = FakeSink()
    outcome: list[Outcome] = []
    worker = threading.Thread(target=lambda: outcome.append(_run(spec, sink, stop)))
    worker.start()
    threading.Timer(0.2, stop.set).start()
    worker.join(timeout=60)
    assert not worker.is_alive() and outcome == [Outcome.STOPPED]
    assert len(sink.points) == 1


# --------------------------------------------------------------------------- errors
def test_missing_file_names_the_field_and_the_fix(tmp_path: Path) -> None:
    spec = _spec(tmp_path, {"type": "replay", "file": str(tmp_path / "nope.csv")})
    with pytest.raises(ConfigError) as info:
        _run(spec, FakeSink())
    assert info.value.field == "runner.file" and "nope.csv" in str(info.value)
    assert "no such curve file" in str(info.value) and "fix:" in str(info.value)
    with pytest.raises(ConfigError, match=r"runner\.file"):
        check_sources([spec])  # what `scalerl sweep` runs before submitting


def test_unknown_run_in_a_file_lists_the_runs(tmp_path: Path) -> None:
    multi = REAL / "wandb-export-deep-grpo" / "training_dynamics__test_reward.csv"
    with pytest.raises(ConfigError) as info:
        _run(_spec(tmp_path, {"type": "replay", "file": str(multi)}), FakeSink())
    assert info.value.field == "runner.run" and "holds 2 runs" in str(info.value)
    runs = sorted({c.run for c in read_curves(multi)})
    with pytest.raises(ConfigError) as info:
        _run(_spec(tmp_path, {"type": "replay", "file": str(multi), "run": "nope"}), FakeSink())
    assert info.value.field == "runner.run" and info.value.value == "nope" and runs[0] in str(info.value)
    sink = FakeSink()
    _run(_spec(tmp_path, {"type": "replay", "file": str(multi), "run": runs[0]}), sink)
    (curve,) = [c for c in read_curves(multi) if c.run == runs[0]]
    assert [s for s, _, _, _ in sink.points] == curve.steps.tolist()


def test_unknown_metric_and_unknown_column_are_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        _run(_spec(tmp_path, {"type": "replay", "file": str(JSONL), "metrics": ["val/nope"]}), FakeSink())
    assert info.value.field == "runner.metrics" and MATH500 in str(info.value)
    bad = {"type": "replay", "file": str(JSONL), "compute": {"flops": "no_such_key"}}
    with pytest.raises(ConfigError) as info:
        _run(_spec(tmp_path, bad), FakeSink())
    assert info.value.field == "runner.compute.flops.column" and "accumulated_training_time" in str(
        info.value
    )


def test_unknown_stored_run_names_the_run_id(tmp_path: Path) -> None:
    from scalerl import db

    url = f"sqlite:///{tmp_path / 's.db'}"
    db.open_store(url).close()
    spec = _spec(tmp_path, {"type": "replay", "run_id": "feedfacefeedface-s0", "db_url": url})
    with pytest.raises(ConfigError) as info:
        _run(spec, FakeSink())
    assert info.value.field == "runner.run_id" and info.value.value == "feedfacefeedface-s0"
    assert "no such run" in str(info.value)
    with pytest.raises(ConfigError, match=r"runner\.run_id"):
        check_sources([spec])
    itself = _spec(tmp_path, {"type": "replay", "run_id": "r0-s0", "db_url": url})
    with pytest.raises(ConfigError, match="cannot replay itself"):
        _run(itself, FakeSink())


@pytest.mark.parametrize(
    ("runner", "expected"),
    [
        (
            "{type: replay, file: a.csv, run_id: abc-s0}",
            ["runner", "both file='a.csv' and run_id='abc-s0'", "exactly one"],
        ),
        ("{type: replay}", ["runner", "neither given", "fix: give exactly one of file"]),
        ("{type: replay, run_id: a, run: b}", ["run='b' only applies to a file source"]),
        ("{type: replay, file: a.csv, db_url: 'sqlite:///x.db'}", ["db_url only applies"]),
        ("{type: replay, file: a.csv, format: nope}", ["format='nope'", "wandb-csv"]),
        ("{type: replay, run_id: a, db_url: 'postgresql://u:hunter2@h/db'}", ["holds a password", "pgpass"]),
        ("{type: replay, file: a.csv, speed: -1}", ["runner.speed=-1", ">= 0"]),
        ("{type: replay, file: a.csv, compute: {gpus: x}}", ["runner.compute.gpus", "gpu_hours"]),
        (
            "{type: replay, file: a.csv, compute: {flops: {column: step, scale: 0}}}",
            ["runner.compute.flops.scale"],
        ),
        ("{type: replay, files: a.csv}", ["unknown key 'files'", "did you mean 'file'"]),
    ],
)
def test_bad_replay_configs_name_field_value_and_fix(
    tmp_path: Path, runner: str, expected: list[str]
) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(f"name: r\nrunner: {runner}\n")
    with pytest.raises(ConfigError) as info:
        load_recipe(path)
    text = str(info.value)
    assert "r.yaml:2" in text and "hunter2" not in text
    for part in expected:
        assert part in text


def test_the_example_recipe_replays(tmp_path: Path) -> None:
    recipe = load_recipe(REPO / "recipes" / "examples" / "replay-recipe.yaml")
    spec = RunSpec(
        sweep="ex",
        variant="baseline",
        knob=None,
        alternative=None,
        seed=0,
        run_id="ex-s0",
        recipe=recipe.model_dump(mode="json"),
        workdir=str(tmp_path / "work"),
    )
    waits: list[float] = []
    sink = FakeSink()
    assert _run(spec, sink, runner=ReplayRunner(sleep=waits.append)) is Outcome.COMPLETED
    assert len(sink.points) == 32 and sink.points[-1][1] == {MATH500: 0.806}
    assert sink.points[-1][2] == pytest.approx({"gpu_hours": 178.12005, "flops": 7.75e17})
    assert waits == [0.05] * 31


def test_a_corrupt_checkpoint_is_an_execution_error(tmp_path: Path) -> None:
    (tmp_path / CHECKPOINT).write_text("{not json")
    with pytest.raises(ExecutionError, match="delete it"):
        ReplayRunner().resume_step(tmp_path)
    (tmp_path / CHECKPOINT).write_text('{"step": "x"}')
    with pytest.raises(ExecutionError, match="integer step"):
        ReplayRunner().resume_step(tmp_path)
