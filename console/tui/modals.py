"""Modal screens: drain form, confirmations with blast radius, quit with commands open, help,
``:`` command line."""

import math
import time
from collections.abc import Callable
from typing import ClassVar, Literal, TypeVar

from textual import events, on
from textual.app import ComposeResult
from textual.await_complete import AwaitComplete
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.css.query import NoMatches
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Button, Footer, Input, Label, RadioButton, RadioSet, Static

from fleetdeck.console import publish_probe
from fleetdeck.console.commands import TYPED_CONFIRM_ABOVE, BlastRadius, clip_words
from fleetdeck.console.tui.text import esc, plural
from fleetdeck.hostlist import compress
from fleetdeck.protocol.messages import CommandOp, DrainMode

MAX_TARGET_LINES = 8
"""Target lines shown before the dialog is laid out (``CommandScreen.fit_body`` then sizes the
list to the screen)."""
RADIUS_REFRESH_S = 1.0
"""How often an open drain dialog takes its blast radius again: one left open while its node's
agent died kept "ok, nothing found on it" and no word of a time-out to come, and the drain typed
into it timed out (a 2026-12-07 drill)."""
RADIUS_REFRESH_SHARE = 0.02
"""At most this share of the event loop goes to an open drain dialog's radius: the radius reads
the whole fleet (each node's jobs, the free GPUs): 45 ms at 16,384 nodes for one target, more
for many. Taken each second, that was a 45 ms stall each second under the reason being typed,
where a tick's work is cut in 20 ms slices; a slower radius is taken less often."""

ResultT = TypeVar("ResultT")


def _rows(markup: str, width: int) -> int:
    return len(Content.from_markup(markup).wrap(width)) if width > 0 else 1


def radius_text(r: BlastRadius, width: int = 0, height: int = 0) -> str:
    """The blast radius, its target list cut to fit ``height`` rows of ``width`` (0: at most
    ``MAX_TARGET_LINES`` targets), ending with how many more and which where it is cut."""
    # What the command costs and its warnings first: a job's dozen target lines must not push
    # them below the dialog's fold.
    lines = [f"[b]Blast radius[/]: {esc(r.summary())}"]
    for job in r.jobs[:6]:
        lines.append(f"  • {esc(job.line())}")
    if len(r.jobs) > 6:
        lines.append(f"  … and {plural(len(r.jobs) - 6, 'more job')}")
    for note in r.notes:
        lines.append(f"  [$warning]⚠ {esc(note)}[/]")
    if r.subject and not r.targets:
        # A job that holds no nodes (failed, pending): what the restart targets, not an empty
        # "Targets (0):" heading.
        lines.append(f"[b]Target[/]: {esc(r.subject)}")
    else:
        lines.append(f"[b]Targets[/] ({len(r.targets)}): {esc(r.hostlist)}")
    targets = [f"  • {esc(t)}" for t in r.target_lines]
    if height <= 0:
        n = min(len(targets), MAX_TARGET_LINES)
    else:
        # As many as the rows left show, a line kept for the rest; two at least (the body
        # scrolls): a 12-node restart showed 2 of them, and no word of the other 10, with 30
        # rows of the screen free (a 3 a.m. drive).
        # Only the lines that can show are measured: a 16,384-node drain measured every
        # one, ~0.4 s at each open, resize and mode change (a review).
        room = height - sum(_rows(line, width) for line in lines)
        needs: list[int] = []
        for t in targets:
            needs.append(_rows(t, width))
            if sum(needs) > room:
                break
        n = len(targets)
        if sum(needs) > room:
            n = 0
            while n < len(needs) and sum(needs[:n + 1]) <= room - 1:
                n += 1
            n = max(n, min(2, len(targets)))
    lines.extend(targets[:n])
    if n < len(targets):
        lines.append(f"  … and {len(targets) - n} more ({esc(compress(r.targets[n:]))})")
    return "\n".join(lines)


def payload_text(r: BlastRadius) -> str:
    if r.op is CommandOp.RESTART_JOB:
        return "[$text-muted]publishes Command op=restart_job to sched/cmd (QoS 1)[/]"
    return (f"[$text-muted]publishes Command op={r.op.value} to node/<n>/cmd for "
            f"{plural(len(r.targets), 'node')} (QoS 1, expires in 10 s)[/]")


