"""The console's GC sweeps walk what changed since the screen settled (fleetdeck/runtime.py,
``SETTLING_S``): views removed (another context, the kept node detail dropped) were frozen
with it, so they ask the next sweep to unfreeze everything first and nothing frozen is kept
as garbage (a review: a context switch after the first minute kept every view and its
per-node caches)."""

from collections.abc import Iterator

import pytest

from fleetdeck import runtime
from tests.tui.conftest import SIZE, pilot_until


@pytest.fixture
def sweeps() -> Iterator[runtime.SweepStats]:
    st = runtime.SWEEPS
    saved = st.unsettle
    st.unsettle = False
    yield st
    st.unsettle = saved


async def test_a_context_switch_and_a_dropped_detail_unsettle(
        sweeps: runtime.SweepStats) -> None:
    from fleetdeck.console.audit import MemoryAudit
    from fleetdeck.console.tui.app import FleetdeckApp

    app = FleetdeckApp(cluster="east", contexts=["west"], connect=False, auto_tick=False,
                       audit=MemoryAudit(), operator="t")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.action_view("nodes")
        await pilot.pause()
        app._node_detail("gpu0001", None)  # the detail kept for reuse
        assert not sweeps.unsettle  # views composed and kept: nothing to free
        await app._drop_detail()
        assert sweeps.unsettle
        sweeps.unsettle = False
        app.use_context("west")
        await pilot_until(pilot, lambda: app.active == "west" and app.current_mode == "nodes",
                          "the switch to west's nodes view")
        assert sweeps.unsettle
