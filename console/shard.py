"""Which collector owns which node: rendezvous (highest random weight) hashing over the live
collectors, and the scope a sharded collector keeps (docs/architecture.md, "Sharded
collectors").

Why not Mosquitto's ``$share/<group>/…``: it hands out messages round-robin per message, so with
two collectors every node's samples reach both, and per-node state (counter deltas, windows,
``seq`` gaps, event tracking) breaks. Affinity needs every message of a node to reach one
collector: each collector subscribes to exactly its nodes' topics, and the owner of a node is the
live member with the highest hash of ``(member, node)``. Adding a member moves only the nodes it
now wins (about 1/N of them); losing one moves only the nodes it owned.

Pure: no MQTT, no clock of its own. The session feeds it collector births and wills (through the
ingest), node ids (from the retained births) and, each tick, the time and the console's blind
spell (``settle``); it answers ``owns(node)`` and says which nodes were gained and lost since it
was last asked.

A peer's ``online: false`` is not believed at once. A Mosquitto that shuts down gracefully
(``systemctl restart mosquitto``) sends the Last Will of every client it drops, so a collector
gets the wills of the peers dropped before it and would take over all their nodes for the few
seconds until they announce themselves again: every collector subscribed to the whole fleet just
as the broker comes back with its retained flood. The same rule as for node wills
(``WILL_BURST_S``, docs/protocol.md, "Wills of a broker that shuts down"): a peer's offline
counts after ``WILL_BURST_S`` with this collector still connected; one that arrived just before
this collector lost the broker, or while it was cut off, counts only if the peer has not
announced itself again by the time the agents are back (the blind's end).

A peer can also go without a will: killed while the broker was down (a crashed host that ran
both), its retained birth lost with a non-persistent broker or kept by a persistent one. Its
nodes were orphaned for good. Every collector announces itself on each connect and every
``ANNOUNCE_EVERY_S``, and the broker re-sends the retained births on every (re)subscribe, so a
peer not heard from since this collector's last connect (``REANNOUNCE_GRACE_S`` after it), or
for ``MEMBER_SILENT_S``, is gone.
"""

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from fleetdeck.console.state import AGENT_RECONNECT_S, WILL_BURST_S, Blind
from fleetdeck.errors import UserError
from fleetdeck.protocol.ids import is_valid_id
from fleetdeck.protocol.messages import CollectorStatus

ANNOUNCE_EVERY_S = 30.0
"""A collector re-sends its birth this often with its node count (for people and dashboards,
and so that a peer that vanished without a will is noticed: ``MEMBER_SILENT_S``)."""
MEMBER_SILENT_S = 2.5 * ANNOUNCE_EVERY_S
"""A peer not heard from this long (two announcements missed, and a slow one) is gone."""
REANNOUNCE_GRACE_S = AGENT_RECONNECT_S
"""After this collector (re)connects, how long its peers have to be heard from again: the
broker re-sends their retained births at once, and after a broker restart they reconnect
within their back-off (10 s at most, docs/reliability.md)."""

MAX_KNOWN_NODES = 1_000_000
"""Node ids remembered at most (they come from the network: a hostile publisher must not
exhaust memory)."""


