"""Rule 4 of issue 26: hostile numbers and types get a clear error, never a traceback or a
half-written store.

Surfaces: every numeric CLI flag (one set of argparse types, exit 2), seeds from ``--seed-from``
and from sweep files (bounded before anything is written), a grid search's size (counted, never
built), pruner options (checked against the pruner's signature, at launch), the Python API's
arguments, the client's step, and ``scalerl db replay`` on a spool holding poisoned records."""

from __future__ import annotations

import json
import math
import resource
from pathlib import Path

import pytest

from scalerl import Sweep, db
from scalerl.db.spool import SpoolFile, check_row
from scalerl.harness import client
from scalerl.harness.cli import main
from scalerl.harness.errors import ConfigError, HarnessError, StoreError
from scalerl.harness.importers.mapping import RunMapping
from scalerl.harness.recipe import load_sweep
from tests.unit.execution import helpers
from tests.unit.execution.helpers import REPO

TINY_LOO = str(REPO / "recipes" / "tiny-loo.yaml")
# Flags are checked before the sweep file is read: if a check regressed, the command fails on the
# missing file instead of launching a real sweep.
MISSING = "no-such-sweep.yaml"
TINY_SEARCH = str(REPO / "recipes" / "tiny-search.yaml")


# ----------------------------------------------------------------- every numeric CLI flag


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["fit", "s", "--margin", "nan"], "argument --margin: must be a finite number in [0, 1)"),
        (["fit", "s", "--margin", "-1"], "argument --margin: must be in [0, 1), got -1"),
        (["fit", "s", "--window-start", "nan"], "argument --window-start: must be a finite number"),
        (["fit", "s", "--window-start", "-5"], "argument --window-start: must be in [0, inf), got -5"),
        (["fit", "s", "--window-fraction", "1"], "argument --window-fraction: must be in [0, 1), got 1"),
        (["fit", "s", "--seed-sd", "inf"], "argument --seed-sd: must be a finite number in (0, 1)"),
        (["fit", "s", "--boot", "1e9"], "argument --boot: not a whole number: '1e9'"),
        (["fit", "s", "--boot", "99999999999"], "argument --boot: must be at most 100000"),
        (["forecast", "s", "--at", "nan"], "argument --at: must be a finite number in (0, inf)"),
        (["forecast", "s", "--at", "1", "-1"], "argument --at: must be in (0, inf), got -1"),
        (["forecast", "s", "--level", "1e999"], "argument --level: must be a finite number in (0, 1)"),
        (["forecast", "s", "--reach", "nan"], "argument --reach: must be a finite number in (0, 1)"),
        (["sweep", MISSING, "--extend", "nan"], "argument --extend: must be a finite number in (0, inf)"),
        (["sweep", MISSING, "--poll-s", "-1"], "argument --poll-s: must be in (0, 86400], got -1"),
        (["sweep", MISSING, "--workers", "100000"], "argument --workers: must be at most 1024"),
        (["sweep", MISSING, "--max-parallel", "0"], "argument --max-parallel: must be at least 1"),
        (["config", MISSING, "--seed", str(2**63 - 1)], "argument --seed: must be at most 2147483647"),
        (["report", "s", "--max-points", "1e3"], "argument --max-points: not a whole number"),
        (["train", "r.yaml", "--seed", "inf"], "argument --seed: not a whole number: 'inf'"),
        (["train", "r.yaml", "--threads", "0"], "argument --threads: must be at least 1, got 0"),
    ],
)
def test_every_numeric_flag_refuses_hostile_numbers(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


# ----------------------------------------------------------------- seeds


@pytest.mark.parametrize("seed", ["inf", "1e30", "-1", "nan", "2147483648", "1.5", "x"])
def test_a_hostile_seed_from_a_param_fails_before_anything_is_written(seed: str) -> None:
    mapping = RunMapping(variant="v", seed="seed", baseline={"v": "base"})
    params = {
        "a": {"v": "base", "seed": "0"},
        "b": {"v": "base", "seed": "1"},
        "c": {"v": "base", "seed": seed},
    }
    with pytest.raises(ConfigError) as info:
        mapping.assign(params)
    assert "run 'c'" in str(info.value) and "[0, 2147483647]" in str(info.value)


def test_a_seed_past_the_store_fails_at_the_sweep_file() -> None:
    with pytest.raises(ConfigError) as info:
        load_sweep(TINY_LOO, ["seeds=[0, 3000000000]"])
    assert "seeds.1=3000000000" in str(info.value) and "<= 2147483647" in str(info.value)
    with pytest.raises(ConfigError):
        load_sweep(TINY_SEARCH, ["optuna.sampler.seed=99999999999"])


# ----------------------------------------------------------------- search space and pruner


def test_a_huge_grid_is_counted_not_built(tmp_path: Path) -> None:
    sweep = tmp_path / "grid.yaml"
    sweep.write_text(
        f"sweep: g\nbase: {REPO / 'recipes' / 'tiny.yaml'}\ndesign: optuna\n"
        "optuna:\n  space:\n    scale.prompts_per_batch: {type: int, low: 1, high: 300000000}\n"
        "    optimizer.lr: {type: float, low: 0.0, high: 1.0, step: 1.0e-300}\n"
        "  sampler: {type: grid}\n  objective: {kind: final}\n"
    )
    # Cap this process's address space at 2 GiB more than it holds now, so a regression fails
    # with MemoryError instead of taking the machine's memory.
    vm_kib = next(
        int(ln.split()[1])
        for ln in Path("/proc/self/status").read_text().splitlines()
        if ln.startswith("VmSize")
    )
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, ((vm_kib + (2 << 20)) * 1024, hard))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        with pytest.raises(ConfigError) as info:
            load_sweep(sweep)
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert "points" in str(info.value) and "more than 10000" in str(info.value)
    assert grown_kib < 200_000  # building 3e8 ints would take gigabytes


