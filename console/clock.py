"""Rule T1: a node whose clock is off (docs/architecture.md, "Health rules"; docs/real-nodes.md).

An agent stamps each sample with its own clock (``ts``); the console notes when it received it
(``rx``). ``rx - ts`` is the console's clock minus the node's, plus whatever the network, the
broker and the console's own backlog added: those only ever add, so the lowest ``rx - ts`` of a
window is the offset's bound, and a delayed sample never makes a node look ahead. A console that
falls behind under load adds its backlog to every node alike, so a node is judged against the
fleet's median offset, not against the console's clock, whenever most of the fleet agrees on
one; then a median far from the console's own says that the console is off (its clock, or its
backlog), and no node is flagged for it (``ClockWatch.console_off``).

Why it matters: an agent judges a command's expiry by its own clock, with no allowance
(agents/guard.py ``EXPIRY_SKEW_MS``), so one ahead of the console by more than a command's
lifetime refused it as expired, and one behind acted on it after the console's wait; one behind
shows its events (a drain, an XID) that much in the past. A 2026-12-07 drill found nothing said
so. Commands to a node are now stamped in its clock by the same offset
(``ClockWatch.on_node_clock``, docs/protocol.md "Command expiry").
"""

import math
from dataclasses import dataclass

from fleetdeck.protocol.messages import Command
from fleetdeck.protocol.signing import MAX_CLOCK_SKEW_MS

from .health import Finding, Severity

CLOCK_RULE = "T1"
CLOCK_WARN_S = 5.0
"""A clock this far off the fleet's (or the console's) gets T1: chrony keeps a synced node
within milliseconds, and the console's figures are per second; 5 s is past any broker or network
delay the window's lowest sample keeps."""
CLOCK_CLEAR_S = 4.0
"""T1 clears below this: an offset hovering at 5 s must not flip the node every judgement."""
CLOCK_REFUSED_S = 10.0
"""A node this far ahead of the console refuses its commands as expired: a TUI's command lives
this long (console/commands.py ``ACK_TIMEOUT_S``; a test keeps them equal) and an agent allows
nothing past its expiry (agents/guard.py ``EXPIRY_SKEW_MS``). Of a console that stamps by its
own clock: one with an offset of the node stamps its commands in the node's clock
(``ClockWatch.on_node_clock``)."""
CLOCK_FUTURE_S = MAX_CLOCK_SKEW_MS / 1000
"""A signed command from a console this far ahead of a node reads as issued in the future
(fleetdeck/protocol/signing.py)."""
CLOCK_BUCKET_S = 30.0
"""The running minimum is kept per bucket of this long, two buckets: an offset rests on the last
30-60 s of samples, so a fixed clock clears T1 within a minute."""
CLOCK_QUORUM = 3
"""Nodes with an offset needed before the fleet's median outvotes the console's clock."""
CLOCK_JUDGE_EVERY_LARGE_S = 10.0
"""How often a large fleet's offsets are judged (on a grid of the console's clock): a judgement
is a pass over every node and a sort. A smaller one is judged at every fleet-wide pass, so what
it says is of the tick's own state: a replay that seeks lands where straight play does, and a
one-shot ``status`` judges its last tick."""
CLOCK_LARGE_FLEET = 2048
CLOCK_SHIFT_S = 1.0
"""A command to a node whose offset is within this of the console's clock is stamped by the
console's clock, as it always was (``ClockWatch.on_node_clock``): a synced node's offset reads
as its samples' delivery delay (milliseconds), and the operator's "timed out" comes at a
console tick. Past it, the command is stamped in the node's clock."""
CLOCK_ACTION = "check the node's time sync (chronyc tracking)"
REFUSES = "it refuses as expired the commands of a console that has not heard its samples"
"""Of a console on digests, or one not yet heard from it: they stamp a command by their own
clock; one that has heard it stamps in its clock (``ClockWatch.on_node_clock``)."""

_INF = math.inf

# node -> (bucket, lowest rx - ts of that bucket, lowest of the bucket before it)
_Held = tuple[int, float, float]


