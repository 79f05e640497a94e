"""The small API a lab's own training script uses to report points to the harness.

::

    from scalerl.harness import client
    client.log(step, {"val/pass_rate": 0.41}, compute={"gpu_hours": 1.5, "samples": 4096},
               n={"val/pass_rate": 512})

Two ways to say which run the points belong to:

- Launched by the harness (the ``command`` runner): the environment says where to write:
  ``SCALERL_RUN_ID``, ``SCALERL_ATTEMPT`` and (optionally) ``SCALERL_DB_URL``. The writer is
  opened on the first ``log`` and carries the attempt, so a superseded attempt's points are fenced
  by the store; the harness's job finishes the run.
- Launched by anything else (an sbatch script, a Ray job, plain ``python``): :func:`init` attaches
  the run to a sweep, in the spirit of ``wandb.init`` / ``mlflow.start_run``, with the harness's
  run-id and fencing rules (:mod:`scalerl.harness.execution.attach`), and returns a :class:`Run`::

      with client.init(sweep="loss-loo", knob="loss", alternative="dapo", seed=0,
                       config=cfg) as run:
          for step in ...:
              run.log(step, {"val/pass_rate": p}, compute={"flops": flops})   # or client.log

  Leaving the ``with`` block completes the run; an exception fails it (with its text) and goes
  on; ``SystemExit`` completes it with status 0 or None, else fails it with the status. ``run.finish()``
  does the same without a ``with``. A run still open when the interpreter exits is finished
  then: failed on an uncaught exception, on a non-zero status (``sys.exit(3)``, ``exit(3)``,
  ``raise SystemExit(3)`` in the script; the status is in the run's error), on a ``SystemExit``
  raised inside a function whose status Python hides from exit hooks (use ``sys.exit`` or the
  ``with`` block there), and on SIGTERM (left at its default, it becomes ``SystemExit(143)``);
  completed when the script ran to its end or exited with status 0. A run whose process dies
  without exit hooks (SIGKILL, the OOM killer, a lost node) is ended by ``scalerl status``
  (:mod:`scalerl.harness.execution.liveness`); ``scalerl cancel`` ends it too.

A requeued or resubmitted attempt fences this one: its points and its finish are refused.
``superseded()`` (or ``run.superseded``) turns True once the store refused a batch of this
attempt's points; a training loop should then stop at once *without* saving a checkpoint, since
the newer attempt resumes from and saves into the same place::

    if client.superseded():
        break  # a newer attempt owns this run

Points are batched; ``flush()`` pushes them now, and they are flushed at interpreter exit.
Not thread-safe: log from one thread.
"""

from __future__ import annotations

import atexit
import logging
import math
import numbers
import os
import sys
from collections.abc import Mapping
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any, NoReturn

from scalerl.harness.errors import ConfigError

if TYPE_CHECKING:
    from scalerl.harness.execution.attach import Attached

_logger = logging.getLogger(__name__)
_writer: Any = None  # the writer of the run the harness launched this process for
_active: Run | None = None  # the run init() attached, until it is finished
_exit_hook = False


def _launched() -> bool:
    """Whether the harness launched this process for a run (the ``command`` runner's environment)."""
    return bool(os.environ.get("SCALERL_RUN_ID"))


def _open() -> Any:
    global _writer
    if _writer is None:
        run_id = os.environ.get("SCALERL_RUN_ID")
        attempt = os.environ.get("SCALERL_ATTEMPT")
        if not run_id or not attempt or not attempt.isdigit():
            raise ConfigError(
                "scalerl.harness.client needs SCALERL_RUN_ID and SCALERL_ATTEMPT in the environment",
                field="SCALERL_ATTEMPT" if run_id else "SCALERL_RUN_ID",
                value=attempt if run_id else run_id,
                fix="launch the script through a sweep with runner: {type: command, ...}, or attach "
                "it first: client.init(sweep=..., seed=..., config=...)",
            )
        from scalerl import db

        store = db.open_store(os.environ.get("SCALERL_DB_URL"))
        _writer = store.writer(run_id, int(attempt))
        atexit.register(close)
    return _writer


