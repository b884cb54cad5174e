"""The one place verdicts and node states get their colours: theme variables, so every view
follows the active Textual theme (and a theme change recolours all of them)."""

from textual.app import App

VERDICT_VARIABLE = {
    "ok": "success", "degraded": "warning", "failed": "error", "stale": "text-muted",
    "offline": "error", "waiting": "text-muted",
}
STATE_VARIABLE = {"idle": "text", "alloc": "success", "mix": "success", "drng": "warning",
                  "drain": "secondary", "down": "error", "stale": "text-muted"}


def verdict_markup(verdict: str) -> str:
    """``$success`` etc., for content markup (``f"[{verdict_markup(v)}]{v}[/]"``)."""
    return f"${VERDICT_VARIABLE[verdict]}"


def state_markup(state: str) -> str:
    return f"${STATE_VARIABLE.get(state, 'text')}"


def verdict_style(app: App[object], verdict: str) -> str:
    """A rich style for ``rich.text.Text`` (which cannot read theme variables), resolved from
    the app's current theme."""
    variables = app.get_css_variables()
    colour = variables.get(VERDICT_VARIABLE[verdict], "")
    if colour.startswith("auto"):
        # $text-muted is "auto 60%" (a contrast colour Textual resolves against what is under
        # it): not a Rich colour, and a Text styled with it failed to render (node detail of
        # a stale node). Rich's dim is the same intent.
        colour = "dim"
    return f"bold {colour}" if verdict == "failed" else colour


PORT_GLYPHS = {
    "none": " ", "ok": "■", "waiting": "?", "silent": "·", "errors": "△", "erroring": "▲",
    "flapping": "↯", "down": "✖",
}
"""Fabric matrix cells, by ``fabric_map.PORT_NAMES``: the same shapes as the GPU grid's where
the meaning is the same (■ fine, ▲ degraded, ✖ failed, · silent, ? not known yet), so a port
reads without colour (NO_COLOR, 16 colours, colour-blind operators); the error rate is the
triangle's fill (△ errors rising, ▲ at a rate that drains). Colours: fleetdeck.tcss,
``FabricMatrix > .fabricmatrix--*``."""
PORT_WORDS = {
    "ok": "ok", "waiting": "waiting", "silent": "silent", "errors": "errors",
    "erroring": "erroring", "flapping": "flapping", "down": "down",
}
"""The legend's word for each state that a cell can show."""
SUSPECT_MARK = "▶"
"""In front of the row of a suspected switch (the row is also drawn on a red background)."""
