"""The ``scalerl`` command line.

Each command group lives in its own module under :mod:`scalerl.harness.cli` and exposes
``register(subparsers) -> None``, which adds its sub-parsers with ``set_defaults(func=handler)``.
A handler takes the parsed ``argparse.Namespace`` and returns an exit code. Handlers import heavy
dependencies inside the function so ``scalerl --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from scalerl.harness.errors import ExecutionError, HarnessError
from scalerl.harness.extras import missing_analysis_package, needs_analysis

# One entry per command module; the order is the order in ``scalerl --help``.
COMMAND_MODULES: tuple[str, ...] = (
    "scalerl.harness.cli.recipes",  # plan, config
    "scalerl.harness.cli.train",  # train
    "scalerl.harness.cli.sweep",  # sweep, status, cancel
    "scalerl.harness.cli.fit",  # fit
    "scalerl.harness.cli.forecast",  # forecast
    "scalerl.harness.cli.report",  # report
    "scalerl.harness.cli.store",  # db upgrade / replay / current
    "scalerl.harness.cli.ingest",  # import (W&B CSV, TensorBoard, parsed CSV)
    "scalerl.harness.cli.export",  # export (fits, forecasts, verdicts back to MLflow / W&B)
    "scalerl.harness.cli.browse",  # ls, logs
)


class _Parser(argparse.ArgumentParser):
    """argparse, whose usage errors (exit 2) are also a JSON document under ``--json``.
    Sub-parsers are built from the parent's class, so every command's parser is one of these."""

    json_errors = False  # set by main() when the command line holds --json

    def error(self, message: str) -> NoReturn:
        message = _suggest(message)
        if _Parser.json_errors:
            from scalerl.harness.cli import output

            output.usage_error(f"{self.prog}: {message}")
        super().error(message)


# `scalerl fti`: argparse's "invalid choice: 'fti' (choose from ...)" gains the closest command.
_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)$")


def _suggest(message: str) -> str:
    from scalerl.harness.lookup import did_you_mean

    m = _INVALID_CHOICE.search(message)
    if m is None:
        return message
    hint = did_you_mean(m.group(1), re.findall(r"'([^']*)'", m.group(2)))
    return f"{message}; {hint}" if hint else message


SWEEP_ENV = "SCALERL_SWEEP"


def _sweep_from_env(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """A command that names a sweep (``status``, ``fit``, ``forecast``, ``report``, ``cancel``,
    ``export``, ``import --sweep``) takes it from ``$SCALERL_SWEEP`` when not given, as the notebooks
    do; with neither it is a usage error naming both."""
    if not hasattr(args, "sweep") or args.sweep is not None:
        return
    name = os.environ.get(SWEEP_ENV, "").strip()
    if not name:
        parser.error(f"scalerl {args.command}: which sweep? (pass SWEEP, or set ${SWEEP_ENV})")
    args.sweep = name


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("scalerl-harness")
    except PackageNotFoundError:  # a source tree on sys.path, never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    from scalerl.harness.cli import output

    parser = _Parser(
        prog="scalerl",
        description="Ablation sweeps, a results store and sigmoid-fit verdicts for RL post-training.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument(output.FLAG, action="store_true", help=output.HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        module = importlib.import_module(name)
        module.register(sub)
    output.add_json_flags(parser)
    return parser


def _refuse_memory_store(args: argparse.Namespace) -> None:
    """Every command that names a store (``--db``, or ``scalerl db ... URL``) refuses an in-memory
    one: it would vanish with this process, after the command reported success."""
    if not hasattr(args, "db") and not (args.command == "db" and hasattr(args, "url")):
        return
    from scalerl.db.engine import refuse_memory

    url = args.db if hasattr(args, "db") else args.url
    refuse_memory(url, f"`scalerl {args.command}`")


def main(argv: Sequence[str] | None = None) -> int:
    from scalerl.harness.cli import output

    parser = build_parser()
    tokens, as_json = output.lift(list(sys.argv[1:] if argv is None else argv))
    _Parser.json_errors = as_json
    if as_json and tokens[:1] == ["--version"]:
        output.emit({"version": _version()})
        return 0
    # -v / --verbose is global but reads naturally after the command too (`scalerl fit loo -v`);
    # argparse only takes it before the command, so lift it out wherever it stands (up to "--").
    end = tokens.index("--") if "--" in tokens else len(tokens)
    verbose = any(t in ("-v", "--verbose") for t in tokens[:end])
    tokens = [t for i, t in enumerate(tokens) if i >= end or t not in ("-v", "--verbose")]
    # ``key=value`` overrides are positional, and argparse stops collecting a positional list at
    # the first option, so ``scalerl train CONFIG --seed 1 lr=2e-3`` would leave ``lr=2e-3``
    # unparsed. Collect such leftovers into the command's override list; anything else is still
    # an error.
    args, extra = parser.parse_known_args(tokens)
    args.verbose = verbose
    args.json = as_json
    _sweep_from_env(args, parser)
    if extra:
        target = next((n for n in ("overrides", "rest") if isinstance(getattr(args, n, None), list)), None)
        stray = [tok for tok in extra if tok.startswith("-") or "=" not in tok]
        if target is None or stray:
            parser.error(f"unrecognized arguments: {' '.join(stray or extra)}")
        getattr(args, target).extend(extra)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not args.verbose:
        # Alembic narrates every migration check at INFO; a user running `scalerl fit` only needs
        # to hear about it when something is wrong.
        logging.getLogger("alembic").setLevel(logging.WARNING)
    from scalerl.db.redaction import scrub_logs

    scrub_logs()  # no URL secret reaches a log line, whatever logs it
    func = getattr(args, "func", None)
    if func is None:
        if as_json:
            output.usage_error("scalerl: no COMMAND given (see scalerl --help)")
            return 2
        parser.print_help()
        return 2
    if not as_json:
        return _run(func, args)
    # One JSON document on stdout, whatever the command; its human text goes to stderr.
    with output.session(args.command):
        code = _run(func, args)
        output.finish(code)
    return code


def _run(func: Callable[[argparse.Namespace], int | None], args: argparse.Namespace) -> int:
    """Run a command; every error it can cause becomes a line on stderr (and, under --json, the
    error document on stdout) and its exit code (README, "Scripting with --json, and exit codes")."""
    from scalerl.db.redaction import scrub
    from scalerl.harness.cli import output

    def fail(kind: str, message: str, code: int) -> int:
        print(f"scalerl: {message}", file=sys.stderr)
        output.emit_error(kind, message.removeprefix("error: "), code)
        return code

    try:
        _refuse_memory_store(args)
        return int(func(args) or 0)
    except HarnessError as err:
        return fail(type(err).__name__, f"error: {scrub(str(err))}", err.exit_code)
    except ModuleNotFoundError as err:
        # A light install (no `analysis` extra) running a command that reads, fits or sweeps.
        package = missing_analysis_package(err)
        if package is None:
            raise
        message = needs_analysis(f"scalerl {args.command}", package)
        return fail("MissingExtra", f"error: {message}", ExecutionError.exit_code)
    except KeyboardInterrupt:
        return fail("KeyboardInterrupt", "interrupted", 130)
    except BrokenPipeError:
        # `scalerl plan --json | head`: the reader left. Point stdout at /dev/null so the
        # interpreter's final flush does not raise again, and exit as a SIGPIPE'd tool would.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, output.stdout().fileno())
        return 141


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
