"""What a process that keeps retrying its broker says of each failed try: a reason new to the
outage at once, once more with a note when it repeats, then every ``RETRY_REMIND_S`` with the
tries it stands for. The agent's journal and the collector's filled with one sentence at every
retry, 120 lines an hour of a revoked password (a 2026-12-07 drill; docs/reliability.md).
Shared by the agent (agents/agent.py) and the console's link (fleetdeck/transport.py)."""

RETRY_REMIND_S = 300.0
"""A failed connect whose reason was said is said again only this often, with how many tries
it stands for."""
RETRY_REASONS_HELD = 8
"""How many reasons of one outage ``RetrySaid`` remembers (the oldest said goes)."""


class RetrySaid:
    """Each reason of a failed connect said in this outage: when it was said last
    (``RETRY_REMIND_S``) and the tries with it not said since (-1: its repeat not said yet).
    By reason, not the last one alone: two reasons in turn (a flapping link's "timed out" and
    "no route to host", two brokers behind one name) were each new at every try. ``clear``
    once connected: the next outage starts over."""

    def __init__(self) -> None:
        self._said: dict[str, tuple[float, int]] = {}

    def __len__(self) -> int:
        return len(self._said)

    def clear(self) -> None:
        self._said.clear()

    def line(self, why: str, delay: float, now: float) -> str | None:
        """The words for a failed try at ``now`` (monotonic seconds) that waits ``delay`` for
        the next, or None when it goes unsaid."""
        said = self._said.get(why)
        if said is None:
            if len(self._said) >= RETRY_REASONS_HELD:
                # A reason that carries something new each time (an address, a count) is
                # said each time, as before, without the memory growing for the outage.
                del self._said[min(self._said, key=lambda r: self._said[r][0])]
            self._said[why] = (now, -1)
            return f"{why}; retrying in {delay:.1f} s"
        at, unsaid = said
        if unsaid < 0:
            self._said[why] = (now, 0)
            return (f"{why} again; retrying in {delay:.1f} s (said next in "
                    f"{RETRY_REMIND_S / 60:.0f} min unless it changes)")
        if now - at < RETRY_REMIND_S:
            self._said[why] = (at, unsaid + 1)
            return None
        self._said[why] = (now, 0)
        return (f"still: {why} ({unsaid + 1} more tries in {now - at:.0f} s); retrying in "
                f"{delay:.1f} s")
