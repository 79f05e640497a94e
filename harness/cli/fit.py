"""``scalerl fit``: fit every run and variant of a sweep, write fits and verdicts, print the table."""

from __future__ import annotations

import argparse
import math
from typing import Any

from scalerl.harness.analysis.verdicts.rule import MARGIN
from scalerl.harness.argtypes import real, whole
from scalerl.harness.axes import FIT_AXES

MAX_BOOT = 100_000  # replicates: more would only eat memory and time, never sharpen an interval


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "fit",
        help="fit sigmoid curves for a sweep and classify each knob (asymptote vs efficiency)",
        description="Fit R(C) = R0 + (A - R0) / (1 + (C_mid/C)^B) to every run and to every variant "
        "pooled over seeds, with bootstrap CIs; compare each LOO variant with the baseline; store the "
        "fits and verdicts. Defaults come from the sweep's `fit` section when it has one.",
    )
    p.add_argument("sweep", metavar="SWEEP", nargs="?", help="sweep name (default: $SCALERL_SWEEP)")
    p.add_argument("--metric", help="point metric (default: the sweep's fit.metric, else val/pass_rate)")
    p.add_argument(
        "--axis",
        choices=FIT_AXES,
        help="compute axis (default: the sweep's fit.axis, else flops)",
    )
    win = p.add_mutually_exclusive_group()
    win.add_argument(
        "--window-start", type=real(0.0), metavar="X", help="drop points with compute < X (finite, >= 0)"
    )
    win.add_argument(
        "--window-fraction",
        type=real(0.0, 1.0, hi_open=True),
        metavar="F",
        help="drop the first F (in [0, 1)) of each curve's compute range",
    )
    p.add_argument(
        "--margin",
        type=real(0.0, 1.0, hi_open=True),
        help=f"minimum |dA| for an asymptote-mover, in [0, 1) (default {MARGIN:g})",
    )
    p.add_argument(
        "--seed-sd",
        type=real(0.0, 1.0, lo_open=True, hi_open=True),
        metavar="SD",
        help="a known seed-to-seed sd of a ceiling (e.g. from an earlier replicate study), used instead "
        "of the one the sweep's seeds measure; the only way one seed per variant decides anything",
    )
    p.add_argument(
        "--method",
        default="fast",
        help="fitter: fast (default); paper (ScaleRL App. A.5's grid widened to the data, the reference "
        "baseline); paper_grid (its literal A grid 0.45-0.80); curve_fit",
    )
    p.add_argument(
        "--boot",
        type=whole(10, MAX_BOOT),
        default=200,
        metavar="N",
        help=f"bootstrap replicates, 10 to {MAX_BOOT} (default 200)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print {sweep, metric, axis, saved, notes, fits, verdicts: [...]} as JSON (the store's "
        "column names: d_a, d_a_lo, ...)",
    )
    p.add_argument(
        "--no-save",
        action="store_true",
        help="print only; leave the store's fits and verdicts as they are (a read-only store is "
        "never written either way)",
    )
    p.add_argument(
        "--db", metavar="URL", help="store URL (default: $SCALERL_DB_URL, else sqlite:///./scalerl.db)"
    )
    p.set_defaults(func=_fit)


def _num(v: Any, fmt: str = ".3f") -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, fmt)


def _ci(v: Any, lo: Any, hi: Any) -> str:
    return f"{_num(v, '+.3f')} [{_num(lo, '+.3f')}, {_num(hi, '+.3f')}]"


