"""``fleetdeck agent``: one node agent as a long-running process (systemd) or ``--once``."""

import argparse
import asyncio
import json
import logging
import signal
from typing import Any

from agents.agent import NodeAgent
from agents.source import Source
from fleetdeck.brokerurl import BrokerURL
from fleetdeck.errors import UserError
from fleetdeck.protocol import codec

log = logging.getLogger("fleetdeck.agent")

SOURCES = ("sim",)


def make_source(args: argparse.Namespace, node_id: str) -> Source:
    if args.source == "sim":
        from agents.sim.node import SimNode

        return SimNode(node_id, seed=args.seed)
    raise UserError(
        f"unknown telemetry source '{args.source}' (choose from: {', '.join(SOURCES)})."
    )


def sample_once(args: argparse.Namespace, node_id: str) -> dict[str, Any]:
    """Birth and one telemetry sample as they would go on the wire."""
    from fleetdeck.brokerurl import BrokerURL

    agent = NodeAgent(cluster=args.cluster, node_id=node_id, source=make_source(args, node_id),
                      url=BrokerURL("127.0.0.1", 1), interval_s=args.interval)
    agent.bd_seq = agent._next_bd_seq()
    return {
        "birth": json.loads(codec.encode(agent.birth())),
        "telemetry": json.loads(codec.encode(agent.telemetry())),
    }


async def run_agent(args: argparse.Namespace, node_id: str, url: BrokerURL) -> None:
    agent = NodeAgent(cluster=args.cluster, node_id=node_id, source=make_source(args, node_id),
                      url=url, interval_s=args.interval, keepalive=args.keepalive, phase_s=0.0)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    log.info("agent %s publishing to %s every %.1f s", node_id, url, args.interval)
    await agent.run(stop)
