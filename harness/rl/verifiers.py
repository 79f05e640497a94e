r"""Verifiers: score a model completion against a reference answer, 1.0 or 0.0, chosen by name.

    scorer = get_verifier("math", timeout_s=5.0)             # a Scorer
    scorer(r"... so \boxed{\frac{1}{2}}", "0.5")             # 1.0
    scorer.score_many(completions, answers)                  # the same as calling one by one
    scorer.timeouts, scorer.errors                           # checks scored 0.0 for those reasons
    scorer.close()                                           # stops its worker; idempotent

A :class:`Verifier` is a frozen dataclass whose fields are its parameters (``verifier_params`` in a
recipe) and whose one method, ``check(completion, answer) -> bool``, may raise or hang. A lab adds
its own with :func:`register_verifier`. Built-ins: ``math`` (math-verify, sympy equivalence),
``exact`` (normalised string match) and ``regex`` (a pattern's last match, then ``exact``).

A :class:`Scorer` never raises on model output: a ``check`` that raises scores 0.0 and counts in
``errors``; one that misses the deadline scores 0.0 and counts in ``timeouts``. Checks that cannot
hang (``in_process = True``: linear-time string work) run in the caller. The others run in one
persistent worker process per Scorer (:mod:`scalerl.harness.rl.verify_worker`), because math-verify's own
time limits use ``signal.alarm``, which raises outside the main thread (the trainer scores from a
thread), and because a thread stuck in sympy or in the regex engine cannot be interrupted. We
therefore call math-verify with its timeouts off and kill the worker on a missed deadline instead.

Thread safety: a Scorer serialises its checks with a lock, so threads may share one. Determinism:
the same inputs give the same scores, a missed deadline on a loaded machine aside. The text passed
to ``check`` is whole, however long: math-verify's extraction is regex-based and near-linear, and
the deadline bounds the rest. The caller strips what is not the answer (the ``dataset`` task passes
only the text after the last ``</think>``).
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import math
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar

from scalerl.harness.errors import ConfigError, ExecutionError

if TYPE_CHECKING:
    from scalerl.harness.rl.verify_worker import WorkerProcess

__all__ = ["VERIFIERS", "Scorer", "Verifier", "get_verifier", "register_verifier"]

log = logging.getLogger(__name__)

_NAME_FIELD = "task.params.verifier"
_PARAMS_FIELD = "task.params.verifier_params"
_TIMEOUT_FIELD = "task.params.verifier_timeout_s"
# Starting a worker imports sympy and warms math-verify's caches (~1 s; more on a slow shared
# filesystem); that is not a check, so it has its own, generous deadline.
_START_TIMEOUT_S = 120.0


class Verifier(ABC):
    """Judges one completion against one reference answer.

    Subclasses are frozen dataclasses whose fields are the parameters (JSON values: the worker
    process rebuilds the verifier from them), set ``name``, and define them at the top level of an
    importable module when ``in_process`` is False. ``check`` must be a pure function of its inputs
    and parameters; it may raise or hang (the :class:`Scorer` turns both into 0.0). Validate
    parameters in ``__post_init__`` by raising ``ValueError`` or ``TypeError``.
    """

    name: ClassVar[str]
    # True only for checks that are linear-time and cannot hang: they run in the caller.
    in_process: ClassVar[bool] = False

    @abstractmethod
    def check(self, completion: str, answer: str) -> bool:
        """Whether ``completion`` answers ``answer`` correctly."""

    def warm_up(self) -> None:  # noqa: B027  (an optional hook, empty by default)
        """Called once where the checks will run, before the first: import heavy dependencies and
        fill caches here, so that cost does not count against a check's deadline."""


VERIFIERS: dict[str, type[Verifier]] = {}


def register_verifier(cls: type[Verifier]) -> type[Verifier]:
    """Class decorator: make ``cls`` selectable as ``task.params.verifier: <cls.name>``."""
    if not isinstance(getattr(cls, "name", None), str) or not cls.name:
        raise TypeError(f"verifier class {cls.__qualname__} needs a class attribute `name: ClassVar[str]`")
    VERIFIERS[cls.name] = cls
    return cls


# ------------------------------------------------------------------------------ string helpers
_BOX = "\\boxed{"