def _clean(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v


def _fit(args: argparse.Namespace) -> int:
    from scalerl import db
    from scalerl.harness.analysis.fit.fitters import get_fitter
    from scalerl.harness.analysis.forecast.service import forecast_rows, metric_bounds
    from scalerl.harness.analysis.groups import load_groups
    from scalerl.harness.analysis.verdicts.service import FitRequest, fit_sweep, resolve_request, save_fits
    from scalerl.harness.cli.busy import activity
    from scalerl.harness.cli.forecast import print_rows
    from scalerl.harness.lookup import require_metric, require_sweep

    get_fitter(args.method)  # unknown names fail before touching the store
    req = FitRequest(
        metric=args.metric,
        axis=args.axis,
        window_start=args.window_start,
        window_fraction=args.window_fraction,
        margin=args.margin,
        seed_sd=args.seed_sd,
        method=args.method,
        n_boot=args.boot,
    )
    # Never creates a store (a mistyped --db is an error); a store this process cannot write is
    # opened read-only and the table still prints, with a note that nothing was saved.
    store = db.open_store(args.db, create=False)
    unsaved = None
    try:
        spec = require_sweep(store, args.sweep)
        require_metric(store, args.sweep, resolve_request(req, spec)[0])
        with activity(f"fitting sweep {args.sweep}", as_json=args.json):
            result = fit_sweep(store, args.sweep, req, write=False)
        if args.no_save:
            unsaved = "not saved (--no-save)"
        else:
            try:
                save_fits(store, result)
            except db.StorePermissionError:  # a shared store: another role's sweep (README, "Sharing")
                unsaved = (
                    f"not saved: this role may not change sweep {args.sweep} (every role may read it; "
                    f"its owner grants changes: `scalerl db grant ROLE --sweep {args.sweep}`)"
                )
            except db.StoreReadOnlyError:
                unsaved = f"not saved: the store is read-only ({store.url})"
        # The same forecasts as `scalerl forecast` (issue 12): each variant's seeds pooled.
        groups = None if args.json else load_groups(store, args.sweep, result.metric, result.axis)
    finally:
        store.close()
    rows = result.verdict_rows
    if args.json:
        # An object like every command's (README, "Scripting with --json, and exit codes"), keyed
        # by the store's
        # column names (d_a, d_a_lo, ...), one spelling each.
        from scalerl.harness.cli.output import emit

        emit(
            {
                "sweep": result.sweep,
                "metric": result.metric,
                "axis": result.axis,
                "saved": unsaved is None,
                "notes": list(result.notes),
                "fits": {
                    "total": len(result.fit_rows),
                    "ok": sum(r["status"] == "ok" for r in result.fit_rows),
                },
                "verdicts": [{k: _clean(v) for k, v in r.items()} for r in rows],
            }
        )
        return 0
    n_ok = sum(r["status"] == "ok" for r in result.fit_rows)
    print(
        f"sweep {result.sweep}: metric {result.metric} on {result.axis}; "
        f"{len(result.fit_rows)} fits ({n_ok} ok), {len(rows)} verdicts"
    )
    for note in result.notes:
        print(f"  {note}")
    if unsaved:
        print(f"  fits and verdicts {unsaved}")
    header = (
        "knob",
        "variant",
        "verdict",
        "A_base",
        "A_var",
        "dA [95% CI]",
        "B_base",
        "B_var",
        "dB [CI]",
        # The smallest |dA| / |dB| this sweep would detect (80% power, at its seeds and noise).
        "MDE dA",
        "MDE dB",
        # How much sooner (-) or later (+) the variant reaches half its gain, in log compute.
        "dlogC_mid [CI]",
        # How sure the rule is that the ceiling moves / that efficiency differs (1 - the claim's
        # false-discovery-adjusted p-value over the sweep's knobs), and the efficiency claim
        # ("differs" on an asymptote-mover: the knob is both).
        "P(ceiling)",
        "P(effic.)",
        "effic.",
        "reason",
    )
    table = [header] + [
        (
            str(r["knob"] or "-"),
            str(r["variant"]),
            str(r["verdict"]),
            _num(r["a_base"]),
            _num(r["a_variant"]),
            _ci(r["d_a"], r["d_a_lo"], r["d_a_hi"]),
            _num(r["b_base"], ".2f"),
            _num(r["b_variant"], ".2f"),
            _ci(r["d_b"], r["d_b_lo"], r["d_b_hi"]),
            _num(r.get("mde_a")),
            _num(r.get("mde_b"), ".2f"),
            _ci(r.get("d_log_c_mid"), r.get("d_log_c_mid_lo"), r.get("d_log_c_mid_hi")),
            _num(r.get("p_ceiling"), ".2f"),
            _num(r.get("p_efficiency"), ".2f"),
            str(r.get("efficiency") or "-"),
            str(r["reason"]),
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(header) - 1)]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)) + "  " + row[-1])
    if not rows:
        # No verdict was made (no baseline to compare with): nothing is "decided" either.
        print(
            "no knob verdicts: the sweep has no single baseline variant to compare with (an imported "
            "sweep gets one from a mapping: scalerl import ... --baseline-run NAME)"
        )
    elif groups and result.analysis is not None:
        _print_next(result.analysis, groups, spec)
    if groups:
        clip = metric_bounds(result.metric, groups)  # the rule `scalerl forecast` applies by default
        print(
            f"forecasts at 2x each variant's largest {result.axis} (90% prediction intervals, {clip.note}; "
            "as `scalerl forecast`: borrowing from the sibling variants where they have fitted ceilings):"
        )
        print_rows(forecast_rows(groups, level=0.9, bounds=clip.bounds), result.axis)
    return 0


def _print_next(analysis: Any, groups: Any, spec: dict[str, Any]) -> None:
    """The knobs that are not decided (scalerl.harness.analysis.verdicts.next_steps), and what
    would decide each."""
    import numpy as np

    from scalerl.harness.analysis.verdicts.next_steps import what_decides

    base = [name for name, g in groups.items() if g.knob is None]
    reached = {name: float(max(np.nanmax(c) for c, _ in g.curves)) for name, g in groups.items()}
    steps = what_decides(analysis, base[0] if len(base) == 1 else "", reached)
    if not steps:
        print("every knob is decided (no interval straddles its threshold)")
        return
    budget = spec.get("budget") or {}
    print(f"not decided ({len(steps)}): what would decide each at the current noise")
    for n in steps:
        hint = ""
        if math.isfinite(n.factor) and budget.get("value"):
            hint = f"; ~--extend {math.ceil(n.factor * float(budget['value']))} ({budget.get('unit')})"
        print(f"  {n.knob or '-'} ({n.variant}, {n.verdict}): {n.note}{hint}")
