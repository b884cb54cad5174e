"""``fleetdeck collect``: the console session without a screen, writing the SQLite store (a
systemd service on a management host keeps history even when nobody has a console open)."""

import asyncio
import logging
import os
import signal
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from fleetdeck.brokerurl import BrokerURL
from fleetdeck.console.cli.progress import ProgressLine
from fleetdeck.console.cli.status import LONGEST_WAIT_S, slow_to_hear
from fleetdeck.console.digest import DIGEST_EVERY_S
from fleetdeck.console.session import ConsoleSession, TickReport
from fleetdeck.console.shard import ShardScope, parse_shard
from fleetdeck.console.sharding import ShardRunner, collector_will
from fleetdeck.errors import UserError
from fleetdeck.hostport import host_port
from fleetdeck.protocol.topics import shard_subscriptions
from fleetdeck.runtime import tune_gc

log = logging.getLogger("fleetdeck.collect")

STATUS_EVERY_S = 60.0
"""A progress line a minute by default (``--status-every``)."""
EXIT_STORE_FAILED = 3
EXIT_HUNG_UP = 128 + 1
"""A SIGHUP's orderly stop: the shell's code for a SIGHUP death, and no clean exit to
systemd's ``Restart=on-failure``, which starts the collector again."""
CATCH_UP_S = 10.0
"""Start-up is over when every node known from its retained birth has sent telemetry, or this
long after connecting (a node that stays silent is the console's to judge, not start-up's),
or, for agents that sample less often, once their birth's interval says their first sample
should have come (as ``status`` waits for them: ``slow_to_hear``), at most ``LONGEST_WAIT_S``."""


class StartUp:
    """``collect`` starting: the store opened, the broker connected, then the fleet caught up
    (each node heard from), shown as progress (console/cli/progress.py); afterwards, a store
    that failed and holds ticks in memory says when it has caught up again."""

    def __init__(self, session: ConsoleSession, bar: ProgressLine) -> None:
        self.session = session
        self.bar = bar
        self.connected_at: float | None = None
        self.done = False
        self.failing = False
        self.held = 0

    def tick(self, now: float) -> None:
        session = self.session
        if not self.done:
            feed = session.feed
            if self.connected_at is None:
                if feed is None or not feed.link.connected:
                    return
                self.connected_at = now
                self.bar.milestone(f"connected to {feed.url}")
            nodes = session.state.nodes.values()
            known = sum(1 for st in nodes if st.online is not False)
            heard = sum(1 for st in nodes if st.online is not False and st.sample is not None)
            self.bar.update(heard, known, detail=f"{session.state.applied:,} messages")
            waited = now - self.connected_at
            # Agents on the shipped --interval 10 (docs/real-nodes.md) send their first sample
            # a collector can read within two intervals: after a fixed 10 s the line read
            # "caught up, 0 of 3 nodes reporting (3 silent so far)" over a healthy fleet (a
            # newcomer's production set-up).
            if ((known and heard >= known) or waited >= LONGEST_WAIT_S
                    or (waited >= CATCH_UP_S and not slow_to_hear(session.state, waited))):
                self.done = True
                silent = known - heard
                self.bar.close(f"collect {session.state.cluster}: caught up, {heard} of "
                               f"{_count(known, 'node')} reporting"
                               + (f" ({silent} silent so far)" if silent else "")
                               + "; writing the store")
        # A failing store holds ticks in memory and writes them once it works again: say when
        # that starts and when it has caught up (the minute status line counts in between).
        failing = session.store_failing_s is not None
        backlog = session.store_backlog
        if failing and not self.failing:
            self.bar.milestone(f"the store is failing; holding ticks in memory ({backlog})")
        elif self.failing and not failing:
            self.bar.milestone(f"the store caught up: {self.held} held tick(s) written")
        self.failing = failing
        self.held = max(self.held, backlog) if failing else 0


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def status_line(cluster: str, who: str, nodes: int, received: int, applied: int,
                store_writes: int) -> str:
    """The minute's progress line (``--status-every``): "1 nodes, 1 messages received" of a
    one-node fleet read as a template, not a count (a review)."""
    # Two equal counts read as a mistake (a newcomer's run); they differ only when messages
    # were shed or refused.
    return (f"collect {cluster}:{who} {_count(nodes, 'node')}, "
            f"{_count(received, 'message')} received"
            + (f" ({applied} applied)" if applied != received else "")
            + f", {_count(store_writes, 'store write')}")


def shard_words(me: str, live: Iterable[str], digests: int) -> str:
    """A shard's part of the minute's line: which shard, the live ones, its digests sent."""
    return f" {me} (live: {','.join(live)}), {_count(digests, 'digest')},"


