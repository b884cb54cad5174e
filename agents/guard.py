"""Which commands may be acted on: one set of rules for node agents and the simulated scheduler.

* With a command key, a command must be signed, unaltered and of bounded lifetime
  (``fleetdeck/protocol/signing.py``); without one, anything the broker's ACL lets through counts.
* A command id already answered is answered again from memory, never executed twice (QoS 1
  redelivery, a console retry after a lost ack, or a captured command replayed).
* A command id executed earlier but no longer in the answer memory (many commands later, or
  before a restart when the ids were kept in the agent's state file) is rejected as a replay
  until it expires; an expired command is rejected anyway.
"""

import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping

from fleetdeck.protocol import signing
from fleetdeck.protocol.messages import Ack, Command

log = logging.getLogger("fleetdeck.agent")

ACK_MEMORY = 1024
EXECUTED_MEMORY = 10 * ACK_MEMORY
"""Executed ids kept until they expire, at most this many (an unsigned command may live long)."""
REPLAYED = "replayed command id (already executed)"
EXPIRY_SKEW_MS = 0
"""How far past its ``expires_at`` by this node's clock a command still counts as unexpired:
none. A command expires with the console's wait for it, so one a hung agent (or broker) holds
up is never acted on after the operator was told "timed out" (tests/console/
test_one_shot_answers.py, a drill: a node drained behind the operator's back). A 60 s
allowance for clocks (2026-12-07) broke that, so a node whose clock runs ahead of the consoles'
by more than a command's lifetime refuses it, saying how late by its clock and pointing at its
time sync (``expired``): fix the clock (docs/real-nodes.md)."""


def expired(cmd: Command, now_ms: int) -> str:
    """Empty if ``cmd`` has not expired by this clock (``EXPIRY_SKEW_MS`` allowed), else why,
    with the figures that tell a held-up command from a clock that is ahead."""
    late_ms = now_ms - cmd.expires_at
    if late_ms <= EXPIRY_SKEW_MS:
        return ""
    life_s = max(0, cmd.expires_at - cmd.issued_at) / 1000
    return (f"command expired before it arrived: {late_ms / 1000:.0f} s past its expiry by this "
            f"node's clock (issued to live {life_s:.0f} s); if this node's clock is ahead (check "
            "its time sync), every command is refused so")


class CommandGuard:
    def __init__(self, who: str, key: bytes | None, clock_ms: Callable[[], int],
                 executed: Mapping[str, int] | None = None) -> None:
        self.who = who
        self.key = key
        self.clock_ms = clock_ms
        self.acks: OrderedDict[str, Ack] = OrderedDict()
        self.executed: OrderedDict[str, int] = OrderedDict(executed or {})
        """cmd_id -> ``expires_at`` (ms) of the commands acted on, each remembered
        ``EXPIRY_SKEW_MS`` past it, as long as :meth:`check` may still take it for unexpired.
        The value stays ``expires_at``, as state files written before that allowance hold it:
        stored with the allowance added, an id loaded from one of them was forgotten while
        its command could still run again (a review)."""
        self.prune()

    def answered(self, cmd_id: str) -> Ack | None:
        """The last ack given for ``cmd_id``, if it is still remembered."""
        return self.acks.get(cmd_id)

    def check(self, cmd: Command) -> str:
        """Empty if ``cmd`` may be acted on, else why not (for a ``rejected`` ack)."""
        now = self.clock_ms()
        if self.key is not None:
            problem = signing.check(cmd, self.key, now)
            if problem:
                log.warning("%s: rejected command %s from %s: %s", self.who, cmd.cmd_id,
                            cmd.issued_by, problem)
                return problem
        if cmd.cmd_id in self.executed:
            log.warning("%s: rejected command %s from %s: %s", self.who, cmd.cmd_id,
                        cmd.issued_by, REPLAYED)
            return REPLAYED
        return expired(cmd, now)

    def executing(self, cmd: Command) -> None:
        """``cmd`` passed :meth:`check` and is being acted on now."""
        self.executed[cmd.cmd_id] = cmd.expires_at
        self.executed.move_to_end(cmd.cmd_id)
        self.prune()

    def prune(self) -> None:
        now = self.clock_ms()
        for cmd_id in [c for c, exp in self.executed.items() if exp + EXPIRY_SKEW_MS < now]:
            del self.executed[cmd_id]
        while len(self.executed) > EXECUTED_MEMORY:
            self.executed.popitem(last=False)

    def remember(self, ack: Ack) -> None:
        self.acks[ack.cmd_id] = ack
        self.acks.move_to_end(ack.cmd_id)
        while len(self.acks) > ACK_MEMORY:
            self.acks.popitem(last=False)
