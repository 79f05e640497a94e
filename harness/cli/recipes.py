"""``scalerl plan`` and ``scalerl config``: see a sweep's runs, or one run's resolved config.

Usage::

    scalerl plan recipes/loo.yaml [key=value ...] [--json]
    scalerl config recipes/loo.yaml loo-dapo [--seed N] [key=value ...]
    scalerl config recipes/tiny.yaml [key=value ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from scalerl.harness.argtypes import non_negative_int
from scalerl.harness.cli.output import emit
from scalerl.harness.errors import ConfigError

if TYPE_CHECKING:
    from scalerl.harness.recipe.schema import Recipe


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="list a sweep's variants, seeds, run ids and budgets")
    p.add_argument("sweep", help="sweep YAML (e.g. recipes/loo.yaml)")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="dotted overrides, YAML-typed")
    p.add_argument("--json", action="store_true", help="print a JSON list of runs instead of a table")
    p.set_defaults(func=cmd_plan)

    c = sub.add_parser("config", help="print one variant's (or a recipe's) fully resolved config as YAML")
    c.add_argument("file", help="a sweep YAML (then name a VARIANT) or a recipe YAML")
    c.add_argument("rest", nargs="*", metavar="VARIANT|key=value", help="the variant, then overrides")
    c.add_argument(
        "--seed", type=non_negative_int, default=None, help="seed for the run id (default: the first)"
    )
    c.set_defaults(func=cmd_config)


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def cmd_plan(args: argparse.Namespace) -> int:
    from scalerl.harness.recipe import load_sweep, plan

    sweep = load_sweep(args.sweep, args.overrides)
    result = plan(sweep)
    for dup in result.duplicates:
        print(f"scalerl: warning: {dup.message}", file=sys.stderr)
    if args.json:
        emit([r.as_row() for r in result.runs])
        return 0
    rows = [["variant", "knob", "from -> to", "seed", "run id", "budget"]]
    for r in result.runs:
        move = f"{r.from_alternative} -> {r.alternative}" if r.knob else "-"
        rows.append(
            [r.variant, r.knob or "-", move, str(r.seed), r.run_id, f"{r.budget.value:g} {r.budget.unit}"]
        )
    fit = sweep.fit
    window = (
        f"start={fit.window.start:g}" if fit.window.start is not None else f"fraction={fit.window.fraction:g}"
    )
    print(
        f"sweep {sweep.sweep}: design {sweep.design}, base {sweep.base}, "
        f"{len(result.variant_names)} variants x {len(sweep.seeds)} seeds = {len(result.runs)} runs, "
        f"executor {sweep.executor}"
    )
    print(f"fit: {fit.metric} on {fit.axis}, window {window}, margin {fit.margin:g}")
    print(_table(rows))
    return 0


def _is_sweep(path: Path) -> bool:
    from scalerl.harness.recipe.loader import read_with_extends

    data, _ = read_with_extends(path)
    return "sweep" in data


def cmd_config(args: argparse.Namespace) -> int:
    import yaml

    from scalerl.harness.recipe import load_recipe, load_sweep, plan
    from scalerl.harness.recipe.hashing import config_hash, run_id

    path = Path(args.file)
    names = [a for a in args.rest if "=" not in a]
    overrides = [a for a in args.rest if "=" in a]
    if _is_sweep(path):
        if len(names) != 1:
            sweep = load_sweep(path, overrides)
            raise ConfigError(
                "name exactly one variant of this sweep" if not names else f"too many variants: {names}",
                file=str(path),
                field="VARIANT",
                fix="scalerl config SWEEP.yaml VARIANT; variants: "
                + ", ".join(v.name for v in sweep.variants),
            )
        result = plan(load_sweep(path, overrides))
        seed = args.seed if args.seed is not None else result.sweep.seeds[0]
        dup = next((d for d in result.duplicates if d.variant == names[0]), None)
        # Any seed is fine here: the seed only enters the run id, not the config.
        run = result.run(dup.same_as if dup else names[0], result.sweep.seeds[0])
        recipe = run.recipe
        about = {"sweep": result.sweep.sweep, "variant": names[0], "same_as": dup.same_as if dup else None,
                 "seed": seed, "run_id": run_id(recipe, seed), "config_hash": run.config_hash}  # fmt: skip
        header = (
            f"# sweep {result.sweep.sweep}, variant {names[0]}"
            + (f" (same config as {dup.same_as})" if dup else "")
            + f", seed {seed}\n# run_id {run_id(recipe, seed)}\n# config_hash {run.config_hash}\n"
        )
    else:
        if names:
            raise ConfigError(
                f"{path} is a recipe; it has no variants",
                file=str(path),
                field="VARIANT",
                value=names[0],
                fix="drop the variant name, or pass a sweep file",
            )
        recipe = load_recipe(path, overrides)
        seed = args.seed if args.seed is not None else 0
        about = {"recipe": str(path), "seed": seed, "run_id": run_id(recipe, seed),
                 "config_hash": config_hash(recipe)}  # fmt: skip
        header = (
            f"# recipe {path}, seed {seed}\n# run_id {run_id(recipe, seed)}\n"
            f"# config_hash {config_hash(recipe)}\n"
        )
    if args.json:
        from dataclasses import asdict

        from scalerl.harness.rl.inputs import local_paths

        emit({**about, "config": recipe.resolved(), "local_paths": [asdict(p) for p in local_paths(recipe)]})
        return 0
    print(header + yaml.safe_dump(recipe.resolved(), sort_keys=False, allow_unicode=True), end="")
    _print_paths(recipe)
    return 0


def _print_paths(recipe: Recipe) -> None:
    """The recipe's local inputs, after the config (as YAML comments, so the output stays YAML)."""
    from scalerl.harness.rl.inputs import local_paths

    paths = local_paths(recipe)
    if not paths:
        return
    note = {"placeholder": "  <- still a placeholder: replace it", "missing": "  <- not on this machine"}
    todo = [p for p in paths if p.state in note]
    print("# local paths" + (f": {len(todo)} to fill in before training" if todo else ": all present"))
    for p in paths:
        print(f"#   {p.field}: {p.path}{note.get(p.state, '')}")
