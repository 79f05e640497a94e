"""The one exception root of the project and its few subclasses.

Every error a user can cause (a bad recipe, an unreachable database, an unreadable export) is a
:class:`HarnessError`. The CLI prints ``str(err)`` and exits non-zero without a traceback, so a
message must stand on its own: name the file / field / line, the offending value, and the fix.
Driver and library errors are translated into these at the edge where they happen.
"""

from __future__ import annotations


class HarnessError(Exception):
    """Root of every error the harness raises on purpose.

    ``exit_code`` is what the CLI exits with when this error reaches it. The codes (README,
    "Scripting with --json, and exit codes"): 1 a run or trial failed, 2 a usage error
    (argparse), 3 a bad configuration or a name that is not in the store (a sweep, a run, a
    metric), 4 the store, 5 a refused or failed submission, 6 an analysis that cannot be computed,
    7 an unreadable import, 130 an interrupt, 141 a closed pipe.
    """

    exit_code: int = 1

    def __init__(self, *args: object) -> None:
        # A message often quotes a store or source URL (``mlflow:postgresql://u:PW@h/db``), and
        # str(err) reaches logs, notebooks and reports, not only the CLI (which scrubs again):
        # no password leaves in it, whatever subclass raised it.
        from scalerl.db.redaction import scrub

        super().__init__(*(scrub(a) if isinstance(a, str) else a for a in args))


class ConfigError(HarnessError):
    """A recipe, sweep, profile or CLI override is invalid.

    Carries where the problem is so tools can point at it; ``str()`` renders
    ``file:line: field=value: reason (fix: ...)``.
    """

    exit_code = 3

    def __init__(
        self,
        reason: str,
        *,
        file: str | None = None,
        line: int | None = None,
        field: str | None = None,
        value: object = None,
        fix: str | None = None,
    ) -> None:
        self.reason = reason
        self.file = file
        self.line = line
        self.field = field
        self.value = value
        self.fix = fix
        # The value is echoed back: a store URL given as a value must not carry its password out.
        from scalerl.db.redaction import scrub

        super().__init__(scrub(self._render()))

    def _render(self) -> str:
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line is not None else "")
        parts = [where] if where else []
        if self.field:
            shown = "" if self.value is None else f"={self.value!r}"
            parts.append(f"{self.field}{shown}")
        head = ": ".join(parts)
        msg = f"{head}: {self.reason}" if head else self.reason
        if self.fix:
            msg += f" (fix: {self.fix})"
        return msg


class NotFoundError(ConfigError):
    """A name the user gave (a sweep, a run, a metric) is not in the store; the message lists what
    is there and the closest match (:mod:`scalerl.harness.lookup`). Exit 3, like every bad argument."""


class StoreError(HarnessError):
    """The results store failed: unreachable, locked past retries, or a constraint broke."""

    exit_code = 4


class SchemaOutOfDateError(StoreError):
    """The store's schema is older (or newer) than this code; the message names the command."""


class FencedWriteError(StoreError):
    """A write came from a superseded attempt of a run and was rejected."""


class ExecutionError(HarnessError):
    """A sweep could not be submitted, a job failed, or an executor is misconfigured."""

    exit_code = 5


class AnalysisError(HarnessError):
    """A fit or verdict was asked for on data it cannot be computed from."""

    exit_code = 6


class ImportFormatError(HarnessError):
    """An imported curve file (W&B CSV, TensorBoard events, parsed CSV) is malformed."""

    exit_code = 7