def _last_boxed(text: str) -> str | None:
    r"""The content of the last complete ``\boxed{...}`` (the one closing last), or None.

    Braces are matched with a stack; escaped ``\{`` and ``\}`` do not count. A box whose whole
    content is one box is unwrapped: ``\boxed{\boxed{5}}`` gives ``5``. One pass, linear time.
    """
    closes: dict[int, int] = {}  # content start -> index of the closing brace, for each box
    stack: list[int] = []  # for each open brace: its content start if it opens a box, else -1
    last: tuple[int, int] | None = None
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\":
            if text.startswith(_BOX, i):
                i += len(_BOX)
                stack.append(i)
            else:
                i += 2  # an escaped character: \{ \} \\ ...
            continue
        if ch == "{":
            stack.append(-1)
        elif ch == "}" and stack:
            start = stack.pop()
            if start >= 0:
                closes[start] = i
                last = (start, i)
        i += 1
    if last is None:
        return None
    start, end = last
    while True:
        lo, hi = start, end
        while lo < hi and text[lo].isspace():
            lo += 1
        while hi > lo and text[hi - 1].isspace():
            hi -= 1
        if not (text.startswith(_BOX, lo) and closes.get(lo + len(_BOX)) == hi - 1):
            return text[start:end]
        start, end = lo + len(_BOX), hi - 1


def _normalize(text: str) -> str:
    r"""``exact``'s normal form: whitespace collapsed, the last ``\boxed{}``'s content, one
    surrounding ``$...$`` removed, lower case."""
    s = " ".join(text.split())
    boxed = _last_boxed(s)
    if boxed is not None:
        s = " ".join(boxed.split())
    if len(s) >= 2 and s[0] == "$" and s[-1] == "$":
        s = s[1:-1].strip()
    return s.casefold()


# ------------------------------------------------------------------------------ built-ins
@register_verifier
@dataclass(frozen=True)
class ExactVerifier(Verifier):
    r"""``exact``: the completion and the answer are equal after normalisation (:func:`_normalize`:
    whitespace collapsed, last ``\boxed{}`` taken, one ``$...$`` stripped, case ignored)."""

    name: ClassVar[str] = "exact"
    in_process: ClassVar[bool] = True

    def check(self, completion: str, answer: str) -> bool:
        return _normalize(completion) == _normalize(answer)


_REGEX_FLAGS = {
    "IGNORECASE": re.IGNORECASE,
    "MULTILINE": re.MULTILINE,
    "DOTALL": re.DOTALL,
    "VERBOSE": re.VERBOSE,
    "ASCII": re.ASCII,
}


@register_verifier
@dataclass(frozen=True)
class RegexVerifier(Verifier):
    """``regex``: the last match of ``pattern`` (its group 1 if it has groups, else the whole match)
    equals the answer under ``exact``'s normalisation; no match scores 0.0. ``flags`` are names
    from ``re`` (IGNORECASE, MULTILINE, DOTALL, VERBOSE, ASCII). Runs in the worker: a pattern can
    backtrack catastrophically on model output."""

    name: ClassVar[str] = "regex"

    pattern: str
    flags: Sequence[str] = ()
    _compiled: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.pattern, str) or not self.pattern:
            raise ValueError(f"pattern={self.pattern!r} must be a non-empty string")
        if isinstance(self.flags, str) or not all(f in _REGEX_FLAGS for f in self.flags):
            raise ValueError(f"flags={self.flags!r} must be a list of {sorted(_REGEX_FLAGS)}")
        object.__setattr__(self, "flags", tuple(self.flags))
        bits = functools.reduce(lambda acc, f: acc | _REGEX_FLAGS[f], self.flags, re.NOFLAG)
        try:
            compiled = re.compile(self.pattern, bits)
        except re.error as err:
            raise ValueError(f"pattern {self.pattern!r} does not compile: {err}") from None
        object.__setattr__(self, "_compiled", compiled)

    def check(self, completion: str, answer: str) -> bool:
        last = None
        for last in self._compiled.finditer(completion):  # noqa: B007  (we want the last one)
            pass
        if last is None:
            return False
        found = last.group(1) if self._compiled.groups else last.group(0)
        return found is not None and _normalize(found) == _normalize(answer)


@functools.cache
def _math_verify() -> tuple[Any, Any, list[Any], list[Any]]:
    """math-verify's ``parse`` and ``verify`` and our extraction configs (imported on first use)."""
    from math_verify import (
        ExprExtractionConfig,
        LatexExtractionConfig,
        parse,
        verify,
    )

    gold_config = [LatexExtractionConfig(), ExprExtractionConfig()]
    # Boxed answers first (priority 0, with "final answer is ... I hope"), then math-verify's order.
    pred_config = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
    return parse, verify, gold_config, pred_config


