"""Shared presentation helpers: escaping user text for Plotly and HTML, number formats, colours.

Every string that came from a user (run, variant, knob, sweep names, error text) passes through
:func:`esc` before it reaches a figure or the page. Plotly.js renders trace names, hover text
and table cells as a small HTML subset and decodes entities, so an escaped ``<script>`` shows up
literally as text instead of being parsed as markup.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable

AXIS_LABELS: dict[str, str] = {
    "gpu_hours": "compute (GPU-hours)",
    "flops": "compute (FLOPs)",
    "tokens": "compute (tokens)",
    "samples": "compute (samples)",
    "step": "step",
}

# Qualitative palette (Plotly's default ten, then a darker ten) so variants stay distinguishable
# past ten; the baseline always gets the first colour so it reads the same in every figure.
_PALETTE: tuple[str, ...] = (
    "#636efa", "#ef553b", "#00cc96", "#ab63fa", "#ffa15a", "#19d3f3", "#ff6692", "#b6e880",
    "#ff97ff", "#fecb52", "#2e91e5", "#e15f99", "#1ca71c", "#fb0d0d", "#da16ff", "#222a2a",
    "#b68100", "#750d86", "#eb663b", "#511cfb",
)  # fmt: skip

VERDICT_COLORS: dict[str, str] = {
    "asymptote-mover": "#d62728",
    "efficiency-shaper": "#1f77b4",
    "no-effect": "#7f7f7f",
    "undecided": "#9467bd",
    "unstable": "#ff7f0e",
    "unfit": "#bcbd22",
}


def esc(value: object) -> str:
    """HTML-escape any user value (``None`` and NaN become an empty string)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return html.escape(str(value), quote=True)


def fmt(value: object, digits: int = 3) -> str:
    """A number for people: ``0.612``, ``1.2e+15``; missing values as an en dash."""
    if value is None:
        return "–"
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return esc(value)
    if math.isnan(x):
        return "–"
    if x != 0 and (abs(x) >= 1e5 or abs(x) < 1e-3):
        return f"{x:.{max(digits - 1, 1)}e}"
    return f"{x:.{digits}f}"


def fmt_interval(lo: object, hi: object, digits: int = 3) -> str:
    """``[lo, hi]`` or an en dash when either end is missing."""
    a, b = fmt(lo, digits), fmt(hi, digits)
    return "–" if "–" in (a, b) else f"[{a}, {b}]"


def variant_colors(variants: Iterable[str], baseline: str = "baseline") -> dict[str, str]:
    """Stable variant -> colour map: baseline first, the rest in sorted order."""
    names = sorted(set(variants), key=lambda v: (v != baseline, v))
    return {name: _PALETTE[i % len(_PALETTE)] for i, name in enumerate(names)}


def verdict_color(verdict: object) -> str:
    return VERDICT_COLORS.get(str(verdict), "#8c564b")


def anchor_id(variant: object) -> str:
    """A stable HTML id for a variant's panel: ``panel-`` + a slug + a short hash (unique even
    when two names slug alike; safe in ``id`` and ``href`` without escaping)."""
    import hashlib
    import re

    name = str(variant)
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-")[:40] or "variant"
    return f"panel-{slug}-{hashlib.sha1(name.encode()).hexdigest()[:6]}"


def wrap_lines(text: object, width: int = 100, max_lines: int = 5) -> list[str]:
    """User text wrapped to ``width`` characters, each line escaped (for ``<br>``-joined labels);
    past ``max_lines`` the last line ends with an ellipsis."""
    import textwrap

    raw = "" if text is None or (isinstance(text, float) and math.isnan(text)) else str(text)
    lines = textwrap.wrap(raw, width) or []
    if len(lines) > max_lines:
        lines = [*lines[: max_lines - 1], lines[max_lines - 1][: width - 1] + "…"]
    return [esc(line) for line in lines]
