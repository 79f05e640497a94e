"""From a sweep's ``optuna:`` section to Optuna objects, and from a trial's parameters to a run.

The section itself (and its validation) is :mod:`scalerl.harness.recipe.search`. Here: the distributions,
the sampler, the pruner, the study's storage at the store's URL, and :func:`trial_variant`, which
turns a trial's parameters into a sweep variant so the planner's run-id rules apply unchanged (two
trials that suggest the same parameters are the same run, trained once).
"""

from __future__ import annotations

import inspect
import math
import types
import typing
from typing import TYPE_CHECKING, Any

from scalerl.harness.errors import ConfigError
from scalerl.harness.recipe.designs import Variant
from scalerl.harness.recipe.overrides import Override, check_key
from scalerl.harness.recipe.search import OptunaSection
from scalerl.harness.recipe.yamlio import Source

if TYPE_CHECKING:
    import optuna

    from scalerl.harness.recipe.sweep import SweepSpec


def section(sweep: SweepSpec) -> OptunaSection:
    if sweep.optuna is None:
        raise ConfigError(
            f"sweep {sweep.sweep!r} has design {sweep.design!r}, not optuna",
            field="design",
            value=sweep.design,
            fix="search with a design: optuna sweep file",
        )
    return sweep.optuna


def _source(sweep: SweepSpec, key: str) -> Source:
    loaded = sweep._require()
    return loaded.sources.get(("optuna", "space", key)) or Source(str(loaded.path))


def distributions(sec: OptunaSection) -> dict[str, Any]:
    """Parameter name (the dotted recipe key) -> ``optuna.distributions.BaseDistribution``."""
    return {key: param.distribution() for key, param in sec.space.items()}


def study_name(sweep: SweepSpec) -> str:
    return section(sweep).study or sweep.sweep


def trial_variant(sweep: SweepSpec, number: int, params: dict[str, Any]) -> Variant:
    """Trial ``number``'s parameters as the variant ``trial-NNNN`` (overrides traced to the
    ``optuna.space`` lines that defined them)."""
    overrides = []
    for key, value in params.items():
        src = _source(sweep, key)
        check_key(key, src, value)
        overrides.append(Override(key, value, src))
    first = overrides[0].source if overrides else Source(str(sweep.path))
    return Variant(f"trial-{number:04d}", tuple(overrides), first)


def check_space(sweep: SweepSpec) -> None:
    """Fail before any worker starts when an edge of the space is not a valid recipe: each
    parameter is tried at its bounds (every choice of a categorical) on the base recipe, one at
    a time, so the error names the parameter at fault. (A combination that only fails jointly
    fails its trial, with the recipe error recorded on it.)"""
    from scalerl.harness.recipe.planner import variant_recipe

    sec = section(sweep)
    for key, param in sec.space.items():
        corners = list(param.choices) if param.type == "categorical" else [param.low, param.high]
        for value in corners:
            params = {key: value}
            try:
                variant_recipe(sweep, trial_variant(sweep, 0, params))
            except ConfigError as err:
                src = _source(sweep, key)
                raise ConfigError(
                    f"the search space reaches an invalid recipe at {key}={value!r}: {err.reason}",
                    file=src.file,
                    line=src.line,
                    field=f"optuna.space.{key}",
                    value=value,
                    fix=err.fix or "narrow the range so every value gives a valid recipe",
                ) from None
    make_pruner(sweep)  # a bad pruner option fails the launch, not every worker at its start


def make_sampler(sec: OptunaSection, worker: int = 0) -> optuna.samplers.BaseSampler:
    """The section's sampler, seeded with ``seed + worker`` (None stays None: unseeded)."""
    import optuna

    spec = sec.sampler.model_copy(
        update={"seed": None if sec.sampler.seed is None else sec.sampler.seed + worker}
    )
    if spec.type == "grid":
        grid = {k: p.grid() for k, p in sec.space.items()}
        return optuna.samplers.GridSampler(grid, seed=spec.seed)  # type: ignore[arg-type]
    if spec.type == "random":
        return optuna.samplers.RandomSampler(seed=spec.seed)
    extra: dict[str, Any] = (
        {} if spec.n_startup_trials is None else {"n_startup_trials": spec.n_startup_trials}
    )
    if spec.type == "cmaes":
        # CMA-ES handles float/int parameters; categorical ones go to its independent sampler.
        return optuna.samplers.CmaEsSampler(seed=spec.seed, warn_independent_sampling=False, **extra)
    return optuna.samplers.TPESampler(seed=spec.seed, **extra)


