"""Grouping the store's curves frame into runs and variants, whatever pandas groups by default.

``scalerl.db.queries.curves`` returns ``variant`` and ``run_id`` as Categoricals whose categories
are the whole sweep (every run, every variant, with or without points of the metric read). pandas
2.x groups a Categorical by *all* its categories (``observed=False``, its default until 3.0), so a
groupby without ``observed=True`` gave each variant every other variant's runs as empty curves:
wrong pooled fits and intervals, then a raw ``ValueError`` (issue 22). CI's floors leg runs this on
pandas 2.1.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pandas as pd

from scalerl.harness.analysis.groups import group_curves


def frame() -> pd.DataFrame:
    rows = [
        (run_id, variant, knob, seed, step, 0.3 + 0.01 * step)
        for run_id, variant, knob, seed in (
            ("b-s1", "baseline", None, 1), ("b-s0", "baseline", None, 0), ("d-s0", "loo-dapo", "loss", 0),
        )
        for step in range(1, 6)
    ]  # fmt: skip
    df = pd.DataFrame(rows, columns=["run_id", "variant", "knob", "seed", "step", "value"])
    # As the store reads them: Categoricals over the whole sweep, here with a run and a variant
    # ("x-s0" of "loo-x") that logged no point of this metric.
    df["run_id"] = pd.Categorical(df["run_id"], categories=["b-s0", "b-s1", "d-s0", "x-s0"])
    df["variant"] = pd.Categorical(df["variant"], categories=["baseline", "loo-dapo", "loo-x"])
    df["alternative"] = df["knob"]
    df["n"] = np.nan
    return df


def test_each_variant_gets_only_its_own_runs_in_seed_order() -> None:
    groups = group_curves(frame(), "step")
    assert sorted(groups) == ["baseline", "loo-dapo"]  # no empty "loo-x"
    assert groups["baseline"].run_ids == ("b-s0", "b-s1")  # by seed, not by appearance
    assert groups["loo-dapo"].run_ids == ("d-s0",) and groups["loo-dapo"].knob == "loss"
    for g in groups.values():
        assert all(len(x) == 5 and len(y) == 5 for x, y in g.curves)


def test_every_groupby_in_the_package_says_observed() -> None:
    """Frames from the store carry Categoricals, so a groupby without ``observed=`` means one thing
    on pandas 2.x and another on 3.x; the package always says which (True: observed groups only)."""
    root = Path(__file__).resolve().parents[3]
    missing = []
    for folder in ("harness", "db"):
        for path in sorted((root / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "groupby"
                    and not any(k.arg == "observed" for k in node.keywords)
                ):
                    missing.append(f"{path.relative_to(root)}:{node.lineno}")
    assert not missing, f"groupby without observed=: {missing}"