def run_collect(url: BrokerURL, cluster: str, db: Path, retention_days: float, *,
                command_key: bytes | None = None, metrics: str | None = None,
                shard: str | None = None, status_every_s: float = STATUS_EVERY_S,
                digest_every_s: float = DIGEST_EVERY_S) -> int:
    tune_gc()
    spec = parse_shard(shard) if shard is not None else None
    if metrics is not None:
        from fleetdeck.console.metrics import parse_listen

        parse_listen(metrics)  # a bad address is one sentence now, not after connecting

    async def main() -> int:
        runner: ShardRunner | None = None
        if spec is None:
            session = ConsoleSession(cluster, url=url, operator="fleetdeck-collect",
                                     command_key=command_key,
                                     client_id=f"fd-collect-{os.getpid()}")
        else:
            scope = ShardScope(spec.member, int(time.time() * 1000))
            session = ConsoleSession(cluster, url=url, operator=f"fleetdeck-collect-{spec.member}",
                                     command_key=command_key,
                                     # The pid too: two collectors started as the same
                                     # shard must not take turns kicking each other off.
                                     client_id=f"fd-collect-{cluster}-{spec.member}-"
                                               f"{os.getpid()}"[-64:],
                                     filters=shard_subscriptions(cluster),
                                     will=collector_will(cluster, scope, str(spec)))
            runner = ShardRunner(session, scope, str(spec), digest_every_s)
        if session.feed is not None:
            # A service's log is where a broker it cannot reach is said, from the first
            # refusal: nothing was said for the back-off's first second (a review).
            session.feed.link.say_first = True
        bar = ProgressLine(f"collect {cluster}", unit="nodes reporting")
        # One plain collector per store; shards keep one each (their default --db).
        restored = await session.open_store(db, retention_days, collector=spec is None)
        bar.milestone(f"store {db} open" + (f", {restored} recent events restored"
                                            if restored else ""))
        start = StartUp(session, bar)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def leave() -> None:
            if runner is not None and not runner.stopping:
                runner.stopping = True  # say goodbye on the next tick, then stop
            else:
                stop.set()

        hung_up: list[bool] = []

        def hang_up() -> None:
            # SIGHUP (a closed terminal, a ``kill -HUP`` to make it read its settings again)
            # ended the collector at once, Python's default: the minutes in progress lost, not
            # a word said, and systemd's Restart=on-failure takes a SIGHUP death for a clean
            # stop, so it never came back (2026-12-07 drill). An orderly stop now, its exit
            # 128 + 1: the unit starts it again, reading collect.env anew.
            hung_up.append(True)
            leave()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, leave)
        loop.add_signal_handler(signal.SIGHUP, hang_up)
        log.info("collecting %s from %s into %s%s", cluster, url, db,
                 f" as {spec.member} of {spec.count}" if spec is not None else "")
        if metrics is not None:
            from fleetdeck.console.metrics import serve_metrics

            try:
                host, port = serve_metrics(session, metrics, loop)
            except BaseException:
                # The store is open (its writer thread would keep the process alive): a
                # collector that cannot serve its metrics must end, not sleep on under systemd.
                await session.close()
                raise
            print(f"collect {cluster}: Prometheus metrics on "
                  f"http://{host_port(host, port)}/metrics",
                  file=sys.stderr, flush=True)

        last_line = [float("-inf")]

        def progress(report: TickReport) -> bool:
            start.tick(time.monotonic())
            c = session.counters
            done = runner.on_tick(report) if runner is not None else False
            feed = session.feed
            # Before its first connection there is nothing to count: "0 nodes, 0 received"
            # beside the transport's "cannot reach" read as a collector that works on nothing.
            connected_once = feed is None or feed.conn.connects > 0
            if connected_once and time.monotonic() - last_line[0] >= status_every_s:
                last_line[0] = time.monotonic()
                failing = session.store_failing_s
                who = "" if runner is None else shard_words(
                    runner.scope.me, runner.scope.live, runner.sender.sent)
                received = feed.received if feed is not None else session.state.applied
                line = status_line(cluster, who, len(session.state.nodes), received,
                                   session.state.applied, c.store_writes)
                if failing is not None:
                    line += (f"; STORE FAILING for {failing:.0f} s "
                             f"({session.store_backlog} ticks held in memory)")
                print(line, file=sys.stderr, flush=True)
            return done

        try:
            with bar:
                await session.watch(stop, tick_s=0.5, on_tick=progress)
        finally:
            backlog = session.store_backlog
            await session.close()
        if backlog:
            problem = session.problems.get("store")
            raise UserError(f"stopped with {backlog} tick(s) of history not written "
                            f"({problem.detail if problem else 'store failing'}).")
        if hung_up:
            print(f"collect {cluster}: stopped by SIGHUP, its history written; it reads its "
                  "settings only at start: under systemd, Restart=on-failure starts it again "
                  "(exit 129)", file=sys.stderr, flush=True)
            return EXIT_HUNG_UP
        return 0

    try:
        return asyncio.run(main())
    except UserError as err:
        if "not written" in str(err):
            print(f"fleetdeck collect: {err}", file=sys.stderr)
            return EXIT_STORE_FAILED
        raise
