"""The console over a recording: the same views fed by ``console.replay.Player`` through the
same Ingest path as live MQTT, read-only by construction (Dolphie). Keys: ``p`` pause,
``]``/``[`` step one tick forward/back, ``n``/``N`` next/previous recorded event, ``+``/``-``
speed (0.5x-100x), ``:seek 90`` / ``:seek +10`` / ``:seek -30`` to a time in the recording.

A seek goes on in slices of the Player's work (``Player.work``, about SLICE_S each) with the
loop's other work in between, as a live backlog does: the header shows how far it got, keys stay
live, another seek turns it, ``p`` stops it there and pauses, ``esc`` stops it there."""

import math
import time
from pathlib import Path

from textual.binding import Binding

from fleetdeck.console.commands import fmt_duration
from fleetdeck.console.eventlog import EventLine
from fleetdeck.console.judgements import utc_hms
from fleetdeck.console.recording import damage_text, judged_note
from fleetdeck.console.replay import LINE_SLACK_S, SLICE_S, seek_note, seek_target
from fleetdeck.console.session import TickReport
from fleetdeck.console.tui.app import BACKLOG_PAINT_S, FleetdeckApp
from fleetdeck.console.tui.screens.base import FleetView, HeaderBar
from fleetdeck.console.tui.text import esc
from fleetdeck.protocol.ids import is_valid_id

NAME_CHARS = 24
"""The most of the recording's name the header shows (the rest is the replay's state)."""
MAX_ADVANCE_S = 5.0
"""The most wall time one tick moves the recording by: a console stalled for longer (a
suspended terminal) goes on from where it was rather than jumping over what it did not show."""



DAMAGE_NOTICE_S = 15.0
"""The replay console says new damage at most this often (``ReplayApp._tell_damage``)."""
WIDE_TOAST_W, WIDE_TOAST_H = 120, 40
"""A screen at least this wide and tall shows the judged-at-start note whole, with three
findings (a toast 60 wide, 12 tall); a smaller one a three-line note of node names."""


