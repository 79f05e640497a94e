"""Resubmitting over changed code: which stored runs other code made, and what the sweep does.

A submission captures the code it launches once (:mod:`scalerl.harness.execution.provenance`)
and compares it with the code each planned run that already ran was made by (``run.provenance``).
A run differs when its commit, dirty flag, dirty-diff hash or a version of torch, transformers,
vllm, trl or scalerl-harness differs. A run with no recorded provenance (stored before schema 0006,
or imported) is *unknown*: listed, never counted as changed, since nothing says its code differs.

The policy: ``--on-code-change`` on the command line, else ``on_code_change`` in the sweep file,
else ``$SCALERL_ON_CODE_CHANGE`` (a lab-wide default, e.g. in a cluster profile), else ``refuse``
(:func:`resolve_policy`):

- ``refuse`` (the default): nothing is submitted; the error names the runs, what changed (old ->
  new) and the two ways on. A verdict compares runs with each other, so runs of two code versions
  in one sweep can turn a trainer change into a "knob effect"; mixing must be a decision, never
  the silent result of a resubmission made for another reason (a retry, a new seed).
- ``reuse``: results stay; runs still to run use the new code; every changed run is listed, and
  ``scalerl status`` and the report say the sweep mixes code versions. For a trainer change known
  not to matter (a log line, a comment).
- ``rerun``: every changed run that is not running now starts again from scratch under the new
  code: same run id (its identity is its config and seed), a new attempt; the next attempt drops
  its points and checkpoint (:attr:`RunSpec.restart_after`). A running one is left alone and listed.

Each changed run gets a ``code-changed`` event ``{policy, old, new, changed}`` when the submission
goes ahead, so the event log keeps what happened.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from scalerl.harness.errors import ConfigError, ExecutionError
from scalerl.harness.execution import provenance
from scalerl.harness.execution.spec import RunSpec

Policy = Literal["refuse", "reuse", "rerun"]
POLICIES: tuple[str, ...] = ("refuse", "reuse", "rerun")
DEFAULT_POLICY: Policy = "refuse"
ENV_POLICY = "SCALERL_ON_CODE_CHANGE"
SHOWN = 5  # runs named in an error before "... and N more"


def resolve_policy(given: str | None, in_file: str | None) -> Policy:
    """The policy in force: the command line's, the sweep file's, ``$SCALERL_ON_CODE_CHANGE``'s,
    else :data:`DEFAULT_POLICY`; a bad value in the environment is an error naming it."""
    for value, where in ((given, "--on-code-change"), (in_file, "on_code_change"),
                         (os.environ.get(ENV_POLICY) or None, f"${ENV_POLICY}")):  # fmt: skip
        if value is None:
            continue
        if value not in POLICIES:
            raise ConfigError(
                "unknown policy for runs that other code made", field=where, value=value,
                fix=f"use one of {', '.join(POLICIES)}",
            )  # fmt: skip
        return value  # type: ignore[return-value]  # checked against POLICIES
    return DEFAULT_POLICY


@dataclass(frozen=True)
class ChangedRun:
    """A planned run whose stored results other code made."""

    spec: RunSpec
    status: str
    attempts: int
    old: Mapping[str, Any]
    diffs: tuple[tuple[str, Any, Any], ...]

    def describe(self) -> str:
        s = self.spec
        return f"{s.variant} seed {s.seed} ({s.run_id}, {self.status}): {provenance.describe(self.diffs)}"


@dataclass(frozen=True)
class CodeCheck:
    """What :func:`check` found; ``unknown``: run ids that ran with no recorded provenance."""

    policy: Policy
    changed: tuple[ChangedRun, ...] = ()
    unknown: tuple[str, ...] = ()

    def by_run(self) -> dict[str, ChangedRun]:
        return {c.spec.run_id: c for c in self.changed}

    def lines(self) -> list[str]:
        """What the CLI prints under the submission's summary (nothing when nothing changed)."""
        out = []
        if self.changed:
            what = {"reuse": "their results are kept (on_code_change: reuse)",
                    "rerun": "they run again under the new code (on_code_change: rerun)",
                    "refuse": "nothing was submitted"}[self.policy]  # fmt: skip
            out.append(f"code changed since {len(self.changed)} run(s) of this sweep were made; {what}:")
            out += [f"  {c.describe()}" for c in self.changed]
        if self.unknown:
            out.append(
                f"{len(self.unknown)} run(s) have no recorded code (stored before provenance, or imported); "
                "they are kept as they are"
            )
        return out

    def as_json(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "changed": [
                {
                    "run_id": c.spec.run_id,
                    "variant": c.spec.variant,
                    "seed": c.spec.seed,
                    "status": c.status,
                    "changed": {f: {"old": a, "new": b} for f, a, b in c.diffs},
                }
                for c in self.changed
            ],
            "unknown": list(self.unknown),
        }


