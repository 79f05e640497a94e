"""Sweep designs: how a sweep's variants are derived from its base recipe.

A design is a small class with one method, :meth:`Design.variants`, registered by name in
:data:`DESIGNS`. Each variant is a name plus the dotted overrides that turn the base recipe into
it, traced to the sweep-file lines that asked for them (so a variant that fails validation points
at its own line). Designs only build overrides; the planner validates, hashes and deduplicates.

* ``loo``: the baseline plus, per knob, the baseline with that one knob reverted.
* ``forward``: a stripped-down start plus knobs added back one at a time (cumulative by default).
* ``grid``: the Cartesian product of named axes (``{scale.prompts_per_batch: [16, 32]}``).
* ``list``: explicit variants, each a name and its overrides.
* ``optuna``: none up front; Optuna's trials become variants as a search runs (:mod:`scalerl.harness.search`).
"""

from __future__ import annotations

import itertools
import json
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from scalerl.harness.errors import ConfigError
from scalerl.harness.recipe.overrides import Override, check_key, overrides_from_mapping
from scalerl.harness.recipe.schema import KNOB_SPECS, Knob, Knobs, Recipe
from scalerl.harness.recipe.yamlio import KeyPath, Source, SourceMap

if TYPE_CHECKING:
    from scalerl.harness.recipe.sweep import SweepSpec


@dataclass(frozen=True)
class Variant:
    """A named diff from the base recipe. ``knob``/alternatives are None unless one knob moved."""

    name: str
    overrides: tuple[Override, ...]
    source: Source
    knob: str | None = None
    from_alternative: str | None = None
    alternative: str | None = None


class Design(ABC):
    """Expands a sweep into variants. Pure: no I/O; raises ConfigError naming the sweep line."""

    name: ClassVar[str]

    @abstractmethod
    def variants(self, sweep: SweepSpec, base: Recipe, sources: SourceMap) -> list[Variant]:
        """The variants in listing order (names need not be unique here; the planner checks)."""


DESIGNS: dict[str, type[Design]] = {}


def register(cls: type[Design]) -> type[Design]:
    DESIGNS[cls.name] = cls
    return cls


# --------------------------------------------------------------------------- knob helpers
def _src(sources: SourceMap, path: KeyPath) -> Source:
    return sources.get(path) or Source("<sweep>")


def knob_class(knob: str, src: Source, field: str) -> type[Knob]:
    if knob not in Knobs.model_fields:
        raise ConfigError(
            f"unknown knob {knob!r}",
            file=src.file,
            line=src.line,
            field=field,
            value=knob,
            fix="use one of: " + ", ".join(Knobs.model_fields),
        )
    annotation = Knobs.model_fields[knob].annotation
    assert isinstance(annotation, type) and issubclass(annotation, Knob)
    return annotation


def check_alternative(knob: str, alternative: str, src: Source, field: str) -> None:
    valid = knob_class(knob, src, field).alternative_names()
    if alternative not in valid:
        raise ConfigError(
            f"unknown alternative {alternative!r} for knob {knob!r}",
            file=src.file,
            line=src.line,
            field=field,
            value=alternative,
            fix="use one of: " + ", ".join(valid),
        )


def choice_of(recipe: Recipe, knob: str) -> str:
    return str(getattr(recipe.knobs, knob).choice)


def set_choice(knob: str, alternative: str, src: Source) -> Override:
    return Override(f"knobs.{knob}.choice", alternative, src)


# --------------------------------------------------------------------------- designs
@register
class LooDesign(Design):
    name = "loo"

    def variants(self, sweep: SweepSpec, base: Recipe, sources: SourceMap) -> list[Variant]:
        from scalerl.harness.recipe.sweep import LooKnob, LooSection

        section = sweep.loo or LooSection()
        knobs = section.knobs if section.knobs is not None else {k: LooKnob() for k in KNOB_SPECS}
        out: list[Variant] = []
        if section.include_baseline:
            out.append(Variant(section.baseline_name, (), _src(sources, ("design",))))
        for idx, (knob, item) in enumerate(knobs.items()):
            path: KeyPath = ("design",)
            if section.knobs is not None:
                # A mapping names the knob's own line; the list shorthand, its item's line.
                keyed = ("loo", "knobs", knob)
                path = keyed if keyed in sources.entries else ("loo", "knobs", idx)
            src = _src(sources, path)
            field = f"loo.knobs.{knob}"
            knob_class(knob, src, field)
            current = choice_of(base, knob)
            spec = KNOB_SPECS.get(knob)
            alternative = item.alternative or self._default_alternative(knob, current, src, field)
            check_alternative(knob, alternative, src, f"{field}.alternative")
            if alternative == current:
                others = [a for a in knob_class(knob, src, field).alternative_names() if a != current]
                raise ConfigError(
                    f"knob {knob!r} has no alternative to revert to: the base recipe already uses "
                    f"{current!r}",
                    file=src.file,
                    line=src.line,
                    field=field,
                    value=alternative,
                    fix=f"name another one ({knob}: {{alternative: {others[0]}}}; choices: "
                    + ", ".join(others)
                    + ")",
                )
            default_name = spec.loo_name if spec and alternative == spec.loo else f"loo-{knob}-{alternative}"
            out.append(
                Variant(
                    item.name or default_name,
                    (set_choice(knob, alternative, src),),
                    src,
                    knob,
                    current,
                    alternative,
                )
            )
        return out

    @staticmethod
    def _default_alternative(knob: str, current: str, src: Source, field: str) -> str:
        spec = KNOB_SPECS.get(knob)
        if spec is not None:
            return spec.loo
        others = [a for a in knob_class(knob, src, field).alternative_names() if a != current]
        if len(others) != 1:
            raise ConfigError(
                f"knob {knob!r} has no default LOO alternative",
                file=src.file,
                line=src.line,
                field=field,
                fix="name one: " + " | ".join(f"{knob}: {a}" for a in others),
            )
        return others[0]


