"""Does the broker deliver this console's commands? A test publish that comes back, or not.

Mosquitto drops a publish its ACL forbids without a word, and MQTT 3.1.1 cannot say so
(docs/security.md): a console logged in as the shipped ACL's ``viewer`` showed ``[RW]`` and
opened drain dialogs whose commands could only time out (an SRE drill). What the console can
know is what the broker does with a publish of its own: once per connection it publishes one
inert command (op ``keyframe``, to a node id no agent has) on the command topic it is subscribed
to itself. A broker that takes its commands delivers it back within moments; one that drops
them (or lets it publish but not read command topics) does not. Nothing acts on the probe: no
agent reads that topic, and a replay leaves read-only ops out of its timeline.
"""

import time
from dataclasses import dataclass

from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import Command, CommandArgs, CommandOp
from fleetdeck.protocol.topics import Kind, topic_for

PROBE_NODE = "fleetdeck-publish-probe"
"""The node id the probe is addressed to: no agent's (agents are named after their hosts)."""
PROBE_WAIT_S = 10.0
"""How long a test publish may take to come back before the broker is judged to drop it. A
loopback broker answers in milliseconds; the echo is read by the transport as it arrives,
ahead of any ingest backlog, so only a broker or link in trouble takes seconds."""
PROBE_AGAIN_S = 60.0
"""While publishes are dropped, a new test this often: a fixed ACL shows within a minute."""


def probe_topic(cluster: str) -> str:
    return topic_for(cluster, Kind.CMD, PROBE_NODE)


