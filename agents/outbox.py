"""Events that must not be lost: kept until the broker acknowledged them, and remembered after.

* ``pending``: emitted, not yet acknowledged by the broker (QoS 1 PUBACK). Published in order
  after every reconnect. With a state directory they are also on disk, so an agent restart while
  the broker is away loses nothing.
* ``sent``: the last events the broker took, kept so a console that missed some (it was away, or
  the broker restarted before delivering them) can ask for them again by sequence number.

Bounded both ways: beyond ``limit`` pending events the oldest are dropped and counted (a node
that cannot reach its broker for days must not fill its disk).
"""

import contextlib
import json
import logging
import os
from collections import deque
from pathlib import Path

from fleetdeck.agents.state import remake_removed_dir
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import Event

log = logging.getLogger("fleetdeck.agent.outbox")


class Outbox:
    def __init__(
        self, path: Path | None = None, limit: int = 10_000, keep_sent: int = 1024
    ) -> None:
        self.path = path
        self.limit = limit
        self.pending: deque[Event] = deque()
        self.sent: deque[Event] = deque(maxlen=keep_sent)
        self.dropped = 0
        self._lines = 0
        self._failing = False
        """The file refused a write: the events are held in memory, and the next write puts
        every pending one back in a whole new file."""
        if path is not None:
            self._load(path)

    def _load(self, path: Path) -> None:
        if not path.exists():
            return
        done: set[str] = set()
        events: list[Event] = []
        with path.open("rb") as fh:
            for line in fh:
                try:
                    obj = json.loads(line)
                    if "sent" in obj:
                        done.add(str(obj["sent"]))
                    else:
                        events.append(codec.decode(Event, line.strip()))
                except (ValueError, codec.DecodeError):
                    continue  # a torn last line after a crash
        self.pending.extend(e for e in events if e.event_id not in done)
        if self.pending:
            log.info("outbox: %d undelivered event(s) from before the restart", len(self.pending))
        self._rewrite()

    def _append(self, line: bytes) -> None:
        if self.path is None:
            return
        with open(self.path, "ab") as fh:
            fh.write(line + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        self._lines += 1
        if self._lines > 2 * self.limit:
            self._rewrite()

    def _rewrite(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "wb") as fh:
            for ev in self.pending:
                fh.write(codec.encode(ev) + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        self._lines = len(self.pending)

    def add(self, ev: Event) -> None:
        self.pending.append(ev)
        self._keep(codec.encode(ev))
        while len(self.pending) > self.limit:
            self.pending.popleft()
            self.dropped += 1

    def _keep(self, line: bytes) -> None:
        """On disk if the disk takes it; never raised. An event that could not be written
        crashed the agent (its state directory removed, or a full or read-only disk): the
        drain that emitted it was never acknowledged, and the agent's clean exit dropped its
        Last Will, so the node read stale, not offline (a 2026-12-07 drill). An event the file
        refused waits in memory as every event does until the broker takes it: only an agent
        restart before then loses it, as one without a state directory would."""
        if self.path is None:
            return
        try:
            try:
                if self._failing:
                    self._rewrite()
                else:
                    self._append(line)
            except FileNotFoundError:
                if not remake_removed_dir(self.path):
                    raise
                self._rewrite()
        except OSError as err:
            if not self._failing:
                log.error("cannot write the event outbox %s: %s; its events wait in memory "
                          "until the broker takes them, and an agent restart before then "
                          "loses them", self.path, err.strerror or err)
            self._failing = True
            return
        if self._failing:
            log.warning("the event outbox %s is written again", self.path)
        self._failing = False

    def close(self) -> None:
        """At the agent's exit: events the file refused, still unacknowledged, are tried on
        disk once more, else said lost. They went with the process without a word: only the
        first refusal was said, maybe days before (a review)."""
        if not self._failing or not self.pending:
            return
        self._keep(b"")
        if self._failing:
            log.error("the agent exits with %d event(s) the broker has not taken and the event "
                      "outbox %s refused: they are lost", len(self.pending), self.path)

    def acked(self, ev: Event) -> None:
        """The broker took ``ev`` (the oldest pending)."""
        if self.pending and self.pending[0].event_id == ev.event_id:
            self.pending.popleft()
        self.sent.append(ev)
        with contextlib.suppress(OSError):
            self._append(json.dumps({"sent": ev.event_id}).encode())

    def since(self, seq: int, event_id_prefix: str) -> list[Event]:
        """Sent events of this agent process with ``seq`` greater than ``seq``, in order."""
        return [e for e in self.sent if e.seq > seq and e.event_id.startswith(event_id_prefix)]