def weight(member: str, node: str) -> int:
    """The rendezvous weight of ``node`` for ``member``: stable across processes and Python
    versions (``hash()`` is salted per process, so it cannot be used)."""
    digest = hashlib.blake2b(f"{member}\x00{node}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def owner(node: str, members: Iterable[str]) -> str | None:
    """The member that owns ``node`` (None when there is no member); ties (never in practice)
    go to the smaller member id so every collector agrees."""
    best: tuple[int, str] | None = None
    for m in members:
        w = weight(m, node)
        if best is None or w > best[0] or (w == best[0] and m < best[1]):
            best = (w, m)
    return None if best is None else best[1]


def assign(nodes: Iterable[str], members: Iterable[str]) -> dict[str, str]:
    """Owner per node."""
    ms = sorted(set(members))
    return {n: o for n in nodes if (o := owner(n, ms)) is not None}


_SHARD_RE = re.compile(r"(\d+)/(\d+)")


@dataclass(frozen=True)
class ShardSpec:
    index: int
    count: int

    @property
    def member(self) -> str:
        """The collector id ``--shard K/N`` runs as."""
        return f"shard-{self.index}"

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> ShardSpec:
    """``K/N`` with 1 <= K <= N; anything else is one sentence."""
    m = _SHARD_RE.fullmatch(text.strip())
    if m is None:
        raise UserError(f"--shard '{text[:40]}' is not K/N (e.g. 2/3: the second of three "
                        "collectors)")
    k, n = int(m.group(1)), int(m.group(2))
    if not 1 <= k <= n:
        raise UserError(f"--shard {k}/{n}: K must be between 1 and N")
    return ShardSpec(k, n)


@dataclass
class Member:
    collector: str
    online: bool
    started: int
    seen_at: float
    gone: bool = False
    """Its ``online: false`` is believed, or it fell silent (``ShardScope.settle``): it owns
    no nodes until it announces itself again."""


class ShardScope:
    """One collector's view of the members and of the nodes it owns."""

    def __init__(self, me: str, started_ms: int) -> None:
        if not is_valid_id(me):
            raise UserError(f"collector id '{me[:64]}' is not a valid id")
        self.me = me
        self.started_ms = started_ms
        self.members: dict[str, Member] = {}
        """Every collector heard of, live or not (the live ones own nodes)."""
        self.known: set[str] = set()
        """Node ids seen in births (retained: every node that ever announced itself)."""
        self.owned: set[str] = set()
        self._live: tuple[str, ...] = (me,)
        self._reported: set[str] = set()
        """``owned`` as the last ``take_changes`` answered it."""
        self._dirty = False
        self.unknown_dropped = 0
        self.membership_changes = 0
        self.wills_unbelieved = 0
        """Peers' ``online: false`` that they took back (announced themselves again) before it
        was believed: a broker that shut down, not a collector that left."""
        self.clobbered = False
        """A will of another process under this collector's id came (a twin that died): it
        replaced this collector's retained birth, so peers and consoles read it gone until it
        announces itself again, which it should do now (``ShardRunner``)."""
        self.twin: CollectorStatus | None = None
        """A live birth under this collector's own id from another process (two collectors
        started with the same --shard K): both would own the same nodes."""

    @property
    def live(self) -> tuple[str, ...]:
        """The members that own nodes: the live collectors, this one always among them."""
        return self._live

    def owns(self, node: str) -> bool:
        return node in self.owned

    def learn(self, node: str) -> bool:
        """A node id from a birth topic; return whether this collector owns it."""
        if node not in self.known:
            if len(self.known) >= MAX_KNOWN_NODES:
                self.unknown_dropped += 1
                return False
            self.known.add(node)
            if owner(node, self._live) == self.me:
                self.owned.add(node)
                self._dirty = True
        return node in self.owned

    def forget(self, node: str) -> None:
        """``node`` was retired (its retained birth cleared: docs/protocol.md, "Retiring a
        node"): no longer known nor owned, so ``take_changes`` counts it lost once (its topics
        let go) and a birth under its name is learnt afresh. Kept, a collector stayed
        subscribed to a retired node's topics for good and counted it in its ``nodes``."""
        self.known.discard(node)
        if node in self.owned:
            self.owned.discard(node)
            self._dirty = True

    def observe(self, msg: CollectorStatus, rx: float) -> bool:
        """A collector's birth or will; return whether the live members changed."""
        if msg.collector == self.me:
            # Our own retained birth, a will of an earlier run of us, or a twin.
            if msg.online and msg.started != self.started_ms:
                self.twin = msg
            elif not msg.online and msg.started != self.started_ms:
                self.clobbered = True
            return False
        old = self.members.get(msg.collector)
        if old is not None and msg.started < old.started and not (msg.online and not old.online):
            # A late will of an older process of that collector. Not the birth of an older
            # process that still runs after a newer twin under its id died: its will read as
            # the older one's death, for good (both births ignored as "older"), so the peers
            # took its nodes while it kept publishing their digests: 13 of 32 nodes with two
            # owners, digests alternating between them (an SRE drill).
            return False
        if (old is not None and not msg.online and not old.online
                and msg.started == old.started):
            return False  # the same goodbye again (retained, re-sent): keep when it came
        if old is not None and msg.online and not old.online and not old.gone:
            self.wills_unbelieved += 1  # it came back before its goodbye was believed
        self.members[msg.collector] = Member(msg.collector, msg.online, msg.started, rx)
        return self._relive()

    def settle(self, now: float, blind: Blind | None, connected_at: float | None) -> bool:
        """Believe the peers' ``online: false`` that are old enough, and give up on the peers
        that fell silent (see the module's docstring); return whether the live members
        changed. ``blind`` is the console's last spell without the broker
        (``FleetState.blind``), ``connected_at`` when it last (re)connected."""
        changed = False
        sightless = blind is not None and (blind[1] is None or now < blind[1])
        for m in self.members.values():
            if m.gone:
                continue
            if (_goodbye_counts(m, now, blind) if not m.online
                    else not sightless and _fell_silent(m, now, connected_at)):
                m.gone = changed = True
        return self._relive() if changed else False

    def _relive(self) -> bool:
        live = tuple(sorted({self.me, *(m.collector for m in self.members.values()
                                        if not m.gone)}))
        if live == self._live:
            return False
        self._live = live
        self.membership_changes += 1
        self.owned = {n for n, o in assign(self.known, live).items() if o == self.me}
        self._dirty = True
        return True

    def take_changes(self) -> tuple[set[str], set[str]]:
        """(nodes gained, nodes lost) since the last call: what to subscribe to and what to
        drop. A node gained and lost again in between is neither."""
        if not self._dirty:
            return set(), set()
        self._dirty = False
        gained, lost = self.owned - self._reported, self._reported - self.owned
        self._reported = set(self.owned)
        return gained, lost


def _goodbye_counts(m: Member, now: float, blind: Blind | None) -> bool:
    """Whether a peer's ``online: false`` is to be believed now: ``WILL_BURST_S`` after it came
    with the connection up; one that came just before the broker was lost, or while cut off,
    only once the agents (and peers) have had time to reconnect, the blind's end."""
    if (blind is not None and blind[0] - WILL_BURST_S <= m.seen_at
            and (blind[1] is None or m.seen_at < blind[1])):
        return blind[1] is not None and now >= blind[1]
    return now - m.seen_at >= WILL_BURST_S


def _fell_silent(m: Member, now: float, connected_at: float | None) -> bool:
    """Whether a peer that said it is online has not been heard from since this collector
    (re)connected, ``REANNOUNCE_GRACE_S`` after it, or for ``MEMBER_SILENT_S``."""
    unheard = (connected_at is not None and m.seen_at < connected_at
               and now - connected_at >= REANNOUNCE_GRACE_S)
    return unheard or now - m.seen_at > MEMBER_SILENT_S
