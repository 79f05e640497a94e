"""Templating of a command runner's ``argv`` and ``env`` with the variant's values.

Placeholders are ``{name}`` where ``name`` is one of the run's own fields (``seed``, ``run_id``,
``workdir``, ``checkpoint_dir``, ``variant``, ``knob``, ``alternative``, ``sweep``, ``attempt``,
``metrics_file``, ``python`` (this interpreter)) or
a dotted path into the run's resolved config (``knobs.loss.choice``, ``scale.max_gen_len``,
``knobs.loss.params.eps_max``, ``params.kl_coef`` for the recipe's own ``params:``). ``{{`` and
``}}`` are literal braces. An unknown placeholder is a :class:`ConfigError` that names it and
lists the valid ones (for ``{params.<key>}``, the recipe's declared params).

A float with an integral value renders as an integer (``3.0`` -> ``3``), the same spelling the
run's hash uses, so two configs with one run id render one command line. A list renders as JSON.
"""

from __future__ import annotations

import json
import string
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from scalerl.harness.errors import ConfigError


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; lists stay leaves (rendered as JSON)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, path + "."))
        else:
            out[path] = value
    return out


def _render_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # a budget of 40.0 steps is "40" on a command line
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, sort_keys=True)


class Template:
    """Values available to placeholders; :meth:`render` fills one string."""

    def __init__(self, fields: Mapping[str, Any], config: Mapping[str, Any]) -> None:
        self._values: dict[str, Any] = flatten(config)
        self._values.update(fields)
        self._fields = tuple(fields)

    def valid_names(self) -> list[str]:
        return list(self._fields) + sorted(k for k in self._values if k not in self._fields)

    def _fix_for(self, name: str) -> str:
        if name.startswith("params."):
            known = sorted(k.removeprefix("params.") for k in self._values if k.startswith("params."))
            declared = ", ".join(known) if known else "none"
            return f"declare it under params: in the recipe, or use a declared one (params: {declared})"
        return "use one of: " + ", ".join(self.valid_names()[:60])

    def render(self, text: str, *, where: str) -> str:
        out: list[str] = []
        try:
            parsed = list(string.Formatter().parse(text))
        except ValueError as err:
            raise ConfigError(
                f"malformed template ({err})",
                field=where,
                value=text,
                fix="balance the braces; write {{ and }} for literal braces",
            ) from None
        for literal, name, spec, conversion in parsed:
            out.append(literal)
            if name is None:
                continue
            if spec or conversion:
                raise ConfigError(
                    "format specs and conversions are not supported in placeholders",
                    field=where,
                    value=text,
                    fix=f"write a bare placeholder such as {{{name}}}",
                )
            if name not in self._values:
                raise ConfigError(
                    f"unknown placeholder {{{name}}}", field=where, value=text, fix=self._fix_for(name)
                )
            out.append(_render_value(self._values[name]))
        return "".join(out)

    def render_all(self, items: Sequence[str], *, where: str) -> list[str]:
        return [self.render(item, where=f"{where}[{i}]") for i, item in enumerate(items)]


def run_fields(ctx: Any) -> dict[str, object]:
    """The run's own placeholders (``{seed}``, ``{workdir}``, ``{attempt}`` ...) for one attempt
    (``ctx``: a :class:`scalerl.harness.execution.runners.base.RunContext`); the recipe's values come from
    the resolved config. ``{metrics_file}`` is the command runner's to add."""
    spec = ctx.spec
    return {
        "seed": spec.seed,
        "run_id": spec.run_id,
        "workdir": str(ctx.workdir),
        "checkpoint_dir": str(ctx.workdir / "checkpoint"),
        "variant": spec.variant,
        "knob": spec.knob or "",
        "alternative": spec.alternative or "",
        "sweep": spec.sweep,
        "attempt": ctx.attempt,
        "python": sys.executable,
    }
