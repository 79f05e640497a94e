"""The forecast pruners in plain Optuna studies: BoundPruner on synthetic sigmoids (warm-up,
directions, quantile mode, an RDB storage, replayed real curves), BeatPruner (P of beating the
incumbent), the forecaster seam, and ForecastPruner (the rule-name factory recipes use)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import optuna
import pytest
from optuna.trial import TrialState

from scalerl.harness.analysis.fit.curve import sigmoid_curve
from scalerl.harness.analysis.forecast.calibrations import (
    FINISHED_SWEEP_CALIBRATION,
    LINEAR_CALIBRATION,
    SWEEP_CALIBRATION,
)
from scalerl.harness.analysis.forecast.peers import exceed_probability, peer_forecast, smoothed_at
from scalerl.harness.errors import ConfigError
from scalerl.harness.importers import read_curves
from scalerl.harness.optuna import (
    RULES,
    BeatPruner,
    BoundPruner,
    EnsembleForecaster,
    ForecastPruner,
    beat_probability,
    central_level,
    late_noise,
    sweep_noise,
)

REAL = Path("/work/shared/data/real-rl-curves")
STEPS = np.arange(5, 205, 5)  # 40 reports, compute 5..200
TARGET = 200.0

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _curve(a: float, c_mid: float = 40.0, seed: int = 0, sd: float = 0.005) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return sigmoid_curve(STEPS, 0.1, a, 2.0, c_mid) + rng.normal(0.0, sd, STEPS.size)


def _replay(study: optuna.Study, curves: Sequence[np.ndarray], steps: np.ndarray = STEPS) -> list[int]:
    """Run one trial per curve, in order; returns the step each was pruned at (-1: completed)."""
    out: list[int] = []
    for y in curves:
        trial = study.ask()
        stop = -1
        for s, v in zip(steps, y, strict=True):
            trial.report(float(v), int(s))
            if trial.should_prune():
                stop = int(s)
                break
        if stop >= 0:
            study.tell(trial, state=TrialState.PRUNED)
        else:
            study.tell(trial, float(np.mean(y[-3:])))
        out.append(stop)
    return out


def test_worse_trial_pruned_best_kept() -> None:
    study = optuna.create_study(direction="maximize", pruner=BoundPruner(TARGET))
    stops = _replay(
        study, [_curve(0.8, seed=1), _curve(0.4, seed=2), _curve(0.81, seed=3), _curve(0.6, seed=4)]
    )
    # The 0.4 and 0.6 ceilings are pruned well before the target; both 0.8x curves complete.
    assert stops[0] == -1 and stops[2] == -1
    assert 0 < stops[1] <= 80 and 0 < stops[3] <= 100
    assert [t.state for t in study.trials] == [TrialState.COMPLETE, TrialState.PRUNED] * 2


def test_inflection_margin_guards_a_close_call() -> None:
    # Deciding as soon as the fit puts C_mid inside the data (margin 1) prunes the 0.81 trial at
    # ~C_mid (the fit underestimates its ceiling with a narrow interval); the default margin
    # waits and keeps it. bench/search/settings.py's passes_guard rejects every setting that prunes it.
    curves = [_curve(0.8, seed=1), _curve(0.4, seed=2), _curve(0.81, seed=3), _curve(0.6, seed=4)]
    eager = optuna.create_study(direction="maximize", pruner=BoundPruner(TARGET, inflection_margin=1.0))
    assert 0 < _replay(eager, curves)[2] <= 40
    study = optuna.create_study(direction="maximize", pruner=BoundPruner(TARGET))
    assert _replay(study, curves)[2] == -1


def test_edge_and_reference() -> None:
    curves = [_curve(0.8, seed=1), _curve(0.4, seed=2), _curve(0.6, seed=4), _curve(0.77, seed=5)]
    stops = {}
    for edge, ref in (("hi", "lo"), ("hi", "value"), ("value", "lo")):
        pruner = BoundPruner(TARGET, edge=edge, reference=ref)
        assert (pruner.edge, pruner.reference) == (edge, ref)
        stops[(edge, ref)] = _replay(optuna.create_study(direction="maximize", pruner=pruner), curves)
    hi_lo = stops[("hi", "lo")]
    assert hi_lo[0] == -1 and all(s > 0 for s in hi_lo[1:3])
    # A tighter bar (the best point forecast) or the trial's own point forecast prunes no later,
    # and the 0.77 ceiling (0.03 under the best) earlier than the two-sided interval rule (which
    # waits until step ~180 for the intervals to part).
    for key in (("hi", "value"), ("value", "lo")):
        got = stops[key]
        assert got[0] == -1
        assert all(0 < g <= h or (h == -1 and g != 0) for g, h in zip(got[1:], hi_lo[1:], strict=True))
        assert got[3] > 0 and (hi_lo[3] == -1 or got[3] < hi_lo[3])
    with pytest.raises(ConfigError, match="reference"):
        BoundPruner(TARGET, reference="hi")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="edge"):
        BoundPruner(TARGET, edge="lo")  # type: ignore[arg-type]


def test_warm_up_points_and_inflection() -> None:
    pruner = BoundPruner(TARGET, min_points=12)
    study = optuna.create_study(direction="maximize", pruner=pruner)
    _replay(study, [_curve(0.8, seed=1)])
    bad = _curve(0.3, seed=2)
    trial = study.ask()
    verdicts = []
    for s, v in zip(STEPS, bad, strict=True):
        trial.report(float(v), int(s))
        verdicts.append(trial.should_prune())
    assert not any(verdicts[:11])  # fewer than min_points
    assert verdicts.index(True) >= 11
    # A slow riser still before its inflection (C_mid 400 >> last compute 100): its forecast
    # alone would prune it, the inflection rule keeps it running.
    slow = sigmoid_curve(STEPS[:20], 0.1, 0.9, 2.0, 400.0)
    kept = optuna.create_study(direction="maximize", pruner=BoundPruner(TARGET))
    loose = optuna.create_study(direction="maximize", pruner=BoundPruner(TARGET, require_inflection=False))
    for st in (kept, loose):
        _replay(st, [_curve(0.8, seed=1)])
    assert _replay(kept, [slow], STEPS[:20]) == [-1]
    assert _replay(loose, [slow], STEPS[:20])[0] > 0
    assert not BoundPruner(TARGET).forecast(kept, kept.trials[-1]).past_inflection


def test_minimize_mirrors() -> None:
    study = optuna.create_study(direction="minimize", pruner=BoundPruner(TARGET))
    losses = [1.0 - _curve(0.8, seed=1), 1.0 - _curve(0.4, seed=2), 1.0 - _curve(0.82, seed=3)]
    stops = _replay(study, losses)
    assert stops[0] == -1 and stops[2] == -1 and 0 < stops[1] <= 80
    # The same curves maximised: the good ones are now the worst and get pruned instead.
    flipped = optuna.create_study(direction="maximize", pruner=BoundPruner(TARGET))
    assert _replay(flipped, [losses[1], losses[0], losses[2]])[1:] != [-1, -1]


def test_quantile_mode() -> None:
    done = [_curve(a, seed=i) for i, a in enumerate((0.8, 0.6, 0.5))]
    for q, expect_pruned in ((0.5, False), (0.9, True)):
        pruner = BoundPruner(TARGET, quantile=q, min_completed=3)
        study = optuna.create_study(direction="maximize", pruner=pruner)
        stops = _replay(study, [*done, _curve(0.7, seed=9)])
        assert stops[:3] == [-1, -1, -1]
        # Completed forecasts at the target are ~0.8, 0.6, 0.5: the median (0.6) cannot prune a
        # 0.7 ceiling; the 0.9-quantile (~0.76) can.
        assert (stops[3] > 0) is expect_pruned
    study = optuna.create_study(
        direction="maximize", pruner=BoundPruner(TARGET, quantile=0.5, min_completed=3)
    )
    assert _replay(study, [*done, _curve(0.45, seed=9)])[3] > 0


def test_needs_a_completed_trial_and_single_objective() -> None:
    study = optuna.create_study(direction="maximize", pruner=BoundPruner(TARGET, min_completed=2))
    assert _replay(study, [_curve(0.8, seed=1), _curve(0.3, seed=2)]) == [-1, -1]
    assert _replay(study, [_curve(0.3, seed=3)])[0] > 0
    multi = optuna.create_study(directions=["maximize", "maximize"])
    multi.tell(multi.ask(), [0.1, 0.2])
    with pytest.raises(ConfigError, match="single-objective"):
        BoundPruner(TARGET).prune(multi, multi.trials[0])
    with pytest.raises(ConfigError, match="target"):
        BoundPruner(0.0)
    with pytest.raises(ConfigError, match="level"):
        BoundPruner(TARGET, level=0.99)


def test_rdb_storage(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'study.db'}"
    storage = optuna.storages.RDBStorage(url)
    study = optuna.create_study(
        study_name="s", storage=storage, direction="maximize", pruner=BoundPruner(TARGET)
    )
    stops = _replay(study, [_curve(0.8, seed=1), _curve(0.4, seed=2)])
    assert stops[0] == -1 and 0 < stops[1] <= 80
    # A second process (fresh pruner, empty cache) reading the same database decides the same.
    again = optuna.load_study(
        study_name="s", storage=optuna.storages.RDBStorage(url), pruner=BoundPruner(TARGET)
    )
    assert _replay(again, [_curve(0.4, seed=2)]) == [stops[1]]


def _real_pool() -> list[tuple[np.ndarray, np.ndarray]]:
    """The SPEED-RL MATH500 curves (1.5B and 7B) that reach 700 steps, cut there (29 points)."""
    out = []
    for f in sorted((REAL / "speedrl-dapo-json").glob("*/processed_metrics.json")):
        c = read_curves(f, metric="val-core/MATH500*/acc/mean@*")[0]
        if c.steps[-1] >= 700:
            keep = c.steps <= 700
            out.append((c.steps[keep].astype(np.int64), c.values[keep].astype(np.float64)))
    return out


def test_real_curves_best_never_pruned() -> None:
    pool = _real_pool()
    assert len(pool) == 17
    finals = [float(np.mean(y[-3:])) for _, y in pool]
    best = int(np.argmax(finals))
    pruned = 0
    for seed in range(3):
        order = list(np.random.default_rng(seed).permutation(len(pool)))
        order.remove(best)
        order.insert(seed * 7, best)  # the best first, in the middle, late
        study = optuna.create_study(direction="maximize", pruner=BoundPruner(700.0))
        for i in order:
            x, y = pool[i]
            stops = _replay(study, [y], x)
            if i == best:
                assert stops == [-1], f"seed {seed}: the best curve was pruned at step {stops[0]}"
            pruned += stops[0] > 0
    assert pruned >= 10  # it does prune: 14 of the 48 other trials when written


# --- rule="beat": prune on P(beating the incumbent's observed result) -------------------------

GUARD = [_curve(0.8, seed=1), _curve(0.4, seed=2), _curve(0.81, seed=3), _curve(0.6, seed=4)]


def test_beat_prunes_the_worse_and_keeps_a_close_call() -> None:
    pruner = BeatPruner(TARGET)
    study = optuna.create_study(direction="maximize", pruner=pruner)
    stops = _replay(study, GUARD)
    # 0.4 and 0.6 ceilings against a 0.80 incumbent: pruned once their fits put 2x C_mid inside
    # the data (C_mid 40); the 0.81 ceiling (0.01 above the incumbent) completes.
    assert stops[0] == -1 and stops[2] == -1
    assert 60 <= stops[1] <= 100 and 60 <= stops[3] <= 100
    # The forecasts borrowed from the sweep once two other trials had enough points.
    last = study.trials[3]
    assert pruner.forecast(study, last).method == "sweep"
    assert pruner.probability(study, last) < pruner.min_probability == 0.05
    assert pruner.probability(study, study.trials[2]) > 0.3  # the 0.81 trial, against 0.80


def test_beat_probability_monotone_and_symmetric() -> None:
    cal = LINEAR_CALIBRATION  # the pruner's default
    # At each calibrated quantile the central level is that level; beyond the last it keeps rising.
    for lv, q in zip(cal.levels, cal.quantiles, strict=True):
        assert central_level(q, cal) == pytest.approx(lv)
    assert 0.98 < central_level(5.0, cal) < central_level(6.0, cal) < 1.0
    gaps = np.linspace(-0.3, 0.3, 61)
    p = [beat_probability(0.7, 0.05, 0.7 + g, cal) for g in gaps]
    assert all(a > b for a, b in itertools.pairwise(p))  # strictly decreasing in the gap
    assert beat_probability(0.7, 0.05, 0.7, cal) == pytest.approx(0.5)
    for g in (0.01, 0.05, 0.2):
        assert beat_probability(0.7, 0.05, 0.7 + g, cal) + beat_probability(0.7, 0.05, 0.7 - g, cal) == (
            pytest.approx(1.0)
        )
    # The incumbent 2.171 units above the forecast: the 90% interval's upper edge, P = 5%.
    assert beat_probability(0.7, 0.05, 0.7 + 2.171 * 0.05, cal) == pytest.approx(0.05)
    assert np.isnan(beat_probability(np.nan, 0.05, 0.7, cal))


def test_beat_minimize_mirrors() -> None:
    maxi = optuna.create_study(direction="maximize", pruner=BeatPruner(TARGET))
    mini = optuna.create_study(direction="minimize", pruner=BeatPruner(TARGET))
    losses = [1.0 - y for y in GUARD]
    assert _replay(mini, losses) == _replay(maxi, GUARD)
    assert [t.state for t in mini.trials] == [TrialState.COMPLETE, TrialState.PRUNED] * 2


def test_beat_uses_the_calibrations() -> None:
    # Quantiles 20x wider: the 0.6 trial keeps a real chance of beating 0.80.
    wide = replace(LINEAR_CALIBRATION, quantiles=tuple(20 * q for q in LINEAR_CALIBRATION.quantiles))
    wide_sweep = replace(SWEEP_CALIBRATION, quantiles=tuple(20 * q for q in SWEEP_CALIBRATION.quantiles))
    loose = BeatPruner(TARGET, calibration=wide, sweep_calibration=wide_sweep)
    tight = BeatPruner(TARGET)
    wide_stops = _replay(optuna.create_study(direction="maximize", pruner=loose), GUARD)
    study = optuna.create_study(direction="maximize", pruner=tight)
    stops = _replay(study, GUARD)
    assert stops[3] > 0 and wide_stops[3] == -1  # the 0.6 trial survives the wide calibration
    assert wide_stops[1] == -1 or wide_stops[1] >= stops[1] > 0
    # The same trial in the same study: the wider calibration gives it a larger chance.
    assert 0.05 < loose.probability(study, study.trials[3]) < 0.5
    assert tight.probability(study, study.trials[3]) < 0.05
    # With one sibling the single-curve forecast and `calibration` decide; sweep_calibration
    # alone widened changes nothing there.
    two = [GUARD[0], GUARD[1]]
    only_sweep = BeatPruner(TARGET, sweep_calibration=wide_sweep)
    default = BeatPruner(TARGET)
    s1 = optuna.create_study(direction="maximize", pruner=only_sweep)
    s2 = optuna.create_study(direction="maximize", pruner=default)
    got = _replay(s1, two)
    assert got == _replay(s2, two) and got[0] == -1 and got[1] > 0
    assert only_sweep.forecast(s1, s1.trials[1]).method == "single"
    with pytest.raises(ConfigError, match="min_probability"):
        BeatPruner(TARGET, min_probability=1.0)
    with pytest.raises(ConfigError, match="calibration"):
        BeatPruner(TARGET, calibration=0.9)  # type: ignore[arg-type]


def test_beat_margin_keeps_a_near_tie_and_still_prunes_the_clear_loser() -> None:
    # Noise sd 0.01: a 0.775 ceiling against a 0.80 incumbent is 2.5 noise sds short, a near-tie.
    # (With issue 37's sweep calibration, wider than before, a 0.78 is kept even without a margin.)
    curves = [_curve(0.8, seed=1, sd=0.01), _curve(0.4, seed=2, sd=0.01), _curve(0.775, seed=3, sd=0.01)]
    noise = sweep_noise([curves[0]])  # the one COMPLETE trial when the 0.78 trial is decided
    assert noise == pytest.approx(late_noise(curves[0])) and 0.01 < noise < 0.02
    plain = BeatPruner(TARGET, margin_noise=0)
    study = optuna.create_study(direction="maximize", pruner=plain)
    assert _replay(study, curves) == [-1, 65, 85]  # without a margin the near-tie is pruned
    default = optuna.create_study(direction="maximize", pruner=BeatPruner(TARGET))
    assert _replay(default, curves) == [-1, 65, -1]  # the default is a 1-sd margin
    for m in (1.0, 2.0):
        wide = optuna.create_study(direction="maximize", pruner=BeatPruner(TARGET, margin_noise=m))
        assert _replay(wide, curves) == [-1, 65, -1]  # kept; the 0.4 trial pruned as before
    # The margin moves the bar by margin_noise x the sweep's noise, nothing else.
    margin = BeatPruner(TARGET, margin_noise=1.5)
    trial = study.trials[2]
    own = plain.forecast(study, trial)
    assert own.siblings == ((0, 40), (1, 13))  # the two earlier trials: the same forecast prune used
    incumbent = float(study.trials[0].value or 0.0)
    want = beat_probability(own.value, own.unit, incumbent - 1.5 * noise, SWEEP_CALIBRATION)
    assert margin.probability(study, trial) == pytest.approx(want)
    assert margin.probability(study, trial) > plain.probability(study, trial)


def test_beat_margin_is_validated() -> None:
    for bad in (-0.5, float("nan"), float("inf")):
        with pytest.raises(ConfigError, match="margin_noise"):
            BeatPruner(TARGET, margin_noise=bad)
    assert BeatPruner(TARGET).margin_noise == 1.0
    assert np.isnan(late_noise(np.array([0.1, 0.2]))) and np.isnan(sweep_noise([]))


PEER_RUN = [(0.6, 1), (0.7, 2), (0.75, 3), (0.8, 4), (0.4, 5), (0.79, 6), (0.65, 7)]  # (ceiling, seed)


def test_peers_decide_before_the_inflection() -> None:
    curves = [_curve(a, seed=s) for a, s in PEER_RUN]
    plain = BeatPruner(TARGET)
    peers = BeatPruner(TARGET, peers=3)
    s0 = optuna.create_study(direction="maximize", pruner=plain)
    s3 = optuna.create_study(direction="maximize", pruner=peers)
    # The sweep forecast waits for 2x C_mid (step 80) and keeps the 0.79 ceiling (P ~0.5); the
    # peers (4 COMPLETE trials on the same schedule) decide at the 8th report, C_mid itself, and
    # read the 0.79 ceiling as 2 noise sds short of the 0.80 incumbent (the margin is 1 sd).
    assert _replay(s0, curves) == [-1, -1, -1, -1, 80, -1, 80]
    assert _replay(s3, curves) == [-1, -1, -1, -1, 40, 130, 40]
    assert plain.probability(s0, s0.trials[5]) > 0.4
    p = peers.probability(s3, s3.trials[5])
    assert 0.0 < p < peers.min_probability
    # The probability is the peer forecast's, from the 4 COMPLETE trials at the trial's compute.
    done = [t for t in s3.trials if t.state == TrialState.COMPLETE]
    upto = max(s3.trials[5].intermediate_values)
    xs = [smoothed_at(*_steps_values(t), upto) for t in done]
    bar = max(float(t.value or 0.0) for t in done) - sweep_noise([_steps_values(t)[1] for t in done])
    own = smoothed_at(*_steps_values(s3.trials[5]), upto)
    want = exceed_probability(peer_forecast(own, xs, [float(t.value or 0.0) for t in done]), bar)
    assert p == pytest.approx(want)
    # Minimised losses are mirrored: the same decisions.
    mini = optuna.create_study(direction="minimize", pruner=BeatPruner(TARGET, peers=3))
    assert _replay(mini, [1.0 - y for y in curves]) == [-1, -1, -1, -1, 40, 130, 40]


def _steps_values(t: optuna.trial.FrozenTrial) -> tuple[np.ndarray, np.ndarray]:
    steps = sorted(t.intermediate_values)
    return np.asarray(steps, dtype=np.float64), np.array([t.intermediate_values[s] for s in steps])


@pytest.mark.parametrize("seeds", [(1, 2, 3, 4, 5), (6, 7, 8, 9, 10), (11, 12, 13, 14, 15)])
def test_peers_keep_the_close_call(seeds: tuple[int, ...]) -> None:
    # The guard's close call with peers in play: a 0.81 (and a 0.80) ceiling after four COMPLETE
    # trials up to 0.80 is never pruned.
    for last in (0.81, 0.8):
        curves = [_curve(a, seed=s) for a, s in zip((0.6, 0.7, 0.75, 0.8, last), seeds, strict=True)]
        study = optuna.create_study(direction="maximize", pruner=BeatPruner(TARGET, peers=3))
        assert _replay(study, curves) == [-1] * 5


def test_peers_validated_and_off_by_default() -> None:
    assert BeatPruner(TARGET).peers == 0
    for bad in (1, -1, 2.5, True):
        with pytest.raises(ConfigError, match="peers"):
            BeatPruner(TARGET, peers=bad)  # type: ignore[arg-type]
    # With fewer COMPLETE trials than `peers` the sweep forecast decides, exactly as without peers
    # (the 0.4 and 0.79 ceilings see 4); the 0.65 ceiling sees 5 and its peers decide at C_mid.
    assert _replay(
        optuna.create_study(direction="maximize", pruner=BeatPruner(TARGET, peers=5)),
        [_curve(a, seed=s) for a, s in PEER_RUN],
    ) == [-1, -1, -1, -1, 80, -1, 40]


def test_finished_calibration_where_siblings_ran_on() -> None:
    # Two COMPLETE trials ran to 200; the fourth trial is decided at 80-100: its siblings ran on to
    # 2x its last compute, so with finished_calibration set its interval is that calibration's.
    pruner = BeatPruner(TARGET, finished_calibration=FINISHED_SWEEP_CALIBRATION)
    study = optuna.create_study(direction="maximize", pruner=pruner)
    stops = _replay(study, GUARD)
    assert stops[0] == -1 and stops[2] == -1 and 0 < stops[3] <= 100
    last = study.trials[3]
    f = pruner.forecast(study, last)
    assert f.method == "sweep" and f.finished
    assert [n for n, _ in f.siblings] == [0, 1, 2]
    assert pruner.forecast(study, last) is f  # cached
    # Off by default: the same study read with the sweep calibration, flagged not finished.
    plain = BeatPruner(TARGET)
    g = plain.forecast(study, last)
    assert not g.finished and g.value == pytest.approx(f.value)
    # The 90% half-width (unit x the calibration's 90% quantile) is the finished one's, narrower.
    assert f.unit * FINISHED_SWEEP_CALIBRATION.quantile(0.9) < g.unit * SWEEP_CALIBRATION.quantile(0.9)
    with pytest.raises(ConfigError, match="finished_calibration"):
        BeatPruner(TARGET, finished_calibration=0.9)  # type: ignore[arg-type]


# --- the forecaster seam, and the rule-name factory ------------------------------------------


class _Counting(EnsembleForecaster):
    """The library's forecasts, counted: a stand-in for a benchmark's memoising forecaster."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = {"single": 0, "sweep": 0, "sigmoid": 0}

    def single(self, curves, at):  # type: ignore[no-untyped-def]
        self.calls["single"] += 1
        return super().single(curves, at)

    def sweep(self, curves, at, siblings):  # type: ignore[no-untyped-def]
        self.calls["sweep"] += 1
        return super().sweep(curves, at, siblings)

    def sigmoid(self, curves, r0):  # type: ignore[no-untyped-def]
        self.calls["sigmoid"] += 1
        return super().sigmoid(curves, r0)