class ReplayApp(FleetdeckApp):
    BINDINGS = [
        *FleetdeckApp.BINDINGS,
        Binding("p", "pause", "Pause"),
        Binding("right_square_bracket", "step(1)", "Step", show=False),
        Binding("left_square_bracket", "step(-1)", "Back", show=False),
        Binding("n", "event(1)", "Next event"),
        Binding("N", "event(-1)", "Prev event", show=False),
        Binding("plus,equals_sign", "speed(2)", "Faster", show=False),
        Binding("minus", "speed(0.5)", "Slower", show=False),
    ]
    SPEEDS = (0.5, 100.0)
    read_only_why = "a replay is read-only"
    nothing_to_record = "a replay records nothing: it plays a recording already"
    HELP_EXTRA = (
        "[b]Replay[/]  p pause/play · ] / \\[ one tick on / back · n/N next/previous event\n"
        "        + faster · - slower (0.5x-100x) · :seek 90 (into the recording), :seek +10,\n"
        "        :seek -30, :seek 2h, :seek 02:13 (UTC), :seek start, :seek end, :seek gpu0005\n"
        "        (that node's next recorded event) · t in the events view: to that line's time\n"
        "        · esc stops a seek under way · at the end, p plays it again from the start")

    def __init__(self, path: Path, *, speed: float = 1.0, tick_s: float = 0.5,
                 log_path: Path | None = None) -> None:
        from fleetdeck.console.replay import Player

        self.player = Player(Path(path), speed=speed, tick_s=tick_s)
        super().__init__(cluster=self.player.cluster, session=self.player.session,
                         clock=self.player.clock, read_only=True,
                         broker_label=short_name(Path(path), self.player.cluster),
                         tick_s=tick_s,
                         operator="replay", log_path=log_path)

    _advanced_at: float | None = None
    _damage_told = 0
    _damage_said_at = -math.inf
    """Damaged parts of the recording already said (``_tell_damage``)."""

    def on_mount(self) -> None:
        # Textual calls FleetdeckApp.on_mount too (a handler per class of the MRO): calling
        # it here as well started every timer and signal handler twice.
        judged = self.player.reader.header.judged_at_start
        if judged:
            # The live console's judgement at the start may rest on the hour before it.
            if self.size.width < WIDE_TOAST_W or self.size.height < WIDE_TOAST_H:
                # The whole note and three findings took 12 of 24 rows, over half the node
                # detail, for 20 s (a fresh-clone walk-through at 80x24): three short lines.
                more = f" +{len(judged) - 3}" if len(judged) > 3 else ""
                names = ", ".join(j.node for j in judged[:3]) + more
                text = (f"its console judged {len(judged)} node(s) not ok at the start, maybe "
                        f"on findings the replay lacks: {names} (all: replay --headless "
                        "--summary-json)")
            else:
                names = ", ".join(j.text for j in judged[:3])
                text = f"{judged_note(len(judged))}; first: {names}"
            self.notify(esc(text), severity="warning", timeout=20)

    def tick(self, paint_later: bool = False) -> TickReport:
        # ``paint_later`` is the live console's: ``_next`` paints in a step of its own after a
        # long slice already. The recording moves with the wall clock at the player's speed,
        # not by a tick's length per tick: a backlog's slices are ticks too, ms apart, and
        # each moved it by tick_s, so a replay with a backlog ran many times faster than asked
        # and fed itself more backlog.
        now = time.monotonic()
        last, self._advanced_at = self._advanced_at, now
        p = self.player
        t0 = time.perf_counter()
        if p.seeking:
            p.work()
        else:
            p.advance(self.tick_s if last is None else min(now - last, MAX_ADVANCE_S))
        return self._next(time.perf_counter() - t0)

    def _next(self, worked_s: float) -> TickReport:
        """After a slice of the Player's work (``worked_s`` long): with more left (a seek, a
        tick or snapshot in part, a replay behind its speed), the next slice after the loop's
        other work and a key's paint, as for a live backlog, the seek's progress shown every
        BACKLOG_PAINT_S meanwhile (the header alone), a replay behind its speed painted every
        tick_s; else the console's tick and paint, in a callback of its own after a long slice
        (a slice and a paint in one held the loop for both)."""
        p = self.player
        if not (p.busy or p.behind):
            if worked_s < SLICE_S / 2:
                return self._show()
            self._cancel_slice()
            self._backlog_left = 0
            self.set_timer(0.001, self._show_when_idle)
            return TickReport(p.clock(), 0, frozenset(), [], [], 0, 0.0)
        self._cancel_slice()
        # The session is left alone meanwhile: between two pieces of the Player's work it
        # holds a tick in part, and the console's tick would apply that part on its own.
        self._backlog_left = 1
        now = time.perf_counter()
        if p.seeking:
            if now - self._last_paint >= BACKLOG_PAINT_S:
                self._show_progress()
            self._slice_later(0.001)
        elif now - self._last_paint < self.tick_s or self._key_waits(now):
            # Played faster than this machine replays: painted as often as the console ticks
            # (a paint of 1,024 nodes is 10-20 ms; ten a second slowed the replay by a third).
            self._slice_later(0.001)
        else:
            self._paint_later()
        return TickReport(p.clock(), 0, frozenset(), [], [], 0, 0.0, 1)

    def _show_when_idle(self) -> None:
        # Unless a key gave the Player more to do meanwhile: the session is not to be ticked.
        self._next(0.0)

    def _show_progress(self) -> None:
        """The header alone (how far the seek got), not the view's body: that waits for the
        seek to land, and the seek does not wait for it."""
        screen = self.screen
        if isinstance(screen, FleetView):
            header = screen.query(HeaderBar)
            if header:
                header.first().show(self.header_text(self.clock()))
        self._last_paint = time.perf_counter()

    def _go(self) -> None:
        """A move asked for by a key: its first slice now, so a short one (a step, a seek over
        what was played) is painted with the key; a long one shows its progress and goes on
        in slices (``_next``)."""
        self._advanced_at = time.monotonic()  # the time the seek takes is not played
        t0 = time.perf_counter()
        self.player.work()
        if self.player.seeking:
            self._show_progress()
        self._next(time.perf_counter() - t0)

    _sought: tuple[EventLine, float] | None = None
    """The line ``seek_line`` went to, and how far on it is looked for."""

    def _show(self) -> TickReport:
        """The console's own tick and paint, after the Player moved."""
        p = self.player
        sought = self._sought
        if sought is not None:
            if p.seeking or p.heading >= min(sought[1], p.end) or sought[0] in (
                    self.event_log.lines()):
                self._sought = None
            else:
                p.aim(p.heading + self.tick_s)
                t0 = time.perf_counter()
                p.work()
                return self._next(time.perf_counter() - t0)
        self._tell_end()
        # The Player ticks the session itself, each tick whole, as straight play does. The
        # console's tick after it, at the same time, finds nothing to apply and must not cut
        # a judgement pass short under the live console's budget either (on_mount sets it):
        # the rest would be left to the Player's next tick.
        self.session.apply_budget_s = None
        self._tell_damage()
        return super().tick()

    def _tell_damage(self) -> None:
        """Say what of the recording could not be read, as the reader meets it: a truncated
        file played to its cut and said "done", malformed 0 (a newcomer's run; the headless
        replay said so on stderr). Again when more is skipped; on exit on stderr too
        (``damage_on_exit``)."""
        report = self.player.reader.report
        now = time.monotonic()
        # At most one notice per DAMAGE_NOTICE_S (the header counts on): a badly damaged
        # file raised one every tick (a review).
        if report.skipped > self._damage_told and now - self._damage_said_at >= DAMAGE_NOTICE_S:
            self._damage_told, self._damage_said_at = report.skipped, now
            self.notify(esc(damage_text(report)), severity="warning", timeout=15)

    _end_told = False

    def _tell_end(self) -> None:
        """Say once that the recording has ended and what the keys do then: it stopped with
        "done" in the header and nothing else, and ``p`` seemed to do nothing there (a replay
        drill)."""
        p = self.player
        if not p.done or p.seeking:
            self._end_told = False
            return
        if self._end_told:
            return
        self._end_told = True
        # The header's clock (rounded): "done" at 23:02:40 over "end of the recording
        # (23:02:39 UTC…)" read as two ends (a newcomer's run).
        self.notify(esc(f"end of the recording ({position_clock(p.end)} UTC, "
                        f"{fmt_duration(round(p.end - p.start))} in): p plays it again from the "
                        "start; [ or :seek -30 looks back"), timeout=10)

    def damage_on_exit(self) -> str:
        """The sentence for stderr once the terminal is the shell's again ('' if none)."""
        return damage_text(self.player.reader.report)

    def link_text(self, now: float) -> str:
        # Where the replay stands comes first: at 80 columns the header's end is cut off,
        # and with it the position and PAUSED (p seemed to do nothing).
        # Clock times, as the views and ':seek' have them, and spans a person reads: raw
        # seconds ("51445.0/172680.0s" two days in) had to be worked out by hand (an SRE's run).
        p = self.player
        length = fmt_duration(round(p.end - p.start))
        at = length if now >= p.end else position_span(now - p.start)
        where = f"{position_clock(now)} UTC +{at}/{length} x{p.speed:g}"
        if p.target is not None:
            state = (f"[$accent b]seeking to {position_clock(p.target)} … "
                     f"{100 * p.progress:.0f} %[/]")
        else:
            state = "[$warning b]PAUSED[/]" if p.paused else ("done" if p.done else "playing")
        skipped = p.reader.report.skipped
        damaged = f" [$error]{skipped} damaged[/]" if skipped else ""
        return f"replay {where} {state}{damaged}  [$text-muted]{esc(self.broker_label)}[/]"

    def updated_text(self, now: float) -> str:
        p = self.player
        if (p.paused or p.done) and p.target is None:
            # "upd 0.0s ago" under PAUSED read as data still arriving (an SRE's run), and so
            # it did under "done", the clock stopped at the recording's end (a replay drill).
            return ""
        return super().updated_text(now)

    SPEED_STEPS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)
    """``+``/``-`` walk these: halving from x100 gave x50, x25, x12.5 … x0.78125, never x1 again
    (a replay audit)."""

    def action_speed(self, factor: float) -> None:
        p = self.player
        steps = self.SPEED_STEPS
        if factor > 1:
            p.speed = next((s for s in steps if s > p.speed + 1e-9), steps[-1])
        else:
            p.speed = next((s for s in reversed(steps) if s < p.speed - 1e-9), steps[0])
        p.speed = min(self.SPEEDS[1], max(self.SPEEDS[0], p.speed))
        self.notify(f"replay speed x{p.speed:g}", timeout=2)
        self.refresh_view()

    def run_command_line(self, text: str | None) -> None:
        words = (text or "").strip().lstrip(":").split()
        if words and words[0].lower() == "seek":
            if len(words) == 2:
                self.seek_to(words[1])
            else:
                self.notify("':seek' needs one time: :seek 90 (into the recording), :seek +10, "
                            ":seek -30, :seek 1h30m, :seek 04:02:30 (UTC), :seek start, "
                            ":seek end, or a node: :seek gpu0005 (its next recorded event)",
                            severity="warning")
            return
        super().run_command_line(text)

    def seek_to(self, arg: str) -> None:
        """``90`` = 90 s into the recording; ``+10``/``-30`` relative to now; ``2h``, ``+1h``;
        a UTC clock time (``seek_target``); ``start`` or ``end``."""
        p = self.player
        self._sought = None
        try:
            # The domain's one parser
            target = seek_target(arg, p.start, p.heading, p.end, nodes=True)
        except ValueError as err:
            if is_valid_id(arg) and (arg in p.node_events or arg in self.state.nodes
                                     or arg in p.recorded_nodes):
                self.seek_node(arg)
            else:
                self.notify(f"seek: {esc(str(err))}", severity="error")
            return
        note = seek_note(arg, target, p.start, p.end)
        if note:
            self.notify(f"seek: {esc(note)}", severity="warning")
        p.aim(target)
        self._go()

    def seek_node(self, node: str) -> None:
        """To the tick that shows ``node``'s next recorded event (``Player.node_event``),
        saying which one it is and when, so the operator knows where the replay went."""
        p = self.player
        found = p.node_event(node)
        if found is None:
            # Its verdict changes are the console's own judgement, not in the recording: the
            # events view lists them once played there.
            self.notify(f"seek: {esc(node)} has no recorded event (an XID, a link change, a "
                        "drain); its verdict changes are in the events view (5) once played "
                        "(:seek end)", severity="warning")
            return
        # Said at the tick it lands on, as the header says it: the event's own time can be
        # the second before.
        wrapped = found[1]
        at = position_clock(p.heading)
        again = (f" (no later one: back at its first, {at} UTC)" if wrapped else f" at {at} UTC")
        self.notify(f"seek: {esc(node)}'s next recorded event{again}; :seek {esc(node)} "
                    "again for the one after", timeout=6)
        self._go()

    def seek_line(self, line: EventLine) -> None:
        """To the tick that shows a timeline line (the events view's ``t``): found at the
        recording's end, "14:46:47 gpu0005 verdict ok -> failed" was to be typed back as
        ``:seek 14:46:47`` (a replay UX run), and a verdict change is in no recording for
        ``:seek gpu0005`` to find."""
        p = self.player
        p.aim(p.line_at(line.source, line.ts, line.from_agent(self.state.nodes)))
        # A line dated before the tick that made it (an interruption by the scheduler's
        # time) is not shown there: the tick on, until it is (``_show``).
        self._sought = (line, p.heading + LINE_SLACK_S)
        self.notify(esc(f"to the time of: {line.source} {line.kind} {line.text}"[:120]),
                    timeout=4)
        self._go()

    def action_pause(self) -> None:
        p = self.player
        if p.done and not p.seeking:
            # At the end, as a media player does: play it again (it toggled "done" to PAUSED
            # and back, and nothing moved).
            p.paused = False
            p.aim(p.start)
            self._go()
            return
        if p.seeking:
            # Stops the seek where it got (on a tick of straight play) and holds it there.
            p.cancel()
            p.paused = True
            self._go()
            return
        p.paused = not p.paused
        self.refresh_view()

    def action_go_back(self) -> None:
        p = self.player
        if p.seeking and isinstance(self.screen, FleetView):
            p.cancel()
            self.notify("seek stopped", timeout=2)
            self._go()
            return
        super().action_go_back()

    def action_step(self, direction: int) -> None:
        p = self.player
        self._sought = None
        p.aim(p.heading + direction * self.tick_s)
        self._go()

    def action_event(self, direction: int) -> None:
        p = self.player
        self._sought = None
        t = (p.next_event(wait=False) if direction > 0 else p.prev_event(wait=False))
        if t is None:
            self.notify("no more recorded events")
        self._go()