def _drop_timeout_disabled(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("Timeout is disabled")


@functools.lru_cache(maxsize=8192)
def _parse_gold(answer: str) -> list[Any]:
    r"""A reference answer parsed as if boxed: bare ``3\sqrt{2}`` would otherwise parse as ``3``
    (math-verify finds LaTeX only in ``$...$``, ``\[...\]`` or a box). Cached: answers repeat."""
    parse, _, gold_config, _ = _math_verify()
    return list(parse(_BOX + answer + "}", gold_config, parsing_timeout=None))


@register_verifier
@dataclass(frozen=True)
class MathVerifier(Verifier):
    r"""``math``: the answer and the completion are mathematically equal, by math-verify (sympy).

    The reference answer is parsed as if it were boxed (``\frac{1}{2}``, ``0.5``, ``3\sqrt{2}``,
    ``\{1,2\}``, ``(1,2]`` all work bare). From the completion we take the content of the last
    complete ``\boxed{...}`` (nested boxes unwrapped) and parse only that: math-verify on its own
    merges every box into one set, so ``\boxed{5} no, \boxed{6}`` would match neither 5 nor 6.
    Without a complete box, math-verify searches the whole text: "final answer is", "answer:",
    LaTeX in ``$...$``, then the last plain number or arithmetic expression ("so the answer is 12"
    gives 12; "17, and then 3" gives 3; "is 3\sqrt{2}" without ``$`` gives 3; words give nothing).
    An unclosed ``\boxed{\frac{1}{2}`` still parses. ``float_rounding`` and ``strict`` go to
    ``verify`` (strict: variables of equations matter). What math-verify accepts, surprises
    included (``50`` for ``50\%``, ``ab`` for ``ba``), is pinned in tests/unit/rl/test_verifiers.py.
    Needs the ``math-verify`` package. Runs in the worker, with math-verify's own timeouts off.
    """

    name: ClassVar[str] = "math"

    float_rounding: int = 6
    strict: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.float_rounding, bool) or not isinstance(self.float_rounding, int):
            raise TypeError(f"float_rounding={self.float_rounding!r} must be an integer")
        if not 0 <= self.float_rounding <= 15:
            raise ValueError(f"float_rounding={self.float_rounding} must be in 0..15")
        if not isinstance(self.strict, bool):
            raise TypeError(f"strict={self.strict!r} must be true or false")
        import importlib.util

        if importlib.util.find_spec("math_verify") is None:
            raise ExecutionError(
                "the 'math' verifier needs math-verify, which this environment lacks "
                "(fix: pip install 'math-verify>=0.9')"
            )

    def warm_up(self) -> None:
        # Its timeouts are off on purpose (the worker's deadline replaces them): drop its warning.
        for name in ("math_verify.parser", "math_verify.grader"):
            logging.getLogger(name).addFilter(_drop_timeout_disabled)
        self.check(r"\boxed{\frac{1}{2}}", "0.5")  # imports sympy, compiles the extraction regexes

    def check(self, completion: str, answer: str) -> bool:
        parse, verify, _, pred_config = _math_verify()
        gold = _parse_gold(answer)
        boxed = _last_boxed(completion)
        text = completion if boxed is None else _BOX + boxed + "}"
        pred = parse(text, pred_config, parsing_timeout=None)
        return bool(
            verify(
                gold,
                pred,
                float_rounding=self.float_rounding,
                strict=self.strict,
                timeout_seconds=None,
            )
        )