class Choice(RadioButton):
    """A radio button whose glyph says whether it is chosen (● / ○): Textual's differs by
    colour only, which a monochrome terminal or a colour-blind operator cannot read."""

    @property
    def BUTTON_INNER(self) -> str:  # type: ignore[override]  # Textual's class attribute
        return "●" if self.value else "○"


class Modal(ModalScreen[ResultT]):
    """A modal that closes once.

    A second Enter (a double tap, a key bounce, keys queued on a loaded machine) reached the
    modal's box after the first had closed it, and Textual's dismiss popped whatever screen was
    on top then: with one screen left it raised and took the console down. A modal that is no
    longer on top ignores a dismiss; the keys that reach it then are dropped, not passed on,
    since a dialog is there to be read before its next answer."""

    KEYS_FOOTER: ClassVar[bool] = True
    """A footer of this modal's own keys over the view's: the view's footer showed under a
    dialog, offering keys that do nothing there (an operator's read)."""

    def dismiss(self, result: ResultT | None = None) -> AwaitComplete:
        if not self.is_active:
            return AwaitComplete()
        return super().dismiss(result)

    def on_mount(self) -> None:
        if self.KEYS_FOOTER:
            self.mount(Footer(show_command_palette=False))


class DialogBody(VerticalScroll):
    """A command dialog's blast radius: a Tab stop only while it has more than it shows.

    ``fit_body`` cuts the radius to the rows the screen leaves, so it nearly always fits, and a
    scroll box that does not scroll was the first Tab stop of every dialog, showing no focus:
    Tab, Tab, Tab from the reason box went round to it and the Enter after did nothing, the
    dialog still open (a 3 a.m. drive, keyboard only)."""

    def allow_focus(self) -> bool:
        return self.allow_vertical_scroll


ROUTED_KEYS = frozenset({"backspace", "enter", "tab", "shift+tab"})
"""Keys besides the printable ones a ``Box`` passes on to the field a Tab focused."""


class Box(Input):
    """A modal's text box: Enter submits in order with the keys typed before it.

    Input's own Enter binding runs once the key has gone up to the app; characters typed
    straight after it were in the box by then and were submitted with it (":drain gpu0003⏎bad"
    read as the nodes "gpu0003bad")."""

    async def _on_key(self, event: events.Key) -> None:
        screen = self.screen
        if (screen.focused is not self and screen.focused is not None
                and (event.is_printable or event.key in ROUTED_KEYS)):
            # Routed here before a Tab moved the focus: the field it moved to takes it, in
            # order with the keys routed there since. Other keys go their usual way (Escape
            # to the dialog's binding: a burst '⇥<esc>' did not cancel it, a review).
            event.stop()
            event.prevent_default()
            await self._pass_on(event, screen.focused)
            return
        if event.key in ("tab", "shift+tab"):
            # Tab's binding ran only once the key had gone round, and the keys typed after it
            # went into this box meanwhile ('reason⇥restart 12⏎' read the reason as
            # "reasonrestart 12": a 3 a.m. drive). Focus moves now, and they follow it.
            event.stop()
            event.prevent_default()
            if event.key == "tab":
                screen.focus_next()
            else:
                screen.focus_previous()
            return
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            await self.action_submit()
            return
        await super()._on_key(event)

    @staticmethod
    async def _pass_on(event: events.Key, to: Widget) -> None:
        if isinstance(to, Box):
            await to._on_key(event)
        elif isinstance(to, Input):
            if event.is_printable and event.character:
                to.insert_text_at_cursor(event.character)
            elif event.key == "backspace":
                to.action_delete_left()
            elif event.key == "enter":
                await to.action_submit()
        elif isinstance(to, Button) and event.key == "enter":
            to.press()
        elif event.key in ("tab", "shift+tab"):
            if event.key == "tab":
                to.screen.focus_next()
            else:
                to.screen.focus_previous()


def typed_at_enter(event: Input.Submitted) -> dict[str, str]:
    """What the box held when Enter was pressed, by the box's id.

    The modal handles the submission after the keys typed behind the Enter, which the box took
    meanwhile: a reason typed, Enter and ``3`` in one burst (tmux, a paste, a slow link) was
    audited as "reason-xyz3" (a newcomer's run). ``Input.Submitted`` carries the value as it
    was at the Enter."""
    return {event.input.id: event.value} if event.input.id else {}