@pytest.mark.parametrize("cls", [BoundPruner, BeatPruner])
def test_the_forecaster_is_passed_in(cls: type[BoundPruner] | type[BeatPruner]) -> None:
    counting = _Counting()
    passed = optuna.create_study(direction="maximize", pruner=cls(TARGET, forecaster=counting))
    default = optuna.create_study(direction="maximize", pruner=cls(TARGET))
    assert _replay(passed, GUARD) == _replay(default, GUARD)
    assert counting.calls["sigmoid"] > 0  # the inflection check fits through it
    assert counting.calls["sweep" if cls is BeatPruner else "single"] > 0


def test_forecast_pruner_maps_the_rule_to_its_class() -> None:
    assert type(ForecastPruner(TARGET)) is BoundPruner
    assert {"bound": BoundPruner, "beat": BeatPruner} == RULES
    beat = ForecastPruner(TARGET, rule="beat", min_probability=0.1)
    assert isinstance(beat, BeatPruner) and beat.rule == "beat" and beat.min_probability == 0.1
    # The other rule's options were accepted (and ignored) by the single class before: still so,
    # with a warning that names them.
    with pytest.warns(UserWarning, match="level: only rule 'bound' uses it"):
        assert isinstance(ForecastPruner(TARGET, rule="beat", level=0.8), BeatPruner)
    with pytest.raises(ConfigError, match="rule"):
        ForecastPruner(TARGET, rule="best")
    with pytest.raises(TypeError, match="nope"):
        ForecastPruner(TARGET, nope=1)
