"""Load recipes and sweeps: YAML with line numbers, ``extends:``, overrides, one validation.

* ``extends: base.yaml`` (path relative to the file that writes it) deep-merges the file over its
  base: mappings merge key by key, lists and scalars are replaced; a file that names another
  ``task.name`` than its base starts that task's ``params`` afresh. Chains are allowed, cycles and
  missing bases are errors that name the line of the ``extends`` key.
* Overrides are ``dotted.key=value`` strings whose values are read as YAML (``seeds=[0, 1]``,
  ``optimizer.lr=1e-3``). For a sweep, a key whose first part is a sweep field (``budget.value``,
  ``seeds``) changes the sweep; one whose first part is a recipe field (``scale.max_gen_len``) is
  applied to every variant's recipe, like the sweep's own ``overrides:``.
* The result is validated once into frozen objects; every problem is a
  :class:`~scalerl.harness.errors.ConfigError` naming the file, line, field, value and fix.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from scalerl.harness.errors import ConfigError
from scalerl.harness.recipe.designs import design_for
from scalerl.harness.recipe.overrides import (
    Override,
    deep_merge,
    overrides_from_mapping,
    parse_cli_overrides,
    set_dotted,
)
from scalerl.harness.recipe.schema import Recipe
from scalerl.harness.recipe.sweep import LoadedSweep, SweepSpec
from scalerl.harness.recipe.validation import validate
from scalerl.harness.recipe.yamlio import Source, SourceMap, read_yaml_mapping

OverrideArgs = Sequence[str | Override]


def read_with_extends(path: Path, _chain: tuple[Path, ...] = ()) -> tuple[dict[str, Any], SourceMap]:
    """Read ``path`` and, recursively, the files it ``extends``; return merged data and sources."""
    data, sources = read_yaml_mapping(path)
    if "extends" not in data:
        return data, sources
    ext = data.pop("extends")
    where = sources.entries.pop(("extends",))
    if not isinstance(ext, str) or not ext.strip():
        raise ConfigError(
            "extends must be a file path",
            file=where.file,
            line=where.line,
            field="extends",
            value=ext,
            fix="write extends: other.yaml (relative to this file)",
        )
    base = path.parent / ext
    chain = (*_chain, path.resolve())
    if base.resolve() in chain:
        cycle = " -> ".join(str(p.name) for p in (*chain, base.resolve()))
        raise ConfigError(
            f"extends cycle: {cycle}",
            file=where.file,
            line=where.line,
            field="extends",
            value=ext,
            fix="remove the extends that points back into the chain",
        )
    if not base.is_file():
        raise ConfigError(
            f"base file {str(base)!r} not found",
            file=where.file,
            line=where.line,
            field="extends",
            value=ext,
            fix="give a path relative to this file's folder",
        )
    base_data, base_sources = read_with_extends(base, chain)
    base_task, task = base_data.get("task"), data.get("task")
    new_name = task.get("name") if isinstance(task, dict) else None
    if isinstance(base_task, dict) and new_name is not None and new_name != base_task.get("name"):
        # Another task: the base's task.params belong to the base's task, so they are not merged.
        base_data = {**base_data, "task": {k: v for k, v in base_task.items() if k != "params"}}
    merged, merged_sources = deep_merge(base_data, base_sources, data, sources)
    merged_sources.entries[()] = sources.entries[()]
    return merged, merged_sources


def as_path(path: object, what: str) -> Path:
    """``path`` as a Path, or a ConfigError when the caller (the Python API) passed something that
    is not a path at all (None, a number, bytes), instead of a TypeError from deep in pathlib."""
    if isinstance(path, str | os.PathLike) and not isinstance(path, bytes):
        fspath = os.fspath(path)
        if isinstance(fspath, str):
            return Path(fspath)
    raise ConfigError(
        f"the {what} must be a path (str or pathlib.Path), not {type(path).__name__}",
        field="path",
        value=path,
        fix=f"pass the {what}'s file name, e.g. 'recipes/tiny-loo.yaml'",
    )


def as_overrides(items: OverrideArgs) -> tuple[Override, ...]:
    """Strings (``key=value``) are parsed; :class:`Override` objects pass through. Anything else
    (a bare string instead of a list, a number, None) is a ConfigError naming what was passed."""
    if isinstance(items, str | bytes) or not isinstance(items, Iterable):
        raise ConfigError(
            f"overrides must be a list of 'key=value' strings, not {type(items).__name__}",
            field="overrides",
            value=items,
            fix="pass e.g. ['seeds=[0, 1]', 'scale.max_gen_len=64'] (a list, even for one)",
        )
    out: list[Override] = []
    for item in items:
        if isinstance(item, str):
            out.extend(parse_cli_overrides([item]))
        elif isinstance(item, Override):
            out.append(item)
        else:
            raise ConfigError(
                f"an override must be a 'key=value' string, not {type(item).__name__}",
                field="overrides",
                value=item,
                fix="write each override as dotted.key=value, e.g. 'seeds=[0, 1]'",
            )
    return tuple(out)


def apply_overrides(
    data: dict[str, Any], sources: SourceMap, overrides: Sequence[Override]
) -> tuple[dict[str, Any], SourceMap]:
    """``overrides`` applied, in order, to a copy of ``data`` (and of its sources)."""
    data, sources = deep_merge({}, SourceMap(), data, sources)
    for override in overrides:
        set_dotted(data, sources, override)
    return data, sources


def build_recipe(data: dict[str, Any], sources: SourceMap, overrides: Sequence[Override] = ()) -> Recipe:
    """Apply ``overrides`` to a copy of recipe data and validate it."""
    return validate(Recipe, *apply_overrides(data, sources, overrides))


def load_recipe(path: str | Path, overrides: OverrideArgs = ()) -> Recipe:
    """Read, extend, override and validate one recipe file."""
    data, sources = read_with_extends(as_path(path, "recipe"))
    if "sweep" in data:
        src = sources.entries.get(("sweep",))
        raise ConfigError(
            "this is a sweep file, not a recipe",
            file=str(path),
            line=src.line if src else None,
            field="sweep",
            fix="use load_sweep or 'scalerl config SWEEP.yaml VARIANT' for a sweep",
        )
    return build_recipe(data, sources, as_overrides(overrides))


def recipe_overrides_section(data: dict[str, Any], sources: SourceMap) -> tuple[Override, ...]:
    """A sweep's ``overrides:`` mapping as :class:`Override` s traced to their lines."""
    section = data.get("overrides") or {}
    if not isinstance(section, dict):
        return ()  # the sweep schema reports the wrong type with its line
    return overrides_from_mapping(section, sources, ("overrides",))