def pruner_target(sweep: SweepSpec) -> float:
    """Where the forecast pruner compares trials: the objective's ``at``, else the budget when it is
    on the fit axis, in reported steps (compute x compute_scale)."""
    sec = section(sweep)
    at = sec.objective.at
    if at is None:
        budget = sweep.base_recipe.budget
        if budget.unit.rstrip("s") != sweep.fit.axis.rstrip("s"):
            raise ConfigError(
                "the forecast pruner needs a target compute on the fit axis, and the budget is in "
                f"{budget.unit} while fit.axis is {sweep.fit.axis}",
                field="optuna.objective.at",
                fix="set optuna.objective.at (a compute on fit.axis), or use another pruner",
            )
        at = budget.value
    return float(at) * sec.compute_scale


def make_pruner(sweep: SweepSpec) -> optuna.pruners.BasePruner:
    """The section's pruner; ``options`` are checked against its constructor's keywords."""
    import optuna

    sec = section(sweep)
    spec = sec.pruner
    factory: Any
    base: dict[str, Any] = {}
    options: dict[str, Any] = dict(spec.options)
    if spec.type == "none":
        factory = optuna.pruners.NopPruner
    elif spec.type == "median":
        factory = optuna.pruners.MedianPruner
    elif spec.type == "hyperband":
        factory = optuna.pruners.HyperbandPruner
        steps = _budget_steps(sweep)
        if steps is not None:
            base["max_resource"] = steps
    else:
        from scalerl.harness.optuna import other_rules_options, rule_class, warn_ignored

        rule = options.pop("rule", "bound")
        try:
            factory = rule_class(rule)
        except ConfigError as err:
            src = sweep._require().sources.get(("optuna", "pruner", "options", "rule"))
            raise ConfigError(
                f"pruner 'forecast': {err.reason}",
                file=src.file if src else None,
                line=src.line if src else None,
                field="optuna.pruner.options.rule",
                value=rule,
                fix=err.fix,
            ) from None
        options, ignored = other_rules_options(rule, options)
        warn_ignored(rule, ignored, where="optuna.pruner.options.")
        base["target"] = pruner_target(sweep)
    params = inspect.signature(factory).parameters
    unknown = sorted(set(options) - set(params))
    if unknown:
        valid = ", ".join(
            f"{n}={p.default!r}"
            for n, p in params.items()
            if p.kind is p.KEYWORD_ONLY or p.default is not p.empty
        )
        raise ConfigError(
            f"pruner {spec.type!r} takes no option {unknown[0]!r}",
            field=f"optuna.pruner.options.{unknown[0]}",
            value=options[unknown[0]],
            fix=f"use some of: {valid}",
        )
    hints = _hints(factory)
    for name, value in options.items():
        hint = hints.get(name)
        if hint is not None and not _accepts(hint, value):
            default = params[name].default
            src = sweep._require().sources.get(("optuna", "pruner", "options", name))
            raise ConfigError(
                f"pruner {spec.type!r} option {name!r} must be {_describe(hint)}, "
                f"not the {type(value).__name__} {value!r}",
                file=src.file if src else None,
                line=src.line if src else None,
                field=f"optuna.pruner.options.{name}",
                value=value,
                fix=f"write {_describe(hint)}"
                + ("" if default is params[name].empty else f", e.g. {default!r}"),
            )
    try:
        pruner: optuna.pruners.BasePruner = factory(**{**base, **options})
    except ConfigError as err:  # a forecast pruner's own checks: point at the sweep's option
        raise ConfigError(
            f"pruner {spec.type!r}: {err.reason}",
            field=f"optuna.pruner.options.{err.field}" if err.field else "optuna.pruner.options",
            value=err.value,
            fix=err.fix,
        ) from None
    except (TypeError, ValueError) as err:  # Optuna's range checks (n_startup_trials=-1 ...)
        raise ConfigError(
            f"pruner {spec.type!r} refused its options: {err}",
            field="optuna.pruner.options",
            value=dict(spec.options),
            fix="see the pruner's documentation for each option's range",
        ) from None
    return pruner