class Run:
    """A run :func:`init` attached (or, inside a harness launch, the launcher's run).

    ``log`` writes points, ``finish`` ends the run; as a context manager it finishes on exit,
    ``failed`` on an exception. ``run_id``, ``attempt``, ``sweep``, ``variant`` and ``seed`` say
    where the points go (None on a rank other than 0, which writes nothing). ``status`` is None
    until finished, then what the store recorded: ``completed``, ``failed``, ``superseded`` (a newer
    attempt of the run owns it; nothing changed) or ``cancelled``."""

    def __init__(
        self,
        *,
        run_id: str | None,
        store: Any = None,
        writer: Any = None,
        attached: Attached | None = None,
    ) -> None:
        self.run_id = run_id
        self._store = store
        self._writer = writer
        self._attached = attached
        self.attempt = attached.attempt if attached else None
        self.sweep = attached.sweep if attached else None
        self.variant = attached.variant if attached else None
        self.seed = attached.seed if attached else None
        self.created_sweep = attached.created_sweep if attached else False
        self.status: str | None = None
        # Running totals of ``add_compute``; each unit starts from the store's value at resume_step.
        self._totals: dict[str, float] = {}
        self._at_resume: Mapping[str, float] = attached.compute_at_resume if attached else {}

    @property
    def superseded(self) -> bool:
        """True once a newer attempt of this run took it over (the store refused a batch of this
        attempt's points; :meth:`flush` to find out now): stop training, save no checkpoint."""
        if self._writer is not None:
            return bool(self._writer.fenced)
        if self._store is None and self.run_id is not None:
            return superseded()  # the harness launched this process: its writer
        return False

    @property
    def owned(self) -> bool:
        """True when this process owns the attempt (it attached the run, on rank 0)."""
        return self._attached is not None

    def log(
        self,
        step: int,
        metrics: Mapping[str, float],
        compute: Mapping[str, float] | None = None,
        n: Mapping[str, int] | None = None,
        *,
        add_compute: Mapping[str, float] | None = None,
    ) -> None:
        """:func:`scalerl.harness.client.log` into this run. ``add_compute`` adds per-step amounts
        (verl logs ``perf/total_num_tokens`` per step) to running totals, logged as the cumulative
        compute; after ``init(resume_step=N)`` the totals go on from the store's values at step N."""
        if self.status is not None:
            raise ConfigError(
                f"run {self.run_id} is finished ({self.status})",
                field="step",
                value=step,
                fix="log before finish(), or attach another run with client.init(...)",
            )
        if self._writer is None and self._store is None:
            if self.run_id is None:
                return  # rank > 0: every rank may call log; rank 0 writes
            log(step, metrics, compute, n, add_compute=add_compute)  # the launcher's run
            return
        step = _as_step(step)
        _check_mappings(metrics=metrics, compute=compute or {}, n=n or {}, add_compute=add_compute or {})
        totals = dict(self._totals)
        for unit, amount in (add_compute or {}).items():
            totals[unit] = totals.get(unit, self._at_resume.get(unit, 0.0)) + _amount(unit, amount)
        # Every point carries the totals so far (a step that adds nothing is still on the axis);
        # a cumulative value given in ``compute`` wins. A refused point adds nothing to them.
        self._writer.add(step, dict(metrics), totals | dict(compute or {}), n=n)
        self._totals = totals

    def flush(self) -> None:
        if self._writer is not None:
            self._writer.flush()
        elif self.run_id is not None and self._attached is None:
            flush()

    def finish(self, error: BaseException | str | None = None) -> str | None:
        """End the run: ``completed``, or ``failed`` with ``error`` (an exception or its text).
        Idempotent. Returns :attr:`status`; None where this process does not own the attempt (a
        rank other than 0, or a harness-launched run, which its job finishes)."""
        global _active
        if self.status is not None:
            return self.status
        if _active is self:
            _active = None
        if self._attached is None:
            if self.run_id is not None:
                flush()
            return None
        from scalerl.harness.execution.attach import error_text, finish

        text = error_text(error) if isinstance(error, BaseException) else error
        try:
            self.status = finish(self._store, self._writer, self._attached, text)
        finally:
            if self.status is None:
                self.status = "failed"
            self._store.close()
        if self.status == "superseded":
            _logger.warning("run %s attempt %s was superseded by a newer attempt", self.run_id, self.attempt)
        return self.status

    def __enter__(self) -> Run:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # sys.exit(0) inside the block is a success; any other exit or exception is a failure.
        ok = exc is None or (isinstance(exc, SystemExit) and exc.code in (0, None))
        self.finish(None if ok else exc)

    def __repr__(self) -> str:
        return (
            f"Run(run_id={self.run_id!r}, sweep={self.sweep!r}, variant={self.variant!r}, "
            f"seed={self.seed!r}, attempt={self.attempt!r}, status={self.status!r})"
        )


