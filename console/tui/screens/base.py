"""What every view shares: the permanent header, the view tabs and the tick hook."""

from typing import TYPE_CHECKING, ClassVar, cast

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer, Static

if TYPE_CHECKING:
    from fleetdeck.console.tui.app import FleetdeckApp

TABS = (("1", "overview"), ("2", "nodes"), ("3", "jobs"), ("4", "fabric"), ("5", "events"))
"""The views, in tab order, with their number keys: the one list (the app's modes and bindings
are made from it)."""
VIEWS = tuple(name for _key, name in TABS)


class HeaderBar(Static):
    """Cluster, broker connection, [RW]/[R], last update age, malformed count."""


class ViewTabs(Static):
    """The views and their number keys, the active one highlighted, then view info."""


class FleetView(Screen[None]):
    VIEW: ClassVar[str] = ""
    """The mode this screen belongs to (highlighted in the tabs)."""

    @property
    def fleet(self) -> "FleetdeckApp":
        return cast("FleetdeckApp", self.app)

    def compose(self) -> ComposeResult:
        yield HeaderBar(id="header")
        yield ViewTabs(id="tabs")
        yield from self.compose_body()
        yield Footer()

    def compose_body(self) -> ComposeResult:
        yield from ()

    def refresh_view(self, now: float) -> None:
        self.query_one(HeaderBar).update(self.fleet.header_text(now))
        self.update_body(now)
        self.query_one(ViewTabs).update(self._tabs())

    def _tabs(self) -> str:
        parts = []
        for key, name in TABS:
            if name == self.VIEW:
                parts.append(f"[reverse b] {key} {name} [/]")
            else:
                parts.append(f"[$text-muted]{key}[/] {name}")
        info = self.info()
        return " ".join(parts) + (f"  [$text-muted]│[/] {info}" if info else "")

    def info(self) -> str:
        """View-specific status shown after the tabs (markup; escape data)."""
        return ""

    def update_body(self, now: float) -> None:
        """Redraw what this view shows from ``self.fleet.state`` (called on every tick)."""

    def on_escape(self) -> bool:
        """Handle esc inside the view (clear a filter…); False lets the app go back."""
        return False

    def on_screen_resume(self) -> None:
        self.call_after_refresh(self.fleet.refresh_view)
