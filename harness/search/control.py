"""Stopping a running search: ``scalerl cancel`` on a ``design: optuna`` sweep.

A search's trials are not jobs the executor knows (a worker trains them in its own process), so
cancelling one goes through the study every worker shares: :func:`cancel_search` sets the study's
user attribute :data:`CANCEL_ATTR` and marks the runs of its RUNNING trials ``cancelled``. Each
worker watches the attribute (:func:`watch_cancel`, every couple of seconds): it sets the worker's
stop, so the trial's run stops at its next step with a checkpoint, the trial fails with a copy
enqueued, and the worker asks for no further trial. ``scalerl sweep`` of the same search clears
the flag (:func:`clear_cancel`, the user asked again) and the copies resume the runs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import optuna

log = logging.getLogger(__name__)

CANCEL_ATTR = "scalerl_cancelled"  # study user attribute: falsy, or {"at": unix time}


def is_cancelled(study: optuna.Study) -> bool:
    """Whether ``scalerl cancel`` flagged the study (read from the storage, not a cache)."""
    attrs = study._storage.get_study_user_attrs(study._study_id)
    return bool(attrs.get(CANCEL_ATTR))


def clear_cancel(study: optuna.Study) -> None:
    if is_cancelled(study):
        study.set_user_attr(CANCEL_ATTR, False)


def watch_cancel(study: optuna.Study, stop: threading.Event, done: threading.Event, every_s: float) -> None:
    """Set ``stop`` once the study is flagged cancelled; returns when ``done`` is set."""
    while not done.wait(every_s):
        try:
            if is_cancelled(study):
                log.info("study %s was cancelled: stopping this worker", study.study_name)
                stop.set()
                return
        except Exception:  # a store hiccup: look again next time
            log.exception("reading the cancel flag of study %s", study.study_name)


def search_study_name(name: str, spec: Mapping[str, Any]) -> str | None:
    """The study of a stored sweep spec when it is a search (``design: optuna``), else None."""
    if spec.get("design") != "optuna":
        return None
    section = spec.get("optuna") or {}
    return str(section.get("study") or name)


def cancel_search(store: Any, spec: Mapping[str, Any], study_name: str, db_url: str | None) -> dict[str, str]:
    """Flag the study cancelled and mark the runs of its RUNNING trials ``cancelled``.

    Returns ``{"search": what happened, run_id: outcome, ...}``; the ``search`` entry is
    ``cancelled`` when the search still had trials to run or running, ``nothing to cancel`` when
    it was done (or its study does not exist)."""
    import optuna
    from optuna.trial import TrialState

    from scalerl.harness.search.worker import optuna_quiet, storage_url

    # The study lives beside the store: without a URL, the one the store was opened with.
    url = storage_url(db_url) if db_url else store.engine.url.render_as_string(hide_password=False)
    with optuna_quiet():
        storage = optuna.storages.RDBStorage(url)
    try:
        study = optuna.load_study(study_name=study_name, storage=storage)
    except KeyError:
        return {"search": f"nothing to cancel: no study {study_name!r} in the store's database"}
    trials = study.get_trials(deepcopy=False)
    live = [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    section = spec.get("optuna") or {}
    unclaimed = len(trials) < int(section.get("n_trials", 0) or 0)
    was = is_cancelled(study)
    study.set_user_attr(CANCEL_ATTR, {"at": time.time()})
    out: dict[str, str] = {}
    if was:
        out["search"] = "already cancelled"
    elif live or unclaimed:
        out["search"] = "cancelled"
    else:
        out["search"] = "nothing to cancel: every trial has ended"
    for t in trials:
        run_id = t.user_attrs.get("run_id")
        if t.state != TrialState.RUNNING or not run_id:
            continue
        run = store.get_run(str(run_id))
        if run is None or run.status not in ("running", "submitted", "queued", "requeued"):
            continue
        marked = store.finish_run(run.run_id, run.attempts, "cancelled", error="cancelled by user")
        out[run.run_id] = "cancelled" if marked else "a newer attempt owns the run (store not updated)"
    return out
