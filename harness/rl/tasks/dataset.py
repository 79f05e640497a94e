"""``dataset``: prompts and reference answers read from local files, scored by a verifier.

Recipes select it as ``task: {name: dataset, params: {path: ..., val_fraction: 0.05}, n_train,
n_val, seed}``. Nothing is ever downloaded: ``path`` (and ``val_path``) is a JSON Lines file
(``.jsonl``/``.json``/``.ndjson``, one object a line, blank lines skipped), a Parquet file, or a
directory written by ``datasets`` ``save_to_disk`` (``train_split`` picks a ``DatasetDict``'s split);
``format`` overrides the guess by suffix. The readers live in :mod:`.records`.

Each record gives ``Problem(prompt, answer, difficulty, system, solution)``:

- ``prompt_template`` (default ``"{prompt}"``) renders the prompt: ``{prompt}`` is the
  ``prompt_field`` value and ``{name}`` any field of the record; all other brace text (``\\boxed{}``)
  stays as it is, and ``{{name}}`` gives a literal ``{name}``. An unknown ``{name}`` is an error.
- ``answer_field`` is the reference answer; numbers become strings (``3`` -> ``"3"``, floats by
  ``repr``). ``solution_field`` (optional) is a reference completion, which :meth:`DatasetTask.trace`
  returns for the warm start of a small model. ``difficulty_field`` (optional, an int) else 0.
- ``system_prompt`` goes to ``Problem.system``. A missing or null field is an error naming the
  file, the line (or row), the field and the fields the record has.

Validation is exactly one of ``val_path`` (another file), ``val_split`` (another split of the same
``DatasetDict``), ``val_fraction`` or ``val_size``; the last two shuffle the row indices with
``random.Random(val_seed)`` and hold out the first ``k`` (both splits stay in file order).

``task.n_train`` / ``task.n_val`` cap the splits: a larger split is cut to a subset drawn with
``random.Random(task.seed)`` (file order kept) and a warning names the cap; raise ``task.n_train``
(default 4096) to train on all of a bigger set. A smaller split is used whole.

Length: every prompt, rendered as the trainer renders it, must fit the checkpoint's context with
``scale.max_gen_len`` tokens to spare. Prompts are never truncated (a cut question is another
question, scored against the first one's answer): a run whose data holds a longer one is refused
before it trains, naming how many prompts are too long and the first rows
(:func:`scalerl.harness.rl.context.check_prompt_lengths`); filter the data, or lower
``scale.max_gen_len``.

Scoring: the answer region is the text after the last end-of-thinking marker (the whole completion
when there is none, or 0.0 with ``require_think_end``), judged by the ``verifier`` (``math``,
``exact``, ``regex``; :mod:`scalerl.harness.rl.verifiers`) with ``verifier_params`` and
``verifier_timeout_s``; the scorer starts on first use. Data is read once, on first use, and
:meth:`DatasetTask.fingerprint` digests its bytes and the params that shape problems, so a run
does not resume on changed data.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scalerl.harness.errors import ConfigError
from scalerl.harness.rl.tasks.base import THINK_END, Problem, Split, Task, register_task
from scalerl.harness.rl.tasks.records import (
    READERS,
    Records,
    digest,
    format_by_suffix,
    is_placeholder,
    read_records,
)

if TYPE_CHECKING:
    from scalerl.harness.rl.verifiers import Scorer

__all__ = ["DatasetTask", "is_placeholder"]

log = logging.getLogger(__name__)

_TEMPLATE = re.compile(r"\{\{([A-Za-z_]\w*)\}\}|\{([A-Za-z_]\w*)\}")
_VAL_OPTIONS = ("val_path", "val_split", "val_fraction", "val_size")
_PATH_FIX = (
    "point it at a local JSONL/Parquet file or a datasets save_to_disk directory; nothing is downloaded"
)
_OPT_STR = (str, type(None))
_STRS = ("path", "format", "train_split", "prompt_field", "answer_field", "prompt_template", "verifier")
_OPT_STRS = ("solution_field", "difficulty_field", "val_path", "val_split", "system_prompt")
_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    **{n: ((str,), "a string") for n in _STRS},
    **{n: (_OPT_STR, "a string or null") for n in _OPT_STRS},
    "val_fraction": ((float, type(None)), "a number in (0, 1) or null"),
    "val_size": ((int, type(None)), "an integer >= 1 or null"),
    "val_seed": ((int,), "an integer"),
    "verifier_params": ((Mapping,), "a mapping"),
    "verifier_timeout_s": ((int, float), "a number > 0"),
    "require_think_end": ((bool,), "true or false"),
}
# The params that change the problems read from the same bytes (part of the fingerprint).
_SHAPING = (
    *("format", "train_split", "prompt_field", "answer_field", "solution_field", "difficulty_field"),
    *("val_split", "val_fraction", "val_size", "val_seed", "prompt_template", "system_prompt"),
)


@dataclass
class _State:
    """What a task loads or starts on first use (the task itself is frozen)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    train: tuple[Problem, ...] = ()
    val: tuple[Problem, ...] = ()
    fingerprint: str | None = None
    scorer: Scorer | None = None
    closed: dict[str, int] = field(default_factory=lambda: {"verifier_timeouts": 0, "verifier_errors": 0})