@dataclass
class PublishProbe:
    """The probe's state, driven by the session's tick (``due``, ``judge``) and by the feed,
    which hands back what arrives on ``probe_topic`` (``heard``)."""

    user: str = ""
    """The broker user name (from the URL), as the sentences name it; '' when none."""
    payload: bytes = b""
    """The test publish in flight (or last answered)."""
    sent_at: float | None = None
    """When the test publish went out (its PUBACK came; the session's clock): the wait runs
    from here. None while it is queued or being published."""
    sent_on: int = -1
    """The connection (``Connection.connects``) the test was sent on: a new one tests again."""
    answered: bool = False
    dropped_since: float | None = None
    """Set while the broker is judged to drop this console's publishes: when that was judged."""
    heard_at: float | None = None
    """When a test publish last came back (monotonic: the transport's read loop sets it)."""

    def due(self, now: float, connects: int, operator: str) -> bytes | None:
        """The test publish to send now, if one is due on this connection."""
        if connects <= 0:
            return None
        again = (self.dropped_since is not None and self.sent_at is not None
                 and now - self.sent_at >= PROBE_AGAIN_S)
        if self.sent_on == connects and not again:
            return None
        stamp = int(now * 1000)
        self.payload = codec.encode(Command(
            cmd_id=f"probe-{connects}-{stamp}", op=CommandOp.KEYFRAME, target=PROBE_NODE,
            args=CommandArgs(reason="console: does the broker deliver my commands?"),
            issued_by=operator, issued_at=stamp, expires_at=stamp + int(PROBE_WAIT_S * 1000)))
        # The wait starts when the publish went out (``sent``), not now: the pump publishes it
        # later, seconds later behind a slow store write or a loaded broker's PUBACKs, and a
        # clock started here judged a sound broker to drop commands.
        self.sent_at, self.sent_on, self.answered = None, connects, False
        return self.payload

    def sent(self, payload: bytes, at: float) -> None:
        """The test publish ``payload`` went out at ``at`` (the session's clock): the broker
        acknowledged it (PUBACK, QoS 1), so from now on it is the broker's to deliver."""
        if payload == self.payload and self.sent_at is None:
            self.sent_at = at

    def unsent(self, payload: bytes) -> None:
        """The test publish ``payload`` did not go out (not connected, no PUBACK in time): it
        proves nothing, and the next tick on a live connection sends a new one."""
        if payload == self.payload and self.sent_at is None and not self.answered:
            self.sent_on = -1

    @property
    def pending(self) -> bool:
        """No test publish has come back yet, nor has the broker been judged to drop them:
        whether it delivers this console's commands is not known (the header's ``[RW?]``)."""
        return self.heard_at is None and self.dropped_since is None

    def undecided(self, now: float) -> bool:
        """The test publish may still be judged: not come back, not judged dropped, and not
        out yet or out for less than ``PROBE_WAIT_S`` (and a second's grace for the tick). A
        command nothing answered waits for this before its outcome is said (the CLI, which
        bounds the wait itself: a publish that never goes out is never judged)."""
        if self.answered or self.dropped_since is not None:
            return False
        return self.sent_at is None or now - self.sent_at < PROBE_WAIT_S + 1.0

    def heard(self, payload: bytes) -> None:
        """A message on the probe topic: ours (another console's probe proves nothing of
        ours). Called in the transport's read loop: it only marks."""
        if payload == self.payload and self.payload:
            self.answered = True
            self.heard_at = time.monotonic()

    def judge(self, now: float, connected: bool, spoke_since: bool = True) -> str | None:
        """'dropped' or 'delivered' when the judgement changed at this tick, else None.
        ``spoke_since``: the broker sent something after the test publish (telemetry, a
        keepalive answer): a hung broker keeps the link up for a while and echoes nothing,
        which says nothing of its ACL."""
        if self.answered:
            if self.dropped_since is not None:
                self.dropped_since = None
                return "delivered"
            return None
        if (connected and spoke_since and self.dropped_since is None
                and self.sent_at is not None and now - self.sent_at >= PROBE_WAIT_S):
            self.dropped_since = now
            return "dropped"
        return None

    def node_answered(self) -> bool:
        """A node answered a command of this console's (its ack): the broker delivers its
        commands, whatever became of the test publish. A user that may publish ``node/+/cmd``
        but not read it back (an ACL, docs/security.md) never gets its test publish back, and
        the header said "broker drops commands" while its drains were carried out. True when
        that takes back a judgement of dropped publishes."""
        was = self.dropped_since is not None
        self.answered, self.dropped_since = True, None
        if self.heard_at is None:
            self.heard_at = time.monotonic()
        return was

    @property
    def dropped(self) -> bool:
        return self.dropped_since is not None

    def why(self) -> str:
        """Why this console's commands would not reach the nodes (plain text), '' while they
        would or it is not known yet."""
        if self.dropped_since is None:
            return ""
        # "Cannot confirm", not "does not deliver": a user that may publish commands but not
        # read them back fails the test while its commands reach their nodes.
        return (f"this console cannot confirm that the broker delivers its commands (its test "
                f"publish on node/+/cmd did not come back in {PROBE_WAIT_S:.0f} s): {self._who} "
                "most likely may not publish node/+/cmd, and a command sent now times out "
                "unheard; or it may publish there but not read it back (docs/security.md)")

    def hint(self) -> str:
        """What the probe found, for a command still waiting for its answers (plain text), ''
        while the broker is not judged to drop this user's publishes. A finding, not the
        command's outcome: a user that may publish commands but not read them back fails the
        test while its commands work, and a loaded broker can echo late."""
        if self.dropped_since is None:
            return ""
        return (f"the broker did not deliver a test publish of this user's on node/+/cmd back "
                f"within {PROBE_WAIT_S:.0f} s: {self._who} most likely may not publish "
                "node/+/cmd (docs/security.md)")

    def dropped_command(self) -> str:
        """Why a command nothing answered by its deadline most likely never reached its
        targets, while the broker is judged to drop this user's publishes (plain text), ''
        while it is not. A likelihood, not a fact: the test publish may have been lost to a
        user that cannot read command topics back, or come back late, and the command expired
        at its deadline unanswered either way."""
        if self.dropped_since is None:
            return ""
        return (f"the broker most likely dropped it: a test publish of this user's on node/+/cmd "
                f"did not come back within {PROBE_WAIT_S:.0f} s either, as when {self._who} "
                "may not publish there (or not read it back); the console role in "
                "deploy/mosquitto/acl may (docs/security.md)")

    @property
    def _who(self) -> str:
        return f"broker user '{self.user}'" if self.user else "this (anonymous) broker user"
