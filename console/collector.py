"""``fleetdeck collect``: the console's ingest and store without a screen (a systemd service on a
management host keeps history even when nobody has a console open)."""

import asyncio
import contextlib
import logging
import os
import signal
import time
from pathlib import Path

from fleetdeck.brokerurl import BrokerURL
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.live import LiveFeed
from fleetdeck.console.state import FleetState
from fleetdeck.console.store import Store
from fleetdeck.runtime import tune_gc

log = logging.getLogger("fleetdeck.collect")


class Collector:
    """Ingest -> FleetState -> Store on a fixed tick. Shared by ``collect`` and tests."""

    def __init__(self, url: BrokerURL, cluster: str, store: Store, tick_s: float = 0.5) -> None:
        self.ingest = Ingest(cluster)
        self.state = FleetState(cluster, self.ingest.malformed)
        self.feed = LiveFeed(url, self.ingest, client_id=f"fd-collect-{os.getpid()}")
        self.store = store
        self.tick_s = tick_s
        self.ticks = 0

    async def tick(self) -> None:
        now = time.time()
        batch = self.ingest.take_batch()
        self.state.apply(batch, now)
        await self.store.write_tick(batch, self.state.take_transitions())
        await self.feed.request_resends(self.state.missing_events(now), "fleetdeck-collect")
        self.ticks += 1

    async def run(self, stop: asyncio.Event) -> None:
        await self.store.restore(self.state)
        feed = asyncio.create_task(self.feed.run(stop))
        try:
            while not stop.is_set():
                await self.tick()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.tick_s)
            await self.tick()  # what arrived before the stop is kept
        finally:
            await feed


def run_collect(url: BrokerURL, cluster: str, db: Path, retention_days: float) -> int:
    tune_gc()

    async def main() -> None:
        store = await Store.open(db, retention_days)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        log.info("collecting %s from %s into %s", cluster, url, db)
        try:
            await Collector(url, cluster, store).run(stop)
        finally:
            await store.close()

    asyncio.run(main())
    return 0