@pytest.mark.parametrize(
    ("pruner", "message"),
    [
        ('{type: median, options: {n_startup_trials: "x"}}', "must be a whole number, not the str 'x'"),
        ("{type: median, options: {n_startup_trials: 2.5}}", "must be a whole number, not the float 2.5"),
        ("{type: median, options: {n_startup_trials: true}}", "must be a whole number, not the bool True"),
        ("{type: median, options: {n_startup_trials: -1}}", "refused its options"),
        ("{type: hyperband, options: {reduction_factor: [3]}}", "must be a whole number"),
        ("{type: forecast, options: {level: .nan}}", "must be a finite number"),
        ("{type: forecast, options: {reference: up}}", "must be one of 'lo', 'value'"),
        ("{type: forecast, options: {level: 0.1}}", "outside the calibrated range"),
        ("{type: forecast, options: {rule: best}}", "must be one of 'bound', 'beat'"),
        ("{type: forecast, options: {rule: beat, margin_noise: .inf}}", "must be a finite number"),
    ],
)
def test_a_bad_pruner_option_fails_the_launch_with_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pruner: str, message: str
) -> None:
    store = tmp_path / "s.db"
    code = main(["sweep", TINY_SEARCH, f"optuna.pruner={pruner}", "--executor", "debug",
                 "--state-dir", str(tmp_path / "st"), "--db", f"sqlite:///{store}"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == ConfigError.exit_code
    assert message in err and "optuna.pruner.options" in err and "Traceback" not in err
    assert not store.exists() and not (tmp_path / "st").exists()  # nothing half-written


# ----------------------------------------------------------------- the Python API


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: Sweep.from_yaml(None), "must be a path (str or pathlib.Path), not NoneType"),
        (lambda: Sweep.from_yaml(5), "must be a path (str or pathlib.Path), not int"),
        (lambda: Sweep.from_yaml(b"x.yaml"), "not bytes"),
        (lambda: Sweep.from_yaml(TINY_LOO, "seeds=[1]"), "overrides must be a list"),
        (lambda: Sweep.from_yaml(TINY_LOO, None), "overrides must be a list"),
        (lambda: Sweep.from_yaml(TINY_LOO, [5]), "an override must be a 'key=value' string, not int"),
        (lambda: Sweep.from_dict(None), "a sweep dict must be a mapping"),
        (lambda: Sweep.from_dict([1]), "a sweep dict must be a mapping"),
        (lambda: Sweep.open(None), "a sweep name must be a non-empty string"),
        (lambda: Sweep.open("x", db=5), "database URL must be a string, not int"),
    ],
)
def test_the_api_refuses_wrong_types_from_the_exception_root(call: object, message: str) -> None:
    with pytest.raises(HarnessError) as info:
        call()  # type: ignore[operator]
    assert message in str(info.value)