def position_clock(t: float) -> str:
    """Where the replay stands as a UTC clock time, to the nearest second: cut to the second,
    ``:seek 00:16:40`` read 00:16:39 (its tick is at 00:16:39.58: a replay drill)."""
    return utc_hms(round(t))


def position_span(seconds: float) -> str:
    """How far into the recording, as ``fmt_duration`` says it, with the half seconds of the
    tick grid under an hour (``+1m33.5s``): ``]`` moves by half a second, and in whole
    seconds every other step left the header as it was (it seemed to do nothing: a replay
    drill). Tenths are the room it takes; a clock time to the tenth cut the recording's name
    at 80 columns."""
    seconds = max(0.0, seconds)
    tenths = round(seconds * 10)
    if tenths % 10 == 0 or seconds >= 3600:
        return fmt_duration(tenths // 10)
    return f"{fmt_duration(tenths // 10)[:-1]}.{tenths % 10}s"


def short_name(path: Path, cluster: str) -> str:
    """The recording's name as the header shows it: what the console's ``R`` puts in every
    name (``fleetdeck-CLUSTER-``, ``.jsonl.gz``) is left out, the cluster being in the header
    already, and a long rest is cut in the middle (its start and its time stamp stay)."""
    name = path.name
    for suffix in (".gz", ".jsonl"):
        name = name.removesuffix(suffix)
    for prefix in ("fleetdeck-", f"{cluster}-"):
        if name.startswith(prefix) and len(name) > len(prefix):
            name = name[len(prefix):]
    if len(name) > NAME_CHARS:
        keep = NAME_CHARS - 1
        name = name[:keep // 2] + "…" + name[len(name) - (keep - keep // 2):]
    return name