class TypeAhead(Modal[ResultT]):
    """A modal whose text box takes what was typed before the box had focus.

    The app routes a key to whatever has focus when it reads the key; a modal's box gets focus
    only once the modal is mounted, so keys typed straight after the one that opened it (an
    operator's ":drain gpu0003" in one motion, a paste, tmux send-keys) reached the modal itself
    and were lost, while the Enter after them submitted the empty box. A printable key or a
    backspace that reaches the modal goes into its focused box (or its first one, before focus
    lands), and an Enter submits that box here, in order. An Input stops the printable keys it
    takes, so none arrives here twice. The keys that open a modal or a box are priority
    bindings (the app runs them as it reads them, not after the key went round the old
    screen), else the keys typed after them went to the old screen; see
    ``FleetdeckApp.action_command_line``."""

    async def on_key(self, event: events.Key) -> None:
        if not self.is_active:
            return
        focused = self.focused
        if isinstance(focused, Input):
            box = focused
        elif focused is None and self.query(Input):
            box = self.query(Input).first()
        else:
            return
        if event.is_printable and event.character:
            box.insert_text_at_cursor(event.character)
        elif event.key == "backspace":
            box.action_delete_left()
        elif event.key == "enter":  # a Box stops its own Enter: this one came before focus
            await box.action_submit()
        else:
            return
        event.stop()
        event.prevent_default()


class CommandScreen(TypeAhead[ResultT]):
    """A command's dialog: its blast radius, a typed confirmation above
    ``TYPED_CONFIRM_ABOVE`` targets, ``#ok`` or Enter to go on (``go``), Esc or ``#cancel``
    to give up (None)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    VERB = ""
    """The command's word, as the typed phrase and the errors say it (drain, restart)."""

    radius: BlastRadius

    @property
    def phrase(self) -> str:
        return f"{self.VERB} {len(self.radius.targets)}"

    def footer(self, ok: str, variant: Literal["warning", "error"]) -> ComposeResult:
        """What every command's dialog ends with: the typed confirmation where the radius asks
        for one, what is published, the error line, then the go and Cancel buttons."""
        if self.radius.needs_typed_confirmation:
            yield Label(f"{len(self.radius.targets)} nodes > {TYPED_CONFIRM_ABOVE}: type "
                        f"[b]{esc(self.phrase)}[/] to confirm")
            yield Box(placeholder=self.phrase, id="confirm")
        yield Static(payload_text(self.radius), id="payload")
        yield Static("", id="dialog-error")
        with Horizontal(id="dialog-buttons"):
            yield Button(ok, variant=variant, id="ok", compact=True)
            yield Button("Cancel", id="cancel", compact=True)

    def on_resize(self) -> None:
        self.call_after_refresh(self.fit_body)

    def fit_body(self) -> None:
        """The blast radius gets the rows the dialog's other parts leave on the screen, its
        target list cut to them: a fixed ten rows showed 2 of a 12-node job's targets with 30
        rows free, and at 80x24 pushed the buttons off the screen."""
        try:
            dialog = self.query_one("#dialog")
            body = self.query_one("#dialog-body")
        except NoMatches:
            return
        # outer_size leaves out margins: the drain dialog's mode switch has one above it, and
        # at 80x24 that row pushed its buttons under the border (a 3 a.m. drive).
        others = sum(c.outer_size.height + c.styles.margin.top + c.styles.margin.bottom
                     for c in dialog.children if c is not body)
        footer = sum(f.outer_size.height for f in self.query(Footer))
        # .dialog: at most 95% of what the footer leaves, inside a thick border
        room = max(3, int((self.size.height - footer) * 0.95) - 2 - others)
        # Measured and shown at the body's whole width, its scrollbar off where it all fits:
        # a body left scrolling (longer than the stylesheet's 10 rows before this first fit)
        # kept its scrollbar, wrapped two columns short of what was measured, and the last
        # target went under the fold with no "… and 1 more" (a 1,024-node fleet's drain of 5
        # nodes at 160x48 showed 4 of them: a 3 a.m. drive).
        width = body.content_region.width or dialog.content_region.width
        text = radius_text(self.radius, width, room)
        self.query_one("#radius", Static).update(text)
        rows = _rows(text, width)
        body.styles.overflow_y = "hidden" if rows <= room else "auto"
        body.styles.max_height = room
        body.styles.height = min(room, rows)

    @on(Input.Submitted)
    def _entered(self, event: Input.Submitted) -> None:
        self.submit(typed_at_enter(event))

    @on(Button.Pressed, "#ok")
    def _ok(self) -> None:
        self.submit()

    def confirmed(self, at_enter: dict[str, str]) -> bool:
        """The phrase typed where one is asked for; else says so, with the box focused."""
        if not self.radius.needs_typed_confirmation:
            return True
        box = self.query_one("#confirm", Input)
        if at_enter.get("confirm", box.value).strip() == self.phrase:
            return True
        self.query_one("#dialog-error", Static).update(
            f"[$error]type '{esc(self.phrase)}' to confirm[/]")
        box.focus()
        return False

    def submit(self, at_enter: dict[str, str] | None = None) -> None:
        raise NotImplementedError

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.action_cancel()


