"""Plotly figures in a notebook that every viewer shows: :func:`setup_figures`.

Plotly's default output in a notebook is ``application/vnd.plotly.v1+json`` alone, which JupyterLab
and VS Code draw and everything else leaves blank (``jupyter nbconvert --to html``, nbviewer, a
notebook viewed on a git host). :func:`setup_figures` makes plotly's default renderer one that puts
three representations of each figure in its output, and each viewer takes the one it can show:

- ``application/vnd.plotly.v1+json``: JupyterLab, VS Code (interactive, as before);
- ``text/html``: the figure's div and the script that draws it, with plotly.js inlined once per
  notebook (the first figure's output carries it; no internet at view time: the copy that comes
  with the installed plotly). nbconvert's HTML and nbviewer run it: interactive. Inside it, before
  the plot, the static picture below, which the script removes once the figure is drawn, so a
  viewer that runs no scripts still shows the figure;
- ``image/png``: a static picture (plotly's ``to_image`` through kaleido, which drives a
  Chrome/Chromium it finds on the machine; kaleido is the ``notebooks`` extra). Viewers that show
  no HTML script (a git host's notebook preview) show pictures. Without kaleido or a browser the
  outputs carry no picture, and :func:`setup_figures` says so.

The committed notebooks carry no outputs; this is about the copies a lab executes and shares.
"""

from __future__ import annotations

import base64
import html
import json
import uuid
from typing import Any

RENDERER = "scalerl"
_STATIC_SIZE = (900, 500)  # the picture's size where the figure sets none (px)

# While plotly.js runs, a page's AMD loader (nbconvert's template loads require.js when it can
# reach its CDN) would take it as a module and leave no window.Plotly: hide it for that script.
_PLOTLYJS = """<script type="text/javascript">window.PlotlyConfig = {{MathJaxConfig: 'local'}};
window.__scalerl_define = window.define; window.define = undefined;</script>
<script type="text/javascript">{plotlyjs}</script>
<script type="text/javascript">window.define = window.__scalerl_define;</script>"""


def _base() -> type:
    from plotly.io.base_renderers import MimetypeRenderer

    return MimetypeRenderer


class _Renderer:
    """The renderer :func:`setup_figures` installs (a plotly ``MimetypeRenderer``; built lazily so
    that importing this module imports no plotly)."""

    def __init__(self, static: bool) -> None:
        self.static = static
        self.static_error: str | None = None

    def activate(self) -> None:
        """Put plotly.js in the notebook once (the first figure's cell), for the HTML viewers."""
        from IPython.display import HTML, display
        from plotly.offline import get_plotlyjs

        display(HTML(_PLOTLYJS.format(plotlyjs=get_plotlyjs())))

    def png(self, fig_dict: dict[str, Any]) -> bytes | None:
        if not self.static or self.static_error is not None:
            return None
        import warnings

        import plotly.io as pio

        layout = fig_dict.get("layout") or {}
        width = int(layout.get("width") or _STATIC_SIZE[0])
        height = int(layout.get("height") or _STATIC_SIZE[1])
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # kaleido's notes about its options under a server
                data: bytes = pio.to_image(fig_dict, format="png", width=width, height=height)
        except Exception as err:  # no kaleido, no browser, a browser that failed: no picture
            self.static_error = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
            return None
        return data

    def to_mimebundle(self, fig_dict: dict[str, Any]) -> dict[str, Any]:
        import plotly.io as pio

        div = f"scalerl-{uuid.uuid4().hex}"
        figure = pio.to_html(
            fig_dict,
            include_plotlyjs=False,
            include_mathjax=False,
            full_html=False,
            div_id=div,
            default_width="100%",
            default_height=int((fig_dict.get("layout") or {}).get("height") or 525),
            validate=False,
        )
        bundle: dict[str, Any] = {
            "application/vnd.plotly.v1+json": {
                "data": fig_dict.get("data", []),
                "layout": fig_dict.get("layout", {}),
                "config": {"plotlyServerURL": "https://plot.ly"},
            }
        }
        picture = self.png(fig_dict)
        static = ""
        if picture is not None:
            encoded = base64.b64encode(picture).decode()
            bundle["image/png"] = encoded
            title = ((fig_dict.get("layout") or {}).get("title") or {}).get("text") or "figure"
            static = (
                f'<img class="scalerl-static" data-for="{div}" alt="{html.escape(str(title))}" '
                f'src="data:image/png;base64,{encoded}" style="max-width:100%">'
            )
        # Drawn: the static picture goes (only a viewer that runs this script draws the figure).
        drop = (
            '<script type="text/javascript">(function(){var g=document.getElementById('
            + json.dumps(div)
            + ");var i=document.querySelector('img.scalerl-static[data-for=\"'+"
            + json.dumps(div)
            + "+'\"]');if(g&&i&&window.Plotly){i.remove();}})();</script>"
        )
        bundle["text/html"] = f'<div class="scalerl-figure">{static}{figure}{drop}</div>'
        return bundle


def _make(static: bool) -> Any:
    cls = type("ScalerlFigureRenderer", (_Renderer, _base()), {})
    return cls(static)


def setup_figures(static: bool | None = None) -> str:
    """Make every ``fig.show()`` of this kernel carry the three representations of the module
    docstring (``static``: the PNG; default: where kaleido is installed) and return one line that
    says what each viewer gets."""
    import importlib.util

    import plotly.io as pio

    want = importlib.util.find_spec("kaleido") is not None if static is None else static
    renderer = _make(want)
    pio.renderers[RENDERER] = renderer
    pio.renderers.default = RENDERER
    if want:
        _start_kaleido()
        probe = renderer.png({"data": [], "layout": {"width": 10, "height": 10}})
        if probe is None:
            renderer.static = False
            return (
                "figures: interactive in JupyterLab/VS Code and in nbconvert/nbviewer HTML; no static "
                "picture for viewers that run no scripts (kaleido could not draw one: "
                f"{renderer.static_error})"
            )
        return (
            "figures: interactive in JupyterLab/VS Code and in nbconvert/nbviewer HTML (plotly.js "
            "inlined once), a static PNG for viewers that run no scripts"
        )
    return (
        "figures: interactive in JupyterLab/VS Code and in nbconvert/nbviewer HTML; no static picture "
        "(install kaleido, the `notebooks` extra, and have Chrome or Chromium, for viewers that run "
        "no scripts)"
    )


def _start_kaleido() -> None:
    """Keep one browser for every picture of the kernel (kaleido >= 1: ~0.25 s a figure instead
    of ~2 s); stopped when the kernel exits."""
    import atexit
    import contextlib

    import kaleido

    start = getattr(kaleido, "start_sync_server", None)
    if start is None:  # kaleido 0.x draws without a browser of its own to keep
        return
    with contextlib.suppress(Exception):
        start(silence_warnings=True)
        atexit.register(kaleido.stop_sync_server, silence_warnings=True)
