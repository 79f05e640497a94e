"""Fit a whole sweep from the results store and write its fits and verdicts back.

The store's ``curves()`` frame is grouped into runs and variants; the baseline is the variant
with no knob (named ``baseline`` unless the sweep's spec says ``loo.baseline_name``). Every run gets
a per-seed fit (``run_id`` set), every variant a pooled fit over its seeds with bootstrap CIs
(``run_id`` NULL), and each non-baseline variant a verdict. Defaults come from the sweep spec's
``fit`` section (``metric``, ``axis``, ``window``, ``margin``, ``confidence``: the verdicts'
interval level) where the caller does not override; its ``power`` section (``detect_d_a``,
``detect_d_b``) asks how many seeds would detect those.
Each point's sample count (the frame's ``n``) goes to the verdicts' noise model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from scalerl.harness.analysis.fit.curve import FitOptions, SigmoidFit
from scalerl.harness.analysis.groups import VariantCurves, fit_defaults, group_curves
from scalerl.harness.analysis.verdicts.pipeline import classify
from scalerl.harness.analysis.verdicts.rule import MARGIN
from scalerl.harness.analysis.verdicts.spending import sweep_level
from scalerl.harness.analysis.verdicts.types import SweepAnalysis, VerdictOptions
from scalerl.harness.axes import FIT_AXES
from scalerl.harness.errors import AnalysisError

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class FitRequest:
    """What ``scalerl fit`` asks for; None fields fall back to the sweep spec, then to defaults."""

    metric: str | None = None
    axis: str | None = None
    window_start: float | None = None
    window_fraction: float | None = None
    margin: float | None = None
    method: str = "fast"
    n_boot: int = 200
    seed: int = 0
    # The verdicts' interval level; None: the spec's fit.confidence (stop-when-decided's interim looks).
    confidence: float | None = None
    # A known seed-to-seed sd of a ceiling; None: the spec's fit.seed_sd, else measured.
    seed_sd: float | None = None


@dataclass(frozen=True)
class SweepFitResult:
    sweep: str
    metric: str
    axis: str
    analysis: SweepAnalysis | None  # None when the sweep has no baseline to compare against
    fit_rows: list[dict[str, Any]] = field(default_factory=list)
    verdict_rows: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def resolve_request(req: FitRequest, spec: Mapping[str, Any] | None) -> tuple[str, str, FitOptions, float]:
    """(metric, axis, options, margin) from the request, then the spec's ``fit`` section."""
    fit_spec = dict((spec or {}).get("fit") or {})
    window = dict(fit_spec.get("window") or {})
    default_metric, default_axis = fit_defaults(spec)
    metric = req.metric or default_metric
    axis = req.axis or default_axis
    if axis not in FIT_AXES:
        raise AnalysisError(f"--axis {axis!r} is not a compute axis (fix: use one of {', '.join(FIT_AXES)})")
    if req.window_start is not None or req.window_fraction is not None:
        start, frac = req.window_start, req.window_fraction
    else:
        start, frac = window.get("start"), window.get("fraction")
    margin = req.margin if req.margin is not None else float(fit_spec.get("margin", MARGIN))
    options = FitOptions(
        window_start=None if start is None else float(start),
        window_fraction=None if frac is None else float(frac),
    )
    return metric, axis, options, margin


def _baseline_name(frame: pd.DataFrame, spec: Mapping[str, Any] | None) -> str | None:
    no_knob = sorted(set(frame.loc[frame["knob"].isna(), "variant"]))
    wanted = str(((spec or {}).get("loo") or {}).get("baseline_name") or "baseline")
    if wanted in no_knob:
        return wanted
    return no_knob[0] if len(no_knob) == 1 else None


def _fit_row(fit: SigmoidFit, run_id: str | None, variant: str, metric: str, axis: str) -> dict[str, Any]:
    row: dict[str, Any] = {
        k: getattr(fit, k)
        for k in (
            "window_start",
            "r0",
            "a",
            "a_lo",
            "a_hi",
            "b",
            "b_lo",
            "b_hi",
            "c_mid",
            "c_mid_lo",
            "c_mid_hi",
            "rmse",
            "n_points",
            "status",
            "reason",
            "method",
        )
    }
    return row | {"run_id": run_id, "variant": variant, "metric": metric, "axis": axis}


