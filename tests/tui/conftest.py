import time
from collections.abc import Callable
from typing import TypeVar

import pytest

from fleetdeck.console.audit import MemoryAudit
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.tui.app import FleetdeckApp
from tests.tui.fleet import (
    CLUSTER,
    Clock,
    SynthFleet,
    job_status,
    port_down,
    publish_job,
    throttled,
)

SIZE = (160, 48)

SETTLE_S = 30.0
"""How long a Pilot test waits for what the app does on its own (timers, workers, slices): a
loaded 2-core CI machine takes many times what an idle one does; a passing test never waits
for the deadline, so it is generous."""


async def pilot_until(pilot, predicate: Callable[[], object], message: str = "condition",
                      timeout: float = SETTLE_S, interval: float = 0.01) -> None:
    """Pause ``pilot`` until ``predicate()`` holds (checked first, then between pauses); fail
    with ``message`` after ``timeout`` seconds. Instead of a fixed pause or a fixed count of
    them, whose wall time a loaded machine can outlast."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {message}")
        await pilot.pause(interval)


class World:
    def __init__(self, n: int = 24, read_only: bool = False) -> None:
        self.clock = Clock()
        self.ingest = Ingest(CLUSTER)
        self.fleet = SynthFleet(n, self.clock)
        self.audit = MemoryAudit()
        self.published: list[tuple[str, str, bytes]] = []
        self.app = FleetdeckApp(cluster=CLUSTER, ingest=self.ingest, clock=self.clock,
                                connect=False, auto_tick=False, audit=self.audit,
                                publisher=self._publish, read_only=read_only,
                                operator="alice", ack_timeout_s=10, effect_timeout_s=30)

    async def _publish(self, kind, subject, payload):
        self.published.append((kind.value, subject, payload))

    def populate(self) -> None:
        f = self.fleet
        f.birth(self.ingest)
        job_nodes = f.names[:4]
        publish_job(self.ingest, job_status("41", job_nodes, self.clock,
                                            slowest_node="gpu0003"), self.clock)
        faults = {"gpu0003": throttled(3), "gpu0009": port_down(), "gpu0013": port_down(),
                  "gpu0017": port_down()}
        f.telemetry(self.ingest, job={n: "41" for n in job_nodes}, faults=faults)

    def tick(self, seconds: float = 0.5) -> None:
        self.clock.advance(seconds)
        self.app.tick()


@pytest.fixture
def world() -> World:
    w = World()
    w.populate()
    return w


@pytest.fixture
def ro_world() -> World:
    w = World(read_only=True)
    w.populate()
    return w


T = TypeVar("T")


async def open_view(world: "World", pilot, key: str, screen_type: type[T]) -> T:
    """Press a view's key, tick, and return the screen it opened (asserting its type)."""
    await pilot.press(key)
    world.tick()
    await pilot.pause()
    screen = world.app.screen
    assert isinstance(screen, screen_type)
    return screen