def init(
    *,
    sweep: str,
    knob: str | None = None,
    alternative: str | None = None,
    seed: int = 0,
    config: Mapping[str, Any] | None = None,
    db: str | None = None,
    variant: str | None = None,
    resume_step: int | None = None,
    rerun: bool = False,
    create: bool = True,
    metric: str | None = None,
    axis: str | None = None,
) -> Run:
    """Attach this process's run to ``sweep`` and start an attempt of it; returns the :class:`Run`
    that :func:`log` (or ``run.log``) writes into. For a script the harness did not launch: an
    sbatch script, a Ray job, plain ``python``.

    - ``knob`` + ``alternative``: the one knob this run changes and its value; neither for the
      baseline. ``variant`` names it (default ``<knob>=<alternative>``, ``baseline``).
    - ``seed`` and ``config`` (the trainer's resolved settings, a non-empty mapping): with the
      knob and alternative they are the run's identity, hashed into its id as the harness hashes
      a recipe (:mod:`scalerl.harness.execution.attach`).
    - ``db``: the store URL; default ``$SCALERL_DB_URL``, else ``sqlite:///./scalerl.db`` (as the
      CLI's ``--db``).
    - Attaching the same run again (a requeued job) starts a new attempt that fences the old one.
      ``resume_step=N``: your trainer resumed from its checkpoint at step N; points after N are
      dropped (it logs them again). ``-1``: a fresh start, all dropped. Default: all kept, the new
      values win where a step is logged again. A completed run is refused unless ``rerun=True``.
    - An unknown sweep is created (an attached sweep whose baseline is ``baseline``);
      ``create=False`` refuses it instead. ``metric`` and ``axis`` (gpu_hours, flops, tokens,
      samples, step) become its defaults for ``scalerl fit``, ``report`` and ``forecast``.

    On a rank other than 0 (``RANK`` / ``SLURM_PROCID``) nothing is registered or written; the
    arguments are still checked. Inside a run the harness launched (``SCALERL_RUN_ID`` is set),
    the launcher's run, attempt and store are used and the harness finishes it.
    Bad arguments raise :class:`scalerl.harness.errors.ConfigError` naming the field and the fix."""
    global _active
    from scalerl.harness.execution.attach import attach, identity
    from scalerl.harness.execution.rank import process_rank

    if _active is not None:
        raise ConfigError(
            f"run {_active.run_id} is still attached in this process",
            file="client.init",
            field="sweep",
            value=sweep,
            fix="finish it first (run.finish(), or attach with `with client.init(...) as run:`)",
        )
    if process_rank() != 0 or _launched():
        identity(config, knob, alternative)  # the config is checked on every rank alike
        handle = Run(run_id=os.environ.get("SCALERL_RUN_ID") if process_rank() == 0 else None)
    else:
        from scalerl import db as store_api

        store = store_api.open_store(db)
        try:
            attached = attach(
                store, sweep=sweep, knob=knob, alternative=alternative, seed=seed, config=config,
                variant=variant, resume_step=resume_step, rerun=rerun, create=create, metric=metric,
                axis=axis,
            )  # fmt: skip
            writer = store.writer(attached.run_id, attached.attempt)
        except BaseException:
            store.close()
            raise
        handle = Run(run_id=attached.run_id, store=store, writer=writer, attached=attached)
        if attached.created_sweep:
            _logger.info("created sweep %r in %s for attached runs", attached.sweep, store.url)
    _active = handle
    _hook_exit()
    return handle


def _hook_exit() -> None:
    global _exit_hook, _main_frame
    if not _exit_hook:
        atexit.register(_finish_at_exit)
        _wrap_exits()
        _end_on_sigterm()
        _exit_hook = True
    if _main_frame is None:
        _main_frame = _find_main_frame()


# How the program is ending, for _finish_at_exit: an atexit hook is not told the exit status, and
# a trainer that exits non-zero (Hydra's main, which verl runs under, calls sys.exit(1); a script's
# `raise SystemExit(3)` or `exit(3)`) would otherwise be finished as completed.
_exit_status: object = None
_exit_how = ""
_UNSET = object()
# The main module's frame (held, so its last instruction can be read at exit): whether the script
# ran to its end, or was left by an exception that Python does not keep for exit hooks.
_main_frame: FrameType | None = None


def _find_main_frame() -> FrameType | None:
    """The ``__main__`` module's own frame among the callers of :func:`init` (None when init
    runs in another thread, or under something that is not a script)."""
    frame: FrameType | None = sys._getframe(1)
    found = None
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") == "__main__":
            found = frame
        frame = frame.f_back
    return found


def _note_exit(status: object, how: str) -> None:
    global _exit_status, _exit_how
    _exit_status, _exit_how = status, how


