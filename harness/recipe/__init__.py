"""Recipes: the typed schema, the YAML loader, sweep designs and the variant planner.

Public API: :func:`load_recipe`, :func:`load_sweep`, :func:`plan` (-> :class:`Plan` of
:class:`PlannedRun`), :func:`config_hash`, :func:`run_id`; the schema (:class:`Recipe`,
:data:`KNOB_SPECS`) and the sweep file (:class:`SweepSpec`, with ``fit`` and ``resources``).
"""

from scalerl.harness.recipe.designs import DESIGNS, Design, Variant
from scalerl.harness.recipe.hashing import config_hash, run_id
from scalerl.harness.recipe.loader import load_recipe, load_sweep
from scalerl.harness.recipe.planner import Duplicate, Plan, PlannedRun, plan
from scalerl.harness.recipe.schema import KNOB_SPECS, BudgetConfig, Knobs, KnobSpec, Recipe
from scalerl.harness.recipe.sweep import FitSpec, FitWindow, Resources, SweepSpec

__all__ = [
    "DESIGNS",
    "KNOB_SPECS",
    "BudgetConfig",
    "Design",
    "Duplicate",
    "FitSpec",
    "FitWindow",
    "KnobSpec",
    "Knobs",
    "Plan",
    "PlannedRun",
    "Recipe",
    "Resources",
    "SweepSpec",
    "Variant",
    "config_hash",
    "load_recipe",
    "load_sweep",
    "plan",
    "run_id",
]
