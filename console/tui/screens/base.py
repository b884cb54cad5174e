"""What every view shares: the permanent header, the view tabs and the tick hook."""

from typing import TYPE_CHECKING, ClassVar, cast

from rich.text import Text
from textual import events
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.binding import Binding
from textual.content import Content
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Input, Static
from textual.widgets._footer import FooterKey  # private: textual is pinned (pyproject.toml)

from fleetdeck.console.rows import NodeFilter
from fleetdeck.console.state import NodeState
from fleetdeck.console.tui.text import Part, esc

if TYPE_CHECKING:
    from fleetdeck.console.tui.app import FleetdeckApp

TABS = (("1", "overview"), ("2", "nodes"), ("3", "jobs"), ("4", "fabric"), ("5", "events"),
        ("6", "incidents"))
"""The views, in tab order, with their number keys: the one list (the app's modes and bindings
are made from it)."""
VIEWS = tuple(name for _key, name in TABS)


def dialog_key(key: str, action: str, description: str) -> tuple[Binding, Binding]:
    """A key that opens a dialog (drain, resume, restart), bound twice. As a priority binding
    it runs as the app reads it, so the reason typed straight after it reaches the dialog's box
    (``TypeAhead``): as a plain binding alone it ran only once the key had gone round the
    screen, and the keys after it went to the table, so a reason typed in one motion after
    ``r`` was lost (a 3 a.m. drive; docs/domain.md §7). The plain binding stays for a key read
    while the view was still being switched to ("2r" at once): the app read it on the old view,
    and the key reaches the new one only on its way round. Its action calls
    ``FleetView.not_typing`` first."""
    return (Binding(key, action, description, priority=True),
            Binding(key, action, description, show=False))


def last_known(st: NodeState) -> bool:
    """The node's figures are the last it sent, not live (offline, or silent past its stale
    threshold): every view that draws them says so, or an offline node reads as a busy one."""
    return st.online is False or st.stale


def filter_said(f: NodeFilter) -> list[Part]:
    """What a view's line says of its ``/`` filter: the text with how it was read, and why it
    could not be read (a bracket left open, a bad regex). One wording for the nodes and events
    views: the events view once left the reason out (a newcomer's run). On a short line the
    filter is said as typed after its key, ``/leaf40``: at 80 columns the nodes view's line
    read "16/2048 nodes  f…", the filter that hid 2,032 nodes cut to a letter (a 3 a.m.
    drive)."""
    parts: list[Part] = []
    if f.active:
        how = f.reading
        parts.append((f"[$warning]filter {esc(f.text)}[/]" + (f" ({esc(how)})" if how else ""),
                      f"[$warning]/{esc(f.text)}[/]", 0))
    if f.error:
        parts.append((f"[$error]{esc(f.error)}[/]", "", 0))
    return parts


def age_text(seconds: float) -> str:
    """``42s``, ``5m``, ``3h``: how old a last-known figure is, in few cells."""
    s = max(0.0, seconds)
    return f"{s:.0f}s" if s < 100 else (f"{s / 60:.0f}m" if s < 6000 else f"{s / 3600:.0f}h")


class Readout(Static):
    """A Static that ignores an update to the text it already shows: ``Static.update`` always
    asks for a layout and a repaint, which costs milliseconds per tick per widget."""

    _shown: object = None

    def show(self, content: object, layout: bool = True) -> None:
        """``layout=False`` where the widget's size does not follow its text (``1fr``): the
        repaint then skips the screen's layout pass."""
        if content != self._shown:
            self._shown = content
            self.update(content, layout=layout)  # type: ignore[arg-type]


class HeaderBar(Readout):
    """Cluster, broker connection, [RW]/[R], last update age, malformed count."""


class ViewTabs(Readout):
    """The views and their number keys, the active one highlighted, then view info."""


def _natural_width(w: Widget) -> int:
    """The cells a footer key takes shown, hidden or not: its text, padding, border and
    margins (``width: auto``)."""
    styles = w.styles
    border = sum(1 for edge in (styles.border_left, styles.border_right) if edge[0])
    text = w.render()
    # A key's own text, as it paints it; anything else (a group's label) as Textual measures.
    cells = text.cell_len if isinstance(text, Text) else w.get_content_width(w.size, w.app.size)
    return int(cells + styles.padding.width + border + styles.margin.width)


