"""Turn imported runs into a sweep with a baseline, knob variants and seeds, so that ``scalerl fit``
gives knob verdicts.

Each imported run has a name and string params (MLflow params, a TensorBoard run's
``params.json`` / hparams), its tags as params named ``tag:<key>`` (MLflow tags, W&B tags: a
label ``team=rl`` is ``tag:team`` = ``rl``, any other label ``L`` is ``tag:L`` = ``true``) plus,
with ``run_regex``, the named groups of a regex matched against its name. A :class:`RunMapping`
says which params hold what:

- ``knob`` + ``alternative``: params whose values are the run's knob and alternative
  (variant ``<knob>=<alternative>``); or ``variant``: one param whose value is the alternative of
  the knob named after the param itself (``--variant-from loss``: ``loss=cispo``);
- ``seed``: the param holding the seed (an integer); without it, a variant's runs get seeds
  0, 1, ... in run-name order;
- ``baseline`` (``{param: value}``, every pair must match) and/or ``baseline_run`` (a glob on the
  run name): the runs that make up the variant ``baseline`` (no knob), which the store's sweep
  analysis compares every other variant with.

- ``infer`` (``--baseline-run NAME`` without ``--variant-from``, or ``infer: true`` in the file):
  the knob is found from the params, as a lab reads a leave-one-out: a run's knob is the one
  param whose value differs from the baseline runs' (``kl_coef``: variant ``kl_coef=0.0``). Params
  that are no knob are left out of the comparison: the ``seed`` param, tags, those listed in
  ``ignore`` (``--ignore-param``), those that differ between the baseline's own runs (an output
  folder, a run name) and those whose value differs in every run (an id). A run that differs
  in no param is a baseline run; one that differs in several is no LOO variant: skipped and
  listed with the params that differ (``strict``: an error). Values compare as logged, or as the
  same number (``1e-3`` is ``0.001``). :meth:`RunMapping.inferred` says which params were compared
  and which left out (``scalerl import --dry-run`` prints it).

YAML form (``--map map.yaml``)::

    run_regex: '(?P<loss>\\w+)_s(?P<seed>\\d+)'   # optional
    knob: knob
    alternative: alternative
    seed: seed
    baseline: {knob: none}      # or baseline_run: 'base_*', or {'tag:role': baseline}

A run that lacks a param the mapping reads (``knob``, ``alternative``, ``variant``, ``seed``; a
``run_regex`` that does not match its name) is not a run of this sweep: :meth:`RunMapping.match`
skips and lists it (``strict=True``: an error). A malformed value (a seed that is not an integer)
or two runs on one variant and seed are errors either way.

Every error names the mapping's file (or flag), the field, the run and value, and the fix.
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from scalerl.harness.errors import ConfigError

# A run name is at most 200 characters: any sane pattern matches it in microseconds.
REGEX_TIMEOUT_S = 2.0

BASELINE = "baseline"
_KEYS = (
    "run_regex", "knob", "alternative", "variant", "seed", "baseline", "baseline_run", "infer", "ignore",
)  # fmt: skip
ABSENT = "<unset>"  # the alternative of a run that lacks a param the baseline sets


class UnmatchedRun(ConfigError):
    """A run lacks a param the mapping reads: :meth:`RunMapping.match` skips it unless strict."""


@dataclass(frozen=True)
class RunRole:
    """Where one imported run lands in the sweep."""

    variant: str
    knob: str | None
    alternative: str | None
    seed: int


@dataclass(frozen=True)
class RunMapping:
    knob: str | None = None
    alternative: str | None = None
    variant: str | None = None
    seed: str | None = None
    baseline: Mapping[str, str] = field(default_factory=dict)
    baseline_run: str | None = None
    run_regex: str | None = None
    # Where the mapping came from, for error messages: a file path or the flags.
    origin: str = "flags"
    # The knob is the one param that differs from the baseline's (module docstring).
    infer: bool = False
    ignore: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.infer:
            if self.variant is not None or self.knob is not None or self.alternative is not None:
                self._fail(
                    "infer",
                    True,
                    "an inferred knob excludes variant and knob/alternative",
                    "drop infer, or drop variant/knob/alternative",
                )
        elif self.variant is None and (self.knob is None or self.alternative is None):
            self._fail(
                "knob",
                self.knob,
                "the mapping names no variant",
                "set knob and alternative, or variant, or infer: true (the param that differs from "
                "the baseline)",
            )
        if self.variant is not None and (self.knob is not None or self.alternative is not None):
            self._fail(
                "variant", self.variant, "variant and knob/alternative exclude each other", "use one form"
            )
        if not self.baseline and self.baseline_run is None:
            self._fail(
                "baseline",
                None,
                "the mapping names no baseline",
                "set baseline: {param: value} or baseline_run: NAME (--baseline VALUE with --variant-from)",
            )
        if self.run_regex is not None:
            try:
                re.compile(self.run_regex)
            except re.error as err:
                self._fail("run_regex", self.run_regex, f"not a regex: {err}", "fix the pattern")

    def _fail(self, fld: str, value: object, reason: str, fix: str) -> NoReturn:
        raise ConfigError(reason, file=self.origin, field=fld, value=value, fix=fix)

    def params_of(self, run: str, params: Mapping[str, str]) -> dict[str, str]:
        """The run's params with the named groups of ``run_regex`` (searched in its name) added."""
        out = dict(params)
        if self.run_regex is not None:
            # The `regex` package (re's syntax) because it can stop: a pattern with nested
            # quantifiers such as (a+)+ backtracks exponentially, and `re` cannot be interrupted.
            import regex  # type: ignore[import-untyped]  # no stubs in the dev extra

            try:
                m = regex.search(self.run_regex, run, timeout=REGEX_TIMEOUT_S)
            except TimeoutError:
                self._fail(
                    "run_regex",
                    self.run_regex,
                    f"matching run {run!r} took over {REGEX_TIMEOUT_S:g} s (catastrophic backtracking)",
                    "simplify the pattern: no nested quantifiers such as (a+)+ or (\\w*)*",
                )
            if m is not None:
                out.update({k: v for k, v in m.groupdict().items() if v is not None})
        return out

    def is_baseline(self, run: str, params: Mapping[str, str]) -> bool:
        if self.baseline_run is not None and (
            run == self.baseline_run or fnmatch.fnmatchcase(run, self.baseline_run)
        ):
            return True
        return bool(self.baseline) and all(params.get(k) == v for k, v in self.baseline.items())

    def _param(self, run: str, params: Mapping[str, str], fld: str, name: str) -> str:
        if name in params:
            return params[name]
        has = ", ".join(sorted(params)) or "none"
        regex = f"; run_regex {self.run_regex!r} did not give it" if self.run_regex else ""
        raise UnmatchedRun(
            f"run {run!r} has no param {name!r} (its params: {has}){regex}",
            file=self.origin,
            field=fld,
            value=name,
            fix="log that param for every run, pick another param, set run_regex to read it from "
            "the run name, or leave the run out (--exclude name:RUN)",
        )

    def assign(self, runs: Mapping[str, Mapping[str, str]]) -> dict[str, RunRole]:
        """Run name -> its role, for every run of ``runs`` (run name -> params): ``match`` with
        ``strict=True``."""
        return self.match(runs, strict=True)[0]

    def match(
        self, runs: Mapping[str, Mapping[str, str]], *, strict: bool = False
    ) -> tuple[dict[str, RunRole], dict[str, str]]:
        """(run name -> its role, run name -> why it was skipped) over ``runs`` (run name ->
        params). A run lacking a param the mapping reads is skipped (``strict``: raises
        :class:`UnmatchedRun`); when every run is, the first one's error is raised. Raises
        ConfigError when a seed is not an integer, no run is a baseline run, or two runs land on
        the same variant and seed."""
        full = {run: self.params_of(run, p) for run, p in runs.items()}
        reference = self.inferred(runs) if self.infer else None
        parts: dict[str, tuple[str, str | None, str | None]] = {}
        skipped: dict[str, UnmatchedRun] = {}
        for run, params in sorted(full.items()):
            try:
                parts[run] = self._part(run, params, reference)
            except UnmatchedRun as err:
                if strict:
                    raise
                skipped[run] = err
        if skipped and not parts:
            raise next(iter(skipped.values()))
        full = {run: full[run] for run in parts}
        if not any(v == BASELINE for v, _, _ in parts.values()):
            self._no_baseline(full)
        roles: dict[str, RunRole] = {}
        by_variant: dict[str, list[str]] = defaultdict(list)
        for run, (variant, _, _) in parts.items():
            by_variant[variant].append(run)
        for variant, names in by_variant.items():
            taken: dict[int, str] = {}
            for i, run in enumerate(sorted(names)):
                seed = i if self.seed is None else self._seed(run, full[run])
                if seed in taken:
                    self._fail(
                        "seed",
                        seed,
                        f"runs {taken[seed]!r} and {run!r} are both variant {variant!r} seed {seed}",
                        "give each run of a variant its own seed, or import them into separate sweeps",
                    )
                taken[seed] = run
                _, run_knob, run_alt = parts[run]
                roles[run] = RunRole(variant, run_knob, run_alt, seed)
        return roles, {run: err.reason for run, err in skipped.items()}

    def place(
        self, run: str, params: Mapping[str, str], reference: Inference | None = None
    ) -> tuple[str, str | None, str | None] | None:
        """(variant, knob, alternative) of one run, or None where the mapping cannot place it
        (``reference``: :meth:`inferred` of the runs it is compared with, for ``infer``)."""
        if self.infer and reference is None:
            return None
        try:
            return self._part(run, self.params_of(run, params), reference)
        except ConfigError:
            return None

    def inferred(self, runs: Mapping[str, Mapping[str, str]]) -> Inference:
        """The baseline's params and which params an inferred knob is read from (``infer``), over
        ``runs`` (run name -> params). Raises ConfigError when no run is a baseline run."""
        full = {run: self.params_of(run, p) for run, p in runs.items()}
        base = {run: p for run, p in full.items() if self.is_baseline(run, p)}
        if not base:
            self._no_baseline(full)
        ignored: dict[str, str] = {}
        for key in self.ignore:
            ignored[key] = "--ignore-param"
        if self.seed is not None:
            ignored[self.seed] = "the seed"
        keys = sorted({k for p in full.values() for k in p})
        for key in keys:
            if key in ignored:
                continue
            if key.startswith("tag:"):
                ignored[key] = "a tag"
                continue
            seen = [p[key] for p in base.values() if key in p]
            if (seen and len(seen) != len(base)) or len({_canon(v) for v in seen}) > 1:
                ignored[key] = "differs between the baseline's own runs"
                continue
            # An id (a run name, an output folder): text that differs in every run. A number that
            # does (lr over a one-seed sweep) may well be the knob.
            values = [p[key] for p in full.values() if key in p]
            unique = len(values) == len(full) >= 3 and len({_canon(v) for v in values}) == len(full)
            if unique and not any(_is_number(v) for v in values):
                ignored[key] = "differs in every run"
        reference = {
            k: next(p[k] for p in base.values() if k in p)
            for k in keys
            if k not in ignored and any(k in p for p in base.values())
        }
        compared = tuple(k for k in keys if k not in ignored)
        return Inference(reference, compared, ignored)

    def _part(
        self, run: str, params: Mapping[str, str], reference: Inference | None = None
    ) -> tuple[str, str | None, str | None]:
        """(variant, knob, alternative) of one run; UnmatchedRun when it lacks a param read."""
        if self.seed is not None:
            self._param(run, params, "seed", self.seed)  # checked here: a run without it is skipped
        if self.is_baseline(run, params):
            return (BASELINE, None, None)
        if self.infer:
            assert reference is not None
            diff = reference.differences(params)
            if not diff:
                return (BASELINE, None, None)  # the baseline's config under another name
            if len(diff) > 1:
                shown = ", ".join(f"{k} ({v} vs {reference.base.get(k, ABSENT)})" for k, v in diff)
                raise UnmatchedRun(
                    f"run {run!r} differs from the baseline in {len(diff)} params: {shown}; a "
                    "leave-one-out variant changes one",
                    file=self.origin,
                    field="infer",
                    value=run,
                    fix="--ignore-param NAME for a param that is no knob (an output folder, a run "
                    "name), or leave the run out (--exclude name:RUN)",
                )
            knob, alt = diff[0]
            return (f"{knob}={alt}", knob, alt)
        if self.variant is not None:
            alt = self._param(run, params, "variant", self.variant)
            return (f"{self.variant}={alt}", self.variant, alt)
        assert self.knob is not None and self.alternative is not None
        knob = self._param(run, params, "knob", self.knob)
        alt = self._param(run, params, "alternative", self.alternative)
        return (f"{knob}={alt}", knob, alt)

    def _seed(self, run: str, params: Mapping[str, str]) -> int:
        assert self.seed is not None
        text = self._param(run, params, "seed", self.seed)
        from scalerl.db.limits import SEED_MAX

        try:
            as_float = float(text)
        except (TypeError, ValueError):
            as_float = float("nan")
        # Finite first: int() of inf overflows. Bounded: every run's seed is checked here, before
        # anything is written, so "1e30" fails the import instead of its third run's registration.
        if not math.isfinite(as_float) or as_float != int(as_float) or not 0 <= as_float <= SEED_MAX:
            self._fail(
                "seed",
                text,
                f"run {run!r}: param {self.seed!r} is not a whole number in [0, {SEED_MAX}]",
                "point seed at the param that holds the integer seed",
            )
        return int(as_float)

    def _no_baseline(self, full: Mapping[str, Mapping[str, str]]) -> NoReturn:
        if self.baseline:
            seen = {k: sorted({p[k] for p in full.values() if k in p}) for k in self.baseline}
            found = "; ".join(f"{k}: {', '.join(v) or 'no run has it'}" for k, v in seen.items())
            self._fail(
                "baseline",
                dict(self.baseline),
                f"no run matches the baseline (values found: {found})",
                "use a value that the baseline runs have",
            )
        names = sorted(full)
        shown = ", ".join(names[:8]) + (" ..." if len(names) > 8 else "")
        self._fail(
            "baseline_run",
            self.baseline_run,
            f"no run is named like the baseline (runs: {shown})",
            "use the baseline run's name or a glob matching its seeds",
        )