def _hints(factory: Any) -> dict[str, Any]:
    """The constructor's resolved annotations ({} when they cannot be resolved: the constructor
    then judges the values itself, and its error is translated)."""
    try:
        return typing.get_type_hints(factory.__init__)
    except Exception:  # an unresolvable annotation only skips the type check
        return {}


def _accepts(hint: Any, value: Any) -> bool:
    """Does ``value`` (from YAML) fit the annotation ``hint``? Unknown annotations accept anything."""
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        return any(_accepts(arg, value) for arg in typing.get_args(hint))
    if origin is typing.Literal:
        return value in typing.get_args(hint)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:  # finite: nan / inf would pass every comparison a pruner makes
        return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if hint is str:
        return isinstance(value, str)
    return True


def _describe(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        return " or ".join(_describe(arg) for arg in typing.get_args(hint))
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(hint))
    if hint is type(None):
        return "null"
    return {bool: "true or false", int: "a whole number", float: "a finite number", str: "a string"}.get(
        hint, getattr(hint, "__name__", str(hint))
    )


def _budget_steps(sweep: SweepSpec) -> int | None:
    budget = sweep.base_recipe.budget
    if budget.unit.rstrip("s") != sweep.fit.axis.rstrip("s"):
        return None
    return max(1, math.ceil(budget.value * section(sweep).compute_scale))


SPACE_ATTR = "scalerl_space"  # study user attribute: the space the study was created with


def space_json(sec: OptunaSection) -> dict[str, str]:
    """Parameter -> its distribution as Optuna's JSON, keys sorted (what the study records)."""
    return {key: _canonical(dist) for key, dist in distributions(sec).items()}


def _canonical(dist: Any) -> str:
    import json

    from optuna.distributions import distribution_to_json

    return json.dumps(json.loads(distribution_to_json(dist)), sort_keys=True)


def check_study(study: optuna.Study, sweep: SweepSpec) -> None:
    """Refuse to join a study that optimizes the other way or over another space.

    ``optuna.create_study(load_if_exists=True)`` loads an existing study whatever direction and
    space are asked for: a sweep naming another sweep's study would count that study's trials as
    its own and run none, or have Optuna refuse a parameter mid-``ask``, after the trial was
    created (a trial left RUNNING). The space is the one the study recorded when it was created
    (:data:`SPACE_ATTR`); a study created before that attribute is compared with its trials'."""
    from optuna.distributions import json_to_distribution

    sec = section(sweep)
    name = study.study_name
    have = study.direction.name.lower()
    want = sec.objective.direction
    where = str(sweep._loaded.path) if sweep._loaded is not None else None
    if have != want:
        raise ConfigError(
            f"study {name!r} in the store's database is set to {have}, and this sweep asks to {want}",
            file=where,
            field="optuna.objective.direction",
            value=want,
            fix=f"name a new study (optuna.study: {name}-{want}), or set direction: {have}",
        )
    ours = space_json(sec)
    recorded = study.user_attrs.get(SPACE_ATTR)
    theirs: dict[str, str] = {}
    if isinstance(recorded, dict):
        theirs = {str(k): str(v) for k, v in recorded.items()}
    else:  # a study created before the attribute: the distributions its trials were asked with
        for t in study.get_trials(deepcopy=False):
            for key, dist in t.distributions.items():
                theirs.setdefault(key, _canonical(dist))
        if not theirs:
            return
    differ = sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k))
    if not differ:
        return

    def show(table: dict[str, str], key: str) -> str:
        return repr(json_to_distribution(table[key])) if key in table else "nothing"

    detail = "; ".join(f"{k}: the study has {show(theirs, k)}, the sweep {show(ours, k)}" for k in differ)
    raise ConfigError(
        f"study {name!r} in the store's database searches another space ({detail})",
        file=where,
        field=f"optuna.space.{differ[0]}",
        value=show(ours, differ[0]),
        fix=f"name a new study for this space (optuna.study: {name}-2), or search the study's own",
    )