class StableFooter(Footer):
    """Textual's Footer, recomposed only when the keys it would show changed.

    Footer rebuilds one widget per key (CSS applied to each) whenever the screen's bindings
    are updated, which Textual does on every focus change and every mode switch: about half of
    a view switch's time at any fleet size. The keys of a view rarely change, so the same
    footer is kept while they are the same."""

    _keys: tuple[object, ...] | None = None
    FIRST: ClassVar[tuple[str, ...]] = ("question_mark", "q", "slash", "colon", "r", "u")
    """Shown first: a footer cut at 80 or 100 columns dropped "? Help" and "q Quit", the two a
    newcomer cannot do without (a newcomer's run), then "/ Filter" and ": cmd" (a 3 a.m.
    drive at 80x24), which every view that has them needs, then the commands; a view's own
    keys are in the help too, so the cut takes them."""

    def compose(self) -> ComposeResult:
        keys = list(super().compose())
        first = sorted((k for k in keys if isinstance(k, FooterKey) and k.key in self.FIRST),
                       key=lambda k: self.FIRST.index(k.key))
        yield from first + [k for k in keys if k not in first]
        self.call_after_refresh(self._fit)

    def on_resize(self) -> None:
        self._fit()

    def _fit(self) -> None:
        """Show only the keys that fit whole left of the palette's: at 80 columns the last
        one was cut to "w/W", its label "Worst" under the palette key (a newcomer's run).
        The ones left off are in the help (``?``)."""
        width = self.size.width
        if width <= 0:
            return
        keys = [k for k in self.children if isinstance(k, Widget)]
        palette = [k for k in keys if k.has_class("-command-palette")]
        room = width - sum(_natural_width(k) for k in palette)
        used, full = 0, False
        for k in keys:
            if k in palette:
                continue
            need = _natural_width(k)
            full = full or used + need > room
            k.display = not full
            if not full:
                used += need

    def bindings_changed(self, screen: Screen[object]) -> None:
        if not screen.app.app_focus or not (self.is_attached and screen is self.screen):
            super().bindings_changed(screen)
            return
        keys = tuple((b.key, b.description, b.action, enabled, tooltip)
                     for _node, b, enabled, tooltip in screen.active_bindings.values()
                     if b.show)
        if keys == self._keys and self._bindings_ready:
            return
        self._keys = keys
        super().bindings_changed(screen)


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
        yield StableFooter()

    def compose_body(self) -> ComposeResult:
        yield from ()

    def not_typing(self) -> None:
        """Skip a ``dialog_key`` typed into a text box (the filter): there it is a character."""
        if isinstance(self.focused, Input):
            raise SkipAction()

    _cut_off = False

    def _grey_when_cut_off(self) -> None:
        """Grey what the view shows while the console is cut off from its broker: its figures
        are as of the loss, and they looked as live as ever with only the header and the top
        problems saying so (a 3 a.m. drive). The top problems, which say since when, stay."""
        blind = self.fleet.state.blind
        cut = blind is not None and blind[1] is None
        if cut == self._cut_off:
            return
        self._cut_off = cut
        for child in self.children:
            if isinstance(child, HeaderBar | ViewTabs | StableFooter) or child.id == "problems":
                continue
            child.set_class(cut, "-cut-off")

    def refresh_view(self, now: float) -> None:
        header = self.query(HeaderBar)
        if not header:
            return  # composing or going away (a key switched views mid-tick): next tick
        header.first().show(self.fleet.header_text(now))
        self._grey_when_cut_off()
        self.update_body(now)
        self.query_one(ViewTabs).show(self._tabs())

    def _tabs(self) -> str:
        info = self.info()
        return self._tab_names() + (f"  [$text-muted]│[/] {info}" if info else "")

    def info_room(self) -> int:
        """The cells ``info`` has after the tabs (0: the screen not laid out yet)."""
        if not self.size.width:
            return 0
        return max(1, self.size.width - Content.from_markup(self._tab_names()).cell_length - 6)

    def _tab_names(self) -> str:
        parts = []
        if len(self.fleet.sessions) > 1 or self.VIEW == "clusters":
            # Contexts (console --cluster a,b): the fleet of fleets comes first, on 0.
            parts.append("[reverse b] 0 clusters [/]" if self.VIEW == "clusters"
                         else "[$text-muted]0[/] clusters")
        for key, name in TABS:
            if name == self.VIEW:
                parts.append(f"[reverse b] {key} {name} [/]")
            else:
                parts.append(f"[$text-muted]{key}[/] {name}")
        return " ".join(parts)

    def info(self) -> str:
        """View-specific status shown after the tabs (markup; escape data)."""
        return ""

    def update_body(self, now: float) -> None:
        """Redraw what this view shows from ``self.fleet.state`` (called on every tick)."""

    def on_escape(self) -> bool:
        """Handle esc inside the view (clear a filter…); False lets the app go back."""
        return False

    left_once: bool = False
    """This view was shown and left: its widgets have their sizes (``_on_screen_resume``)."""
    _left_styled: tuple[object, ...] | None = None
    """What the app's styles rested on when the app switched away from this view
    (``leaving``); None: restyle on return, as Textual does."""

    def _style_basis(self) -> tuple[object, ...]:
        """What a view's styles depend on beyond its own widgets: the app's pseudo classes
        (focus, dark, ...), classes, theme, CSS revision and the screen's size. A widget's own
        class changes restyle it at once, shown or not (``App.update_styles``).
        ``_css_update_count`` is Textual's own (pyproject pins textual 8.2.8)."""
        app = self.app
        return (app.pseudo_classes, frozenset(app.classes), app.theme,
                app._css_update_count, app.size)

    def leaving(self) -> None:
        """The app switches away from this view now (``FleetdeckApp._switch``): note what its
        styles rest on while it is still the screen Textual restyles. Noted later (on
        ``ScreenSuspend``), a change of app focus in between would be missed."""
        self._left_styled = self._style_basis()

    def _on_screen_resume(self, event: events.ScreenResume) -> None:
        # Runs before Textual's own handler (Screen._on_screen_resume, later in the MRO),
        # which restyles every widget of a resumed screen: ~12-20 ms a view switch at
        # 16,384 nodes (bench/console_scale.py), for nothing when what the styles rest on is
        # as it was when the view was left. Textual's switch_mode refreshes the CSS itself
        # when it changed (_css_update_count).
        if event.refresh_styles and self._left_styled == self._style_basis():
            event.refresh_styles = False
        if self.left_once:
            # Back to a view laid out before: show the fleet as it is now in the switch's
            # first paint, not one paint later (~20 ms at 16,384 nodes, bench/console_scale.py).
            self.fleet.refresh_view()
        else:
            # A first visit: its widgets have no size until the layout after this.
            self.call_after_refresh(self.fleet.refresh_view)

    def on_screen_suspend(self) -> None:
        self.left_once = True


