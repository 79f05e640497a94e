"""The shared real RL curves, read once for every benchmark: sources, files, metrics, sets.

Four sources under :data:`REAL` (``/work/shared/data/real-rl-curves``, or ``$SCALERL_REAL_CURVES``;
SOURCES.md there says where each came from), read with the product's importers:

- ``wandb-export-deep-grpo``: W&B panel exports (CSV); several files repeat a run;
- ``tensorboard-verl-async``: TensorBoard event files, 11 runs (validation and train reward);
- ``verl-fork-parsed``: verl's parsed metrics CSV, 7 replicate runs (train reward);
- ``speedrl-dapo-json``: SPEED-RL JSON lines, 20 runs x 5 validation benchmarks.

:func:`read` gives every curve of a source with its file, in file order; :func:`load_real` is the
set the forecast, sweep-forecast and search benchmarks score (146 curves on the step axis, W&B runs
deduplicated). A benchmark that needs another selection (the fit benchmark's native axes, the
verdict simulator's noise sources) builds it from :func:`read` and says so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scalerl.harness.importers import read_curves
from scalerl.harness.importers.base import ImportedCurve

REAL = Path(os.environ.get("SCALERL_REAL_CURVES", "/work/shared/data/real-rl-curves"))
WANDB, TENSORBOARD, VERL, SPEEDRL = SOURCES = (
    "wandb-export-deep-grpo",
    "tensorboard-verl-async",
    "verl-fork-parsed",
    "speedrl-dapo-json",
)
SHORT = {WANDB: "W&B", TENSORBOARD: "TensorBoard", VERL: "verl CSV", SPEEDRL: "SPEED-RL"}
PATTERNS = {WANDB: "*.csv", TENSORBOARD: "*.tfevents", VERL: "*.csv", SPEEDRL: "*/processed_metrics.json"}
TB_VAL, TB_TRAIN = "val-core/openai/gsm8k/reward/mean@1", "critic/score/mean"
VERL_REWARD = "critic/rewards/mean"
SPEED_VAL = "val-core/*/acc/mean@*"  # every benchmark's validation accuracy


def files(source: str, root: Path = REAL) -> list[Path]:
    """The source's files, sorted (the order every set below is built in)."""
    return sorted((root / source).glob(PATTERNS[source]))


def read(source: str, metric: str | None = None, root: Path = REAL) -> list[tuple[Path, ImportedCurve]]:
    """Every curve of ``source`` (only metrics equal to / matching the glob ``metric``), with the
    file it came from, in file order then the importer's order. A file that lost anything reading
    raises (:func:`scalerl.harness.importers.read_curves`): none of these does."""
    return [(f, c) for f in files(source, root) for c in read_curves(f, metric=metric)]


def by_file(
    source: str, metric: str | None = None, root: Path = REAL
) -> dict[Path, dict[str, ImportedCurve]]:
    """:func:`read` grouped: file -> metric -> curve (for sources with one run per file)."""
    out: dict[Path, dict[str, ImportedCurve]] = {}
    for f, c in read(source, metric, root):
        out.setdefault(f, {})[c.metric] = c
    return out


@dataclass(frozen=True)
class RealCurve:
    """One curve of :func:`load_real`: ``x`` the training step, ``y`` the metric."""

    source: str
    name: str
    x: np.ndarray
    y: np.ndarray


def load_real(root: Path = REAL) -> list[RealCurve]:
    """The scored set, on the step axis: W&B's validation curves, each run once (the first file it
    appears in; 17), TensorBoard's validation and train reward per run (22), verl's train reward
    per replicate (7), SPEED-RL's five validation benchmarks per run (100)."""
    out: list[RealCurve] = []
    seen: set[str] = set()
    for _, c in read(WANDB, root=root):
        if c.run not in seen:
            seen.add(c.run)
            out.append(RealCurve(WANDB, c.run, c.steps.astype(np.float64), c.values))
    for f, by in by_file(TENSORBOARD, root=root).items():
        for m in (TB_VAL, TB_TRAIN):
            out.append(RealCurve(TENSORBOARD, f"{f.stem}:{m}", by[m].steps.astype(np.float64), by[m].values))
    for _, c in read(VERL, VERL_REWARD, root):
        out.append(RealCurve(VERL, c.run, c.steps.astype(np.float64), c.values))
    for _, c in read(SPEEDRL, SPEED_VAL, root):
        out.append(RealCurve(SPEEDRL, f"{c.run}:{c.metric}", c.steps.astype(np.float64), c.values))
    return out


def first_file_of_runs(root: Path = REAL) -> dict[str, str]:
    """W&B run -> the stem of the first export file it appears in (its sweep, for the sweep forecast)."""
    first: dict[str, str] = {}
    for f, c in read(WANDB, root=root):
        first.setdefault(c.run, f.stem)
    return first