def example_placeholder(example: str, room: int = 0) -> str:
    """``e.g. <example> — ticket OPS-123`` in ``room`` columns (0: any): the example first,
    the ticket's part dropped and then the example cut at a word where the box is too narrow.
    A failed job's scheduler reason as the restart dialog's example ran past its box at 160
    columns, cut mid-word with the ticket's part lost (``restart_reason_hint``)."""
    full = f"e.g. {example} — ticket OPS-123"
    if not room or len(full) <= room:
        return full
    # clip_words keeps up to that many characters of the text, then its "…"
    return "e.g. " + clip_words(example, max(1, room - len("e.g. ") - 1))


class ReasonScreen(CommandScreen[ResultT]):
    """A command that asks why (kept in the audit) before it goes: the reason box has focus and
    must not be empty, so a stray Enter after the key that opened it sends nothing."""

    EXAMPLE = ""
    """The reason box's example with nothing wrong to name."""
    hint = ""
    """What the reason box suggests instead: what is wrong (``*_reason_hint``)."""

    def reason_box(self) -> "Box":
        return Box(placeholder=example_placeholder(self.hint or self.EXAMPLE), id="reason")

    def on_mount(self) -> None:
        self.query_one("#reason", Input).focus()

    def fit_body(self) -> None:
        super().fit_body()
        try:
            box = self.query_one("#reason", Input)
        except NoMatches:
            return
        room = box.content_region.width
        if room:
            box.placeholder = example_placeholder(self.hint or self.EXAMPLE, room)

    def submit(self, at_enter: dict[str, str] | None = None) -> None:
        at_enter = at_enter or {}
        box = self.query_one("#reason", Input)
        reason = at_enter.get("reason", box.value).strip()
        if not reason:
            self.query_one("#dialog-error", Static).update(f"[$error]{self.required}[/]")
            box.focus()
            return
        if self.confirmed(at_enter):
            self.dismiss(self.result(reason))

    @property
    def required(self) -> str:
        return f"a reason is required to {self.VERB}"

    def result(self, reason: str) -> ResultT:
        raise NotImplementedError


