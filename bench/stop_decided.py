"""Stop when decided: compute saved on the tiny LOO sweep, and are the verdicts the full sweep's?

Compares two stores of recipes/tiny-loo.yaml (same seeds, same 300-step budget): ``--full``, every
run trained to its budget (e.g. bench/.work/replication/b300-s3/A.db, seeds 0-2), and ``--stopped``,
the same sweep run with ``fit.stop_when=decided``::

    OMP_NUM_THREADS=1 .venv/bin/scalerl sweep recipes/tiny-loo.yaml fit.stop_when=decided \\
        --executor local --max-parallel 27 --wait \\
        --db sqlite:///$PWD/bench/.work/stop-decided/S.db --state-dir $PWD/bench/.work/stop-decided/state
    .venv/bin/python bench/stop_decided.py

Compute per run: the steps it trained (a stopped run's checkpoint step, read from its workdir under
``--state``; a completed run's budget) and the FLOPs at that step (interpolated on the full
sweep's curve of the same run: the trainer is deterministic, so both runs share their curve up to
the stop). Verdicts: both stores fitted by the same code as ``scalerl fit`` (nothing written).
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "bench" / ".work"


def _verdicts(url: str) -> dict[str, str]:
    from scalerl import db
    from scalerl.harness.analysis.verdicts.service import fit_sweep

    result = fit_sweep(db.open_store(url), "tiny-loo", write=False)
    assert result.analysis is not None
    return {v.variant: v.verdict for v in result.analysis.verdicts}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--full", default=str(WORK / "replication" / "b300-s3" / "A.db"))
    ap.add_argument("--stopped", default=str(WORK / "stop-decided" / "S.db"))
    ap.add_argument("--state", default=str(WORK / "stop-decided" / "state"))
    args = ap.parse_args()
    from scalerl import db
    from scalerl.db import queries
    from scalerl.harness.execution.runners.reference import ReferenceRunner

    full_url, stop_url = f"sqlite:///{args.full}", f"sqlite:///{args.stopped}"
    full_store, stop_store = db.open_store(full_url), db.open_store(stop_url)
    full_runs = queries.runs(full_store, "tiny-loo").set_index(["variant", "seed"])
    stop_runs = queries.runs(stop_store, "tiny-loo")
    curves = queries.curves(full_store, "tiny-loo", metric="val/pass_rate")
    events = queries.events(stop_store, "tiny-loo")
    budget = float(queries.sweeps(stop_store)["spec"].iloc[0]["budget"]["value"])
    rows: list[dict[str, Any]] = []
    for r in stop_runs.to_dict("records"):
        key = (r["variant"], int(r["seed"]))
        full_id = str(full_runs.loc[key, "run_id"])
        c = curves[curves.run_id == full_id].sort_values("step")
        if r["status"] == "stopped-decided":
            step = ReferenceRunner().resume_step(Path(args.state) / "runs" / str(r["run_id"]))
            assert step is not None, r
        else:
            step = int(budget)
        flops = float(np.interp(step, c["step"].to_numpy(float), c["flops"].to_numpy(float)))
        rows.append(
            {"variant": r["variant"], "seed": key[1], "status": r["status"], "steps": step,
             "flops": flops, "full_flops": float(c["flops"].max()), "same_id": full_id == r["run_id"]}
        )  # fmt: skip
    steps = sum(x["steps"] for x in rows)
    flops = sum(x["flops"] for x in rows)
    full_flops = sum(x["full_flops"] for x in rows)
    v_full, v_stop = _verdicts(full_url), _verdicts(stop_url)
    decided = events[events.kind == "stopped-decided"]
    out = {
        "runs": len(rows),
        "stopped_decided": [
            {k: x[k] for k in ("variant", "seed", "steps")} for x in rows if x["status"] == "stopped-decided"
        ],
        "stop_verdicts": sorted({str(d.get("verdict")) for d in decided["detail"] if "verdict" in d}),
        "steps_trained": steps,
        "steps_full": int(budget) * len(rows),
        "saved_steps_share": round(1.0 - steps / (budget * len(rows)), 4),
        "saved_flops_share": round(1.0 - flops / full_flops, 4),
        "same_run_ids": all(x["same_id"] for x in rows),
        "verdicts_full": v_full,
        "verdicts_stopped": v_stop,
        "identical": v_full == v_stop,
        "differ": {k: (v_full.get(k), v_stop.get(k)) for k in v_full if v_full.get(k) != v_stop.get(k)},
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
