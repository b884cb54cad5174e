"""Who else holds this client's session: a broker that drops a client's connections within
seconds of accepting them, again and again, is taking the session over for another client with
the same client id (docs/reliability.md, "Two clients with one client id")."""

import time
from collections.abc import Callable

from fleetdeck.brokerurl import BrokerURL

TAKEOVER_SHORT_S = 10.0
"""A connection the broker drops sooner than this after accepting it is a short one."""
TAKEOVER_SHORT_SESSIONS = 3
"""Short ones in a row, the broker reachable each time, before the takeover is said."""


class TakeoverWatch:
    """A client whose connections the broker keeps dropping within seconds of accepting them:
    another client with the same client id takes the session over each time, and is taken
    over in turn (two agents or simulators for one node: docs/reliability.md, "Two clients
    with one client id"). MQTT 3.1.1, which every client here speaks, gives no reason: the
    broker closes the socket (MQTT 5 would send DISCONNECT 0x8E, session taken over), so the
    pattern is what tells. ``lost`` says so once per episode; an episode ends when a
    connection outlives ``short_s``."""

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 short_s: float = TAKEOVER_SHORT_S,
                 needed: int = TAKEOVER_SHORT_SESSIONS) -> None:
        self.clock = clock
        self.short_s = short_s
        self.needed = needed
        self.short = 0
        """Accepted connections dropped within ``short_s``, in a row."""
        self.said = False
        self._since: float | None = None
        """When the broker accepted the current connection (None: not connected)."""

    def accepted(self) -> None:
        """The broker accepted a connection (its CONNACK)."""
        self._since = self.clock()

    def lost(self, accepted: bool) -> bool:
        """A connection attempt ended in a loss; ``accepted``: the broker had accepted it (a
        connect that failed says nothing either way: a broker too busy to answer in time).
        True the first time the pattern holds in an episode: the caller says it then."""
        since, self._since = self._since, None
        if not accepted or since is None:
            return False
        if self.clock() - since >= self.short_s:
            self.short, self.said = 0, False
            return False
        self.short += 1
        if self.short >= self.needed and not self.said:
            self.said = True
            return True
        return False

    @property
    def active(self) -> bool:
        """In an episode that was said: its losses are not news (no line per retry), until a
        connection outlives ``short_s``."""
        return self.said and not self._held()

    def ended(self) -> bool:
        """True once, when the connection of a said episode has outlived ``short_s``: the
        other client is gone (say so, or the log ends on the takeover while all works)."""
        if self.said and self._held():
            self.short, self.said = 0, False
            return True
        return False

    def _held(self) -> bool:
        return self._since is not None and self.clock() - self._since >= self.short_s

    def sentence(self, url: BrokerURL, client_id: str, who: str) -> str:
        """What to say, ``who``: "a second agent or simulator for the same node"."""
        return (f"the MQTT broker at {url} dropped the connection {self.short} times in a row "
                f"within {self.short_s:g} s of accepting it: another client may be connected "
                f"with the same client id {client_id} ({who}?); each takes the session from "
                "the other")