def _sweep_keys() -> list[str]:
    return [f.alias or name for name, f in SweepSpec.model_fields.items()]


def _split_cli(
    overrides: Sequence[Override], data: dict[str, Any], sources: SourceMap
) -> tuple[dict[str, Any], SourceMap, tuple[Override, ...]]:
    """Sweep-field overrides change the sweep data; recipe-field ones are returned for the recipe."""
    sweep_keys = _sweep_keys()
    sweep_ovr: list[Override] = []
    recipe_ovr: list[Override] = []
    for o in overrides:
        head = o.path[0]
        if head == "overrides" and len(o.path) > 1:
            recipe_ovr.append(Override(".".join(o.path[1:]), o.value, o.source))
        elif head in sweep_keys:
            sweep_ovr.append(o)
        elif head in Recipe.model_fields:
            recipe_ovr.append(o)
        else:
            raise ConfigError(
                f"override key {o.key!r} is neither a sweep nor a recipe field",
                file=o.source.file,
                field=o.key,
                value=o.value,
                fix="start it with a sweep key ("
                + ", ".join(sweep_keys)
                + ") or a recipe key ("
                + ", ".join(Recipe.model_fields)
                + ")",
            )
    data, sources = apply_overrides(data, sources, sweep_ovr)
    return data, sources, tuple(recipe_ovr)


def load_sweep(path: str | Path, overrides: OverrideArgs = ()) -> SweepSpec:
    """Read, extend, override and validate a sweep file, its base recipe and its variants."""
    path = as_path(path, "sweep file")
    data, sources = read_with_extends(path)
    if "sweep" not in data and "name" in data:
        raise ConfigError(
            "this is a recipe, not a sweep (no 'sweep:' key)",
            file=str(path),
            line=1,
            fix="use 'scalerl config RECIPE.yaml', or write a sweep file whose base: is this recipe",
        )
    data, sources, cli_recipe_ovr = _split_cli(as_overrides(overrides), data, sources)
    spec = validate(SweepSpec, data, sources)

    where = sources.get(("base",)) or Source(str(path))
    anchor = Path(where.file).parent if Path(where.file).is_file() else path.parent
    base_path = anchor / spec.base
    if not base_path.is_file():
        raise ConfigError(
            f"base recipe {str(base_path)!r} not found",
            file=where.file,
            line=where.line,
            field="base",
            value=spec.base,
            fix="give the recipe's path relative to the sweep file's folder",
        )
    rdata, rsources = read_with_extends(base_path)
    if "sweep" in rdata:
        raise ConfigError(
            f"base {spec.base!r} is a sweep file, not a recipe",
            file=where.file,
            line=where.line,
            field="base",
            value=spec.base,
            fix="point base: at a recipe (a file with name:, model:, knobs: ...)",
        )
    recipe_ovr = [*recipe_overrides_section(data, sources), *cli_recipe_ovr]
    if spec.budget is not None:
        budget_src = sources.get(("budget",)) or where
        recipe_ovr.append(Override("budget", spec.budget.model_dump(mode="json"), budget_src))
    base_data, base_sources = apply_overrides(rdata, rsources, recipe_ovr)
    base_recipe = validate(Recipe, base_data, base_sources)

    variants = tuple(design_for(spec.design).variants(spec, base_recipe, sources))
    seen: dict[str, Source] = {}
    for v in variants:
        if v.name in seen:
            first = seen[v.name]
            raise ConfigError(
                f"duplicate variant name {v.name!r} (also at {first.file}:{first.line})",
                file=v.source.file,
                line=v.source.line,
                field="name",
                value=v.name,
                fix="give each variant a unique name",
            )
        seen[v.name] = v.source
    spec._loaded = LoadedSweep(path, sources, base_data, base_sources, base_recipe, variants)
    return spec
