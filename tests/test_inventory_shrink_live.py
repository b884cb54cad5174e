"""An agent restarted with a GPU and an IB port fewer than its node had (G14, N8): real agent
code, a real Mosquitto, the console's own session. A failure drill: the node read 7/7, ok,
with no event; only ``--expect-gpus`` caught it (docs/real-nodes.md)."""

import asyncio
import dataclasses
import uuid

from fleetdeck.agents.agent import NodeAgent
from fleetdeck.agents.sim.node import SimNode
from fleetdeck.agents.source import Inventory
from fleetdeck.console.judgements import recommended_action
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.summary import fleet_summary
from tests.conftest import eventually

CLUSTER = "inventory"
NODE = "gpu0001"


class UntoldSim(SimNode):
    """A sim node whose agent is told no counts (a real agent without ``--expect-gpus``)."""

    def inventory(self) -> Inventory:
        return dataclasses.replace(super().inventory(), gpus_expected=0, ib_ports_expected=0)


def _short(sim: SimNode) -> str:
    """gpu3 not enumerated (the rest renumbered, as NVML does), mlx5_ib7 gone; its uuid."""
    lost = sim.gpus[3].uuid
    sim.gpus = [g for g in sim.gpus if g.index != 3]
    for i, g in enumerate(sim.gpus):
        g.index = i
    sim.ports = sim.ports[:7]
    return lost


def _verdict(session: ConsoleSession) -> str:
    st = session.state.nodes.get(NODE)
    return st.verdict.value if st is not None and st.judged else ""


async def test_an_agent_back_short_of_a_gpu_and_a_port_fails_its_node_until_it_is_whole(
        mosquitto):
    session = ConsoleSession(CLUSTER, url=mosquitto.url,
                             client_id=f"console-{uuid.uuid4().hex[:6]}")
    stop = asyncio.Event()
    watch = asyncio.create_task(session.watch(stop, tick_s=0.1))

    async def agent_session(sim: SimNode, until) -> None:
        agent_stop = asyncio.Event()
        agent = NodeAgent(cluster=CLUSTER, node_id=NODE, source=sim, url=mosquitto.url,
                          interval_s=0.2, keepalive=2, phase_s=0.0)
        task = asyncio.create_task(agent.run(agent_stop))
        try:
            await eventually(until, 20, message="the console's verdict")
        finally:
            agent_stop.set()  # a clean stop: its goodbye, then the next agent's birth
            await task

    try:
        await agent_session(UntoldSim(NODE), lambda: _verdict(session) == "ok")
        short = UntoldSim(NODE)
        lost = _short(short)
        await agent_session(short, lambda: _verdict(session) == "failed")
        st = session.state.nodes[NODE]
        assert st.reasons == ["G14", "N8"], st.findings
        (node,) = fleet_summary(session.state, session.clock())["nodes"]
        assert node["findings"][:2] == [
            f"G14 {lost}: gpu3 not enumerated since an earlier birth of the node "
            "(7 GPUs now, 8 before)",
            "N8 mlx5_ib7:1: IB port not enumerated since an earlier birth of the node "
            "(7 IB ports now, 8 before)"]
        assert f"reboot the node and check that gpu3 ({lost}) is seated" in (
            recommended_action(st, session.state))
        lines = [ln.text for ln in session.log.lines()]
        assert any("came back short of the hardware it had: G14" in t for t in lines), lines
        # Whole again: clear.
        await agent_session(UntoldSim(NODE), lambda: _verdict(session) == "ok"
                            and not session.state.nodes[NODE].findings)
    finally:
        stop.set()
        await asyncio.gather(watch, return_exceptions=True)