class DrainScreen(ReasonScreen[tuple[str, DrainMode] | None]):
    """Reason (required), mode (finish / now), typed confirmation above the threshold."""

    VERB = "drain"
    EXAMPLE = "planned maintenance"

    def __init__(self, radius: Callable[[DrainMode], BlastRadius],
                 mode: DrainMode = DrainMode.FINISH, hint: str = "") -> None:
        super().__init__()
        self._radius_for = radius
        self.mode = mode
        self.hint = hint
        """What the reason box suggests: the node's own worst finding."""
        self._radius_s = 0.0
        """How long the last radius took (``RADIUS_REFRESH_SHARE``)."""
        self._refresh_due = 0.0
        """perf_counter when the radius is next taken again (``_refresh_later``)."""
        self._refresh_in = 1
        """The interval's calls left until the radius is taken again (``_refresh_later``)."""
        self.radius = self._take_radius()

    def compose(self) -> ComposeResult:
        r = self.radius
        with Vertical(id="dialog", classes="dialog danger"):
            yield Static(f"[b]Drain {plural(len(r.targets), 'node')}[/]: {esc(r.hostlist)}",
                         id="dialog-title")
            with DialogBody(id="dialog-body"):
                yield Static(radius_text(r), id="radius")
            yield Label("Reason (required; shown as Reason=… [user@time]):")
            # With nothing wrong to name, a neutral example: "XID 79 on gpu3" was offered for
            # nodes that never had one (a 3 a.m. drive).
            yield self.reason_box()
            now = self.mode is DrainMode.NOW
            with RadioSet(id="mode"):
                yield Choice("finish: no new work, running jobs finish (Slurm DRAIN)",
                             value=not now, id="mode-finish")
                yield Choice("now: requeue running jobs from their last checkpoint"
                             + (" (suggested: failed under a job)" if now else ""),
                             value=now, id="mode-now")
            yield from self.footer("Drain", "error")

    def on_mount(self) -> None:
        self.query_one("#mode", RadioSet).compact = True
        super().on_mount()
        # An interval that looks whether a refresh is due, not a chain of one-shot timers:
        # Textual 8.2's one-shot timer can end without calling back on a loaded host, and the
        # chain ended with it (docs/reliability.md, "The console's tick").
        self._refresh_later()
        self.set_interval(RADIUS_REFRESH_S, self._refresh_if_due)

    def _take_radius(self) -> BlastRadius:
        t0 = time.perf_counter()
        radius = self._radius_for(self.mode)
        self._radius_s = time.perf_counter() - t0
        return radius

    def _refresh_later(self) -> None:
        every = max(RADIUS_REFRESH_S, self._radius_s / RADIUS_REFRESH_SHARE)
        # Counted in the interval's calls, not only by the clock: due a second after the last
        # radius with 50 ms to spare, one call 60 ms late (a loaded host) put the next due past
        # the next call, and the radius was taken every 2 s. The clock still counts calls the
        # interval skipped while the loop was held.
        self._refresh_in = math.ceil(every / RADIUS_REFRESH_S - 1e-9)
        self._refresh_due = time.perf_counter() + every

    def _refresh_if_due(self) -> None:
        self._refresh_in -= 1
        if self._refresh_in <= 0 or time.perf_counter() >= self._refresh_due:
            self._refresh_radius()

    def _refresh_radius(self) -> None:
        """The fleet moves on while the operator types the reason: a target that went offline,
        was retired or came back is said as it is now, not as it was when the dialog opened."""
        radius = self._take_radius()
        if radius != self.radius:
            self.radius = radius
            self.fit_body()
        self._refresh_later()

    @on(RadioSet.Changed, "#mode")
    def _mode(self, event: RadioSet.Changed) -> None:
        self.mode = DrainMode.NOW if event.pressed.id == "mode-now" else DrainMode.FINISH
        self.radius = self._take_radius()
        self.fit_body()

    def result(self, reason: str) -> tuple[str, DrainMode] | None:
        return reason, self.mode


class RestartScreen(ReasonScreen[str | None]):
    """Restart (requeue) a job: reason (required), typed confirmation above the threshold.

    A restart kills every rank and loses the work since the checkpoint. The reason box has
    focus and must not be empty, so `r` and a stray Enter restart nothing (an operator's
    walkthrough found that), and the audit says why the job was restarted: the dialog used to
    be a bare yes/no and the audit's ``why`` stayed empty."""

    VERB = "restart"
    EXAMPLE = "NCCL timeout at step 1200"

    def __init__(self, job_id: str, radius: BlastRadius, hint: str = "") -> None:
        super().__init__()
        self.job_id = job_id
        self.radius = radius
        self.hint = hint
        """What the reason box suggests: what holds the job up (``restart_reason_hint``)."""

    @property
    def required(self) -> str:
        return "a reason is required to restart a job"

    def compose(self) -> ComposeResult:
        r = self.radius
        with Vertical(id="dialog", classes="dialog danger"):
            yield Static(f"[b]Restart job {esc(self.job_id)}?[/]", id="dialog-title")
            with DialogBody(id="dialog-body"):
                yield Static(radius_text(r), id="radius")
            yield Label("Reason (required; kept in the audit log):")
            yield self.reason_box()
            yield from self.footer("Restart", "error")

    def result(self, reason: str) -> str | None:
        return reason


class ConfirmScreen(CommandScreen[bool]):
    """Yes/no with the targets and blast radius; typed confirmation above the threshold."""

    def __init__(self, title: str, radius: BlastRadius) -> None:
        super().__init__()
        self.title_text = title
        self.radius = radius
        self.VERB = title.split(maxsplit=1)[0].lower()

    def compose(self) -> ComposeResult:
        r = self.radius
        label = f"{self.title_text} {plural(len(r.targets), 'node')}: {r.hostlist}"
        with Vertical(id="dialog", classes="dialog"):
            yield Static(f"[b]{esc(label)}?[/]", id="dialog-title")
            with DialogBody(id="dialog-body"):
                yield Static(radius_text(r), id="radius")
            yield from self.footer(self.title_text.split()[0], "warning")

    def on_mount(self) -> None:
        if self.radius.needs_typed_confirmation:
            self.query_one("#confirm", Input).focus()
        else:
            self.query_one("#ok", Button).focus()

    def submit(self, at_enter: dict[str, str] | None = None) -> None:
        if self.confirmed(at_enter or {}):
            self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)


