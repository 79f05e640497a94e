"""The planner: a loaded sweep -> the runs to launch, each with its resolved recipe and run id.

Every variant's recipe is the base recipe data with the variant's overrides applied, validated
again (so a variant that breaks a cross-field rule is an error naming its own sweep-file line),
hashed (:mod:`scalerl.harness.recipe.hashing`) and crossed with the sweep's seeds. Two variants that
resolve to the same config are planned once: the later one is reported in ``Plan.duplicates``
(naming both) and gets no runs, so a sweep never trains the same config twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scalerl.harness.errors import ConfigError
from scalerl.harness.recipe.designs import Variant
from scalerl.harness.recipe.hashing import RUN_ID_HEX, config_hash
from scalerl.harness.recipe.loader import build_recipe
from scalerl.harness.recipe.schema import BudgetConfig, Recipe
from scalerl.harness.recipe.sweep import SweepSpec


@dataclass(frozen=True)
class PlannedRun:
    """One run: a variant of the sweep at one seed. ``knob`` and the alternatives are None for the
    baseline and for grid/list variants."""

    variant: str
    knob: str | None
    from_alternative: str | None
    alternative: str | None
    seed: int
    run_id: str
    config_hash: str
    recipe: Recipe
    budget: BudgetConfig

    def as_row(self) -> dict[str, Any]:
        """The JSON row ``scalerl plan --json`` prints."""
        return {
            "name": self.variant,
            "knob": self.knob,
            "from": self.from_alternative,
            "alternative": self.alternative,
            "seed": self.seed,
            "run_id": self.run_id,
            "config_hash": self.config_hash,
            "budget": self.budget.value,
            "unit": self.budget.unit,
        }


@dataclass(frozen=True)
class Duplicate:
    """``variant`` resolves to exactly the config of the earlier ``same_as``; it is not run."""

    variant: str
    same_as: str
    config_hash: str

    @property
    def message(self) -> str:
        return (
            f"variant {self.variant!r} resolves to the same config as {self.same_as!r} "
            f"(hash {self.config_hash[:RUN_ID_HEX]}); it is planned once, as {self.same_as!r}"
        )


@dataclass(frozen=True)
class Plan:
    sweep: SweepSpec
    runs: tuple[PlannedRun, ...]
    duplicates: tuple[Duplicate, ...]

    @property
    def variant_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.variant for r in self.runs))

    def run(self, variant: str, seed: int) -> PlannedRun:
        for r in self.runs:
            if r.variant == variant and r.seed == seed:
                return r
        known = variant in self.variant_names
        raise ConfigError(
            f"no run for seed {seed} of variant {variant!r}" if known else f"no variant named {variant!r}",
            file=str(self.sweep.path),
            field="variant",
            value=variant,
            fix="pick one of: " + ", ".join(self.variant_names) + f"; seeds: {self.sweep.seeds}",
        )


def variant_recipe(sweep: SweepSpec, variant: Variant) -> Recipe:
    """The base recipe with one variant's overrides applied, validated."""
    loaded = sweep._require()
    try:
        return build_recipe(loaded.base_data, loaded.base_sources, variant.overrides)
    except ConfigError as err:
        own = {(o.source.file, o.source.line) for o in variant.overrides}
        if not variant.overrides or (err.file, err.line) in own:
            raise
        # The rule broke on a value the variant did not write (a base value it conflicts with):
        # point at the variant's own line and say where the other value is.
        raise ConfigError(
            f"variant {variant.name!r} is invalid: {err.reason} "
            f"(the other value is at {err.file}:{err.line})",
            file=variant.source.file,
            line=variant.source.line,
            field=err.field,
            value=err.value,
            fix=err.fix,
        ) from None


def plan(sweep: SweepSpec) -> Plan:
    """Expand ``sweep`` into runs (variants x seeds, in listing order) and the duplicates found."""
    runs: list[PlannedRun] = []
    duplicates: list[Duplicate] = []
    first_by_hash: dict[str, str] = {}
    for variant in sweep.variants:
        recipe = variant_recipe(sweep, variant)
        digest = config_hash(recipe)
        if digest in first_by_hash:
            duplicates.append(Duplicate(variant.name, first_by_hash[digest], digest))
            continue
        first_by_hash[digest] = variant.name
        for seed in sweep.seeds:
            runs.append(
                PlannedRun(
                    variant=variant.name,
                    knob=variant.knob,
                    from_alternative=variant.from_alternative,
                    alternative=variant.alternative,
                    seed=seed,
                    run_id=f"{digest[:RUN_ID_HEX]}-s{seed}",
                    config_hash=digest,
                    recipe=recipe,
                    budget=recipe.budget,
                )
            )
    return Plan(sweep, tuple(runs), tuple(duplicates))
