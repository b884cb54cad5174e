"""The console host's wall clock stepped under a live console (NTP, ``date -s``): a real
Mosquitto, a real simulator, a console core whose wall clock is moved back 2 min, then forward
to 5 min ahead (the monotonic clock never steps, as on a real host).

A 2026-12-07 drill (a console under a stepped clock, 16 nodes): the step back wrote 10 of 16
healthy nodes ``ok -> degraded (T1)`` and back within a second (their clock offsets mixed the
old clock's with the new one's); the step forward read "this console did not run for 421 s"
and the header said ``BEHIND 420.0s`` for as long as the console ran (each node's usual delay
was of the old clock)."""

import asyncio
import time
import uuid

import pytest

from fleetdeck.console.session import ConsoleSession
from tests.conftest import eventually, spawn, stop_process


@pytest.mark.timeout(120)
async def test_a_stepped_console_clock_is_said_not_read_as_the_nodes_or_a_backlog(
        mosquitto, tmp_path) -> None:
    sim = spawn("sim", "--broker", str(mosquitto.url), "--cluster", "step", "--nodes", "8",
                "--interval", "1.0", log=tmp_path / "sim.log")
    offset = [0.0]
    session = ConsoleSession("step", url=mosquitto.url, operator="test",
                             client_id=f"step-{uuid.uuid4().hex[:6]}",
                             clock=lambda: time.time() + offset[0], steady=time.monotonic)
    stop = asyncio.Event()
    watcher = asyncio.create_task(session.watch(stop, tick_s=0.2))
    state = session.state

    def all_ok() -> bool:
        return len(state.nodes) == 8 and all(st.verdict.value == "ok"
                                             for st in state.nodes.values())

    def lines() -> list[str]:
        return [line.text for line in session.log.lines()]

    try:
        await eventually(all_ok, 30, message="fleet up")
        await asyncio.sleep(3)
        offset[0] = -120.0
        await asyncio.sleep(4)
        assert not [t for t in lines() if "T1" in t], lines()
        assert all_ok(), {n: st.verdict.value for n, st in state.nodes.items()}
        assert any("clock was stepped back by 120 s" in t for t in lines()), lines()
        assert "120 s ahead of this console" in state.clocks.fleet.console_off
        offset[0] = 300.0
        await asyncio.sleep(4)
        assert state.behind_s < 2.0, state.behind_s
        assert any("clock was stepped forward by 420 s" in t for t in lines()), lines()
        assert not [t for t in lines() if "did not run" in t], lines()
        assert not [t for t in lines() if "T1" in t], lines()
        assert all_ok(), {n: st.verdict.value for n, st in state.nodes.items()}
        assert "300 s behind this console" in state.clocks.fleet.console_off
    finally:
        stop.set()
        await asyncio.gather(watcher, return_exceptions=True)
        stop_process(sim)