def analyze_frame(
    frame: pd.DataFrame,
    *,
    sweep: str,
    metric: str,
    axis: str,
    options: FitOptions,
    margin: float,
    spec: Mapping[str, Any] | None = None,
    method: str = "fast",
    n_boot: int = 200,
    seed: int = 0,
    level: float | None = None,
    seed_sd: float | None = None,
) -> SweepFitResult:
    """Fit a ``curves()`` frame (one metric) and build the fit and verdict rows. ``level``: the
    verdicts' interval level (None: the sweep's,
    :func:`scalerl.harness.analysis.verdicts.spending.sweep_level`)."""
    if frame.empty:
        raise AnalysisError(
            f"sweep {sweep!r} has no points for metric {metric!r} "
            "(fix: check the name with `scalerl status`, or pass --metric)"
        )
    if frame[axis].isna().all():
        filled = [a for a in FIT_AXES if a in frame and frame[a].notna().any()]
        raise AnalysisError(
            f"sweep {sweep!r}: no point has the {axis!r} compute axis "
            f"(fix: pass --axis with one of {filled or ['step']})"
        )
    if axis != "step":
        frame = frame[frame[axis].notna()]
    groups = group_curves(frame, axis)
    base_name = _baseline_name(frame, spec)
    notes: list[str] = []
    power = dict((spec or {}).get("power") or {})
    fit_spec = dict((spec or {}).get("fit") or {})
    vopts = VerdictOptions(
        margin=margin,
        n_boot=n_boot,
        level=level if level is not None else sweep_level((spec or {}).get("fit")),
        seed=seed,
        detect_d_a=None if power.get("detect_d_a") is None else float(power["detect_d_a"]),
        detect_d_b=None if power.get("detect_d_b") is None else float(power["detect_d_b"]),
        seed_sd=seed_sd
        if seed_sd is not None
        else (None if fit_spec.get("seed_sd") is None else float(fit_spec["seed_sd"])),
    )
    if base_name is None:
        # Nothing to compare against (e.g. imported curves): fit every run and variant anyway.
        notes.append("no single baseline variant (a variant without a knob): verdicts skipped")
        names = list(groups)
        analysis = classify(
            groups[names[0]],
            [groups[n] for n in names[1:]],
            options=options,
            verdict_options=vopts,
            method=method,
        )
        analysis = replace(analysis, verdicts=[])
    else:
        others = [g for name, g in groups.items() if name != base_name]
        analysis = classify(groups[base_name], others, options=options, verdict_options=vopts, method=method)
    fit_rows = [
        _fit_row(f, run_id, _variant_of(groups, run_id), metric, axis)
        for run_id, f in analysis.run_fits.items()
    ] + [_fit_row(b.fit, None, variant, metric, axis) for variant, b in analysis.variant_fits.items()]
    verdict_rows = [v.row(metric, axis) for v in analysis.verdicts]
    notes += noise_notes(analysis)
    return SweepFitResult(sweep, metric, axis, analysis, fit_rows, verdict_rows, notes)


def noise_notes(analysis: SweepAnalysis) -> list[str]:
    """What the noise model found and what set the margin, in words (printed by ``scalerl fit``)."""
    kinds = sorted(set(analysis.noise_sources.values()))
    parts = [f"point noise: {', '.join(kinds) or 'none'} (binomial where points carry n)"]
    if math.isfinite(analysis.seed_noise):
        parts.append(
            f"seed sd of A {analysis.seed_noise:.4f} ({analysis.df} degrees of freedom, pooled over "
            "the sweep)"
        )
    if math.isfinite(analysis.noise_a):
        parts.append(f"measurement-noise SE of one run's A {analysis.noise_a:.4f}")
    if math.isfinite(analysis.r0):
        parts.append(f"R0 {analysis.r0:.4f} shared by every run ({analysis.r0_source})")
    parts.append(f"margin {analysis.margin:.4f} ({analysis.margin_source})")
    out = ["; ".join(parts)]
    asked = [v for v in analysis.verdicts if v.power_note]
    if asked:
        out.append(
            f"power targets at {analysis.seeds} seed(s): "
            + "; ".join(f"{v.variant}: {v.power_note}" for v in asked)
        )
    return out


def _variant_of(groups: Mapping[str, VariantCurves], run_id: str) -> str:
    for name, g in groups.items():
        if run_id in g.run_ids:
            return name
    return run_id.split("#", 1)[0]


def fit_sweep(
    store: Any, sweep: str, request: FitRequest | None = None, *, write: bool = True
) -> SweepFitResult:
    """Read a sweep from the store, fit it, and (``write``) replace its fits and verdicts."""
    from scalerl import db

    req = request or FitRequest()
    sweeps = db.queries.sweeps(store)
    match = sweeps[sweeps["name"] == sweep]
    if match.empty:
        known = ", ".join(sweeps["name"].astype(str).tolist()[:10]) or "none"
        raise AnalysisError(f"sweep {sweep!r} is not in the store (fix: use one of: {known})")
    spec = match.iloc[0]["spec"] or {}
    metric, axis, options, margin = resolve_request(req, spec)
    frame = db.queries.curves(store, sweep, metric)
    if frame.empty and (logged := db.queries.logged_metrics(store, sweep)):
        shown = ", ".join(logged[:20]) + (" ..." if len(logged) > 20 else "")
        raise AnalysisError(
            f"sweep {sweep!r} has no points for metric {metric!r} (fix: pass --metric, one its runs "
            f"log: {shown})"
        )
    result = analyze_frame(
        frame,
        sweep=sweep,
        metric=metric,
        axis=axis,
        options=options,
        margin=margin,
        spec=spec,
        method=req.method,
        n_boot=req.n_boot,
        seed=req.seed,
        level=req.confidence,
        seed_sd=req.seed_sd,
    )
    if write:
        save_fits(store, result)
    return result


def save_fits(store: Any, result: SweepFitResult) -> None:
    """Replace the store's fits and verdicts of ``result``'s (sweep, metric, axis) with its rows;
    those of the sweep on any other metric or axis stay."""
    key = {"metric": result.metric, "axis": result.axis}
    store.replace_fits(result.sweep, result.fit_rows, **key)
    store.replace_verdicts(result.sweep, result.verdict_rows, **key)