@register_task
@dataclass(frozen=True)
class DatasetTask(Task):
    """Problems from a local dataset (see the module docstring). Loading and scoring are
    thread-safe; :meth:`close` stops the verifier and may be called more than once."""

    name = "dataset"
    path: str
    format: str = "auto"
    train_split: str = "train"
    prompt_field: str = "problem"
    answer_field: str = "answer"
    solution_field: str | None = None
    difficulty_field: str | None = None
    val_path: str | None = None
    val_split: str | None = None
    val_fraction: float | None = None
    val_size: int | None = None
    val_seed: int = 0
    prompt_template: str = "{prompt}"
    system_prompt: str | None = None
    verifier: str = "math"
    verifier_params: Mapping[str, Any] = field(default_factory=dict, hash=False)
    verifier_timeout_s: float = 5.0
    require_think_end: bool = False
    _state: _State = field(default_factory=_State, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:  # no filesystem access: `scalerl config` runs without the data
        for f in fields(self):
            if f.name in _TYPES:
                value, (types, what) = getattr(self, f.name), _TYPES[f.name]
                if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                    raise _bad(f.name, value, f"must be {what}", f"give {what}")
        if not self.path:
            raise _bad("path", self.path, "is required", _PATH_FIX)
        if self.format not in ("auto", *READERS):
            raise _bad("format", self.format, "unknown format", f"use one of {['auto', *READERS]}")
        given = [n for n in _VAL_OPTIONS if getattr(self, n) is not None]
        if not given:
            raise ConfigError(
                "no validation split given",
                field="task.params",
                fix=f"set one of {', '.join(_VAL_OPTIONS)} (e.g. val_fraction: 0.05)",
            )
        if len(given) > 1:
            raise _bad(
                given[1],
                getattr(self, given[1]),
                f"several validation splits given: {given}",
                f"keep exactly one of {', '.join(_VAL_OPTIONS)}",
            )
        if self.val_fraction is not None and not 0.0 < self.val_fraction < 1.0:
            raise _bad("val_fraction", self.val_fraction, "must be in (0, 1)", "use e.g. 0.05")
        if self.val_size is not None and self.val_size < 1:
            raise _bad("val_size", self.val_size, "must be >= 1", "use e.g. 256")
        if self.val_split is not None:
            fmt = self.format if self.format != "auto" else format_by_suffix(self.path)
            if fmt in ("jsonl", "parquet"):
                raise _bad("val_split", self.val_split, f"a {fmt} file has no splits", "use val_path instead")
            if self.val_split == self.train_split:
                raise _bad("val_split", self.val_split, "is the train split too", "name another split")
        if self.verifier_timeout_s <= 0:
            raise _bad("verifier_timeout_s", self.verifier_timeout_s, "must be > 0", "use e.g. 5.0")
        try:
            from scalerl.harness.rl.verifiers import VERIFIERS
        except ImportError:  # pragma: no cover - the verifiers module is part of the trainer
            return
        if self.verifier not in VERIFIERS:
            raise _bad("verifier", self.verifier, "unknown verifier", f"use one of {sorted(VERIFIERS)}")

    # ----------------------------------------------------------------------------- problems
    def split(self, n_train: int, n_val: int, seed: int) -> Split:
        st = self._load()
        return Split(
            train=_cap(st.train, n_train, seed, "train", "task.n_train", self.path),
            val=_cap(st.val, n_val, seed, "validation", "task.n_val", self.val_path or self.path),
        )

    def problems(self, n: int, rng: random.Random) -> list[Problem]:
        """``n`` problems drawn from the (uncapped) train split with replacement."""
        return rng.choices(self._load().train, k=n)

    def trace(self, problem: Problem, rng: random.Random) -> str:
        if problem.solution is None:
            raise _bad(
                "solution_field",
                self.solution_field,
                "the data has no reference solutions to warm-start a small model on",
                "set task.params.solution_field to the field holding a reference completion",
            )
        return problem.solution

    def fingerprint(self) -> str | None:
        return self._load().fingerprint

    def paths(self) -> dict[str, str]:
        return {n: p for n, p in (("path", self.path), ("val_path", self.val_path)) if p is not None}

    # ------------------------------------------------------------------------------ scoring
    def score(self, problem: Problem, completion: str) -> float:
        return self.score_many([problem], [completion])[0]

    def score_many(
        self, problems: Sequence[Problem], completions: Sequence[str], think_end: str = THINK_END
    ) -> list[float]:
        """Score each completion's answer region (after the last ``think_end``) with the verifier."""
        out = [0.0] * len(completions)
        todo: list[tuple[int, str, str]] = []
        for i, (p, c) in enumerate(zip(problems, completions, strict=True)):
            if think_end in c:
                todo.append((i, c.rsplit(think_end, 1)[1].strip(), p.answer))
            elif not self.require_think_end:
                todo.append((i, c.strip(), p.answer))
        if todo:
            scores = self._scorer().score_many([t[1] for t in todo], [t[2] for t in todo])
            for (i, _, _), s in zip(todo, scores, strict=True):
                out[i] = float(s)
        return out

    def counters(self) -> dict[str, int]:
        st = self._state
        with st.lock:
            live = st.scorer
            return {
                "verifier_timeouts": st.closed["verifier_timeouts"] + (live.timeouts if live else 0),
                "verifier_errors": st.closed["verifier_errors"] + (live.errors if live else 0),
            }

    def close(self) -> None:
        st = self._state
        with st.lock:
            if st.scorer is not None:
                st.closed["verifier_timeouts"] += st.scorer.timeouts
                st.closed["verifier_errors"] += st.scorer.errors
                st.scorer.close()
                st.scorer = None

    def _scorer(self) -> Scorer:
        st = self._state
        with st.lock:
            if st.scorer is None:
                from scalerl.harness.rl.verifiers import get_verifier

                params = dict(self.verifier_params)
                st.scorer = get_verifier(self.verifier, timeout_s=self.verifier_timeout_s, **params)
            return st.scorer

    # ------------------------------------------------------------------------------ loading
    def _load(self) -> _State:
        st = self._state
        with st.lock:
            if st.fingerprint is None:
                st.train, st.val, st.fingerprint = self._read_all()
        return st

    def _read_all(self) -> tuple[tuple[Problem, ...], tuple[Problem, ...], str]:
        data = self._read(self.path, "path", self.train_split, "train_split")
        if self.val_path is not None:
            val_data = self._read(self.val_path, "val_path", None, "val_path")
            train, val = self._problems(data), self._problems(val_data)
        elif self.val_split is not None:
            if data.splits is None:
                raise _bad("val_split", self.val_split, "path is not a DatasetDict directory", "use val_path")
            train, val = (
                self._problems(data),
                self._problems(self._read(self.path, "path", self.val_split, "val_split")),
            )
        else:
            every = self._problems(data)
            order = list(range(len(every)))
            random.Random(self.val_seed).shuffle(order)
            k = self.val_size if self.val_size is not None else round(len(every) * (self.val_fraction or 0.0))
            held = set(order[:k])
            train = tuple(p for i, p in enumerate(every) if i not in held)
            val = tuple(p for i, p in enumerate(every) if i in held)
        if not train or not val:
            raise ConfigError(
                f"an empty split: {len(train)} train and {len(val)} validation problems",
                file=self.path,
                field=f"task.params.{next(n for n in _VAL_OPTIONS if getattr(self, n) is not None)}",
                fix="hold out at least one problem and leave at least one to train on",
            )
        h = hashlib.sha256()
        for path in self.paths().values():
            digest(h, path)
        shaping = {n: getattr(self, n) for n in _SHAPING} | {"val_path": self.val_path is not None}
        h.update(json.dumps(shaping, sort_keys=True).encode())
        return train, val, h.hexdigest()[:16]

    def _read(self, path: str, param: str, split: str | None, split_param: str) -> Records:
        if is_placeholder(path):
            raise _bad(param, path, "still a placeholder", "replace it with the path of your local data")
        if not Path(path).exists():
            raise _bad(param, path, "no such file or directory", _PATH_FIX)
        data = read_records(path, self.format, split, f"task.params.{split_param}")
        if not data.rows:
            raise ConfigError("no records", file=path, field=f"task.params.{param}", fix="check the data")
        return data

    def _problems(self, data: Records) -> tuple[Problem, ...]:
        names = {m[2] for m in _TEMPLATE.finditer(self.prompt_template) if m[2]} - {"prompt"}
        out = []
        for i, rec in enumerate(data.rows):
            if unknown := sorted(names - rec.keys()):
                reason = f"prompt_template names {unknown}: neither {{prompt}} nor a field of the record"
                fix = "use {prompt} or a field name; write {{name}} for a literal {name}"
                raise data.error(
                    i, f"{reason} (fields: {list(rec)})", "prompt_template", self.prompt_template, fix
                )
            values = {n: data.text(i, n, "prompt_template") for n in names}
            values["prompt"] = data.text(i, self.prompt_field, "prompt_field")
            prompt = _render(self.prompt_template, values)
            solution = data.text(i, self.solution_field, "solution_field") if self.solution_field else None
            level = data.value(i, self.difficulty_field, "difficulty_field") if self.difficulty_field else 0
            if isinstance(level, float) and level.is_integer():
                level = int(level)
            if not isinstance(level, int) or isinstance(level, bool):
                reason = f"difficulty {level!r} is not an integer"
                raise data.error(i, reason, "difficulty_field", self.difficulty_field)
            answer = data.text(i, self.answer_field, "answer_field")
            out.append(
                Problem(
                    prompt, answer, level, system=self.system_prompt, solution=solution, where=data.place(i)
                )
            )
        return tuple(out)


def _bad(param: str, value: object, reason: str, fix: str) -> ConfigError:
    return ConfigError(reason, field=f"task.params.{param}", value=value, fix=fix)


def _render(template: str, values: Mapping[str, str]) -> str:
    """``{name}`` -> ``values[name]`` and ``{{name}}`` -> ``{name}``; other braces stay as they are."""
    return _TEMPLATE.sub(lambda m: "{" + m[1] + "}" if m[1] else values[m[2]], template)


def _cap(
    problems: tuple[Problem, ...], cap: int, seed: int, which: str, knob: str, path: str
) -> tuple[Problem, ...]:
    if len(problems) <= cap:
        return problems
    keep = sorted(random.Random(seed).sample(range(len(problems)), cap))
    log.warning(
        "%s=%d caps the %s split of %s (%d problems) to a seeded subset of %d "
        "(fix: raise %s to %d to use them all)",
        *(knob, cap, which, path, len(problems), cap, knob, len(problems)),
    )
    return tuple(problems[i] for i in keep)
