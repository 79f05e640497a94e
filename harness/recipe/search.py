"""The ``optuna:`` section of a ``design: optuna`` sweep, validated at the YAML boundary.

A search sweep names its space with Optuna's own distributions, keyed by the dotted recipe key
each parameter sets::

    design: optuna
    optuna:
      space:
        optimizer.lr: {type: float, low: 3.0e-4, high: 3.0e-3, log: true}
        knobs.loss.choice: {type: categorical, choices: [cispo, dapo]}
        scale.prompts_per_batch: {type: int, low: 8, high: 32, step: 8}
      sampler: {type: tpe, seed: 0}            # tpe | cmaes | random | grid
      n_trials: 12
      objective: {kind: forecast, at: 3.0e12, direction: maximize}   # forecast | fitted_a | final
      pruner: {type: forecast, options: {level: 0.9}}  # forecast | median | hyperband | none
      workers: 2                                # processes (local) or array tasks (slurm)

The objective is read from the fit section's metric on its axis: ``forecast`` is the value
:func:`scalerl.harness.analysis.forecast_curve` gives at ``at`` (a compute on ``fit.axis``), ``fitted_a``
the sigmoid's ceiling, ``final`` the mean of the last three points. Trials report the metric to
the pruner with ``step = round(compute x compute_scale)`` (Optuna steps are integers; set
``compute_scale`` so that one unit is fine enough, e.g. 3600 for GPU-seconds on ``gpu_hours``).
The study lives in an Optuna ``RDBStorage`` at the store's own URL (see :mod:`scalerl.harness.search`).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, FiniteFloat, PositiveFloat, PositiveInt, model_validator

from scalerl.harness.recipe.schema import Frozen


class FloatParam(Frozen):
    """``optuna.distributions.FloatDistribution``."""

    type: Literal["float"]
    low: FiniteFloat
    high: FiniteFloat
    log: bool = False
    step: Annotated[float, Field(gt=0.0, allow_inf_nan=False)] | None = None

    @model_validator(mode="after")
    def _range(self) -> FloatParam:
        if not self.low < self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high}); fix: swap or widen them")
        if self.log and self.low <= 0:
            raise ValueError(f"a log range needs low > 0 (got {self.low}); fix: raise low or set log: false")
        if self.log and self.step is not None:
            raise ValueError("step and log cannot both be set (Optuna's rule); fix: drop one")
        return self

    def distribution(self) -> Any:
        from optuna.distributions import FloatDistribution

        return FloatDistribution(self.low, self.high, log=self.log, step=self.step)

    def size(self) -> float:
        """How many values :meth:`grid` holds, counted without building it (inf: continuous)."""
        if self.step is None:
            return math.inf
        # Capped so that a range of 1e308 over a step of 1e-300 stays a (huge) count, not inf.
        return math.floor(min((self.high - self.low) / self.step, 1e300)) + 1.0

    def grid(self) -> list[Any] | None:
        """``low, low + step, ...`` up to ``high`` and never past it (a step that does not divide
        the range stops short, as Optuna's distribution does). Counted in decimal, so that 0.3 /
        0.1 is 3 steps and the values are the ones a user wrote, not 0.30000000000000004."""
        if self.step is None:
            return None
        from decimal import Decimal

        low, high, step = (Decimal(repr(float(v))) for v in (self.low, self.high, self.step))
        n = int((high - low) // step)
        return [float(low + i * step) for i in range(n + 1)]


class IntParam(Frozen):
    """``optuna.distributions.IntDistribution``."""

    type: Literal["int"]
    low: int
    high: int
    log: bool = False
    step: PositiveInt = 1

    @model_validator(mode="after")
    def _range(self) -> IntParam:
        if not self.low <= self.high:
            raise ValueError(f"low ({self.low}) must not exceed high ({self.high}); fix: swap them")
        if self.log and (self.low < 1 or self.step != 1):
            raise ValueError("a log int range needs low >= 1 and step 1 (Optuna's rule); fix: set log: false")
        return self

    def distribution(self) -> Any:
        from optuna.distributions import IntDistribution

        return IntDistribution(self.low, self.high, log=self.log, step=self.step)

    def size(self) -> float:
        return float((self.high - self.low) // self.step + 1)

    def grid(self) -> list[Any] | None:
        return list(range(self.low, self.high + 1, self.step))


class CategoricalParam(Frozen):
    """``optuna.distributions.CategoricalDistribution``; choices are YAML scalars."""

    type: Literal["categorical"]
    choices: list[str | int | float | bool | None] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> CategoricalParam:
        # Compared as the run's hash sees them (1 and 1.0 are one config, so one run id): two
        # such choices would be two trials training the same run.
        from scalerl.harness.recipe.hashing import canonical_json

        seen: dict[str, Any] = {}
        for c in self.choices:
            key = canonical_json({"v": c})
            if key in seen:
                raise ValueError(
                    f"choices repeat: {seen[key]!r} and {c!r} are one value ({self.choices}), so "
                    "they would train the same run; fix: list each choice once"
                )
            seen[key] = c
        return self

    def distribution(self) -> Any:
        from optuna.distributions import CategoricalDistribution

        return CategoricalDistribution(tuple(self.choices))

    def size(self) -> float:
        return float(len(self.choices))

    def grid(self) -> list[Any] | None:
        return list(self.choices)


# Every point of a grid is a training run (and an enqueued trial): far fewer than this in practice.
MAX_GRID_POINTS = 10_000

SearchParam = Annotated[FloatParam | IntParam | CategoricalParam, Field(discriminator="type")]


class SamplerSpec(Frozen):
    """Optuna's TPE, CMA-ES, random or grid sampler; ``seed`` makes the suggestions repeatable."""

    type: Literal["tpe", "cmaes", "random", "grid"] = "tpe"
    # NumPy seeds stop at 2**32 - 1; workers add their index, so half of that is the safe bound.
    seed: Annotated[int, Field(ge=0, le=2**31 - 1)] | None = 0
    n_startup_trials: PositiveInt | None = Field(None, description="tpe/cmaes: random trials first")


class ObjectiveSpec(Frozen):
    kind: Literal["forecast", "fitted_a", "final"] = "forecast"
    at: PositiveFloat | None = Field(None, description="forecast: the compute (on fit.axis) to forecast at")
    direction: Literal["maximize", "minimize"] = "maximize"
    level: float = Field(0.9, gt=0.0, lt=1.0, description="forecast interval level (recorded with the value)")

    @model_validator(mode="after")
    def _needs_at(self) -> ObjectiveSpec:
        if self.kind == "forecast" and self.at is None:
            raise ValueError(
                "objective kind 'forecast' needs at (a compute on fit.axis); "
                "fix: add at: <compute>, or use kind: final / fitted_a"
            )
        return self


class PrunerSpec(Frozen):
    """``forecast`` (a :mod:`scalerl.harness.optuna` forecast pruner: ``options.rule`` ``bound``
    (default) or ``beat`` picks the class, target = the objective's ``at`` or the budget), Optuna's
    ``median`` / ``hyperband``, or ``none``. ``options`` go to the pruner's constructor as keyword
    arguments (checked against its signature)."""

    type: Literal["forecast", "median", "hyperband", "none"] = "forecast"
    options: dict[str, Any] = Field(default_factory=dict)


class OptunaSection(Frozen):
    space: dict[str, SearchParam] = Field(min_length=1)
    sampler: SamplerSpec = SamplerSpec()
    n_trials: PositiveInt = 10
    objective: ObjectiveSpec = ObjectiveSpec(kind="final")
    pruner: PrunerSpec = PrunerSpec()
    workers: PositiveInt = 1
    study: str | None = Field(None, min_length=1, description="Optuna study name (default: the sweep's)")
    compute_scale: PositiveFloat = Field(1.0, description="trial.report step = round(compute x this)")
    heartbeat_s: PositiveInt = Field(
        60, description="a RUNNING trial silent for 2x this is failed and retried"
    )

    @model_validator(mode="after")
    def _grid_is_finite(self) -> OptunaSection:
        if self.sampler.type == "grid":
            # Counted, never built: a grid over a 3e8-wide int range must fail here, not eat the
            # memory of every process that validates the sweep.
            loose = [k for k, p in self.space.items() if math.isinf(p.size())]
            if loose:
                raise ValueError(
                    f"sampler grid needs a finite space, but {loose} are continuous; "
                    "fix: give each float a step, or use tpe / random"
                )
            points = math.prod(p.size() for p in self.space.values())
            if points > MAX_GRID_POINTS:
                sizes = ", ".join(f"{k}: {p.size():.3g}" for k, p in self.space.items())
                raise ValueError(
                    f"the grid has {points:.3g} points ({sizes}), more than {MAX_GRID_POINTS} trials "
                    "a search can run; fix: raise the int/float steps or narrow the ranges, or use "
                    "tpe / random with n_trials"
                )
        return self