@pytest.fixture
def client_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> db.Store:
    return helpers.client_run(tmp_path, monkeypatch)


@pytest.mark.parametrize(
    "step", ["x", 2**63 - 1, float(2**63 - 1), 2**63 + 5, -1, 1.5, math.nan, math.inf, True, None]
)
def test_the_client_refuses_a_hostile_step_at_log_time(
    client_run: db.Store, tmp_path: Path, step: object
) -> None:
    try:
        client.log(0, {"m": 0.1})
        with pytest.raises(StoreError) as info:
            client.log(step, {"m": 0.5})  # type: ignore[arg-type]
        assert "step=" in str(info.value) and "2147483647" in str(info.value)
        client.log(1, {"m": 0.2})  # the run goes on: later points are not sent to the spool
    finally:
        client.close()
    assert db.curves(client_run, "s", "m")["step"].tolist() == [0, 1]
    assert not list((tmp_path / "spool").glob("*.jsonl"))


def test_the_client_refuses_metrics_that_are_not_a_mapping(client_run: db.Store) -> None:
    try:
        with pytest.raises(ConfigError, match="metrics must be a mapping"):
            client.log(0, "x")  # type: ignore[arg-type]
        with pytest.raises(HarnessError):
            client.log(0, {"m": "x"})
        client.log(10.0, {"m": 0.3})  # an integral float step is still taken
    finally:
        client.close()
    assert db.curves(client_run, "s", "m")["step"].tolist() == [10]


# ----------------------------------------------------------------- spool replay


def test_replay_sets_poisoned_records_aside_and_drains_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = db.open_store(url)
    store.ensure_sweep("loo", {"design": "loo"})
    store.register_run(db.RunRecord("r1", "loo", "baseline", 0, {}, "h" * 16))
    a = store.start_attempt("r1")
    spool = tmp_path / "spool"
    f = SpoolFile(spool, "r1", a)
    empty = (None, None, None, None, None, None)
    f.append([(0, "m", 0.5, None, *empty)])
    f.append([(2**63 + 5, "m", 0.5, None, *empty), (1, "m", 0.6, None, *empty)])  # a step past int64
    f.append([(2, "m", math.nan, None, *empty), (3, "m", 0.7, None, None, math.inf, *empty[2:])])
    f.append([(4, "x" * 300, 0.1, None, *empty), ("5", "m", 0.1, None, *empty), (5, "m", 0.8, None, *empty)])
    f.release()
    with f.path.open("a") as fh:  # lines no writer of ours wrote
        fh.write("not json\n[1, 2]\n")
        fh.write(
            json.dumps({"v": 2, "run_id": "r1", "attempt": a, "rows": [[6, "m", 0.9] + [None] * 7]}) + "\n"
        )
    assert main(["db", "replay", url, "--spool", str(spool)]) == 1  # not everything was stored
    out = capsys.readouterr().out
    assert "5 points written" in out and "set aside 6 record(s)" in out
    assert not list(spool.glob("*.jsonl"))  # drained
    (quarantine,) = (spool / "quarantine").glob("*.jsonl")
    records = [json.loads(line) for line in quarantine.read_text().splitlines()]
    reasons = " | ".join(r["reason"] for r in records)
    assert len(records) == 6
    for part in ("step 9223372036854775813", "compute flops=inf", "300 characters", "step '5'"):
        assert part in reasons
    assert "not a JSON line" in reasons and "a JSON list" in reasons
    curves = db.curves(store, "loo", "m")
    assert curves["step"].tolist() == [0, 1, 2, 5, 6]  # step 2's NaN is kept as a non-finite point
    assert math.isnan(curves.set_index("step").loc[2, "value"])
    # Nothing is left to replay; a second replay is clean.
    assert main(["db", "replay", url, "--spool", str(spool)]) == 0
    store.close()


def test_check_row_normalises_a_raw_non_finite_value() -> None:
    row, problem = check_row([3, "m", math.inf, None, None, None, None, None, None, None])
    assert problem is None and row is not None and row[2] is None and row[3] == "+inf"
    assert check_row([3, "m", 1.0, "bogus"] + [None] * 6)[1] is not None
    assert check_row([3, "m", 1.0, None] + [None] * 5 + [0])[1] == "n=0 is not a whole number >= 1"