# ------------------------------------------------------------------------------ the scorer
class Scorer:
    """Scores completions with one verifier; owns that verifier's worker process, if it needs one.

    Built by :func:`get_verifier`; ``params`` are the keyword arguments ``verifier`` was built from
    (the worker rebuilds it from them). Calls never raise on model output (see the module doc).
    The worker starts on the first check; a missed deadline kills it (``timeouts += 1``, 0.0) and
    the next check starts a fresh one; a worker that dies mid-check is restarted and the check
    retried once, then scored 0.0 (``errors += 1``). A worker that cannot start at all raises
    :class:`ExecutionError`. Thread-safe (one lock). ``close()`` stops the worker and is
    idempotent; a later check would start a new one. Also a context manager.
    """

    def __init__(self, verifier: Verifier, params: Mapping[str, Any], *, timeout_s: float = 5.0) -> None:
        self.verifier = verifier
        self.timeout_s = timeout_s
        self.timeouts = 0
        self.errors = 0
        self._params = dict(params)
        self._lock = threading.Lock()
        self._worker: WorkerProcess | None = None
        self._warm = False

    @property
    def name(self) -> str:
        return self.verifier.name

    @property
    def worker_pid(self) -> int | None:
        """The running worker's process id (None: none running)."""
        return None if self._worker is None else self._worker.pid

    def __call__(self, completion: str, answer: str) -> float:
        with self._lock:
            return self._score(completion, answer)

    def score_many(self, completions: Sequence[str], answers: Sequence[str]) -> list[float]:
        """:meth:`__call__` on each pair, in order (one request at a time to the worker)."""
        if len(completions) != len(answers):
            raise ValueError(f"{len(completions)} completions but {len(answers)} answers")
        with self._lock:
            return [self._score(c, a) for c, a in zip(completions, answers, strict=True)]

    def close(self) -> None:
        """Stop the worker process, if any; idempotent."""
        with self._lock:
            self._stop_worker()

    def __enter__(self) -> Scorer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Scorer({self.verifier!r}, timeout_s={self.timeout_s}, pid={self.worker_pid})"

    def _score(self, completion: str, answer: str) -> float:
        if self.verifier.in_process:
            return self._score_here(completion, answer)
        return self._score_in_worker(completion, answer)

    def _score_here(self, completion: str, answer: str) -> float:
        if not self._warm:
            self.verifier.warm_up()
            self._warm = True
        try:
            return 1.0 if self.verifier.check(completion, answer) else 0.0
        except Exception as err:
            self.errors += 1
            log.debug("verifier %r raised %s: %s; scored 0.0", self.name, type(err).__name__, err)
            return 0.0

    def _score_in_worker(self, completion: str, answer: str) -> float:
        from scalerl.harness.rl.verify_worker import CheckRaised, WorkerDied, WorkerTimeout

        for _attempt in range(2):
            worker = self._worker or self._start_worker()
            try:
                ok = worker.check(completion, answer, self.timeout_s)
            except WorkerTimeout:
                self._stop_worker()
                self.timeouts += 1
                return 0.0
            except CheckRaised as err:
                self.errors += 1
                log.debug("verifier %r raised %s; scored 0.0", self.name, err)
                return 0.0
            except WorkerDied as err:
                tail = worker.stderr_tail()
                self._stop_worker()
                # Gone before the request (e.g. the thread that started it exited): routine.
                level = logging.DEBUG if err.idle else logging.WARNING
                log.log(level, "verifier %r: worker died (%s); restarting; stderr: %s", self.name, err, tail)
                continue
            return 1.0 if ok else 0.0
        self.errors += 1  # the worker died on this input twice
        return 0.0

    def _start_worker(self) -> WorkerProcess:
        from scalerl.harness.rl.verify_worker import WorkerProcess

        cls = type(self.verifier)
        self._worker = WorkerProcess(
            self.name, f"{cls.__module__}:{cls.__qualname__}", self._params, start_timeout_s=_START_TIMEOUT_S
        )
        return self._worker

    def _stop_worker(self) -> None:
        if self._worker is not None:
            self._worker.stop()
            self._worker = None


def _describe_params(cls: type[Verifier]) -> str:
    parts = []
    for p in inspect.signature(cls).parameters.values():
        parts.append(
            f"{p.name} (required)" if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}"
        )
    return ", ".join(parts) or "none"


def get_verifier(name: str, *, timeout_s: float = 5.0, **params: Any) -> Scorer:
    """A :class:`Scorer` for the verifier registered as ``name``, built with ``params``.

    Unknown names, bad parameters and a bad ``timeout_s`` (must be a finite number > 0) raise
    :class:`ConfigError` naming the field and the valid choices. Starts no process.
    """
    if name not in VERIFIERS:
        raise ConfigError(
            "unknown verifier", field=_NAME_FIELD, value=name, fix=f"use one of {sorted(VERIFIERS)}"
        )
    cls = VERIFIERS[name]
    if (
        isinstance(timeout_s, bool)
        or not isinstance(timeout_s, int | float)
        or not math.isfinite(timeout_s)
        or timeout_s <= 0
    ):
        raise ConfigError(
            "must be a finite number > 0", field=_TIMEOUT_FIELD, value=timeout_s, fix="use e.g. 5.0"
        )
    fix = f"valid parameters of verifier {name!r}: {_describe_params(cls)}"
    try:
        json.dumps(params)
    except (TypeError, ValueError) as err:
        raise ConfigError(
            f"parameters must be JSON values: {err}", field=_PARAMS_FIELD, value=params, fix=fix
        ) from None
    try:
        verifier = cls(**params)
    except (TypeError, ValueError) as err:
        raise ConfigError(
            f"bad parameters for verifier {name!r}: {err}", field=_PARAMS_FIELD, value=params, fix=fix
        ) from None
    if not cls.in_process and (cls.__module__ == "__main__" or "<locals>" in cls.__qualname__):
        raise ConfigError(
            f"verifier class {cls.__qualname__} is defined in {cls.__module__!r} or inside a function, "
            "which its worker process cannot import",
            field=_NAME_FIELD,
            value=name,
            fix="define it at the top level of an importable module",
        )
    return Scorer(verifier, params, timeout_s=float(timeout_s))