class FilteredView(FleetView):
    """A view with a filter box under its table (events, jobs): ``/`` opens it, what is typed
    filters as it is typed (``NodeFilter``), Enter keeps it and closes the box, Escape closes
    the box, and Escape again clears the filter. The subclass composes an ``Input`` whose id is
    ``FILTER_BOX`` and has a ``table``."""

    FILTER_BOX: ClassVar[str] = ""

    def __init__(self) -> None:
        super().__init__()
        self.filter = NodeFilter("")

    @property
    def table(self) -> Widget:
        raise NotImplementedError

    def _box(self) -> Input:
        return self.query_one(f"#{self.FILTER_BOX}", Input)

    def action_filter(self) -> None:
        box = self._box()
        if self.focused is box:  # a priority binding (as ':'): in the box, '/' is typed
            raise SkipAction()
        box.display = True
        box.value = self.filter.text
        # At once, not by Widget.focus (a callback after the keys already read): a filter
        # typed straight after '/' went to the table and its keys (c: commands only in the
        # events view, r: restart in the jobs view).
        self.set_focus(box)
        box.focus()  # again once a view switch's own focus ("3/" typed at once) has landed

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == self.FILTER_BOX:
            self.filter = NodeFilter(event.value)
            self.fleet.refresh_view()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == self.FILTER_BOX:
            self.filter = NodeFilter(event.value)
            event.input.display = False
            self.set_focus(self.table)
            self.fleet.refresh_view()

    def on_escape(self) -> bool:
        box = self._box()
        if box.display:
            box.display = False
            self.set_focus(self.table)
            return True
        if self.filter.active:
            self.filter = NodeFilter("")
            self.fleet.refresh_view()
            return True
        return False
