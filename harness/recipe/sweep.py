"""The typed, frozen sweep file: which recipe, which variants, seeds, budget, fit and resources.

A sweep YAML (``recipes/loo.yaml``) looks like::

    sweep: scalerl-loo            # name; also the store's sweep key
    base: scalerl.yaml            # the baseline recipe, relative to this file
    overrides: {scale.max_gen_len: 8192}   # dotted recipe keys applied to every variant
    design: loo                   # loo | forward | grid | list | optuna (scalerl.harness.recipe.designs)
    loo: {knobs: [loss, pipeline]}          # design section (optional for loo and forward)
    seeds: [0, 1, 2]
    budget: {value: 16000, unit: gpu_hours} # per run; replaces the recipe's budget
    fit: {metric: val/pass_rate, axis: gpu_hours, window: {start: 1500}, margin: 0.02}
    power: {detect_d_a: 0.03}     # optional: `scalerl fit` says how many seeds reach |dA| = 0.03
    resources: {cpus: 8, gpus: 8, mem_gb: 512, time_min: 1440, profile: h100}
    executor: slurm               # local | slurm | debug
    max_retries: 3

Fields other pieces read (keep the names):

* ``fit`` (:class:`FitSpec`), read by analysis: ``metric`` (a point metric, default
  ``val/pass_rate``), ``axis`` (``gpu_hours|flops|tokens|samples|step``), ``window`` (exactly one of
  ``start``: absolute compute on ``axis`` below which points are dropped, or ``fraction``: the
  share of each curve's compute range dropped from its start), ``margin`` (the minimum |ΔA| that
  counts as an asymptote move), ``confidence`` (the level of the verdicts' intervals, default
  0.95) and ``stop_when`` (``never``; ``decided``: ``scalerl sweep --wait`` stops a variant's
  runs, checkpointed, once its verdict is decided; ``settled``: also once more compute cannot
  decide it, both ceilings measured and only seeds would; :mod:`scalerl.harness.execution.decide`).
* ``power`` (:class:`PowerSpec`), read by analysis: ``detect_d_a`` / ``detect_d_b``, the |ΔA| /
  |ΔB| the sweep should be able to detect; ``scalerl fit`` reports the seeds per variant that
  would reach each at the measured noise (:mod:`scalerl.harness.analysis.verdicts.power`).
* ``resources`` (:class:`Resources`), read by execution: per run ``cpus``, ``gpus``, ``mem_gb``,
  ``time_min`` (wall limit of one job attempt, minutes) and ``profile`` (a name under ``slurm/``,
  whose partition/account/qos apply; null = none).
* ``executor`` and ``max_retries`` (attempts after the first, on failure or preemption).
* ``on_code_change`` (``refuse`` | ``reuse`` | ``rerun``), read by execution: what a resubmission
  does with runs that other code made (another commit, dirty diff or torch/transformers/vllm/trl
  /harness version; :mod:`scalerl.harness.execution.codechange`). ``--on-code-change`` overrides
  it; unset, ``$SCALERL_ON_CODE_CHANGE`` or ``refuse``.

The design sections are documented on their classes below; :func:`scalerl.harness.recipe.loader.load_sweep`
reads the file and :func:`scalerl.harness.recipe.planner.plan` expands it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    PrivateAttr,
    field_validator,
    model_validator,
)

from scalerl.harness.analysis.verdicts.rule import MARGIN
from scalerl.harness.errors import ConfigError
from scalerl.harness.recipe.schema import BudgetConfig, Frozen, Recipe
from scalerl.harness.recipe.search import OptunaSection
from scalerl.harness.recipe.yamlio import SourceMap

if TYPE_CHECKING:
    from scalerl.harness.recipe.designs import Variant

FitAxis = Literal["gpu_hours", "flops", "tokens", "samples", "step"]


class FitWindow(Frozen):
    """Which early points a fit drops: ``start`` (absolute, on the fit axis) or ``fraction``."""

    start: NonNegativeFloat | None = None
    fraction: float | None = Field(None, ge=0.0, lt=1.0)

    @model_validator(mode="after")
    def _exactly_one(self) -> FitWindow:
        if (self.start is None) == (self.fraction is None):
            raise ValueError(
                "fit.window needs exactly one of start or fraction; "
                "fix: write window: {start: 1500} or window: {fraction: 0.1}"
            )
        return self


class FitSpec(Frozen):
    metric: str = Field("val/pass_rate", min_length=1)
    axis: FitAxis = "gpu_hours"
    window: FitWindow = FitWindow(start=0.0)
    margin: float = Field(MARGIN, ge=0.0, lt=1.0, description="minimum |A_variant - A_base| for a mover")
    # The level of every verdict interval (dA, dB, dlogC_mid); stop_when=decided stops a variant's
    # runs once those intervals no longer straddle its decision, stop_when=settled also once only
    # more seeds could make them (scalerl.harness.execution.decide).
    confidence: float = Field(0.95, gt=0.5, lt=1.0, description="verdict interval level")
    # A known seed-to-seed sd of a ceiling (an earlier replicate study), used instead of the one the
    # sweep's own seeds measure: the only way a one-seed-per-variant sweep decides anything.
    seed_sd: float | None = Field(None, gt=0.0, lt=1.0, description="known seed sd of a ceiling")
    stop_when: Literal["never", "decided", "settled"] = Field(
        "never",
        description="stop a variant's runs early: never; decided (its verdict is decided); settled "
        "(decided, or more compute cannot decide it: only more seeds would)",
    )


class PowerSpec(Frozen):
    """Effects the sweep should be able to detect (80% power at the verdict level); both optional.

    ``scalerl fit`` answers with the seeds per variant that reach them at the measured noise.
    """

    detect_d_a: float | None = Field(None, gt=0.0, lt=1.0, description="target |A_variant - A_base|")
    detect_d_b: float | None = Field(None, gt=0.0, description="target |B_variant - B_base|")


class Resources(Frozen):
    cpus: PositiveInt = 1
    gpus: NonNegativeInt = 0
    mem_gb: PositiveFloat = 4.0
    time_min: PositiveInt = 60
    nodes: PositiveInt = Field(1, description="nodes per run (multi-node: rank 0 owns the run)")
    tasks_per_node: PositiveInt = Field(1, description="processes per node (srun tasks)")
    profile: str | None = Field(None, description="a slurm/ profile name (partition, account, qos)")


class LooKnob(Frozen):
    """One knob of a LOO design: revert it to ``alternative`` (default: KNOB_SPECS' LOO choice)."""

    alternative: str | None = None
    name: str | None = Field(None, min_length=1, description="variant name; default: the paper's")


class LooSection(Frozen):
    """``loo: {knobs: [loss, lm_head]}`` or ``{knobs: {loss: gspo, lm_head: {name: my-fp}}}``.
    ``knobs`` null (the default) = every knob of KNOB_SPECS, in its order."""

    knobs: dict[str, LooKnob] | None = None
    include_baseline: bool = True
    baseline_name: str = Field("baseline", min_length=1)

    @field_validator("knobs", mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        if isinstance(value, list):
            return {str(k): {} for k in value}
        if isinstance(value, dict):
            return {
                k: ({"alternative": v} if isinstance(v, str) else ({} if v is None else v))
                for k, v in value.items()
            }
        return value


class ForwardStep(Frozen):
    """Set ``knob`` to ``alternative`` (default: the base recipe's choice, i.e. add it back in)."""

    knob: str
    alternative: str | None = None
    name: str | None = Field(None, min_length=1)


class ForwardSection(Frozen):
    """Add-one-in: start from ``start`` (knob -> alternative; default: every step's knob at its
    LOO alternative), then apply ``steps`` one at a time (cumulative by default: step i keeps steps
    < i). ``steps`` null = every knob of KNOB_SPECS in order. A step is a knob name or a mapping."""

    start: dict[str, str] | None = None
    steps: list[ForwardStep] | None = Field(None, min_length=1)
    cumulative: bool = True
    start_name: str = Field("fwd-start", min_length=1)

    @field_validator("steps", mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"knob": v} if isinstance(v, str) else v for v in value]
        return value


class ListVariant(Frozen):
    name: str = Field(min_length=1)
    overrides: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class LoadedSweep:
    """What the loader attaches to a :class:`SweepSpec`: the base recipe as data (with its sources,
    so variant overrides can be re-validated and traced) and the expanded variants."""

    path: Path
    sources: SourceMap
    base_data: dict[str, Any]
    base_sources: SourceMap
    base_recipe: Recipe
    variants: tuple[Variant, ...]


class SweepSpec(Frozen):
    """One sweep file, validated. ``base_recipe`` etc. are attached by the loader (not YAML keys)."""

    # A name starts with a letter or digit ("." and ".." would name folders above the state dir) and
    # stays short enough for a file name, a Slurm job name and the store's key.
    sweep: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
    base: str = Field(min_length=1, description="baseline recipe path, relative to the sweep file")
    overrides: dict[str, Any] = Field(default_factory=dict)
    design: str = "loo"
    loo: LooSection | None = None
    forward: ForwardSection | None = None
    grid: dict[str, list[Any]] | None = None
    variants_list: list[ListVariant] | None = Field(None, alias="list")
    optuna: OptunaSection | None = Field(
        None, description="design: optuna; see scalerl.harness.recipe.search"
    )
    # A seed is stored in run.seed (INTEGER: int4 on PostgreSQL), so 1e30 fails here, not mid-sweep.
    seeds: list[Annotated[int, Field(ge=0, le=2**31 - 1)]] = Field(default_factory=lambda: [0], min_length=1)
    budget: BudgetConfig | None = None
    fit: FitSpec = FitSpec()
    power: PowerSpec = PowerSpec()
    resources: Resources = Resources()
    executor: Literal["local", "slurm", "debug"] = "local"
    max_retries: NonNegativeInt = 2
    # Resubmitting over runs other code made (scalerl.harness.execution.codechange): refuse to
    # mix code versions, reuse their results, or rerun them under the new code. None: not set
    # here ($SCALERL_ON_CODE_CHANGE, else refuse).
    on_code_change: Literal["refuse", "reuse", "rerun"] | None = None

    _loaded: LoadedSweep | None = PrivateAttr(None)

    def _require(self) -> LoadedSweep:
        if self._loaded is None:
            raise ConfigError(
                f"sweep {self.sweep!r} was not read from a file",
                fix="build sweeps with scalerl.harness.recipe.load_sweep(path)",
            )
        return self._loaded

    @property
    def path(self) -> Path:
        """The sweep file this spec was read from."""
        return self._require().path

    @property
    def base_recipe(self) -> Recipe:
        """The base recipe with the sweep's ``overrides`` (and ``budget``) applied: the baseline."""
        return self._require().base_recipe

    @property
    def variants(self) -> tuple[Variant, ...]:
        """The design's variants, names unique, in listing order."""
        return self._require().variants

    @field_validator("design")
    @classmethod
    def _known_design(cls, value: str) -> str:
        from scalerl.harness.recipe.designs import DESIGNS

        if value not in DESIGNS:
            raise ValueError(f"unknown design {value!r}; fix: use one of: {', '.join(DESIGNS)}")
        return value

    @field_validator("seeds")
    @classmethod
    def _unique_seeds(cls, value: list[int]) -> list[int]:
        dup = sorted({s for s in value if value.count(s) > 1})
        if dup:
            raise ValueError(f"seeds repeat {dup}; fix: list each seed once")
        return value

    @field_validator("grid")
    @classmethod
    def _grid_axes(cls, value: dict[str, list[Any]] | None) -> dict[str, list[Any]] | None:
        for key, values in (value or {}).items():
            if not values:
                raise ValueError(f"grid axis {key!r} has no values; fix: give at least one value")
        return value

    @model_validator(mode="after")
    def _sections_match_design(self) -> SweepSpec:
        sections = {
            "loo": self.loo,
            "forward": self.forward,
            "grid": self.grid,
            "list": self.variants_list,
            "optuna": self.optuna,
        }
        for name, section in sections.items():
            if section is not None and name != self.design:
                raise ValueError(
                    f"section {name!r} is given but design is {self.design!r}; "
                    f"fix: set design: {name} or remove the {name} section"
                )
        if self.design in ("grid", "list", "optuna") and sections[self.design] is None:
            raise ValueError(f"design {self.design!r} needs a {self.design!r} section; fix: add one")
        if self.design == "optuna" and len(self.seeds) != 1:
            raise ValueError(
                f"design 'optuna' trains one seed per trial, but seeds is {self.seeds}; "
                "fix: give one seed (re-run the best trials over more seeds as a list sweep)"
            )
        return self