@register
class ForwardDesign(Design):
    name = "forward"

    def variants(self, sweep: SweepSpec, base: Recipe, sources: SourceMap) -> list[Variant]:
        from scalerl.harness.recipe.sweep import ForwardSection, ForwardStep

        section = sweep.forward or ForwardSection()
        steps = section.steps if section.steps is not None else [ForwardStep(knob=k) for k in KNOB_SPECS]
        design_src = _src(sources, ("design",))
        if section.start is not None:
            start = dict(section.start)
        else:
            start = {s.knob: KNOB_SPECS[s.knob].loo for s in steps if s.knob in KNOB_SPECS}
        start_ovr: list[Override] = []
        for knob, alt in start.items():
            src = _src(sources, ("forward", "start", knob))
            check_alternative(knob, alt, src, f"forward.start.{knob}")
            start_ovr.append(set_choice(knob, alt, src))
        start_src = _src(sources, ("forward",)) if ("forward",) in sources.entries else design_src
        out = [Variant(section.start_name, tuple(start_ovr), start_src)]
        state = {k: start.get(k, choice_of(base, k)) for k in Knobs.model_fields}
        applied: list[Override] = []
        for i, step in enumerate(steps):
            src = _src(sources, ("forward", "steps", i)) if section.steps is not None else design_src
            field = f"forward.steps[{i}]"
            knob_class(step.knob, src, field)
            alternative = step.alternative or choice_of(base, step.knob)
            check_alternative(step.knob, alternative, src, f"{field}.alternative")
            before = (
                state[step.knob] if section.cumulative else start.get(step.knob, choice_of(base, step.knob))
            )
            if alternative == before:
                raise ConfigError(
                    f"step adds nothing: knob {step.knob!r} is already {alternative!r} at this point",
                    file=src.file,
                    line=src.line,
                    field=field,
                    value=step.knob,
                    fix=f"put {step.knob} in forward.start with another alternative, or drop the step",
                )
            move = set_choice(step.knob, alternative, src)
            if section.cumulative:
                applied.append(move)
                state[step.knob] = alternative
                ovr = (*start_ovr, *applied)
            else:
                ovr = (*start_ovr, move)
            name = step.name or f"fwd-{i + 1}-{step.knob}"
            out.append(Variant(name, ovr, src, step.knob, before, alternative))
        return out


def _fmt(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), sort_keys=True)


@register
class GridDesign(Design):
    name = "grid"

    def variants(self, sweep: SweepSpec, base: Recipe, sources: SourceMap) -> list[Variant]:
        axes = sweep.grid or {}
        short = [k.split(".")[-1] for k in axes]
        labels = short if len(set(short)) == len(short) else list(axes)
        out = []
        for combo in itertools.product(*(list(enumerate(v)) for v in axes.values())):
            ovr = []
            parts = []
            for (key, _), label, (i, value) in zip(axes.items(), labels, combo, strict=True):
                src = _src(sources, ("grid", key, i))
                check_key(key, src, value)
                ovr.append(Override(key, value, src))
                parts.append(f"{label}={_fmt(value)}")
            out.append(
                Variant(
                    "grid-" + "-".join(parts), tuple(ovr), ovr[0].source if ovr else _src(sources, ("grid",))
                )
            )
        return out


@register
class ListDesign(Design):
    name = "list"

    def variants(self, sweep: SweepSpec, base: Recipe, sources: SourceMap) -> list[Variant]:
        out = []
        for i, item in enumerate(sweep.variants_list or []):
            ovr = overrides_from_mapping(item.overrides, sources, ("list", i, "overrides"))
            out.append(Variant(item.name, ovr, _src(sources, ("list", i, "name"))))
        return out


@register
class OptunaDesign(Design):
    """No variants up front: the search's workers ask Optuna for trials and plan each as a run
    (variant ``trial-NNNN``) as they go (:mod:`scalerl.harness.search`)."""

    name = "optuna"

    def variants(self, sweep: SweepSpec, base: Recipe, sources: SourceMap) -> list[Variant]:
        return []


def design_for(name: str) -> Design:
    factory: Callable[[], Design] = DESIGNS[name]
    return factory()
