"""Who else holds this client's session: a broker that drops a client's connections within
seconds of accepting them, again and again, is taking the session over for another client with
the same client id (docs/reliability.md, "Two clients with one client id")."""

import time
from collections.abc import Callable

from fleetdeck.brokerurl import OVERSIZE_AFTER_S, BrokerURL

TAKEOVER_SHORT_S = 10.0
"""A connection the broker drops sooner than this after accepting it is a short one."""
TAKEOVER_SHORT_SESSIONS = 3
"""Short ones in a row, the broker reachable each time, before the takeover is said."""
TAKEOVER_END_S = 3 * TAKEOVER_SHORT_S
"""A connection that outlives this ends an episode: a peer that reconnects 9-11 s after each
takeover made "dropped …" and "the takeovers stopped" alternate while both were still there."""
TAKEOVER_REMIND_S = 300.0
"""While an episode lasts, its losses are said again this often (how many, for how long): said
once, a broker that drops the client for good read as quiet while nothing was published."""
OVERSIZE_MIN_BYTES = 1024
BROKER_LOG = ("The broker's log says why ('already connected, closing old connection' is a "
              "takeover; another reason, such as an oversize packet, is no other client).")
"""Said with the takeover: the same pattern has other causes the broker alone knows."""



def dropped_after_publish(last_sent: tuple[float, int, bool] | None, lost_at: float,
                          taken: int) -> int | None:
    """The size of the publish a loss at ``lost_at`` came right after (``TakeoverWatch.lost``'s
    ``after_publish``), or None: ``last_sent`` (``brokerurl``'s) was the connection's largest so
    far, within ``OVERSIZE_AFTER_S``, and larger than ``taken``, the largest publish the
    broker is known to have read (its connection outlived it). One no larger cannot be over the
    broker's ``max_packet_size``: two agents of one node, each kicked by the other as it sent a
    sample no larger than those the broker took before, read as "max_packet_size is most likely
    below that" (a review: wire 1 samples, each the largest so far by ties)."""
    if last_sent is None or not last_sent[2] or last_sent[1] <= taken:
        return None
    return last_sent[1] if lost_at - last_sent[0] <= OVERSIZE_AFTER_S else None

