"""Many simulated node agents in one process, one MQTT connection (and Last Will) per node."""

import asyncio
import logging
import signal
from dataclasses import dataclass

from agents.agent import NodeAgent
from agents.sim.node import SimNode
from fleetdeck.brokerurl import BrokerURL

log = logging.getLogger("fleetdeck.sim")


def node_names(n: int, prefix: str = "gpu", start: int = 1) -> list[str]:
    """``gpu0001 … gpuNNNN``: zero-padded so names sort and compress into hostlists."""
    width = max(4, len(str(start + n - 1)))
    return [f"{prefix}{i:0{width}d}" for i in range(start, start + n)]


@dataclass
class FleetOptions:
    cluster: str = "demo"
    nodes: int = 64
    prefix: str = "gpu"
    interval_s: float = 1.0
    keepalive: int = 10
    seed: int = 0
    connect_concurrency: int = 16
    """Simultaneous MQTT connects. amqtt needs 1 (its connect race, see embedded_broker.py)."""
    connect_spacing_s: float = 0.0


class Fleet:
    def __init__(self, url: BrokerURL, opts: FleetOptions) -> None:
        self.url = url
        self.opts = opts
        gate = asyncio.Semaphore(max(1, opts.connect_concurrency))
        self.nodes: dict[str, SimNode] = {}
        self.agents: list[NodeAgent] = []
        for name in node_names(opts.nodes, opts.prefix):
            node = SimNode(name, seed=opts.seed)
            self.nodes[name] = node
            self.agents.append(
                NodeAgent(
                    cluster=opts.cluster, node_id=name, source=node, url=url,
                    interval_s=opts.interval_s, keepalive=opts.keepalive, connect_gate=gate,
                    connect_spacing_s=opts.connect_spacing_s,
                )
            )

    async def run(self, stop: asyncio.Event) -> None:
        await asyncio.gather(*(agent.run(stop) for agent in self.agents))

    async def wait_connected(self, timeout: float) -> None:
        await asyncio.wait_for(
            asyncio.gather(*(a.connected.wait() for a in self.agents)), timeout
        )


async def run_fleet(url: BrokerURL, opts: FleetOptions) -> None:
    fleet = Fleet(url, opts)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    log.info("simulating %d nodes against %s", opts.nodes, url)
    await fleet.run(stop)