def attach(specs: Sequence[RunSpec], *, exclude: Iterable[Path] = ()) -> list[RunSpec]:
    """``specs`` with the code they will run (one capture per trainer repository)."""
    runners = [str(s.recipe.get("runner", {}).get("type", "reference")) for s in specs]
    captured = provenance.for_runners(runners, exclude=exclude)
    return [dataclasses.replace(s, provenance=captured[r]) for s, r in zip(specs, runners, strict=True)]


def check(store: Any, specs: Sequence[RunSpec], policy: Policy) -> CodeCheck:
    """Compare each spec's ``provenance`` with its stored run's (whatever sweep made the run)."""
    from scalerl.db import queries

    states = queries.run_states(store, [s.run_id for s in specs])
    changed: list[ChangedRun] = []
    unknown: list[str] = []
    for spec in specs:
        state = states.get(spec.run_id)
        if state is None or spec.provenance is None:
            continue
        status, attempts, old = state
        if attempts == 0:  # never started: no result of any code to keep or refuse
            continue
        if old is None:
            unknown.append(spec.run_id)
            continue
        diffs = provenance.differences(old, spec.provenance)
        if diffs:
            changed.append(ChangedRun(spec, status, attempts, old, tuple(diffs)))
    return CodeCheck(policy, tuple(changed), tuple(unknown))


def enforce(result: CodeCheck, *, where: str, flag: str = "--on-code-change") -> None:
    """Raise for ``refuse`` when runs changed: the runs, what changed, and the fix."""
    if result.policy != "refuse" or not result.changed:
        return
    shown = "; ".join(c.describe() for c in result.changed[:SHOWN])
    more = f"; and {len(result.changed) - SHOWN} more" if len(result.changed) > SHOWN else ""
    raise ExecutionError(
        f"{where}: the code changed since {len(result.changed)} of this sweep's runs were made "
        f"({shown}{more}); nothing was submitted, so the sweep does not mix code versions "
        f"(fix: {flag} rerun to run them again under the new code, or {flag} reuse to keep "
        "their results and mix; or set on_code_change: rerun|reuse in the sweep file)"
    )


def log(store: Any, sweep: str, result: CodeCheck) -> None:
    """One ``code-changed`` event per changed run: the policy applied, old and new provenance."""
    store.log_events(
        sweep,
        "code-changed",
        {
            c.spec.run_id: {
                "policy": result.policy,
                "old": dict(c.old),
                "new": c.spec.provenance,
                "changed": [f for f, _, _ in c.diffs],
            }
            for c in result.changed
        },
    )


def versions_in(provs: Iterable[Any]) -> list[tuple[str, int]]:
    """(short code id, runs) for each code version among runs' recorded provenance (the
    ``provenance`` column of ``scalerl.db.queries.runs``), most runs first; runs with none count
    as ``unknown``."""
    groups: dict[str | None, tuple[Mapping[str, Any] | None, int]] = {}
    for prov in provs:
        prov = prov if isinstance(prov, Mapping) else None
        key = provenance.code_key(prov)
        first, n = groups.get(key, (prov, 0))
        groups[key] = (first, n + 1)
    # Two versions can share a short id (one commit, two dirty trees or two torch builds): name
    # what tells them apart.
    by_label: dict[str, list[Mapping[str, Any]]] = {}
    for prov, _ in groups.values():
        if prov is not None:
            by_label.setdefault(provenance.short(prov), []).append(prov)
    out = []
    for prov, n in groups.values():
        label = provenance.short(prov)
        twins = by_label.get(label, [])
        if prov is not None and len(twins) > 1:
            fields = {f for other in twins for f, _, _ in provenance.differences(other, prov)}
            fields |= {f for other in twins for f, _, _ in provenance.differences(prov, other)}
            detail = ", ".join(
                f"{f} {provenance.shown(f, provenance.field_value(prov, f))}" for f in sorted(fields)
            )
            label = f"{label} ({detail})"
        out.append((label, n))
    return sorted(out, key=lambda t: (-t[1], t[0]))


def mixed_warning(provs: Iterable[Any]) -> str | None:
    """One line when runs (their provenance, as :func:`versions_in` takes it) were made by more
    than one known code version, else None."""
    versions = versions_in(provs)
    known = [(label, n) for label, n in versions if label != "unknown"]
    if len(known) < 2:
        return None
    parts = ", ".join(f"{label} ({n} run{'s' if n != 1 else ''})" for label, n in versions)
    return (
        f"this sweep mixes {len(known)} code versions: {parts}; a verdict between runs of different "
        "code may show the code change, not the knob (rerun them: scalerl sweep FILE --on-code-change rerun)"
    )
