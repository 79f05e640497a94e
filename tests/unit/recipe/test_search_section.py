"""The ``optuna:`` section of a search sweep: valid files load, bad ones name file:line, field and fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from scalerl.harness.errors import ConfigError
from scalerl.harness.recipe import load_sweep
from tests.unit.execution.helpers import REPO


def _write(tmp_path: Path, optuna: dict[str, Any], **top: Any) -> Path:
    spec = {
        "sweep": "s",
        "base": str(REPO / "recipes" / "tiny.yaml"),
        "design": "optuna",
        "optuna": optuna,
        "seeds": [0],
        "fit": {"axis": "step"},
        **top,
    }
    path = tmp_path / "search.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


LR = {"type": "float", "low": 1e-4, "high": 3e-3, "log": True}


def test_the_shipped_search_file_loads_with_typed_distributions() -> None:
    import optuna

    from scalerl.harness.search.space import distributions, make_pruner, make_sampler, pruner_target

    sweep = load_sweep(REPO / "recipes" / "tiny-search.yaml")
    assert sweep.optuna is not None and sweep.variants == ()
    dists = distributions(sweep.optuna)
    assert (
        isinstance(dists["optimizer.lr"], optuna.distributions.FloatDistribution)
        and dists["optimizer.lr"].log
    )
    assert dists["knobs.loss.choice"].choices == ("cispo", "dapo")
    assert isinstance(make_sampler(sweep.optuna), optuna.samplers.TPESampler)
    assert pruner_target(sweep) == 150.0  # the budget, on the step axis
    assert type(make_pruner(sweep)).__name__ == "BoundPruner"


@pytest.mark.parametrize(
    ("optuna", "top", "needle"),
    [
        ({"space": {"optimizer.lr": {**LR, "low": 5e-3}}}, {}, "must be below high"),
        ({"space": {"optimizer.lr": {**LR, "low": 0.0}}}, {}, "a log range needs low > 0"),
        (
            {"space": {"optimizer.lr": {"type": "uniform", "low": 0, "high": 1}}},
            {},
            "optuna.space.optimizer.lr",
        ),
        ({"space": {"optimizer.lr": LR}, "sampler": {"type": "grid"}}, {}, "grid needs a finite space"),
        ({"space": {"optimizer.lr": LR}, "objective": {"kind": "forecast"}}, {}, "needs at"),
        ({"space": {"optimizer.lr": LR}, "sampler": {"type": "anneal"}}, {}, "optuna.sampler.type"),
        ({"space": {}}, {}, "optuna.space"),
        ({"space": {"optimizer.lr": LR}}, {"seeds": [0, 1]}, "trains one seed per trial"),
        (
            {"space": {"knobs.loss.choice": {"type": "categorical", "choices": ["cispo", "cispo"]}}},
            {},
            "choices repeat",
        ),
    ],
)
def test_a_bad_section_is_refused_with_where_and_how(
    tmp_path: Path, optuna: dict[str, Any], top: dict[str, Any], needle: str
) -> None:
    path = _write(tmp_path, optuna, **top)
    with pytest.raises(ConfigError) as info:
        load_sweep(path)
    msg = str(info.value)
    assert needle in msg and str(path) in msg and "fix" in msg


def test_an_optuna_section_under_another_design_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, {"space": {"optimizer.lr": LR}}, design="loo")
    with pytest.raises(ConfigError, match="section 'optuna' is given but design is 'loo'"):
        load_sweep(path)


def test_an_unknown_pruner_option_lists_the_valid_ones(tmp_path: Path) -> None:
    from scalerl.harness.search.space import make_pruner

    path = _write(
        tmp_path, {"space": {"optimizer.lr": LR}, "pruner": {"type": "median", "options": {"warmup": 3}}}
    )
    with pytest.raises(ConfigError) as info:
        make_pruner(load_sweep(path))
    msg = str(info.value)
    assert "optuna.pruner.options.warmup" in msg and "n_warmup_steps" in msg


def test_each_worker_seeds_its_sampler_apart_and_the_grid_is_enqueued_once(tmp_path: Path) -> None:
    from scalerl.harness.search.space import make_sampler
    from scalerl.harness.search.worker import grid_points, open_study, target_trials

    path = _write(
        tmp_path,
        {
            "space": {
                "knobs.loss.choice": {"type": "categorical", "choices": ["cispo", "dapo", "gspo"]},
                "optimizer.lr": {"type": "float", "low": 1e-4, "high": 3e-4, "step": 1e-4},
            },
            "sampler": {"type": "grid", "seed": 3},
            "n_trials": 100,
        },
    )
    sweep = load_sweep(path)
    assert sweep.optuna is not None
    assert make_sampler(sweep.optuna, worker=2)._rng.rng.randint(1 << 30) != make_sampler(  # type: ignore[attr-defined]
        sweep.optuna, worker=0
    )._rng.rng.randint(1 << 30)  # type: ignore[attr-defined]
    points = grid_points(sweep)
    assert len(points) == 9 == target_trials(sweep)  # the grid caps n_trials
    assert grid_points(sweep) == points  # seeded order
    url = f"sqlite:///{tmp_path / 'g.db'}"
    from scalerl import db

    db.open_store(url)
    study = open_study(sweep, url)
    open_study(sweep, url, worker=1)  # a second worker does not enqueue the grid again
    waiting = [t for t in study.get_trials() if t.state.name == "WAITING"]
    assert len(waiting) == 9
    fixed = [t.system_attrs["fixed_params"] for t in waiting]  # enqueued, not yet asked
    assert {(f["knobs.loss.choice"], round(f["optimizer.lr"], 6)) for f in fixed} == {
        (c, lr) for c in ("cispo", "dapo", "gspo") for lr in (1e-4, 2e-4, 3e-4)
    }


def test_the_beat_rule_margin_is_a_pruner_option(tmp_path: Path) -> None:
    from scalerl.harness.search.space import make_pruner

    beat = {"type": "forecast", "options": {"rule": "beat", "margin_noise": 1.0}}
    pruner = make_pruner(load_sweep(_write(tmp_path, {"space": {"optimizer.lr": LR}, "pruner": beat})))
    assert (pruner.rule, pruner.margin_noise) == ("beat", 1.0)  # type: ignore[attr-defined]
    bad = {"type": "forecast", "options": {"rule": "beat", "margin_noise": -1}}
    with pytest.raises(ConfigError) as info:
        make_pruner(load_sweep(_write(tmp_path, {"space": {"optimizer.lr": LR}, "pruner": bad})))
    assert "optuna.pruner.options.margin_noise" in str(info.value) and "-1" in str(info.value)
    peers = {"type": "forecast", "options": {"rule": "beat", "peers": 3}}
    pruner = make_pruner(load_sweep(_write(tmp_path, {"space": {"optimizer.lr": LR}, "pruner": peers})))
    assert pruner.peers == 3  # type: ignore[attr-defined]
    one = {"type": "forecast", "options": {"rule": "beat", "peers": 1}}
    with pytest.raises(ConfigError) as info:
        make_pruner(load_sweep(_write(tmp_path, {"space": {"optimizer.lr": LR}, "pruner": one})))
    assert "optuna.pruner.options.peers" in str(info.value) and "1" in str(info.value)


def test_the_rule_picks_the_class_and_the_other_rules_options_still_load(tmp_path: Path) -> None:
    from scalerl.harness.optuna import BeatPruner
    from scalerl.harness.search.space import make_pruner

    # One class took every option until the rules became classes: a recipe with the bound rule's
    # level under rule: beat still loads; the warning names the ignored option.
    beat = {"type": "forecast", "options": {"rule": "beat", "level": 0.8, "min_probability": 0.1}}
    with pytest.warns(UserWarning, match=r"optuna.pruner.options.level: only rule 'bound' uses it"):
        pruner = make_pruner(load_sweep(_write(tmp_path, {"space": {"optimizer.lr": LR}, "pruner": beat})))
    assert isinstance(pruner, BeatPruner) and pruner.min_probability == 0.1
