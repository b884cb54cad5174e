"""The simulator's tick loop after a stall (agents/fleet.py ``_tick_loop``): the ticks missed
run back to back (sim time stays the clock's; a spread fleet's processes meet at each stamped
tick), and the log says so once, not once per tick caught up."""

import asyncio
import logging
import time

import pytest

from fleetdeck.agents.fleet import Fleet, FleetOptions
from fleetdeck.brokerurl import BrokerURL


def test_a_stall_is_said_once_and_its_ticks_are_caught_up(caplog: pytest.LogCaptureFixture,
                                                          monkeypatch: pytest.MonkeyPatch):
    fleet = Fleet(BrokerURL("127.0.0.1", 1), FleetOptions(cluster="tl", nodes=2, jobs=0,
                                                           interval_s=0.01))
    ticks: list[float] = []

    def tick() -> None:
        ticks.append(time.monotonic())
        if len(ticks) == 3:
            time.sleep(0.5)  # a starved process: 50 ticks missed

    monkeypatch.setattr(fleet, "tick", tick)

    async def run() -> None:
        stop = asyncio.Event()
        loop_task = asyncio.create_task(fleet._tick_loop(stop))
        await asyncio.sleep(1.0)
        stop.set()
        await loop_task

    with caplog.at_level(logging.WARNING, logger="fleetdeck.sim"):
        asyncio.run(run())
    assert len(ticks) >= 90  # about 100: the 50 missed were run, not skipped
    late = [r.getMessage() for r in caplog.records if "late" in r.getMessage()]
    # Unmended: one warning per tick caught up (about 50).
    assert len(late) <= 2, late
    assert any("caught up" in r.getMessage() for r in caplog.records)
