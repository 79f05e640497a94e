"""Synthetic store frames with known parameters, shaped exactly like ``scalerl.db.queries`` returns them."""

from __future__ import annotations

import numpy as np
import pandas as pd

from scalerl.harness.analysis.fit.curve import sigmoid_curve

# variant -> (knob, alternative, A, B); C_mid and R0 are shared.
VARIANTS: dict[str, tuple[str | None, str | None, float, float]] = {
    "baseline": (None, None, 0.60, 1.5),
    "loo-dapo": ("loss", "dapo", 0.50, 1.5),
    "loo-savg": ("loss_aggregation", "sample_avg", 0.60, 0.9),
}
C_MID = 1e15
R0 = 0.1


def curves_frame(
    n_points: int = 60,
    seeds: int = 2,
    variants: dict[str, tuple[str | None, str | None, float, float]] = VARIANTS,
) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for variant, (knob, alt, a, b) in variants.items():
        for seed in range(seeds):
            flops = np.geomspace(1e13, 2e16, n_points)
            value = sigmoid_curve(flops, R0, a, b, C_MID) + rng.normal(0, 0.005, n_points)
            rows.append(
                pd.DataFrame(
                    {
                        "run_id": f"{variant}-s{seed}", "variant": variant, "knob": knob,
                        "alternative": alt, "seed": seed, "step": np.arange(n_points),
                        "metric": "val/pass_rate", "value": value, "gpu_hours": flops / 1e15,
                        "flops": flops, "tokens": flops / 1e6, "samples": flops / 1e9,
                        "wall_s": flops / 1e12,
                    }
                )
            )  # fmt: skip
    return pd.concat(rows, ignore_index=True)


def fits_frame(status: str = "ok") -> pd.DataFrame:
    rows = []
    for variant, (_, _, a, b) in VARIANTS.items():
        rows.append(
            {
                "run_id": None, "variant": variant, "metric": "val/pass_rate", "axis": "flops",
                "window_start": 5e13, "r0": R0, "a": a, "a_lo": a - 0.01, "a_hi": a + 0.01,
                "b": b, "b_lo": b - 0.1, "b_hi": b + 0.1, "c_mid": C_MID, "c_mid_lo": C_MID * 0.9,
                "c_mid_hi": C_MID * 1.1, "rmse": 0.005, "n_points": 100, "status": status,
                "reason": "", "method": "test",
            }
        )  # fmt: skip
    return pd.DataFrame(rows)


def verdicts_frame() -> pd.DataFrame:
    base_a, base_b = VARIANTS["baseline"][2], VARIANTS["baseline"][3]
    rows = []
    for variant, (knob, alt, a, b) in VARIANTS.items():
        if variant == "baseline":
            continue
        d_a, d_b = a - base_a, b - base_b
        verdict = "asymptote-mover" if abs(d_a) > 0.02 else "efficiency-shaper"
        rows.append(
            {
                "knob": knob, "variant": variant, "alternative": alt, "metric": "val/pass_rate",
                "axis": "flops", "verdict": verdict, "a_base": base_a, "a_variant": a, "d_a": d_a,
                "d_a_lo": d_a - 0.01, "d_a_hi": d_a + 0.01, "b_base": base_b, "b_variant": b,
                "d_b": d_b, "d_b_lo": d_b - 0.1, "d_b_hi": d_b + 0.1, "margin": 0.02,
                "mde_a": 0.031, "mde_b": 0.42, "reason": f"|ΔA|={abs(d_a):.3f}",
            }
        )  # fmt: skip
    return pd.DataFrame(rows)


def runs_frame(curves: pd.DataFrame) -> pd.DataFrame:
    runs = curves.groupby("run_id", as_index=False).first()[
        ["run_id", "variant", "knob", "alternative", "seed"]
    ]
    runs["status"] = ["completed" if i % 2 == 0 else "running" for i in range(len(runs))]
    return runs
