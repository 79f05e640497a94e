"""Which imported runs go into the sweep: run states, ``--only`` / ``--exclude`` and resumes.

A run's state comes from its source (:attr:`ImportedCurve.status`: MLflow's ``FAILED``, W&B's
``crashed``, a file's ``completed``) or from ``--run-status NAME=STATE``. Failed and cancelled
(killed) runs are left out by default: a run that collapsed or stopped early is not a seed of its
variant, and pooled as one it moves the seed noise and the verdict. ``include_failed`` keeps them.

Filters, each ``KIND:PATTERN`` (``--only`` keeps a run matching every one; ``--exclude`` drops a run
matching any one)::

    name:GLOB           the run's name                       name:debug-*
    param:KEY=VALUE     a param's value                      param:lr=1e-4
    tag:KEY=VALUE       a tag's value (W&B labels: "true")   tag:team=rl
    param:KEY / tag:KEY the run has that param / tag         tag:baseline

A VALUE matches the logged string exactly, as a glob (``lr=1e-*``), or as the same number
(``1e-4`` matches ``0.0001``). Every run left out is listed with why (:class:`LeftOut`), never
dropped silently.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from scalerl.harness.errors import ConfigError
from scalerl.harness.importers.base import ImportedCurve

# States whose runs stay out of the sweep unless asked for (--include-failed).
LEFT_OUT_STATUSES = frozenset({"failed", "cancelled"})
# What --run-status takes: the store's words, plus the sources' ``killed`` / ``finished``.
STATUS_WORDS = {
    "completed": "completed",
    "finished": "completed",
    "failed": "failed",
    "crashed": "failed",
    "cancelled": "cancelled",
    "killed": "cancelled",
    "running": "running",
    "preempted": "preempted",
    "unknown": "unknown",
}
FILTER_KINDS = ("name", "param", "tag")


@dataclass(frozen=True)
class RunFilter:
    """One ``--only`` / ``--exclude`` term (module docstring)."""

    kind: str
    key: str | None
    pattern: str | None
    text: str

    @classmethod
    def parse(cls, text: str, flag: str) -> RunFilter:
        kind, sep, rest = text.partition(":")
        fix = "write name:GLOB, param:KEY=VALUE or tag:KEY=VALUE (e.g. tag:team=rl)"
        if not sep or kind not in FILTER_KINDS or not rest:
            raise ConfigError("not a run filter", field=flag, value=text, fix=fix)
        if kind == "name":
            return cls(kind, None, rest, text)
        key, eq, value = rest.partition("=")
        if not key:
            raise ConfigError(f"a {kind} filter names no key", field=flag, value=text, fix=fix)
        return cls(kind, key, value if eq else None, text)

    def matches(self, run: str, params: Mapping[str, str], tags: Mapping[str, str]) -> bool:
        if self.kind == "name":
            assert self.pattern is not None
            return run == self.pattern or fnmatch.fnmatchcase(run, self.pattern)
        have = params if self.kind == "param" else tags
        assert self.key is not None
        if self.key not in have:
            return False
        return self.pattern is None or _value_matches(have[self.key], self.pattern)


def _value_matches(value: str, pattern: str) -> bool:
    if value == pattern or fnmatch.fnmatchcase(value, pattern):
        return True
    try:
        a, b = float(value), float(pattern)
    except ValueError:
        return False
    return math.isfinite(a) and a == b


def parse_statuses(items: Sequence[str]) -> list[tuple[str, str]]:
    """``--run-status NAME=STATE`` (NAME a run name or glob) -> [(glob, store status)]."""
    out = []
    for item in items:
        name, eq, word = item.rpartition("=")
        status = STATUS_WORDS.get(word.strip().lower())
        if not eq or not name or status is None:
            raise ConfigError(
                "not NAME=STATE",
                field="--run-status",
                value=item,
                fix=f"write RUN_NAME_OR_GLOB=STATE, STATE one of {', '.join(sorted(STATUS_WORDS))}",
            )
        out.append((name, status))
    return out


@dataclass(frozen=True)
class LeftOut:
    """A run the import did not write, and why (``status`` is the run's own, mapped)."""

    run: str
    status: str
    reason: str
    # Why: ``state`` (failed or killed: left out of the verdicts, still stored without points by
    # ``scalerl import``) or ``filter`` (``--only`` / ``--exclude``: the user's choice, not stored).
    kind: str = "state"


@dataclass(frozen=True)
class Selection:
    curves: tuple[ImportedCurve, ...]
    left_out: tuple[LeftOut, ...]


def select_runs(
    curves: Sequence[ImportedCurve],
    *,
    include_failed: bool = False,
    only: Sequence[RunFilter] = (),
    exclude: Sequence[RunFilter] = (),
    statuses: Sequence[tuple[str, str]] = (),
) -> Selection:
    """The curves of the runs to import, each with its final status, and the runs left out.
    ``statuses`` ([(name glob, status)], the last match wins) overrides the source's state."""
    by_run: dict[str, list[ImportedCurve]] = {}
    for c in curves:
        by_run.setdefault(c.run, []).append(c)
    kept: list[ImportedCurve] = []
    left: list[LeftOut] = []
    for run, group in by_run.items():
        params = {k: v for c in group for k, v in c.params.items()}
        tags = {k: v for c in group for k, v in c.tags.items()}
        # A run read from several places (a resumed W&B run's offline directories, in time
        # order) ends as its last part says.
        status, said = group[-1].status, group[-1].source_status
        for pattern, forced in statuses:
            if run == pattern or fnmatch.fnmatchcase(run, pattern):
                status, said = forced, "--run-status"
        if any(c.status != status or c.source_status != said for c in group):
            group = [replace(c, status=status, source_status=said) for c in group]
        missed = next((f for f in only if not f.matches(run, params, tags)), None)
        hit = next((f for f in exclude if f.matches(run, params, tags)), None)
        # The source's word after the store's, unless it already says it (W&B offline: "failed
        # (exit code 1)", not "failed (failed (exit code 1))").
        if said and said.startswith(f"{status} ("):
            state = said
        else:
            state = status + (f" ({said})" if said and said != status else "")
        if missed is not None:
            left.append(LeftOut(run, status, f"does not match --only {missed.text}", "filter"))
        elif hit is not None:
            left.append(LeftOut(run, status, f"matches --exclude {hit.text}", "filter"))
        elif status in LEFT_OUT_STATUSES and not include_failed:
            left.append(
                LeftOut(run, status, f"{state}: left out of the verdicts (--include-failed keeps it)")
            )
        else:
            kept.extend(group)
    return Selection(tuple(kept), tuple(left))


def relogged_runs(curves: Sequence[ImportedCurve]) -> dict[str, int]:
    """Run name -> how many of its steps were re-logged after a restart (over all its metrics)."""
    steps: dict[str, set[int]] = {}
    for c in curves:
        if c.relogged:
            steps.setdefault(c.run, set()).update(c.relogged)
    return {run: len(s) for run, s in sorted(steps.items())}
