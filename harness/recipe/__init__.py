"""Recipes: the typed schema, the YAML loader, sweep designs and the variant planner."""

from harness.recipe.schema import KNOB_SPECS, Knobs, KnobSpec, Recipe

__all__ = ["KNOB_SPECS", "KnobSpec", "Knobs", "Recipe"]
