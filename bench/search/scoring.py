"""Scoring replayed searches against no pruning, and the selection criterion of the LOSO experiments."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from bench.data import SOURCES
from bench.search.replay import BUDGET_SHARES, Run
from bench.search.settings import BeatSetting, Setting

SAME_BEST = 0.9  # --loso's selection: keep the same best as no pruning in >= 90% of the training runs
S = TypeVar("S", Setting, BeatSetting)


@dataclass(frozen=True)
class Score:
    runs: int
    ratio: float  # mean over runs of compute / no pruning's
    same: float  # share of runs that found the same best as no pruning
    regret: float
    at: tuple[float, ...]  # regret at BUDGET_SHARES of no pruning's compute
    best_pruned: float = 0.0  # share of runs that pruned the pool's best curve


def score(runs: Sequence[Run], base: dict[tuple[str, str, int], Run]) -> Score:
    b = [base[(r.pool, r.sampler, r.seed)] for r in runs]
    return Score(
        len(runs),
        float(np.mean([r.compute / x.compute for r, x in zip(runs, b, strict=True)])),
        float(np.mean([abs(r.found - x.found) < 1e-12 for r, x in zip(runs, b, strict=True)])),
        float(np.mean([r.regret for r in runs])),
        tuple(
            float(np.mean([r.regret_at(f * x.compute) for r, x in zip(runs, b, strict=True)]))
            for f in BUDGET_SHARES
        ),
        float(np.mean([r.best_pruned for r in runs])),
    )


def by_source_table(
    runs: Sequence[Run],
    sampler: str,
    names: Sequence[str],
    base: dict[tuple[str, str, int], Run],
    first: str,
    label: Callable[[str], str],
    n_pools: int,
) -> None:
    """One sampler's table, a row per source and one over all pools: per pruner in ``names``,
    compute vs none / same best / best pruned / regret / regret at each budget share."""
    print(f"| {first} | runs | " + " | ".join(names) + " |")
    print("|" + "---|" * (2 + len(names)))
    for src in (*SOURCES, None):
        rs = [r for r in runs if r.sampler == sampler and (src is None or r.source == src)]
        cells = []
        for n in names:
            sc = score([r for r in rs if r.pruner == n], base)
            cells.append(
                f"{sc.ratio:.2f}x / {sc.same:.0%} / {sc.best_pruned:.0%} / {sc.regret:.4f} / "
                + " / ".join(f"{a:.4f}" for a in sc.at)
            )
        name = f"all {n_pools} pools" if src is None else label(src)
        print(f"| {name} | {len([r for r in rs if r.pruner == 'none'])} | " + " | ".join(cells) + " |")


def choose(scores: dict[S, Score], floor: float = SAME_BEST) -> S:
    """The selection criterion, fixed before any held-out score was seen: the least compute
    among settings that keep the same best as no pruning in >= ``floor`` of the training runs
    (ties: lower regret); if none does, the highest same-best share (then the least compute)."""
    ok = [s for s, v in scores.items() if v.same >= floor - 1e-12]
    if ok:
        return min(ok, key=lambda s: (scores[s].ratio, scores[s].regret))
    return max(scores, key=lambda s: (scores[s].same, -scores[s].ratio))