class TakeoverWatch:
    """A client whose connections the broker keeps dropping within seconds of accepting them:
    another client with the same client id takes the session over each time, and is taken
    over in turn (two agents or simulators for one node: docs/reliability.md, "Two clients
    with one client id"). MQTT 3.1.1, which every client here speaks, gives no reason: the
    broker closes the socket (MQTT 5 would send DISCONNECT 0x8E, session taken over), so the
    pattern is what tells. ``lost`` says so once per episode, ``remind`` every ``remind_s``
    while it lasts; an episode ends when a connection outlives ``end_s``, or when a connect is
    refused or finds no broker (the broker itself went: a crash-looping broker, up a few
    seconds each time, is no other client)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 short_s: float = TAKEOVER_SHORT_S,
                 needed: int = TAKEOVER_SHORT_SESSIONS,
                 end_s: float = TAKEOVER_END_S,
                 remind_s: float = TAKEOVER_REMIND_S) -> None:
        self.clock = clock
        self.short_s = short_s
        self.needed = needed
        self.end_s = end_s
        self.remind_s = remind_s
        self.short = 0
        """Accepted connections dropped within ``short_s``, in a row."""
        self.said = False
        self.episode_short = 0
        """Short connections since the episode was said (``remind`` counts them)."""
        self._said_at = 0.0
        """When the episode was said (``remind``: for how long)."""
        self._reminded_at = 0.0
        self._since: float | None = None
        """When the broker accepted the current connection (None: not connected)."""
        self.oversize: list[int] = []
        """The short connections in the count that ended right after their largest publish so
        far (``lost``'s ``after_publish``): its size each."""

    def accepted(self) -> None:
        """The broker accepted a connection (its CONNACK)."""
        self._since = self.clock()

    def lost(self, accepted: bool, timed_out: bool = False,
             after_publish: int | None = None) -> bool:
        """A connection attempt ended in a loss; ``accepted``: the broker had accepted it;
        ``timed_out``: a connect the broker did not answer in time (too busy: says nothing
        either way); ``after_publish``: the size of the connection's largest publish so far
        when the loss came within ``OVERSIZE_AFTER_S`` of it (``brokerurl``'s
        ``last_sent``). A connect refused or unreachable ends the count: the broker went.
        True the first time the pattern holds in an episode: the caller says it then."""
        since, self._since = self._since, None
        if not accepted or since is None:
            if not timed_out:
                self._reset()
            return False
        held = self.clock() - since
        if held >= self.end_s:
            self._reset()
            return False
        if held >= self.short_s:
            self.short = 0  # not a short one; an episode that was said goes on (``end_s``)
            self.oversize = []
            return False
        self.short += 1
        if after_publish is not None and after_publish >= OVERSIZE_MIN_BYTES:
            self.oversize = [*self.oversize[-(self.needed * 4):], after_publish]
        else:
            self.oversize = []
        if self.said:
            self.episode_short += 1
        elif self.short >= self.needed:
            self.said, self.episode_short = True, self.short
            self._said_at = self._reminded_at = self.clock()
            return True
        return False

    def remind(self) -> bool:
        """True once every ``remind_s`` while a said episode goes on: the caller says
        ``reminder`` then."""
        if self.said and self.clock() - self._reminded_at >= self.remind_s:
            self._reminded_at = self.clock()
            return True
        return False

    @property
    def active(self) -> bool:
        """In an episode that was said: its losses are not news (no line per retry), until a
        connection outlives ``end_s``."""
        return self.said and not self._held()

    def ended(self) -> bool:
        """True once, when the connection of a said episode has outlived ``end_s``: the
        other client is gone (say so, or the log ends on the takeover while all works)."""
        if self.said and self._held():
            self._reset()
            return True
        return False

    def _reset(self) -> None:
        self.short, self.said, self.episode_short = 0, False, 0
        self.oversize = []

    def _oversize_said(self) -> str:
        """A packet too large, where every short connection of the count ended right after
        its largest publish: an agent's keyframe over Mosquitto's ``max_packet_size`` dropped
        it each time, and the journal pointed at a second agent with the node's id (a
        2026-12-07 drill)."""
        if len(self.oversize) < min(self.short, self.needed) or not self.oversize:
            return ""
        return (f"the last {len(self.oversize)} each within {OVERSIZE_AFTER_S:g} s of this "
                f"client's largest publish so far (at least {min(self.oversize):,} bytes): the "
                "broker's max_packet_size is most likely below that (it drops the sender of a "
                "larger packet as it reads it: 'oversize packet' in its log)")

    def _held(self) -> bool:
        return self._since is not None and self.clock() - self._since >= self.end_s

    def sentence(self, url: BrokerURL, client_id: str, who: str) -> str:
        """What to say, ``who``: "a second agent or simulator for the same node"."""
        dropped = (f"the MQTT broker at {url} dropped the connection {self.short} times in a "
                   f"row within {self.short_s:g} s of accepting it")
        other = (f"another client may be connected with the same client id {client_id} "
                 f"({who}?); each takes the session from the other")
        oversize = self._oversize_said()
        if oversize:
            return f"{dropped}, {oversize}; or {other}. {BROKER_LOG}"
        return f"{dropped}: {other}. {BROKER_LOG}"

    def reminder(self, url: BrokerURL, client_id: str) -> str:
        """What ``remind`` has to say: the episode goes on."""
        minutes = (self.clock() - self._said_at) / 60
        return (f"the MQTT broker at {url} still drops the connection of client id "
                f"{client_id} within {self.short_s:g} s of accepting it: "
                f"{self.episode_short} times in {minutes:.0f} min, nothing held "
                f"{self.end_s:g} s{', ' + self._oversize_said() if self.oversize else ''}. "
                f"{BROKER_LOG}")

