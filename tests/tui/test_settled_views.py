"""The console's GC sweeps walk what changed since the screen settled (fleetdeck/runtime.py,
``SETTLING_S``): a view composed later asks the next sweep to freeze it too, and
views removed ask it to unfreeze everything first, so nothing frozen is kept as garbage (a
review: a context switch after the first minute kept every view and its per-node caches)."""

from collections.abc import Iterator

import pytest

from fleetdeck import runtime
from tests.tui.conftest import SIZE, pilot_until


@pytest.fixture
def sweeps() -> Iterator[runtime.SweepStats]:
    st = runtime.SWEEPS
    saved = (st.settle, st.unsettle)
    st.settle = st.unsettle = False
    yield st
    st.settle, st.unsettle = saved


async def test_first_visits_and_the_kept_detail_settle_and_a_context_switch_unsettles(
        sweeps: runtime.SweepStats) -> None:
    from fleetdeck.console.audit import MemoryAudit
    from fleetdeck.console.tui.app import FleetdeckApp

    app = FleetdeckApp(cluster="east", contexts=["west"], connect=False, auto_tick=False,
                       audit=MemoryAudit(), operator="t")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        sweeps.settle = False
        app.action_view("nodes")  # composed now
        await pilot.pause()
        assert sweeps.settle and not sweeps.unsettle
        sweeps.settle = False
        app.action_view("overview")
        await pilot.pause()
        app.action_view("nodes")  # visited before: nothing new to settle
        await pilot.pause()
        assert not sweeps.settle
        app._node_detail("gpu0001", None)  # the detail kept for reuse
        assert sweeps.settle
        sweeps.settle = False
        app.use_context("west")
        await pilot_until(pilot, lambda: app.active == "west" and app.current_mode == "nodes",
                          "the switch to west's nodes view")
        assert sweeps.unsettle
