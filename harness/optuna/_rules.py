"""The forecast pruners by rule name: the registry the recipe's ``optuna.pruner`` reads.

A recipe selects a forecast pruner with ``pruner: {type: forecast, options: {rule: beat, ...}}``;
``rule`` (default ``bound``) names the class and the other options are its constructor's keywords.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any

from scalerl.harness.errors import ConfigError
from scalerl.harness.optuna._base import ForecastPrunerBase
from scalerl.harness.optuna._beat import BeatPruner
from scalerl.harness.optuna._bound import BoundPruner

RULES: dict[str, type[ForecastPrunerBase]] = {"bound": BoundPruner, "beat": BeatPruner}
DEFAULT_RULE = "bound"


def rule_class(rule: object) -> type[ForecastPrunerBase]:
    """The pruner class registered under ``rule``; a ConfigError naming the valid rules otherwise."""
    cls = RULES.get(rule) if isinstance(rule, str) else None
    if cls is None:
        raise ConfigError(
            f"must be one of {', '.join(map(repr, RULES))}",
            field="rule",
            value=rule,
            fix=f"use {DEFAULT_RULE!r}",
        )
    return cls


def other_rules_options(rule: str, options: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``options`` split into those ``rule``'s class takes and the names that only another rule's
    class takes (one ``ForecastPruner`` class took every option until the rules became classes, and
    ignored the other rule's; they stay accepted, with a warning, so existing recipes still load).
    Names no class takes stay in the first dict, for the caller's unknown-option error."""
    own = set(inspect.signature(rule_class(rule)).parameters)
    others = {p for c in RULES.values() for p in inspect.signature(c).parameters} - own
    kept = {k: v for k, v in options.items() if k not in others}
    return kept, sorted(k for k in options if k in others)


def warn_ignored(rule: str, names: list[str], where: str = "") -> None:
    for name in names:
        warnings.warn(
            f"{where}{name}: only rule {_owner(name)!r} uses it; rule {rule!r} ({rule_class(rule).__name__}) "
            "ignores it; fix: remove it, or set rule",
            UserWarning,
            stacklevel=3,
        )


def _owner(name: str) -> str:
    return next(r for r, c in RULES.items() if name in inspect.signature(c).parameters)


def ForecastPruner(target: float, *, rule: str = DEFAULT_RULE, **options: Any) -> ForecastPrunerBase:
    """The forecast pruner of ``rule`` (:data:`RULES`: ``"bound"`` -> :class:`BoundPruner`,
    ``"beat"`` -> :class:`BeatPruner`) with ``options`` as its keywords. Kept for code written
    against the single ``ForecastPruner(target, rule=...)`` class: options of the other rule are
    ignored with a warning, as that class ignored them. New code names the class."""
    kept, ignored = other_rules_options(rule, options)
    warn_ignored(rule, ignored)
    return rule_class(rule)(target, **kept)
