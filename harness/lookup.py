"""Names looked up in a store (a sweep, a metric) and the one error each gives when it is not there.

Every command and :class:`scalerl.Sweep` reach a sweep and a metric through these, so a name that
is not in the store fails the same way everywhere: a :class:`~scalerl.harness.errors.NotFoundError`
(exit 3, README "Scripting with --json, and exit codes") that names the value, lists what is
there and, for a near miss, says which one was meant (:func:`did_you_mean`, difflib's close
matches).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

from scalerl.harness.errors import NotFoundError


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    """``"did you mean 'fit'?"`` for the closest of ``choices`` to ``word`` (difflib, cutoff 0.6),
    else ``""``."""
    close = difflib.get_close_matches(word, [str(c) for c in choices], n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else ""


def _listing(choices: Sequence[str], limit: int = 12) -> str:
    shown = ", ".join(choices[:limit]) + (" ..." if len(choices) > limit else "")
    return shown or "none"


def require_sweep(store: Any, name: str, *, how: str = "--db") -> dict[str, Any]:
    """The stored spec of sweep ``name``; :class:`NotFoundError` when the store has no such sweep
    (``how``: how to name another store, ``--db`` or ``db=URL``)."""
    from scalerl.db import queries

    known = queries.sweeps(store)
    names = [str(n) for n in known["name"]] if not known.empty else []
    if name not in names:
        hint = did_you_mean(name, names)
        raise NotFoundError(
            "no such sweep in the store",
            field="SWEEP",
            value=name,
            fix=(f"{hint} " if hint else "") + f"use one of: {_listing(names)}; or pass {how}",
        )
    return dict(known.loc[known["name"] == name, "spec"].iloc[0] or {})


def require_metric(store: Any, sweep: str, metric: str, *, how: str = "--metric") -> None:
    """:class:`NotFoundError` when no run of ``sweep`` logged ``metric`` (but some logged others;
    a sweep with no point at all is left to the analysis, which says so)."""
    from scalerl.db import queries

    logged = queries.logged_metrics(store, sweep)
    if logged and metric not in logged:
        hint = did_you_mean(metric, logged)
        raise NotFoundError(
            f"no run of sweep {sweep!r} logged this metric",
            field="metric",
            value=metric,
            fix=(f"{hint} " if hint else "") + f"pass {how}, one its runs log: {_listing(logged, 20)}",
        )