def _canon(value: str) -> str:
    """A param value as compared: the same number whatever its spelling (``1e-3``, ``0.001``)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    return repr(number) if math.isfinite(number) else str(value)


def _is_number(value: str) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


@dataclass(frozen=True)
class Inference:
    """What an inferred mapping compares: the baseline's value of each param (``base``), the
    params compared (``compared``) and those left out with why (``ignored``)."""

    base: Mapping[str, str]
    compared: tuple[str, ...]
    ignored: Mapping[str, str]

    def differences(self, params: Mapping[str, str]) -> list[tuple[str, str]]:
        """(param, the run's value) for each compared param where the run differs from the
        baseline (a param on one side only differs, as ``<unset>``)."""
        out = []
        for key in self.compared:
            mine, base = params.get(key), self.base.get(key)
            if mine is None and base is None:
                continue
            if mine is None or base is None or _canon(mine) != _canon(base):
                out.append((key, ABSENT if mine is None else mine))
        return out

    def describe(self) -> str:
        """One line: what was compared and what was left out."""
        left = "; ".join(f"{k}: {why}" for k, why in sorted(self.ignored.items()))
        return f"knob inferred from {', '.join(self.compared) or 'no param'}" + (
            f" (not compared: {left})" if left else ""
        )


def from_flags(
    variant_from: str | None,
    seed_from: str | None,
    baseline: str | None,
    baseline_run: str | None,
    run_regex: str | None,
    ignore: Sequence[str] = (),
) -> RunMapping:
    """The mapping of ``--variant-from P [--seed-from S] --baseline V | --baseline-run NAME``, or
    with ``--baseline-run NAME`` alone the inferred one (the knob is the param that differs)."""
    if variant_from is None and baseline_run is not None and baseline is None:
        return RunMapping(
            seed=seed_from,
            baseline_run=baseline_run,
            run_regex=run_regex,
            origin="--baseline-run",
            infer=True,
            ignore=tuple(ignore),
        )
    if variant_from is None:
        raise ConfigError(
            "--seed-from/--baseline/--run-regex need --variant-from, or --baseline-run NAME to "
            "find each run's knob as the param that differs from the baseline",
            field="--variant-from",
            fix="pass --baseline-run NAME (the baseline's run name or a glob over its seeds), "
            "--variant-from PARAM, or put the whole mapping in --map map.yaml",
        )
    if ignore:
        raise ConfigError(
            "--ignore-param applies to an inferred knob only",
            field="--ignore-param",
            value=list(ignore),
            fix="drop --variant-from (the knob is then the param that differs from --baseline-run)",
        )
    return RunMapping(
        variant=variant_from,
        seed=seed_from,
        baseline={variant_from: baseline} if baseline is not None else {},
        baseline_run=baseline_run,
        run_regex=run_regex,
        origin="--variant-from/--baseline",
    )


def load_mapping(path: str | Path) -> RunMapping:
    """Read a mapping YAML file; unknown keys and wrong types are errors naming the file and key."""
    from scalerl.harness.recipe.yamlio import read_yaml_file

    p = Path(path)
    # The recipes' loader: a regular file, bounded in size and in alias expansion (an alias bomb
    # in a mapping file would otherwise grow to gigabytes), duplicate keys refused.
    data: Any
    data, _ = read_yaml_file(p)
    if not isinstance(data, dict):
        raise ConfigError("a mapping file holds a YAML mapping", file=str(p), fix=f"use keys {_KEYS}")
    unknown = sorted(set(data) - set(_KEYS))
    if unknown:
        raise ConfigError("unknown key", file=str(p), field=unknown[0], fix=f"use only: {', '.join(_KEYS)}")
    for key in ("run_regex", "knob", "alternative", "variant", "seed", "baseline_run"):
        if data.get(key) is not None and not isinstance(data[key], str | int):
            raise ConfigError("must be a string", file=str(p), field=key, value=data[key], fix="quote it")
    infer = data.get("infer", False)
    if not isinstance(infer, bool):
        raise ConfigError("must be true or false", file=str(p), field="infer", value=infer, fix="infer: true")
    ignore = data.get("ignore") or []
    if not isinstance(ignore, list) or not all(isinstance(k, str) for k in ignore):
        raise ConfigError(
            "must be a list of param names",
            file=str(p),
            field="ignore",
            value=ignore,
            fix="ignore: [output_dir]",
        )
    base = data.get("baseline") or {}
    if not isinstance(base, dict):
        raise ConfigError(
            "must map params to values",
            file=str(p),
            field="baseline",
            value=base,
            fix="baseline: {knob: none}",
        )

    def opt(key: str) -> str | None:
        return None if data.get(key) is None else str(data[key])

    return RunMapping(
        knob=opt("knob"),
        alternative=opt("alternative"),
        variant=opt("variant"),
        seed=opt("seed"),
        baseline={str(k): str(v) for k, v in base.items()},
        baseline_run=opt("baseline_run"),
        run_regex=opt("run_regex"),
        origin=str(p),
        infer=infer,
        ignore=tuple(ignore),
    )