def _wrap_exits() -> None:
    """Record the status given to ``sys.exit``, and to the ``exit()`` / ``quit()`` builtins
    (``site``'s, which raise SystemExit themselves), on the way out, as wandb's exit hooks do."""
    import builtins

    original = sys.exit

    def exit(status: object = None) -> NoReturn:
        _note_exit(status, "sys.exit")
        original(status)  # type: ignore[arg-type]
        raise SystemExit(status)  # not reached: for the type checker

    sys.exit = exit
    for name in ("exit", "quit"):
        quitter = getattr(builtins, name, None)
        if callable(quitter) and not getattr(quitter, "_scalerl", False):
            setattr(builtins, name, _Quitter(quitter, name))


class _Quitter:
    """``site``'s ``exit`` / ``quit`` builtin, recording the status it is called with."""

    _scalerl = True

    def __init__(self, inner: Any, name: str) -> None:
        self._inner, self._name = inner, name

    def __call__(self, code: object = None) -> NoReturn:
        _note_exit(code, f"{self._name}()")
        self._inner(code)
        raise SystemExit(code)  # not reached: for the type checker

    def __repr__(self) -> str:
        return repr(self._inner)


def _end_on_sigterm() -> None:
    """SIGTERM (``kill``, ``scalerl cancel``, Slurm's scancel or preemption) kills a Python
    program without running its exit hooks, leaving its run ``running``. Where the program left
    SIGTERM at its default, it becomes ``SystemExit(143)`` instead: the run is ended as failed
    (or left cancelled) and its points flushed. A handler of the program's own is left alone."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def on_sigterm(signum: int, _frame: Any) -> None:
        _note_exit(128 + signum, "SIGTERM")
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_sigterm)


_MOVES = {"CACHE", "PRECALL", "CALL", "PUSH_NULL", "KW_NAMES", "NOP", "EXTENDED_ARG"}


def _main_exit() -> tuple[str, object, str]:
    """(how, status, where) the main module ended, read off its frame's last instruction:
    ``end`` (it ran to its end), ``raise`` (a ``raise SystemExit...`` in the module itself, whose
    status is a constant, a module-level name or none), ``left`` (an exception left it from inside
    a call: the status is not in the frame), or ``unknown`` (no main frame to read)."""
    import dis

    frame = _main_frame
    if frame is None:
        return "unknown", None, "an unknown place"
    code = frame.f_code
    where = f"{code.co_filename}:{frame.f_lineno}"
    instrs = [i for i in dis.get_instructions(code) if i.opname != "CACHE"]
    at = max((n for n, i in enumerate(instrs) if i.offset <= frame.f_lasti), default=-1)
    op = instrs[at].opname if at >= 0 else ""
    if op in ("RETURN_VALUE", "RETURN_CONST"):
        return "end", None, where
    if op != "RAISE_VARARGS":
        return "left", None, where
    names = ("LOAD_NAME", "LOAD_GLOBAL")
    loads = [n for n in range(at) if instrs[n].opname in names and instrs[n].argval == "SystemExit"]
    if not loads:
        return "left", None, where  # `raise err`: not a SystemExit built here
    between = instrs[loads[-1] + 1 : at]
    calls = sum(i.opname == "CALL" for i in between)
    args = [i for i in between if i.opname not in _MOVES]
    if not args and calls <= 1:
        return "raise", None, where  # `raise SystemExit`, `raise SystemExit()`
    if len(args) == 1 and calls == 1:
        value = args[0]
        if value.opname == "LOAD_CONST":
            return "raise", value.argval, where
        found = frame.f_globals.get(str(value.argval), _UNSET) if value.opname in names else _UNSET
        if found is not _UNSET:
            return "raise", found, where
    return "left", None, where  # `raise SystemExit(main())`: its value is gone


def _exit_error() -> str | None:
    """Why the program's exit fails the run, or None when it completes it (see
    :func:`_finish_at_exit`)."""
    how_ended, status, where = _main_exit()
    if how_ended == "end":
        return None  # a sys.exit(1) recorded on the way was caught by the program itself
    if how_ended == "raise":
        how = f"raise SystemExit at {where}"
    elif _exit_how:
        status, how = _exit_status, _exit_how
    elif how_ended == "left":
        return (
            f"the program ended by raising SystemExit (it left the script at {where}) with a status "
            "Python does not show to exit hooks, before finishing the run: counted as failed (fix: "
            "exit with sys.exit(status), or attach with `with client.init(...) as run:`, which sees it)"
        )
    else:
        return None  # nothing known (init ran outside the main thread): as before, completed
    if status in (None, 0):
        return None
    code = f"message {status!r} (status 1)" if isinstance(status, str) else f"status {status!r}"
    return f"the program exited with {code} ({how}) before finishing the run"


def _finish_at_exit() -> None:
    """A run still open at exit is finished: failed when the interpreter exits on an uncaught
    exception (Python keeps it in ``sys.last_value``), with a non-zero status (``sys.exit(3)``,
    ``exit(3)``, ``raise SystemExit(3)``, a SIGTERM), or through a SystemExit whose status is not
    knowable; completed when the script ran to its end or exited with status 0 or None."""
    run = _active
    if run is None:
        return
    last = getattr(sys, "last_value", None)
    error: BaseException | str | None = last if isinstance(last, BaseException) else None
    if error is None:
        error = _exit_error()
    try:
        run.finish(error)
    except Exception:  # at exit there is no caller left to raise to: say it in the log
        _logger.exception("finishing run %s at exit", run.run_id)


def log(
    step: int,
    metrics: Mapping[str, float],
    compute: Mapping[str, float] | None = None,
    n: Mapping[str, int] | None = None,
    *,
    add_compute: Mapping[str, float] | None = None,
) -> None:
    """Record ``metrics`` at ``step`` with the cumulative ``compute`` (gpu_hours, flops, tokens,
    samples, wall_s). ``n`` (optional) maps a rate metric to the number of samples it was
    measured on (e.g. ``{"val/pass_rate": 512}``), so the fits and verdicts know its binomial
    noise; without it the noise is estimated from the curve. Idempotent per (step, metric).
    ``add_compute`` (a run :func:`init` attached): per-step amounts added to running totals.

    Writes into the run :func:`init` attached, else into the run the harness launched this
    process for. In a multi-process job only rank 0 (``RANK`` / ``SLURM_PROCID``) records; on the
    other ranks this is a no-op, so every rank may call it."""
    from scalerl.harness.execution.rank import process_rank

    if process_rank() != 0:
        return
    if _active is not None and _active.owned:
        _active.log(step, metrics, compute, n, add_compute=add_compute)
        return
    if add_compute:
        raise ConfigError(
            "add_compute keeps running totals for a run client.init attached; a run the harness "
            "launched cannot carry them across its restarts",
            field="add_compute",
            fix="pass the cumulative amounts as compute={...}",
        )
    step = _as_step(step)
    _check_mappings(metrics=metrics, compute=compute or {}, n=n or {})
    # Values are converted (and refused with their metric's name) by the writer, the one place
    # every writer path shares: a bad value fails this call, never a batch in the background.
    _open().add(step, dict(metrics), dict(compute or {}), n=n)


def _check_mappings(**given: Any) -> None:
    for name, value in given.items():
        if not isinstance(value, Mapping):
            raise ConfigError(
                f"client.log: {name} must be a mapping of name -> number, not {type(value).__name__}",
                field=name,
                value=value if isinstance(value, str | int | float) else None,
                fix='pass e.g. client.log(10, {"val/pass_rate": 0.41}, compute={"flops": 1e15})',
            )


def _amount(unit: str, amount: Any) -> float:
    """One ``add_compute`` amount: a finite number >= 0 (the writer checks the unit's name)."""
    # numbers.Real: numpy's scalars too (verl's metrics are numpy floats and ints).
    ok = isinstance(amount, numbers.Real) and not isinstance(amount, bool) and math.isfinite(amount)
    if not ok or amount < 0:
        raise ConfigError(
            "a per-step compute amount must be a finite number >= 0",
            field=f"add_compute.{unit}",
            value=amount if isinstance(amount, str | int | float) else type(amount).__name__,
            fix="pass what this step used, e.g. add_compute={'tokens': 4096}",
        )
    return float(amount)


def _as_step(step: Any) -> Any:
    """An integral float (``10.0``) is taken as its int; everything else goes to the writer as
    given, whose ``add`` checks every step (type and the store's range) for every writer path, at
    the call, so a bad one never fails a batch in the background or spools later points."""
    if isinstance(step, float) and math.isfinite(step) and step.is_integer():
        return int(step)
    return step


def superseded() -> bool:
    """True once a newer attempt of this process's run took it over (the store refused a batch of
    its points): stop training at once and save no checkpoint. False before the first ``log``."""
    if _active is not None and _active.owned:
        return _active.superseded
    return _writer is not None and bool(_writer.fenced)


def flush() -> None:
    if _active is not None and _active.owned:
        _active.flush()
    if _writer is not None:
        _writer.flush()


def close() -> None:
    """Close the writer of the run the harness launched this process for (also at exit). A run
    :func:`init` attached is ended by its ``finish()`` (or its ``with`` block), not here."""
    global _writer
    if _writer is not None:
        try:
            _writer.close()
        finally:
            _writer = None