@dataclass(frozen=True, slots=True)
class FleetClock:
    """What the last judgement found of the fleet as a whole (``status --json``: ``clock``)."""

    nodes: int
    """Nodes with an offset in the window."""
    median_s: float
    """The fleet's median offset: this console's clock minus the nodes' (+: the nodes behind)."""
    agree: int
    """Nodes within ``CLOCK_WARN_S`` of the median."""
    console_off: str
    """Non-empty when most of the fleet agrees on a clock this console's is off from."""

    @property
    def by_fleet(self) -> bool:
        """Whether nodes are judged against the fleet's median (else the console's clock)."""
        return self.nodes >= CLOCK_QUORUM and 2 * self.agree > self.nodes

    def as_json(self) -> dict[str, object]:
        return {"nodes": self.nodes, "median_offset_s": round(self.median_s, 3),
                "agree": self.agree, "reference": "fleet" if self.by_fleet else "console",
                "console_off": self.console_off or None}


NO_FLEET_CLOCK = FleetClock(0, 0.0, 0, "")


class ClockWatch:
    """Per node, the running minimum of ``rx - ts``; per judgement, T1 findings."""

    def __init__(self) -> None:
        self.lag: dict[str, _Held] = {}
        self.shown: dict[str, tuple[float, bool, bool]] = {}
        """node -> the offset (s, node ahead of the reference: +), whether commands are refused,
        and whether against the fleet, as its T1 says: rewritten only when one moves (the text
        of an offset that wavers at a rounding edge would change the node's shape each pass)."""
        self.findings: dict[str, Finding] = {}
        """The T1 finding of each node that has one."""
        self.judged_at = -_INF
        self.fleet = NO_FLEET_CLOCK
        self.last: dict[str, float] = {}
        """node -> ``rx - ts`` of its latest sample: what a command is stamped by
        (``on_node_clock``)."""
        self.settle_until = -_INF
        """After this console's clock stepped (``stepped``), until this time a node with no
        offset yet keeps its T1: every offset starts again from the node's next sample."""
        self.settle_nodes = 0
        """How many nodes had an offset when the clock stepped: until as many have one again
        (or ``settle_until``), nothing is judged. Judged on the first few, a step back read
        them off the console's clock, too few to outvote it (``CLOCK_QUORUM``): T1 on each."""
        self.old_clock: tuple[float, float] | None = None
        """After a step: received times in this span (low, high: before the step's edge, for
        a step forward; the old clock's last tick, for one back) are of samples received
        before the step and noted after it: left out, as they were left out of the ingest's
        delays."""

    def note(self, node: str, rx: float, ts_ms: int) -> None:
        """A sample of ``node`` stamped ``ts_ms`` by its clock, received at ``rx`` by ours."""
        if self.old_clock is not None:
            low, high = self.old_clock
            if low < rx <= high:
                return
        lag = self.last[node] = rx - ts_ms / 1000
        bucket = int(rx // CLOCK_BUCKET_S)
        held = self.lag.get(node)
        if held is None or bucket > held[0] + 1:
            self.lag[node] = (bucket, lag, _INF)
        elif bucket == held[0]:
            if lag < held[1]:
                self.lag[node] = (bucket, lag, held[2])
        elif bucket == held[0] + 1:
            self.lag[node] = (bucket, lag, held[1])
        elif lag < held[1]:  # the console's clock went back: keep to the newer bucket
            self.lag[node] = (held[0], lag, held[2])

    def stepped(self, now: float, step: float) -> None:
        """This console's wall clock was stepped by ``step`` s (detected at ``now``, within a
        tick): the offsets held were of the old clock. Mixed with the new one's, a step back
        of 2 min read the nodes that had sampled since as 120 s ahead and the rest not, so no
        majority agreed and 10 of 16 healthy nodes were written ``ok -> degraded (T1)`` and
        back within a second (a 2026-12-07 drill)."""
        self.settle_nodes = len(self.lag)
        self.lag.clear()
        self.last.clear()  # of the old clock: a command is stamped as ours until a sample
        self.settle_until = now + CLOCK_BUCKET_S
        # A sample received before the step was stamped at most ``now - step`` by the old
        # clock and after the tick before (``now - step`` less a tick); one received after
        # it, at least a tick's length past ``now - step`` (a step forward) or at most ``now``
        # (back). These edges sit between the two for any step over 2 s (the session's
        # ``CLOCK_STEP_S``) at ticks of 0.5 s at most; a sample left out by mistake costs
        # nothing but itself. Back, the span ends where the old clock stood: left open above
        # it, every sample was left out once the new clock got there (|step| s on), for good.
        self.old_clock = ((-_INF, now - step / 2) if step > 0
                          else (now - step - 1.0, now - step))

    def offset(self, node: str, now: float) -> float | None:
        """``node``'s offset at ``now``: our clock minus its, at most (+: the node is behind);
        None without a sample in the window."""
        held = self.lag.get(node)
        if held is None:
            return None
        bucket = int(now // CLOCK_BUCKET_S)
        if bucket > held[0] + 1:
            return None
        return held[1] if bucket == held[0] + 1 else min(held[1], held[2])

    def on_node_clock(self, cmd: Command, node: str, now: float,
                      duplicate: bool = False) -> Command:
        """``cmd`` (stamped by this console's clock) as sent to ``node``: ``issued_at`` and
        ``expires_at`` moved by how far ahead of ours ``node``'s clock reads, so that its agent,
        which judges expiry by its own clock with no allowance (agents/guard.py
        ``EXPIRY_SKEW_MS``), refuses it when our wait for it ends: a node 30 s ahead no longer
        refuses every command, one 30 s behind no longer acts 30 s after the operator read
        "timed out" (docs/protocol.md, "Command expiry").

        The shift is ``-(rx - ts)`` of the node's latest sample (or of a new agent process's
        birth, ``new_process``): how far ahead the node is, never overstated (delays only add
        to ``rx - ts``, docs/real-nodes.md "Time sync"), so the node reaches ``expires_at``
        at or before our deadline, never after; a console reading samples late (its backlog)
        only makes commands expire earlier. Not the window's lowest ``rx - ts`` (T1's,
        ``offset``): a node whose clock was set back since (its time sync fixed, as T1 asks)
        kept that for up to a minute, and a command stamped by it stayed valid on the node up
        to the old offset past our wait.
        Unchanged: a node with no sample in the window (no estimate: as before), one within
        ``CLOCK_SHIFT_S``, and the lifetime (``expires_at - issued_at``), which the signature
        limit and a recording's reader go by. Called on every send, a re-send included, before
        signing: the shifted stamps are what is signed.

        ``duplicate``: two machines publish as ``node`` (H3), and the latest sample may be
        the other's: the command is only ever moved earlier. A clone 30 s ahead read last
        stamped the drain 30 s into the future of the synced clone that took the session
        back, valid there 30 s past our wait (a review)."""
        if self.offset(node, now) is None:  # no sample in the window
            return cmd
        off = self.last[node]
        if abs(off) <= CLOCK_SHIFT_S:
            return cmd
        # Down to the ms, so rounding never moves the expiry past what the offset allows.
        shift_ms = math.floor(-off * 1000)
        if duplicate and shift_ms > 0:
            return cmd
        return cmd.model_copy(update={"issued_at": cmd.issued_at + shift_ms,
                                      "expires_at": cmd.expires_at + shift_ms})

    def new_process(self, node: str, rx: float, ts_ms: int) -> None:
        """``node``'s session opened (its birth, stamped ``ts_ms``, heard at ``rx``) with another
        agent process than its latest sample's: a restart, a rebooted or replaced machine under
        its id, a clone taking the session. Its clock may be another, so commands are stamped
        by the birth's ``rx - ts`` until the new process's first sample, not by the old one's:
        a node 30 s ahead rebooted with its clock set right got the re-send of its drain
        stamped 30 s into its future (a review). A retained birth heard late (its age adds to
        ``rx - ts``) only makes them expire earlier, as a delayed sample does. T1's window is
        kept: it reads the lowest ``rx - ts`` of a minute, as before."""
        if node in self.lag:  # else nothing is stamped by it (``on_node_clock``)
            self.last[node] = rx - ts_ms / 1000

    def forget(self, node: str) -> None:
        self.lag.pop(node, None)
        self.last.pop(node, None)
        self.shown.pop(node, None)
        self.findings.pop(node, None)

    def due(self, now: float, nodes: int) -> bool:
        if nodes < CLOCK_LARGE_FLEET or self.judged_at == -_INF:
            return True
        every = CLOCK_JUDGE_EVERY_LARGE_S
        return now // every != self.judged_at // every

    def judge(self, now: float) -> dict[str, Finding | None]:
        """Judge every node's offset at ``now``; return the nodes whose T1 changed (None: it
        cleared)."""
        self.judged_at = now
        offsets: dict[str, float] = {}
        bucket = int(now // CLOCK_BUCKET_S)
        gone: list[str] = []
        for node, (at, low, before) in self.lag.items():  # ``offset`` inline: every node
            if bucket > at + 1:
                gone.append(node)  # silent for a window: nothing to judge it by
            else:
                offsets[node] = low if bucket == at + 1 or low < before else before
        for node in gone:
            del self.lag[node]
            self.last.pop(node, None)
        if now < self.settle_until and len(offsets) < self.settle_nodes:
            return {}
        self.fleet = fleet = _fleet(offsets)
        ref = fleet.median_s if fleet.by_fleet else 0.0
        changed: dict[str, Finding | None] = {}
        settling = now < self.settle_until
        for node in list(self.findings):
            if node not in offsets and not settling:
                # Its offset left the window (a silent node: H1 says so) or it left the scope.
                del self.findings[node]
                self.shown.pop(node, None)
                changed[node] = None
        for node, off in offsets.items():
            ahead = ref - off  # + : the node's clock is ahead of the reference
            had = self.findings.get(node)
            limit = CLOCK_CLEAR_S if had is not None else CLOCK_WARN_S
            if abs(ahead) <= limit:
                if had is not None:
                    del self.findings[node]
                    self.shown.pop(node, None)
                    changed[node] = None
                continue
            refused = -off > CLOCK_REFUSED_S
            shown = self.shown.get(node)
            if (had is not None and shown is not None and abs(shown[0] - ahead) < 1.0
                    and shown[1] is refused and shown[2] is fleet.by_fleet):
                continue
            self.shown[node] = (ahead, refused, fleet.by_fleet)
            f = Finding(CLOCK_RULE, Severity.WARN, "", _text(ahead, -off, fleet))
            if f != had:
                self.findings[node] = f
                changed[node] = f
        return changed


def _fleet(offsets: dict[str, float]) -> FleetClock:
    if not offsets:
        return NO_FLEET_CLOCK
    values = sorted(offsets.values())
    n = len(values)
    median = values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2
    agree = sum(1 for v in values if abs(v - median) <= CLOCK_WARN_S)
    off = ""
    if n >= CLOCK_QUORUM and 2 * agree > n and abs(median) > CLOCK_WARN_S:
        # Most of the fleet agrees on a clock the console's is off from: the console is the
        # odd one (its clock, or, with the nodes read behind, its own backlog), not the fleet.
        if median > 0:
            off = (f"{agree} of {n} nodes read {median:.0f} s behind this console: its clock is "
                   "ahead, or it reads their samples late (its backlog)")
            if median > CLOCK_FUTURE_S:
                off += "; signed commands from it read as issued in the future"
        else:
            off = (f"{agree} of {n} nodes read {-median:.0f} s ahead of this console: its clock "
                   "is behind")
            if -median > CLOCK_REFUSED_S:
                off += "; they refuse as expired its commands to any it has not heard yet"
        off += f": {CLOCK_ACTION.replace('the node', 'this host')}"
    return FleetClock(n, median, agree, off)


def _text(ahead: float, ahead_of_console: float, fleet: FleetClock) -> str:
    # No counts in the text: it would change (and the node's shape with it) as nodes come
    # and go; ``status --json``'s ``clock`` has them.
    of = ("the fleet's (most nodes agree: this node's is off)" if fleet.by_fleet
          else "this console's (too few nodes agree to tell which is off)")
    text = (f"clock {ahead:.0f} s ahead of {of}" if ahead > 0
            else f"clock {-ahead:.0f} s behind {of}; its events read that much in the past")
    if ahead_of_console > CLOCK_REFUSED_S:
        text += f"; over {CLOCK_REFUSED_S:.0f} s ahead of this console, {REFUSES}"
    return text