class QuitScreen(Modal[bool]):
    """Quit while commands are still open (k9s asks too): y (or ctrl+c again, the app's
    binding) quits, n or esc stays."""

    BINDINGS = [Binding("y", "answer(True)", "Quit"),
                Binding("n,escape", "answer(False)", "Stay")]

    MAX_LINES = 6

    def __init__(self, open_lines: list[str]) -> None:
        """``open_lines``: one line per open command (what, target, where it stands)."""
        super().__init__()
        self.open_lines = open_lines

    def compose(self) -> ComposeResult:
        n = len(self.open_lines)
        shown = self.open_lines[:self.MAX_LINES]
        body = [f"  • {esc(line)}" for line in shown]
        if n > len(shown):
            body.append(f"  … and {n - len(shown)} more")
        body.append("[$text-muted]quitting stops following them: the audit log records each "
                    "as abandoned, whatever the agents do next[/]")
        with Vertical(id="dialog", classes="dialog"):
            yield Static(f"[b]{plural(n, 'command')} still open: quit anyway? y/n[/]",
                         id="dialog-title")
            yield Static("\n".join(body), id="radius")
            with Horizontal(id="dialog-buttons"):
                yield Button("Quit (y, ctrl+c)", variant="warning", id="ok", compact=True)
                yield Button("Stay (n)", id="cancel", compact=True)

    def on_mount(self) -> None:
        # Stay is the safe answer to a stray enter.
        self.query_one("#cancel", Button).focus()

    def action_answer(self, quit_: bool) -> None:
        self.dismiss(quit_)

    @on(Button.Pressed, "#ok")
    def _quit(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#cancel")
    def _stay(self) -> None:
        self.dismiss(False)


HELP = """[b]Views[/]   1 overview · 2 nodes · 3 jobs · 4 fabric · 5 events · 6 incidents
        esc back (each view once) · q or ctrl+c quit (asks if commands are open; :q! does not)
        : command line: :nodes :jobs :fabric :events :incidents :node NAME :ctx NAME{rw_cmds}
        ctrl+p palette ("node: …", "job: …", "view: …") · ? this help
[b]Clusters[/] 0 every cluster watched (console --cluster a,b) · enter or :ctx NAME switches
[b]Lists[/]   ↑↓/jk move · pgup/pgdn · g/G top/bottom · enter open
[b]Overview[/] arrows/hjkl move on the grid · g/G first/last node · enter detail · / filter nodes
        m colour by health/util/temp/power · w worst node (again: next worst, W back)
        }} next leaf · {{ this/previous leaf · ) next rack · ( this/previous rack
        cells: ■ busy □ idle ⊟ out (idle on a failed node) ▲ degraded ✖ failed ◐ draining
        ○ drained · stale ⊘ offline - no GPU (a node without GPUs: storage, CPU)
        x missing GPU ? waiting for telemetry ↯ IB fault ≈ IB warn (port erroring, or
        failing with its suspect switch): the GPU is sound, the InfiniBand port of its rail
        is not
        GPUs: in use · free (on nodes that take work) · failed (a fault of its own) · out
        (sound, on a node that takes no new work: failed by a port, drained, draining, silent;
        a job still running there shows its GPUs ■ busy on the grid)
        under the grid, room permitting: jobs (held up by a node, a hang or a failure first,
        then slowed by a straggler), fabric by switch, last events
[b]Nodes[/]   / filter (regex: name, state, job, reasons, leaf, rack; hostlist gpu\\[0010-0020];
        !inverse) · ctrl+z unhealthy only
        space mark, move down · ctrl+backslash clear marks · o next sort col · O reverse{rw_nodes}
        grey italic figures: last known (node offline or stale; AGE says how old)
[b]Jobs[/]    / filter (regex, hostlist gpu\\[0010-0020]: jobs on them, !inverse)
        enter its nodes{rw_jobs}
[b]Fabric[/]  matrix: a row per rail switch (r0-r7) of each leaf group, a cell per node's port;
        arrows/hjkl move · enter the port's node · w worst port (W back) · }} / {{ leaf group
        ■ ok △ errors ▲ erroring ↯ flapping ✖ down · silent ? waiting ▶ suspected switch
        tab matrix → leaves → ports · enter a leaf's bad ports / a port's node
[b]Events[/]  / filter · c commands (this console's, and drains by anyone) · enter the node
[b]Incidents[/] one root-cause line each, worst first; ↑↓ shows its timeline · enter its nodes;
        the top line: job interruptions by cause and ETTR (fleetdeck report)
[b]Node[/]    {rw_node}h history charts from the store: s span 15 min/1 h/24 h · ←/→ time cursor
        (shift: 10 minutes, end newest) · h or esc back to the live tables
[b]State[/]   idle alloc mix drng drain down, * = not responding (stale telemetry)
[b]Record[/]  R records what this console receives (and the commands it sends) to a file;
        R again stops. fleetdeck replay FILE plays it back
[b]Commands[/] requested → acknowledged → done | rejected | failed | timed_out;
        done only when the effect shows in telemetry (DRAINED, back in service, requeued).
        Mode: {mode}"""


def help_sections(text: str) -> list[tuple[str, str]]:
    """``HELP``'s sections as (label markup, body markup): a line that starts with ``[b]``
    starts one, an indented line goes on with its body (a line of its own)."""
    out: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("[b]") and "[/]" in line:
            label, _, rest = line.partition("[/]")
            out.append((f"{label}[/]", [rest.strip()]))
        elif out:
            out[-1][1].append(line.strip())
    return [(label, "\n".join(body)) for label, body in out]


class HelpScreen(Modal[None]):
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def __init__(self, read_only: bool, extra: str = "", dropped: str = "", *,
                 pending: bool = False) -> None:
        super().__init__()
        self.read_only = read_only
        self.extra = extra
        """Keys of this front end's own, shown first (the replay console's)."""
        self.dropped = dropped
        """Why the broker drops this console's commands (``PublishProbe.why``), '' if not:
        the help said "[RW] commands enabled" under a header saying they are dropped."""
        self.pending = pending
        """Whether the broker delivers them is not known yet (``PublishProbe.pending``): the
        header's ``[RW?]``."""

    def compose(self) -> ComposeResult:
        rw = not self.read_only
        text = HELP.format(
            rw_cmds="\n        :drain HOSTLIST · :resume HOSTLIST · :restart JOB" if rw else "",
            rw_nodes="\n        r drain (reason, finish/now) · u resume (marked nodes or cursor)"
            if rw else "",
            rw_jobs=" · r restart (requeue from the last checkpoint)" if rw else "",
            rw_node="r drain · u resume this node\n        " if rw else "",
            mode="[$warning]\\[R] read-only: no command keys[/]; drain, resume and restart "
            "are for a read-write console" if self.read_only
            else f"[$error]\\[R?] commands unconfirmed[/]: {esc(self.dropped)}" if self.dropped
            else "[$text-muted]\\[RW?][/] commands enabled, each audited; checking that the "
            "broker delivers them: \\[RW] once its test publish comes back, \\[R?] commands "
            f"unconfirmed if not within {publish_probe.PROBE_WAIT_S:.0f} s" if self.pending
            else "[$success]\\[RW][/] commands enabled, each audited",
        )
        with Vertical(id="help", classes="dialog"):
            yield Static("[b]fleetdeck keys[/]  (esc to close)", id="dialog-title")
            with VerticalScroll():
                for label, body in help_sections(f"{self.extra}\n{text}" if self.extra
                                                 else text):
                    # A label column of its own: at 80 columns a wrapped line went back to
                    # the dialog's edge, under the section names (an operator's read).
                    with Horizontal(classes="help-section"):
                        yield Static(label, classes="help-label")
                        yield Static(body, classes="help-body")

    def action_close(self) -> None:
        self.dismiss(None)


class CommandLine(TypeAhead[str | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    KEYS_FOOTER = False  # a line at the bottom itself, in the footer's place

    def compose(self) -> ComposeResult:
        yield Box(placeholder=":nodes :jobs :fabric :events :incidents :overview :node NAME "
                    ":drain HOSTLIST :resume HOSTLIST :restart JOB :ctx NAME :q", id="cmdline")

    @on(Input.Submitted)
    def _submit(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)
