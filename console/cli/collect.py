"""``fleetdeck collect``: the console session without a screen, writing the SQLite store (a
systemd service on a management host keeps history even when nobody has a console open)."""

import asyncio
import logging
import os
import signal
import sys
import time
from pathlib import Path

from fleetdeck.brokerurl import BrokerURL
from fleetdeck.console.digest import DIGEST_EVERY_S
from fleetdeck.console.session import ConsoleSession, TickReport
from fleetdeck.console.shard import ShardScope, parse_shard
from fleetdeck.console.sharding import ShardRunner, collector_will
from fleetdeck.errors import UserError
from fleetdeck.protocol.topics import shard_subscriptions
from fleetdeck.runtime import tune_gc

log = logging.getLogger("fleetdeck.collect")

STATUS_EVERY_S = 60.0
"""A progress line a minute by default (``--status-every``)."""
EXIT_STORE_FAILED = 3


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
        await session.open_store(db, retention_days)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def leave() -> None:
            if runner is not None and not runner.stopping:
                runner.stopping = True  # say goodbye on the next tick, then stop
            else:
                stop.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, leave)
        log.info("collecting %s from %s into %s%s", cluster, url, db,
                 f" as {spec.member} of {spec.count}" if spec is not None else "")
        if metrics is not None:
            from fleetdeck.console.metrics import serve_metrics

            host, port = serve_metrics(session, metrics, loop)
            print(f"collect {cluster}: Prometheus metrics on http://{host}:{port}/metrics",
                  file=sys.stderr, flush=True)

        last_line = [float("-inf")]

        def progress(report: TickReport) -> bool:
            c = session.counters
            done = runner.on_tick(report) if runner is not None else False
            if time.monotonic() - last_line[0] >= status_every_s:
                last_line[0] = time.monotonic()
                failing = session.store_failing_s
                who = "" if runner is None else (
                    f" {runner.scope.me} (live: {','.join(runner.scope.live)}),"
                    f" {runner.sender.sent} digests,")
                received = session.feed.received if session.feed is not None else 0
                line = (f"collect {cluster}:{who} {len(session.state.nodes)} nodes, "
                        f"{received} received, {session.state.applied} messages, "
                        f"{c.store_writes} store writes")
                if failing is not None:
                    line += (f"; STORE FAILING for {failing:.0f} s "
                             f"({session.store_backlog} ticks held in memory)")
                print(line, file=sys.stderr, flush=True)
            return done

        try:
            await session.watch(stop, tick_s=0.5, on_tick=progress)
        finally:
            backlog = session.store_backlog
            await session.close()
        if backlog:
            problem = session.problems.get("store")
            raise UserError(f"stopped with {backlog} tick(s) of history not written "
                            f"({problem.detail if problem else 'store failing'}).")
        return 0

    try:
        return asyncio.run(main())
    except UserError as err:
        if "not written" in str(err):
            print(f"fleetdeck collect: {err}", file=sys.stderr)
            return EXIT_STORE_FAILED
        raise
